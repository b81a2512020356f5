package contracts

import (
	"fmt"
	"math"

	"tfc/runtime/device"
)

// Read returns a host copy of a tensor: Rows*Cols values row-major, I32 as exact integers.
type Read func(t device.Tensor) ([]float64, error)

// Class is an output's precision class; it fixes the bound a backend must meet.
type Class uint8

const (
	// Exact: data movement (embed, gather, scatter, copy, KV-cache stores). The backend's value
	// equals the reference rounded to the output dtype, bit for bit.
	Exact Class = iota
	// Elementwise: one float32 rounding or a few per element (add, mul, activations, GLU, rope,
	// the residual sum of rmsnorm). Bound: 2e-6 of the row's largest reference magnitude.
	Elementwise
	// Reduction: float32 accumulation over K terms (linear, norms, attention), weights converted
	// exactly from BF16/F16. Bound: 1e-5·max(1, √(K/1024)) of the row's largest magnitude.
	Reduction
)

func (c Class) String() string {
	return [...]string{"exact", "elementwise", "reduction"}[c]
}

// Output is what the reference says one output tensor must hold after the op.
type Output struct {
	Name  string
	T     device.Tensor
	Want  []float64
	Class Class
	K     int // reduction length (Reduction only): K of a linear, D of a norm, max(HeadDim, keys) of attention
	// Slack is, in BF16 precision, each element's absolute allowance for rounding points that
	// round the other way (one BF16 ulp of the value there, carried to the output); nil in F32.
	Slack []float64
}

// Tolerance is the largest error allowed in a row, relative to the row's largest reference
// magnitude; a narrow output dtype adds its own rounding (BF16 2^-8, F16 2^-10).
func (o Output) Tolerance() float64 {
	tol := 0.0
	switch o.Class {
	case Elementwise:
		tol = 2e-6
	case Reduction:
		tol = 1e-5 * math.Max(1, math.Sqrt(float64(o.K)/1024))
	}
	if o.Class != Exact && o.T.Buf != nil {
		switch o.T.Buf.DType() {
		case device.BF16:
			tol += math.Ldexp(1, -8)
		case device.F16:
			tol += math.Ldexp(1, -10)
		}
	}
	return tol
}

// Compare checks got (Rows*Cols values of o.T) against the reference. NaN must meet NaN and
// ±Inf the same infinity; finite values must meet finite values within the class bound.
// It returns the largest relative row error seen.
func (o Output) Compare(got []float64) (float64, error) {
	r, c := o.T.Rows, o.T.Cols
	if len(got) != r*c || len(o.Want) != r*c {
		return 0, fmt.Errorf("%s: have %d values, want %d", o.Name, len(got), len(o.Want))
	}
	dt := device.F32
	if o.T.Buf != nil {
		dt = o.T.Buf.DType()
	}
	tol := o.Tolerance()
	worst := 0.0
	for i := 0; i < r; i++ {
		scale := 0.0
		for j := 0; j < c; j++ {
			if w := o.Want[i*c+j]; !math.IsNaN(w) && !math.IsInf(w, 0) {
				scale = math.Max(scale, math.Abs(w))
			}
		}
		scale = math.Max(scale, 0x1p-126)
		for j := 0; j < c; j++ {
			w, g := o.Want[i*c+j], got[i*c+j]
			if o.Class == Exact {
				w = Round(dt, w)
			}
			if cw, cg := classOf(w), classOf(g); cw != cg {
				return worst, fmt.Errorf("%s[%d,%d] = %g, want %g (%s, not %s)", o.Name, i, j, g, w, cw, cg)
			}
			if classOf(w) != "finite" {
				continue
			}
			if o.Slack != nil && dt == device.F32 && rb(g) != g {
				return worst, fmt.Errorf("%s[%d,%d] = %.9g is not BF16-exact: a rounding point is missing", o.Name, i, j, g)
			}
			e := math.Abs(g-w) / scale
			if o.Slack != nil {
				e = math.Max(0, math.Abs(g-w)-o.Slack[i*c+j]) / scale
			}
			worst = math.Max(worst, e)
			if e > tol {
				return worst, fmt.Errorf("%s[%d,%d] = %.9g, want %.9g: error %.3g of the row's scale %.4g exceeds the %s bound %.3g",
					o.Name, i, j, g, w, e, scale, o.Class, tol)
			}
		}
	}
	return worst, nil
}

