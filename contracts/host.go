package contracts

import (
	"fmt"
	"math"
	"reflect"
	"strings"

	"tfc/compiler/emit/hip"
	"tfc/runtime/device"
	"tfc/runtime/device/catalog"
	"tfc/runtime/device/cpu"
)

// Controls of a backend that runs no generated source (the CPU backend): the mutation is
// applied to the launch of one kernel instead of to its HIP text.
const (
	// BatchDependent nudges the first element of every output of the last op by one unit in
	// the last place (of BF16 in BF16 precision) when an operand of the first op starts past the
	// first row of its buffer: a row's bits depend on its batch position (gate 3).
	BatchDependent = "batch-dependent"
	// NaNFlush writes 0 over every NaN the kernel stores (gate 4).
	NaNFlush = "nan-flush"
)

// HostMutations are the compiler mutations a host wrapper can plant: a barrier has no meaning
// without generated device code.
var HostMutations = []hip.Mutation{hip.OffByOneBound, hip.DroppedScale, hip.WrongStride}

// HostControls are the controls a host backend plants for f: the applicable compiler
// mutations, then a batch-position and a NaN-flush control on the first kernel of each
// producer kind that reads activations.
func HostControls(f Family) []Control {
	cs := PlantedControls(f, HostMutations)
	seen := map[string]bool{}
	for _, k := range f.Kernels {
		p := producer(k)
		if seen[p] {
			continue
		}
		seen[p] = true
		cs = append(cs, Control{k.Name, BatchDependent})
		if s := catalog.Find(k.Ops[0].Kind); s != nil && s.Class == catalog.Reduction {
			cs = append(cs, Control{k.Name, NaNFlush})
		}
	}
	return cs
}

// HostPlant wraps be so that launches of c's kernel carry c's mutation.
func HostPlant(be device.Backend, c Control) (device.Backend, error) {
	switch c.Mutation {
	case hip.OffByOneBound.String(), hip.DroppedScale.String(), hip.WrongStride.String(), BatchDependent, NaNFlush:
		return &mutant{Backend: be, kernel: c.Kernel, mut: c.Mutation}, nil
	}
	return nil, fmt.Errorf("mutation %s cannot be planted on the %s backend", c.Mutation, be.Name())
}

// mutant is a backend whose launches of one kernel carry a planted bug.
type mutant struct {
	device.Backend
	kernel string
	mut    string
	temps  []device.Buffer
}

// Precision is the wrapped backend's.
func (b *mutant) Precision() device.Precision { return device.PrecisionOf(b.Backend) }

func (b *mutant) Launch(k *device.KernelRef, ops ...device.Op) error {
	if k.Name != b.kernel || len(ops) == 0 {
		return b.Backend.Launch(k, ops...)
	}
	defer b.release()
	ops = append([]device.Op(nil), ops...)
	switch b.mut {
	case hip.OffByOneBound.String():
		return b.skipLastColumn(k, ops)
	case hip.DroppedScale.String():
		for i, op := range ops {
			if d, ok, err := b.dropScale(op); ok || err != nil {
				if err != nil {
					return err
				}
				ops[i] = d
				break
			}
		}
	case hip.WrongStride.String():
		d, err := b.bendStride(ops[0])
		if err != nil {
			return err
		}
		ops[0] = d
	case BatchDependent:
		if err := b.Backend.Launch(k, ops...); err != nil {
			return err
		}
		if !pastFirstRow(ops[0]) {
			return nil
		}
		_, outs := Operands(ops[len(ops)-1])
		for _, o := range outs { // an integer output (an argmax's picks): its first value moves on by one
			if o.T.Buf.DType() != device.I32 || o.T.Rows*o.T.Cols == 0 {
				continue
			}
			first, v := o.T.Slice(0, 1).ColSlice(0, 1), make([]int32, 1)
			if err := b.Backend.Read(first, v); err != nil {
				return err
			}
			v[0]++
			if err := b.Backend.Write(first, v, device.I32); err != nil {
				return err
			}
		}
		return b.each(ops[len(ops)-1], func(_ device.Tensor, v []float32) bool {
			if len(v) == 0 {
				return false
			}
			v[0] = math.Nextafter32(v[0], float32(math.Inf(1)))
			if b.Precision() == device.BF16Precision { // one BF16 ulp, which a write keeps
				v[0] = float32(rb(float64(v[0])) + BF16ULP(float64(v[0])))
			}
			return true
		})
	case NaNFlush:
		if err := b.Backend.Launch(k, ops...); err != nil {
			return err
		}
		return b.each(ops[len(ops)-1], func(_ device.Tensor, v []float32) bool {
			changed := false
			for i, x := range v {
				if x != x {
					v[i], changed = 0, true
				}
			}
			return changed
		})
	}
	return b.Backend.Launch(k, ops...)
}

func (b *mutant) release() {
	for _, t := range b.temps {
		b.Backend.Free(t)
	}
	b.temps = nil
}

func (b *mutant) temp(dt device.DType, rows, cols int, v []float32) (device.Tensor, error) {
	buf, err := b.Backend.Alloc(dt, max(rows*cols, 1))
	if err != nil {
		return device.Tensor{}, err
	}
	b.temps = append(b.temps, buf)
	t := device.Tensor{Buf: buf, Rows: rows, Cols: cols}
	return t, b.Backend.Write(t, v, device.F32)
}

