package contracts

import (
	"fmt"
	"math"
	"math/rand"

	"tfc/runtime/device"
)

// Named is an operand of an op with its field name.
type Named struct {
	Name string
	T    device.Tensor
}

// Operands lists the tensors an op reads and the tensors it writes, as device.Operands lists
// them; an in-out tensor (rope's X, scatter's Y, the KV cache) appears in both. An op the device
// catalog cannot list has none (Expect says why).
func Operands(op device.Op) (ins, outs []Named) {
	ns, _ := device.Operands(op)
	for _, n := range ns {
		if n.In {
			ins = append(ins, Named{n.Field, n.T})
		}
		if n.Out {
			outs = append(outs, Named{n.Field, n.T})
		}
	}
	return ins, outs
}

// overlap reports whether two tensors may share elements of one buffer.
func overlap(a, b device.Tensor) bool {
	if a.Buf == nil || a.Buf != b.Buf || a.Rows == 0 || a.Cols == 0 || b.Rows == 0 || b.Cols == 0 {
		return false
	}
	a1 := a.Off + (a.Rows-1)*a.RowStride() + a.Cols
	b1 := b.Off + (b.Rows-1)*b.RowStride() + b.Cols
	return a.Off < b1 && b.Off < a1
}

// PoisonBits is the NaN written into outputs before a contract run; seeing it afterwards means
// the backend never wrote that element.
const PoisonBits = 0x7fc0dead

// PoisonInt is what integer outputs (picks) hold before a contract run: no index is negative.
const PoisonInt = -0x21524111

// poisoned reports whether g, read back from an output of dtype dt, still holds the poison.
func poisoned(dt device.DType, g float64) bool {
	if dt == device.I32 {
		return g == PoisonInt
	}
	return dt == device.F32 && math.Float32bits(float32(g)) == PoisonBits
}

// HostRead returns a Read that copies tensors out of a backend.
func HostRead(be device.Backend) Read {
	return func(t device.Tensor) ([]float64, error) {
		n := t.Rows * t.Cols
		out := make([]float64, n)
		if t.Buf.DType() == device.I32 {
			v := make([]int32, n)
			if err := be.Read(t, v); err != nil {
				return nil, err
			}
			for i, x := range v {
				out[i] = float64(x)
			}
			return out, nil
		}
		v := make([]float32, n)
		if err := be.Read(t, v); err != nil {
			return nil, err
		}
		for i, x := range v {
			out[i] = float64(x)
		}
		return out, nil
	}
}

// Poison fills every output of op that no input shares with PoisonBits NaNs.
func Poison(be device.Backend, op device.Op) error {
	ins, outs := Operands(op)
	for _, o := range outs {
		shared := false
		for _, i := range ins {
			shared = shared || overlap(o.T, i.T)
		}
		if shared {
			continue
		}
		if o.T.Buf.DType() == device.I32 {
			p := make([]int32, o.T.Rows*o.T.Cols)
			for i := range p {
				p[i] = PoisonInt
			}
			if err := be.Write(o.T, p, device.I32); err != nil {
				return fmt.Errorf("poisoning %s: %w", o.Name, err)
			}
			continue
		}
		p := make([]float32, o.T.Rows*o.T.Cols)
		for i := range p {
			p[i] = math.Float32frombits(PoisonBits)
		}
		if err := be.Write(o.T, p, device.F32); err != nil {
			return fmt.Errorf("poisoning %s: %w", o.Name, err)
		}
	}
	return nil
}

// Result is the largest relative row error of each output of one checked op.
type Result map[string]float64

// Check runs op on be and compares every output with the float64 reference: outputs are
// poisoned first, inputs are copied to the host, the op is launched, and each output must meet
// its class bound with NaN and ±Inf where the reference has them.
func Check(be device.Backend, op device.Op) (Result, error) {
	name := device.Deref(op).OpName()
	if err := Poison(be, op); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	read := HostRead(be)
	want, err := ExpectIn(op, read, device.PrecisionOf(be), nil)
	if err != nil {
		return nil, fmt.Errorf("reference: %w", err)
	}
	if err := be.Launch(&device.KernelRef{Name: "contract_" + name, Source: "contracts"}, op); err != nil {
		return nil, err
	}
	if err := be.Sync(); err != nil {
		return nil, err
	}
	res := Result{}
	for _, w := range want {
		got, err := read(w.T)
		if err != nil {
			return nil, fmt.Errorf("%s: reading %s: %w", name, w.Name, err)
		}
		for i, g := range got {
			if poisoned(w.T.Buf.DType(), g) && !math.IsNaN(w.Want[i]) {
				return nil, fmt.Errorf("%s: %s[%d,%d] was never written (poison survived)", name, w.Name, i/w.T.Cols, i%w.T.Cols)
			}
		}
		worst, err := w.Compare(got)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		res[w.Name] = worst
	}
	return res, nil
}

// Layout is one way the suite places its operands.
type Layout struct {
	Name              string
	Strided, Specials bool
}

// Layouts are the suite's placements: contiguous and column-sliced operands, each with plain
// inputs and with NaN/±Inf planted in the activations.
var Layouts = []Layout{{"plain", false, false}, {"strided", true, false}, {"specials", false, true}, {"strided_specials", true, true}}

// RunSuite checks every case of Cases in every layout on be, with inputs drawn from seed, and
// calls report once per check (err nil when the case passed).
func RunSuite(be device.Backend, seed int64, report func(name string, res Result, err error)) {
	for _, l := range Layouts {
		for i, c := range Cases() {
			b := &Builder{Backend: be, Rng: rand.New(rand.NewSource(seed + int64(i))), Strided: l.Strided, Specials: l.Specials}
			op := c.Build(b)
			var res Result
			err := b.Err()
			if err == nil {
				res, err = Check(be, op)
			}
			b.Free()
			report(l.Name+"/"+c.Name, res, err)
		}
	}
}