func classOf(x float64) string {
	switch {
	case math.IsNaN(x):
		return "NaN"
	case math.IsInf(x, 1):
		return "+Inf"
	case math.IsInf(x, -1):
		return "-Inf"
	}
	return "finite"
}

func ints(v []float64) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

// reader reads operands and remembers the first error, naming the op and operand.
type reader struct {
	op   string
	read Read
	err  error
}

func (r *reader) get(name string, t device.Tensor) []float64 {
	if r.err != nil || !t.Present() {
		return nil
	}
	v, err := r.read(t)
	if err != nil {
		r.err = fmt.Errorf("%s: reading %s: %w", r.op, name, err)
	}
	return v
}

func (r *reader) need(name string, t device.Tensor, rows, cols int) {
	if r.err == nil && (t.Rows != rows || t.Cols != cols) {
		r.err = fmt.Errorf("%s: %s is [%d,%d], want [%d,%d]", r.op, name, t.Rows, t.Cols, rows, cols)
	}
}

// Expect runs the float64 reference of op on host copies of its operands (taken before the op
// runs) and returns what each output must hold afterwards.
func Expect(op device.Op, read Read) ([]Output, error) {
	op = device.Deref(op)
	r := &reader{op: op.OpName(), read: read}
	var outs []Output
	switch o := op.(type) {
	case device.Linear:
		m, k, n := o.X.Rows, o.X.Cols, o.W.Rows
		r.need("W", o.W, n, k)
		r.need("Y", o.Y, m, n)
		if o.B.Present() {
			r.need("B", o.B, 1, n)
		}
		if o.Res.Present() {
			r.need("Res", o.Res, m, n)
		}
		x, w, b, res := r.get("X", o.X), r.get("W", o.W), r.get("B", o.B), r.get("Res", o.Res)
		if r.err == nil {
			outs = append(outs, Output{"Y", o.Y, Linear(x, m, k, w, n, b, res, o.Act), Reduction, k, nil})
		}
	case device.RMSNorm:
		m, d := o.X.Rows, o.X.Cols
		r.need("W", o.W, 1, d)
		r.need("Y", o.Y, m, d)
		x, w := r.get("X", o.X), r.get("W", o.W)
		if o.Res.Present() {
			r.need("Res", o.Res, m, d)
			if o.Sum.Present() {
				r.need("Sum", o.Sum, m, d)
			}
			res := r.get("Res", o.Res)
			if r.err == nil {
				x = Add(x, res)
				if o.Sum.Present() {
					outs = append(outs, Output{"Sum", o.Sum, append([]float64(nil), x...), Elementwise, 0, nil})
					for i := range x {
						x[i] = Round(o.Sum.Buf.DType(), x[i])
					}
				}
			}
		}
		if r.err == nil {
			outs = append(outs, Output{"Y", o.Y, RMSNorm(x, m, d, w, float64(o.Eps)), Reduction, d, nil})
		}
	case device.LayerNorm:
		m, d := o.X.Rows, o.X.Cols
		r.need("W", o.W, 1, d)
		r.need("B", o.B, 1, d)
		r.need("Y", o.Y, m, d)
		x, w, b := r.get("X", o.X), r.get("W", o.W), r.get("B", o.B)
		if r.err == nil {
			outs = append(outs, Output{"Y", o.Y, LayerNorm(x, m, d, w, b, float64(o.Eps)), Reduction, d, nil})
		}
	case device.Rope:
		if o.Heads*o.HeadDim > o.X.Cols {
			return nil, fmt.Errorf("rope: %d heads of %d exceed X's %d columns", o.Heads, o.HeadDim, o.X.Cols)
		}
		r.need("Pos", o.Pos, o.X.Rows, len(o.Sections))
		x, pos := r.get("X", o.X), r.get("Pos", o.Pos)
		if r.err == nil {
			y, err := Rope(x, o.X.Rows, o.X.Cols, ints(pos), o.Heads, o.HeadDim, o.Theta, o.Sections, o.Mode)
			if err != nil {
				return nil, err
			}
			outs = append(outs, Output{"X", o.X, y, Elementwise, 0, nil})
		}
	case device.Attention:
		return expectAttention(o, r)
	case device.Add:
		a, b := r.get("A", o.A), r.get("B", o.B)
		r.need("B", o.B, o.A.Rows, o.A.Cols)
		r.need("Y", o.Y, o.A.Rows, o.A.Cols)
		if r.err == nil {
			outs = append(outs, Output{"Y", o.Y, Add(a, b), Elementwise, 0, nil})
		}
	case device.Mul:
		a, b := r.get("A", o.A), r.get("B", o.B)
		r.need("B", o.B, o.A.Rows, o.A.Cols)
		r.need("Y", o.Y, o.A.Rows, o.A.Cols)
		if r.err == nil {
			outs = append(outs, Output{"Y", o.Y, Mul(a, b), Elementwise, 0, nil})
		}
	case device.Activate:
		x := r.get("X", o.X)
		r.need("Y", o.Y, o.X.Rows, o.X.Cols)
		if r.err == nil {
			outs = append(outs, Output{"Y", o.Y, Activate(x, o.Act), Elementwise, 0, nil})
		}
	case device.GLU:
		g, u := r.get("Gate", o.Gate), r.get("Up", o.Up)
		r.need("Up", o.Up, o.Gate.Rows, o.Gate.Cols)
		r.need("Y", o.Y, o.Gate.Rows, o.Gate.Cols)
		if r.err == nil {
			outs = append(outs, Output{"Y", o.Y, GLU(g, u, o.Act), Elementwise, 0, nil})
		}
	case device.Embed:
		ids, tab := r.get("Ids", o.Ids), r.get("Table", o.Table)
		r.need("Y", o.Y, o.Ids.Cols, o.Table.Cols)
		if r.err == nil {
			y, err := Gather(tab, o.Table.Cols, ints(ids))
			if err != nil {
				return nil, fmt.Errorf("embed: Ids: %w", err)
			}
			outs = append(outs, Output{"Y", o.Y, y, Exact, 0, nil})
		}
	case device.Gather:
		idx, x := r.get("Index", o.Index), r.get("X", o.X)
		r.need("Y", o.Y, o.Index.Cols, o.X.Cols)
		if r.err == nil {
			y, err := Gather(x, o.X.Cols, ints(idx))
			if err != nil {
				return nil, fmt.Errorf("gather: Index: %w", err)
			}
			outs = append(outs, Output{"Y", o.Y, y, Exact, 0, nil})
		}
	case device.Scatter:
		idx, src, y := r.get("Index", o.Index), r.get("Src", o.Src), r.get("Y", o.Y)
		r.need("Index", o.Index, 1, o.Src.Rows)
		if r.err == nil && o.Src.Cols != o.Y.Cols {
			r.err = fmt.Errorf("scatter: Src has %d columns, Y %d", o.Src.Cols, o.Y.Cols)
		}
		if r.err == nil {
			y, err := Scatter(src, o.Src.Cols, ints(idx), y)
			if err != nil {
				return nil, fmt.Errorf("scatter: Index: %w", err)
			}
			outs = append(outs, Output{"Y", o.Y, y, Exact, 0, nil})
		}
	case device.Copy:
		x := r.get("X", o.X)
		r.need("Y", o.Y, o.X.Rows, o.X.Cols)
		if r.err == nil {
			outs = append(outs, Output{"Y", o.Y, x, Exact, 0, nil})
		}
	case device.Argmax:
		x := r.get("X", o.X)
		r.need("Y", o.Y, 1, o.X.Rows)
		if r.err == nil {
			outs = append(outs, Output{"Y", o.Y, Argmax(x, o.X.Cols), Exact, 0, nil})
		}
	default:
		return nil, fmt.Errorf("contracts: no reference for op %T", op)
	}
	return outs, r.err
}

