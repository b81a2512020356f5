package cuda

import (
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"tfc/compiler"
	"tfc/compiler/emit/hip"
	"tfc/contracts"
	"tfc/runtime/device"
	"tfc/runtime/device/cpu"
)

const root = "../../.."

// familyKernels lowers graphs/qwen2_vl.graph specialised for the tiny checkpoint, as its
// go:generate line does, and returns the kernels of kernels/qwen2vl.hip.
func familyKernels(t *testing.T) []hip.Kernel {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, "graphs/qwen2_vl.graph"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(root, "testdata/qwen2-vl-tiny/config.json"))
	if err != nil {
		t.Fatal(err)
	}
	ks, err := compiler.HIPKernels("graphs/qwen2_vl.graph", src, compiler.Options{Specialize: cfg, PageSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

// chain builds device ops for kernel k over random operands at its specialised shapes, with m
// rows: each later op reads the previous op's output, and a rope rotates its column slice of
// the last non-rope output, as compiler/emit/hip chains them.
func chain(b *contracts.Builder, k hip.Kernel, m int) ([]device.Op, error) {
	dt := func(o hip.Op, field string) device.DType {
		switch o.DTypes[field] {
		case "BF16":
			return device.BF16
		case "F16":
			return device.F16
		}
		return device.F32
	}
	acts := map[string]device.Act{"": device.ActNone, "none": device.ActNone, "silu": device.ActSiLU, "gelu": device.ActGELU,
		"gelu_tanh": device.ActGELUTanh, "quick_gelu": device.ActQuickGELU}
	weight := func(o hip.Op, field string, rows, cols int) device.Tensor {
		return b.Normal(dt(o, field), rows, cols, 1/math.Sqrt(float64(cols)))
	}
	var ops []device.Op
	var last device.Tensor // output of the last op that is not a rope
	input := func(o hip.Op, field string, cols int) device.Tensor {
		if len(ops) > 0 {
			return last
		}
		return b.Act(dt(o, field), m, cols)
	}
	ints := func(n, limit int) []int32 {
		v := make([]int32, n)
		for i := range v {
			v[i] = int32(b.Rng.Intn(limit))
		}
		return v
	}
	for i, o := range k.Ops {
		act, ok := acts[o.Act]
		if !ok {
			return nil, fmt.Errorf("op %d: activation %q", i, o.Act)
		}
		var op device.Op
		switch o.Kind {
		case "linear":
			n, kk := o.Ints["N"], o.Ints["K"]
			l := device.Linear{X: input(o, "X", kk), W: weight(o, "W", n, kk), Act: act}
			if o.Flags["has_bias"] {
				l.B = weight(o, "B", 1, n)
			}
			if o.Flags["has_res"] {
				l.Res = b.Act(dt(o, "Res"), m, n)
			}
			l.Y = b.Out(dt(o, "Y"), m, n)
			op, last = l, l.Y
		case "rope":
			hd, heads, ns := o.Ints["head_dim"], o.Ints["heads"], o.Ints["sections"]
			r := device.Rope{Heads: heads, HeadDim: hd, Theta: float32(o.Floats["theta"]), Mode: device.RopeSections}
			if o.Flags["per_axis"] {
				r.Mode = device.RopePerAxis
			}
			for s := 0; s < ns; s++ {
				r.Sections = append(r.Sections, o.Ints[fmt.Sprintf("section%d", s)])
			}
			if len(ops) > 0 {
				col := o.Ints["col"]
				r.X = last.ColSlice(col, col+heads*hd)
			} else {
				r.X = b.Act(dt(o, "X"), m, heads*hd)
			}
			r.Pos = b.Ints(m, ns, ints(m*ns, 64))
			op = r
		case "rmsnorm":
			d := o.Ints["D"]
			r := device.RMSNorm{X: input(o, "X", d), Eps: float32(o.Floats["eps"])}
			if o.Flags["has_res"] {
				r.Res = b.Act(dt(o, "Res"), m, d)
				r.Sum = b.Out(dt(o, "Sum"), m, d)
			}
			r.W = weight(o, "W", 1, d)
			r.Y = b.Out(dt(o, "Y"), m, d)
			op, last = r, r.Y
		case "layernorm":
			d := o.Ints["D"]
			l := device.LayerNorm{X: input(o, "X", d), W: weight(o, "W", 1, d), Eps: float32(o.Floats["eps"])}
			if o.Flags["has_bias"] {
				l.B = weight(o, "B", 1, d)
			}
			l.Y = b.Out(dt(o, "Y"), m, d)
			op, last = l, l.Y
		case "attention":
			h, kv, hd := o.Ints["heads"], o.Ints["kv_heads"], o.Ints["head_dim"]
			a := device.Attention{Heads: h, KVHeads: kv, HeadDim: hd, Scale: float32(o.Floats["scale"]),
				Q: b.Act(dt(o, "Q"), m, h*hd), K: b.Act(dt(o, "K"), m, kv*hd), V: b.Act(dt(o, "V"), m, kv*hd)}
			a.Y = b.Out(dt(o, "Y"), m, h*hd)
			if o.Flags["cache"] {
				ps := o.Ints["page_size"]
				// two sequences of two pages each, their rows after a cached prefix of ps-1
				a.Cache = &device.KVCache{K: b.Normal(dt(o, "Cache.K"), 4*ps, kv*hd, 1), V: b.Normal(dt(o, "Cache.V"), 4*ps, kv*hd, 1)}
				seq, pos := make([]int32, m), make([]int32, m)
				for r := range seq {
					j := r
					if r >= m/2 {
						seq[r], j = 1, r-m/2
					}
					pos[r] = int32(ps - 1 + j)
				}
				a.Rows = &device.Rows{PageSize: ps, RowSeq: b.Ints(1, m, seq), RowPos: b.Ints(1, m, pos), PageTable: b.Ints(2, 2, []int32{2, 0, 3, 1})}
			} else {
				a.Spans = b.Ints(1, 3, []int32{0, int32(m / 3), int32(m)})
			}
			op, last = a, a.Y
		case "add", "mul":
			n := o.Ints["N"]
			x, y := input(o, "A", n), b.Act(dt(o, "B"), m, n)
			out := b.Out(dt(o, "Y"), m, n)
			if o.Kind == "add" {
				op = device.Add{A: x, B: y, Y: out}
			} else {
				op = device.Mul{A: x, B: y, Y: out}
			}
			last = out
		case "activate":
			n := o.Ints["N"]
			a := device.Activate{X: input(o, "X", n), Act: act}
			a.Y = b.Out(dt(o, "Y"), m, n)
			op, last = a, a.Y
		case "glu":
			n := o.Ints["N"]
			g := device.GLU{Gate: input(o, "Gate", n), Up: b.Act(dt(o, "Up"), m, n), Act: act}
			g.Y = b.Out(dt(o, "Y"), m, n)
			op, last = g, g.Y
		case "copy":
			n := o.Ints["N"]
			c := device.Copy{X: input(o, "X", n)}
			c.Y = b.Out(dt(o, "Y"), m, n)
			op, last = c, c.Y
		case "embed":
			d, v := o.Ints["D"], o.Ints["V"]
			e := device.Embed{Ids: b.Ints(1, m, ints(m, v)), Table: b.Normal(dt(o, "Table"), v, d, 1), Y: b.Out(dt(o, "Y"), m, d)}
			op, last = e, e.Y
		case "gather":
			d := o.Ints["D"]
			g := device.Gather{X: b.Act(dt(o, "X"), m+3, d), Index: b.Ints(1, m, ints(m, m+3)), Y: b.Out(dt(o, "Y"), m, d)}
			op, last = g, g.Y
		case "scatter":
			d := o.Ints["D"]
			idx := make([]int32, m)
			for j, p := range b.Rng.Perm(m + 3)[:m] {
				idx[j] = int32(p)
			}
			s := device.Scatter{Src: b.Act(dt(o, "Src"), m, d), Index: b.Ints(1, m, idx), Y: b.Act(dt(o, "Y"), m+3, d)}
			op, last = s, s.Y
		default:
			return nil, fmt.Errorf("op %d: unknown kind %q", i, o.Kind)
		}
		ops = append(ops, op)
	}
	return ops, b.Err()
}

// rowsFor is the row count a kernel is checked at: enough for two GEMM row tiles, fewer for the
// logits and the cached attention (two sequences over two pages).
func rowsFor(k hip.Kernel) int {
	o := k.Ops[0]
	switch {
	case o.Kind == "attention" && o.Flags["cache"]:
		return 6
	case o.Kind == "linear" && o.Ints["N"] > 100000:
		return 5
	}
	return 70
}

type final struct {
	out contracts.Output
	tol float64
	got []float64
}

// checkChain launches ops as one kernel and compares every tensor it stores with the float64
// references of the ops in order, each op's outputs rounded to their dtype before the next op
// reads them; outputs of ops the kernel keeps internal are not stored and not compared.
func checkChain(be device.Backend, k hip.Kernel, ops []device.Op) (map[string]*final, float64, error) {
	for _, op := range ops {
		if err := contracts.Poison(be, op); err != nil {
			return nil, 0, err
		}
	}
	read := contracts.HostRead(be)
	mirror := map[device.Buffer][]float64{}
	for _, op := range ops {
		ins, outs := contracts.Operands(op)
		for _, n := range append(ins, outs...) {
			if _, ok := mirror[n.T.Buf]; ok {
				continue
			}
			v, err := read(device.Tensor{Buf: n.T.Buf, Rows: 1, Cols: n.T.Buf.Len()})
			if err != nil {
				return nil, 0, err
			}
			mirror[n.T.Buf] = v
		}
	}
	fromMirror := func(t device.Tensor) ([]float64, error) {
		out := make([]float64, 0, t.Rows*t.Cols)
		for r := 0; r < t.Rows; r++ {
			off := t.Off + r*t.RowStride()
			out = append(out, mirror[t.Buf][off:off+t.Cols]...)
		}
		return out, nil
	}
	finals := map[string]*final{}
	var order []string
	tol := 0.0
	for i, op := range ops {
		want, err := contracts.Expect(op, fromMirror)
		if err != nil {
			return nil, 0, fmt.Errorf("reference of %s: %w", op.OpName(), err)
		}
		for _, w := range want {
			tol += w.Tolerance()
			m := mirror[w.T.Buf]
			for r := 0; r < w.T.Rows; r++ {
				for c := 0; c < w.T.Cols; c++ {
					m[w.T.Off+r*w.T.RowStride()+c] = contracts.Round(w.T.Buf.DType(), w.Want[r*w.T.Cols+c])
				}
			}
			if k.Ops[i].Flags["internal"] {
				continue
			}
			// a later op's output over the same tensor (a rope over a linear's columns) replaces it
			key := fmt.Sprintf("%p/%d/%d/%d/%d", w.T.Buf, w.T.Off, w.T.Rows, w.T.Cols, w.T.RowStride())
			if _, ok := finals[key]; !ok {
				order = append(order, key)
			}
			w.Name = fmt.Sprintf("op%d.%s", i, w.Name)
			finals[key] = &final{out: w}
		}
	}
	if err := be.Launch(&device.Kernel{Name: k.Name}, ops...); err != nil {
		return nil, 0, err
	}
	if err := be.Sync(); err != nil {
		return nil, 0, err
	}
	worst := 0.0
	for _, key := range order {
		f := finals[key]
		got, err := read(f.out.T)
		if err != nil {
			return nil, 0, err
		}
		f.got = got
		o := f.out
		o.Want, _ = fromMirror(o.T)
		dt := o.T.Buf.DType()
		for r := 0; r < o.T.Rows; r++ {
			row := o.Want[r*o.T.Cols : (r+1)*o.T.Cols]
			scale := 0x1p-126
			for _, w := range row {
				scale = math.Max(scale, math.Abs(w))
			}
			for j, w := range row {
				g := got[r*o.T.Cols+j]
				w = contracts.Round(dt, w)
				e := math.Abs(g-w) / scale
				if math.IsNaN(g) || e > 4*tol {
					return nil, 0, fmt.Errorf("%s: %s[%d,%d] = %.9g, want %.9g: error %.3g of the row's scale exceeds %.3g", k.Name, o.Name, r, j, g, w, e, 4*tol)
				}
				worst = math.Max(worst, e)
			}
		}
	}
	return finals, worst, nil
}

// readAll reads back every compared output of a checked chain after the launches before it.
func readAll(be device.Backend, fs map[string]*final) (map[string][]float64, error) {
	if err := be.Sync(); err != nil {
		return nil, err
	}
	read := contracts.HostRead(be)
	out := map[string][]float64{}
	for key, f := range fs {
		v, err := read(f.out.T)
		if err != nil {
			return nil, err
		}
		out[key] = v
	}
	return out, nil
}

// TestChainHarnessOnCPU runs the GPU contract's harness on the CPU backend, which computes every
// op of a launch: every kernel passes, and a backend that skips a launch's last op fails each one.
func TestChainHarnessOnCPU(t *testing.T) {
	for i, k := range familyKernels(t) {
		for _, broken := range []bool{false, true} {
			var be device.Backend = cpu.New()
			if broken {
				be = dropLast{be}
			}
			b := &contracts.Builder{Backend: be, Rng: rand.New(rand.NewSource(int64(i + 1)))}
			ops, err := chain(b, k, rowsFor(k))
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = checkChain(be, k, ops)
			switch {
			case !broken && err != nil:
				t.Errorf("%s on the CPU: %v", k.Name, err)
			case broken && err == nil:
				t.Errorf("%s: the harness passed a backend that skips the last op", k.Name)
			}
			b.Free()
		}
	}
}

// dropLast is a broken backend: it skips the last op of every launch.
type dropLast struct{ device.Backend }

func (d dropLast) Launch(k *device.Kernel, ops ...device.Op) error {
	return d.Backend.Launch(k, ops[:len(ops)-1]...)
}