// each reads every float output of op, lets f change it, and writes it back when f says so.
func (b *mutant) each(op device.Op, f func(device.Tensor, []float32) bool) error {
	if err := b.Backend.Sync(); err != nil {
		return err
	}
	_, outs := Operands(op)
	for _, o := range outs {
		if o.T.Buf.DType() == device.I32 {
			continue
		}
		v := make([]float32, o.T.Rows*o.T.Cols)
		if err := b.Backend.Read(o.T, v); err != nil {
			return err
		}
		if f(o.T, v) {
			if err := b.Backend.Write(o.T, v, device.F32); err != nil {
				return err
			}
		}
	}
	return nil
}

// skipLastColumn launches ops and then puts back what the last column of every output of the
// last op held before: the last element of each row was never stored. An argmax, whose output
// is its picks, searches its rows one column short instead.
func (b *mutant) skipLastColumn(k *device.KernelRef, ops []device.Op) error {
	if a, ok := device.Deref(ops[len(ops)-1]).(device.Argmax); ok && a.X.Cols > 1 {
		a.X = a.X.ColSlice(0, a.X.Cols-1)
		ops[len(ops)-1] = a
		return b.Backend.Launch(k, ops...)
	}
	_, outs := Operands(ops[len(ops)-1])
	saved := make([][]float32, len(outs))
	for i, o := range outs {
		if o.T.Buf.DType() == device.I32 || o.T.Cols == 0 {
			continue
		}
		saved[i] = make([]float32, o.T.Rows)
		if err := b.Backend.Read(o.T.ColSlice(o.T.Cols-1, o.T.Cols), saved[i]); err != nil {
			return err
		}
	}
	if err := b.Backend.Launch(k, ops...); err != nil {
		return err
	}
	if err := b.Backend.Sync(); err != nil {
		return err
	}
	for i, o := range outs {
		if saved[i] != nil {
			if err := b.Backend.Write(o.T.ColSlice(o.T.Cols-1, o.T.Cols), saved[i], device.F32); err != nil {
				return err
			}
		}
	}
	return nil
}

// dropScale returns op with its catalog Scale neutralised: a float (attention's scale) set to 1,
// a tensor (a norm's weight) to ones.
func (b *mutant) dropScale(op device.Op) (device.Op, bool, error) {
	s, err := device.Spec(op)
	if err != nil || s.Scale == "" {
		return op, false, err
	}
	if s.Tensor(s.Scale) == nil {
		v := reflect.New(reflect.TypeOf(device.Deref(op))).Elem()
		v.Set(reflect.ValueOf(device.Deref(op)))
		v.FieldByName(s.Scale).SetFloat(1)
		return v.Interface().(device.Op), true, nil
	}
	op, err = device.MapTensors(op, func(f catalog.Tensor, t device.Tensor) device.Tensor {
		if f.Path != s.Scale || err != nil {
			return t
		}
		v := make([]float32, t.Rows*t.Cols)
		for i := range v {
			v[i] = 1
		}
		var ones device.Tensor
		ones, err = b.temp(t.Buf.DType(), t.Rows, t.Cols, v)
		return ones
	})
	return op, err == nil, err
}

// bendStride returns op with its first row-strided float input read with a row stride one
// short, as a copy laid out the way such a kernel would read it.
func (b *mutant) bendStride(op device.Op) (device.Op, error) {
	ins, _ := Operands(op)
	var in Named
	for _, n := range ins {
		if n.T.Buf.DType() != device.I32 && n.T.Rows > 1 {
			in = n
			break
		}
	}
	if !in.T.Present() {
		return nil, fmt.Errorf("%s has no row-strided input to bend", op.OpName())
	}
	t := in.T
	flat := make([]float32, t.Buf.Len())
	if err := b.Backend.Read(device.Tensor{Buf: t.Buf, Rows: 1, Cols: t.Buf.Len()}, flat); err != nil {
		return nil, err
	}
	v := make([]float32, 0, t.Rows*t.Cols)
	for r := 0; r < t.Rows; r++ {
		off := t.Off + r*(t.RowStride()-1)
		v = append(v, flat[off:off+t.Cols]...)
	}
	bent, err := b.temp(t.Buf.DType(), t.Rows, t.Cols, v)
	if err != nil {
		return nil, err
	}
	return device.MapTensors(op, func(f catalog.Tensor, t device.Tensor) device.Tensor {
		if f.Path == in.Name {
			return bent
		}
		return t
	})
}

// pastFirstRow reports whether some float operand of op starts past the first row of its buffer.
func pastFirstRow(op device.Op) bool {
	ins, outs := Operands(op)
	for _, n := range append(ins, outs...) {
		if n.T.Buf.DType() != device.I32 && n.T.Off >= n.T.RowStride() {
			return true
		}
	}
	return false
}

// CPUTarget is the CPU backend (made with opts) under contract, its controls planted on the host
// (HostControls).
func CPUTarget(f Family, opts ...cpu.Option) Target {
	be := cpu.New(opts...)
	return Target{Name: "cpu", Backend: be, Controls: HostControls(f),
		Plant: func(c Control) (device.Backend, func(), error) {
			m, err := HostPlant(be, c)
			return m, func() {}, err
		}}
}

// RunOnCPU runs the contract of the registered family name (root: the repository root) on the CPU
// backend: every kernel through gates 1-4, every control red. It returns the summary, or an error
// holding the log when a kernel fails or a control stays green.
func RunOnCPU(name, root string, seed int64) (string, error) {
	f, err := LoadFamily(name, root)
	if err != nil {
		return "", err
	}
	var log strings.Builder
	r := Run(CPUTarget(f), f, seed, &log)
	if !r.OK() {
		return "", fmt.Errorf("%s\n%s", r.Summary(), log.String())
	}
	return r.Summary(), nil
}