func expectAttention(o device.Attention, r *reader) ([]Output, error) {
	if o.KVHeads <= 0 || o.Heads%o.KVHeads != 0 {
		return nil, fmt.Errorf("attention: Heads %d must be a multiple of KVHeads %d", o.Heads, o.KVHeads)
	}
	n, hd := o.Q.Rows, o.HeadDim
	r.need("Q", o.Q, n, o.Heads*hd)
	r.need("K", o.K, n, o.KVHeads*hd)
	r.need("V", o.V, n, o.KVHeads*hd)
	r.need("Y", o.Y, n, o.Heads*hd)
	q, k, v := r.get("Q", o.Q), r.get("K", o.K), r.get("V", o.V)
	if o.Cache == nil {
		spans := r.get("Spans", o.Spans)
		if r.err != nil {
			return nil, r.err
		}
		y, err := AttentionFull(q, k, v, n, o.Heads, o.KVHeads, hd, float64(o.Scale), ints(spans))
		if err != nil {
			return nil, err
		}
		keys := hd
		for i := 1; i < len(spans); i++ {
			keys = max(keys, int(spans[i]-spans[i-1]))
		}
		return []Output{{"Y", o.Y, y, Reduction, keys, nil}}, nil
	}
	if o.Rows == nil {
		return nil, fmt.Errorf("attention: a cache needs Rows")
	}
	rs := r.get("RowSeq", o.Rows.RowSeq)
	rp := r.get("RowPos", o.Rows.RowPos)
	pt := r.get("PageTable", o.Rows.PageTable)
	ck, cv := r.get("Cache.K", o.Cache.K), r.get("Cache.V", o.Cache.V)
	r.need("RowSeq", o.Rows.RowSeq, 1, n)
	r.need("RowPos", o.Rows.RowPos, 1, n)
	r.need("Cache.K", o.Cache.K, o.Cache.K.Rows, o.KVHeads*hd)
	r.need("Cache.V", o.Cache.V, o.Cache.K.Rows, o.KVHeads*hd)
	if r.err != nil {
		return nil, r.err
	}
	pages := Pages{Table: ints(pt), MaxPages: o.Rows.PageTable.Cols, PageSize: o.Rows.PageSize, Rows: o.Cache.K.Rows}
	if pages.PageSize <= 0 {
		return nil, fmt.Errorf("attention: PageSize %d must be positive", pages.PageSize)
	}
	kt, vt := o.Cache.K.Buf.DType(), o.Cache.V.Buf.DType()
	y, nk, nv, err := AttentionCached(q, k, v, n, o.Heads, o.KVHeads, hd, float64(o.Scale), ints(rs), ints(rp), pages, ck, cv,
		func(x float64) float64 { return Round(kt, x) }, func(x float64) float64 { return Round(vt, x) })
	if err != nil {
		return nil, err
	}
	maxPos := 0
	for _, p := range rp {
		maxPos = max(maxPos, int(p)+1)
	}
	return []Output{
		{"Y", o.Y, y, Reduction, max(hd, maxPos), nil},
		{"Cache.K", o.Cache.K, nk, Exact, 0, nil},
		{"Cache.V", o.Cache.V, nv, Exact, 0, nil},
	}, nil
}
