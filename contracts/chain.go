package contracts

import (
	"fmt"
	"math"

	"tfc/compiler/emit/hip"
	"tfc/runtime/device"
	"tfc/runtime/device/catalog"
)

// Chain builds the device ops of kernel k over random operands at its specialised shapes, with
// m rows: each later op reads the previous op's output, a rope rotates its column slice of the
// last non-rope output, and a glu after a linear reads its gate and up columns of the linear's
// output, as compiler/emit/hip chains them.
func Chain(b *Builder, k hip.Kernel, m int) ([]device.Op, error) {
	acts := map[string]device.Act{"": device.ActNone, "none": device.ActNone, "silu": device.ActSiLU, "gelu": device.ActGELU,
		"gelu_tanh": device.ActGELUTanh, "quick_gelu": device.ActQuickGELU}
	weight := func(o hip.Op, field string, rows, cols int) device.Tensor {
		return b.Normal(o.DType(field), rows, cols, 1/math.Sqrt(float64(cols)))
	}
	var ops []device.Op
	var last device.Tensor // output of the last op that is not a rope
	input := func(o hip.Op, field string, cols int) device.Tensor {
		if len(ops) > 0 {
			return last
		}
		return b.Act(o.DType(field), m, cols)
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
			return nil, fmt.Errorf("%s op %d: activation %q has no device.Act", k.Name, i, o.Act)
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
				l.Res = b.Act(o.DType("Res"), m, n)
			}
			if o.Flags["round_product"] {
				l.Round = device.RoundProduct
			}
			l.Y = b.Out(o.DType("Y"), m, n)
			op, last = l, l.Y
		case "rope":
			hd, heads, ns := o.Ints["head_dim"], o.Ints["heads"], o.Ints["sections"]
			r := device.Rope{Heads: heads, HeadDim: hd, Theta: float32(o.Floats["theta"]), Mode: device.RopeSections}
			if o.Flags["per_axis"] {
				r.Mode = device.RopePerAxis
			}
			if o.Flags["alternating"] {
				r.Mode = device.RopeAlternating
			}
			for s := 0; s < ns; s++ {
				r.Sections = append(r.Sections, o.Ints[fmt.Sprintf("section%d", s)])
			}
			if len(ops) > 0 {
				col := o.Ints["col"]
				r.X = last.ColSlice(col, col+heads*hd)
			} else {
				r.X = b.Act(o.DType("X"), m, heads*hd)
			}
			r.Pos = b.Ints(m, ns, ints(m*ns, ropePositions))
			op = r
		case "rmsnorm":
			d := o.Ints["D"]
			r := device.RMSNorm{X: input(o, "X", d), Eps: float32(o.Floats["eps"])}
			if o.Flags["has_res"] {
				r.Res = b.Act(o.DType("Res"), m, d)
				r.Sum = b.Out(o.DType("Sum"), m, d)
			}
			r.W = weight(o, "W", 1, d)
			r.Y = b.Out(o.DType("Y"), m, d)
			op, last = r, r.Y
		case "layernorm":
			d := o.Ints["D"]
			l := device.LayerNorm{X: input(o, "X", d), W: weight(o, "W", 1, d), Eps: float32(o.Floats["eps"])}
			if o.Flags["has_bias"] {
				l.B = weight(o, "B", 1, d)
			}
			l.Y = b.Out(o.DType("Y"), m, d)
			op, last = l, l.Y
		case "attention":
			h, kv, hd := o.Ints["heads"], o.Ints["kv_heads"], o.Ints["head_dim"]
			a := device.Attention{Heads: h, KVHeads: kv, HeadDim: hd, Scale: float32(o.Floats["scale"]),
				Q: b.Act(o.DType("Q"), m, h*hd), K: b.Act(o.DType("K"), m, kv*hd), V: b.Act(o.DType("V"), m, kv*hd)}
			a.Y = b.Out(o.DType("Y"), m, h*hd)
			if o.Flags["cache"] {
				ps := o.Ints["page_size"]
				// two sequences, their rows after a cached prefix of cachedPrefix keys, their pages interleaved
				pages := (cachedPrefix + m/2 + ps - 1) / ps
				a.Cache = &device.KVCache{K: b.Normal(o.DType("Cache.K"), 2*pages*ps, kv*hd, 1), V: b.Normal(o.DType("Cache.V"), 2*pages*ps, kv*hd, 1)}
				seq, pos := make([]int32, m), make([]int32, m)
				for r := range seq {
					j := r
					if r >= m/2 {
						seq[r], j = 1, r-m/2
					}
					pos[r] = int32(cachedPrefix + j)
				}
				table := make([]int32, 2*pages)
				for i := range pages {
					table[i], table[pages+i] = int32(2*i+1), int32(2*i)
				}
				a.Rows = &device.Rows{PageSize: ps, RowSeq: b.Ints(1, m, seq), RowPos: b.Ints(1, m, pos), PageTable: b.Ints(2, pages, table)}
			} else {
				a.Spans = b.Ints(1, 3, []int32{0, int32(m / 3), int32(m)})
			}
			op, last = a, a.Y
		case "add", "mul":
			n := o.Ints["N"]
			x, y := input(o, "A", n), b.Act(o.DType("B"), m, n)
			out := b.Out(o.DType("Y"), m, n)
			if o.Kind == "add" {
				op = device.Add{A: x, B: y, Y: out}
			} else {
				op = device.Mul{A: x, B: y, Y: out}
			}
			last = out
		case "activate":
			n := o.Ints["N"]
			a := device.Activate{X: input(o, "X", n), Act: act}
			a.Y = b.Out(o.DType("Y"), m, n)
			op, last = a, a.Y
		case "glu":
			n := o.Ints["N"]
			g := device.GLU{Gate: input(o, "Gate", n), Up: b.Act(o.DType("Up"), m, n), Act: act}
			if up, ok := o.Ints["up_col"]; ok && len(ops) > 0 { // the halves of a stacked linear's output
				gate := o.Ints["gate_col"]
				g.Gate, g.Up = last.ColSlice(gate, gate+n), last.ColSlice(up, up+n)
			}
			g.Y = b.Out(o.DType("Y"), m, n)
			op, last = g, g.Y
		case "copy":
			n := o.Ints["N"]
			c := device.Copy{X: input(o, "X", n)}
			c.Y = b.Out(o.DType("Y"), m, n)
			op, last = c, c.Y
		case "embed":
			d, v := o.Ints["D"], o.Ints["V"]
			e := device.Embed{Ids: b.Ints(1, m, ints(m, v)), Table: b.Act(o.DType("Table"), v, d), Y: b.Out(o.DType("Y"), m, d)}
			op, last = e, e.Y
		case "gather":
			d := o.Ints["D"]
			g := device.Gather{X: b.Act(o.DType("X"), m+3, d), Index: b.Ints(1, m, ints(m, m+3)), Y: b.Out(o.DType("Y"), m, d)}
			op, last = g, g.Y
		case "scatter":
			d := o.Ints["D"]
			idx := make([]int32, m)
			for j, p := range b.Rng.Perm(m + 3)[:m] {
				idx[j] = int32(p)
			}
			s := device.Scatter{Src: b.Act(o.DType("Src"), m, d), Index: b.Ints(1, m, idx), Y: b.Act(o.DType("Y"), m+3, d)}
			op, last = s, s.Y
		case "argmax":
			v := o.Ints["V"]
			a := device.Argmax{X: input(o, "X", v), Y: b.Out(device.I32, 1, m)}
			if len(ops) == 0 && m > 0 && v > 0 { // row 0's largest value in its last column, which a loop one short misses
				b.fill(a.X.Slice(0, 1).ColSlice(v-1, v), []float32{1e4})
			}
			op, last = a, a.Y
		default:
			return nil, fmt.Errorf("%s op %d: no chain for op kind %q", k.Name, i, o.Kind)
		}
		ops = append(ops, op)
	}
	return ops, b.Err()
}

// RowsFor is the row count a kernel is checked at: enough for two GEMM row tiles, or for its
// fill function where it has one (two fill tiles past the threshold: hip.FillRows), fewer for the
// logits and the cached attention (two sequences over two pages).
func RowsFor(k hip.Kernel) int {
	o := k.Ops[0]
	if f := hip.FillRows(k); f > 0 && !(o.Kind == "linear" && o.Ints["N"] > 100000) {
		return f + 44
	}
	switch {
	case o.Kind == "attention" && o.Flags["cache"] && o.Ints["page_size"] >= 5:
		return 12 // gate 3 relaunches the last 6 alone: over 8 rows and at most 8 take different layouts
	case o.Kind == "attention" && o.Flags["cache"]:
		return 6
	case o.Kind == "linear" && o.Ints["N"] > 100000, o.Kind == "argmax" && o.Ints["V"] > 100000:
		return 5
	}
	return 70
}

// Stored is a tensor a kernel stores and what it must hold after the launch.
type Stored struct {
	Output
	Bound float64 // the kernel's bound: four times the sum of its ops' class bounds
}

// ExpectChain poisons the outputs of ops on be and returns, for every tensor kernel k stores,
// the float64 references of its ops applied in order, each op's outputs rounded to their dtype
// before the next op reads them; outputs of ops the kernel keeps internal are not stored.
func ExpectChain(be device.Backend, k hip.Kernel, ops []device.Op) ([]Stored, error) {
	if len(ops) != len(k.Ops) {
		return nil, fmt.Errorf("%s: %d ops for a kernel of %d", k.Name, len(ops), len(k.Ops))
	}
	return expectOps(be, k.Name, ops, func(i int) bool { return k.Ops[i].Flags["internal"] })
}

// expectOps is ExpectChain for the ops of kernel name, internal(i) saying whether op i's outputs
// stay inside the kernel.
func expectOps(be device.Backend, name string, ops []device.Op, internal func(i int) bool) ([]Stored, error) {
	for _, op := range ops {
		if err := Poison(be, op); err != nil {
			return nil, err
		}
	}
	mirror, err := mirrorOf(HostRead(be), ops)
	if err != nil {
		return nil, err
	}
	prec := device.PrecisionOf(be)
	var slack hostMirror // BF16 precision: each element's slack, as the ops' references leave it
	var slackRead Read
	if prec == device.BF16Precision {
		slack = hostMirror{}
		for b, v := range mirror {
			slack[b] = make([]float64, len(v))
		}
		slackRead = slack.read
	}
	var stored []Stored
	tol := 0.0
	for i, op := range ops {
		want, err := ExpectIn(op, mirror.read, prec, slackRead)
		if err != nil {
			return nil, fmt.Errorf("%s: reference of %s: %w", name, op.OpName(), err)
		}
		for _, w := range want {
			tol += w.Tolerance()
			mirror.store(w)
			if slack != nil {
				slack.storeSlack(w)
			}
			if internal(i) {
				continue
			}
			// a later op's output over the same tensor (a rope over a linear's columns) replaces it
			w.Name = fmt.Sprintf("op%d.%s", i, w.Name)
			replaced := false
			for j := range stored {
				if stored[j].T == w.T {
					stored[j].Output, replaced = w, true
				}
			}
			if !replaced {
				stored = append(stored, Stored{Output: w})
			}
		}
	}
	for i := range stored {
		// later ops may have rewritten part of the tensor: the mirror holds its final state
		stored[i].Want, _ = mirror.read(stored[i].T)
		stored[i].Bound = 4 * tol
		if slack != nil {
			stored[i].Slack, _ = slack.read(stored[i].T)
		}
	}
	return stored, nil
}

// Verify compares got, read back from s.T after the launch: an element still holding the
// poison was never written; NaN must meet NaN and ±Inf the same infinity; finite values must
// lie within s.Bound of the row's largest finite reference magnitude (beyond their Slack, in
// BF16 precision). It returns the largest
// relative error seen and which gate failed (2: not written, 4: wrong NaN/Inf class, 1: error).
func (s Stored) Verify(got []float64) (worst float64, gate int, err error) {
	r, c := s.T.Rows, s.T.Cols
	if len(got) != r*c || len(s.Want) != r*c {
		return 0, 1, fmt.Errorf("%s: have %d values, want %d", s.Name, len(got), len(s.Want))
	}
	dt := s.T.Buf.DType()
	for i := 0; i < r; i++ {
		row := s.Want[i*c : (i+1)*c]
		scale := 0x1p-126
		for _, w := range row {
			if !math.IsNaN(w) && !math.IsInf(w, 0) {
				scale = math.Max(scale, math.Abs(w))
			}
		}
		for j, w := range row {
			g := got[i*c+j]
			w = Round(dt, w)
			if poisoned(dt, g) && !math.IsNaN(w) {
				return worst, 2, fmt.Errorf("%s[%d,%d] was never written (poison survived)", s.Name, i, j)
			}
			if cw, cg := classOf(w), classOf(g); cw != cg {
				return worst, 4, fmt.Errorf("%s[%d,%d] = %g, want %g (%s, not %s)", s.Name, i, j, g, w, cw, cg)
			}
			if classOf(w) != "finite" {
				continue
			}
			if s.Slack != nil && dt == device.F32 && rb(g) != g {
				return worst, 1, fmt.Errorf("%s[%d,%d] = %.9g is not BF16-exact: a rounding point is missing", s.Name, i, j, g)
			}
			e := math.Abs(g-w) / scale
			if s.Slack != nil {
				e = math.Max(0, math.Abs(g-w)-s.Slack[i*c+j]) / scale
			}
			worst = math.Max(worst, e)
			if e > s.Bound {
				return worst, 1, fmt.Errorf("%s[%d,%d] = %.9g, want %.9g: error %.3g of the row's scale exceeds %.3g", s.Name, i, j, g, w, e, s.Bound)
			}
		}
	}
	return worst, 0, nil
}

// SubLaunch returns ops restricted to rows [lo, hi) of the launch, in place over the same
// buffers: row operands are row slices, per-row index operands column slices; tables, weights
// and caches are shared. An attention without a cache needs [lo, hi) to be whole spans and gets
// its own span list from b.
func SubLaunch(b *Builder, ops []device.Op, lo, hi int) ([]device.Op, error) {
	out := make([]device.Op, len(ops))
	for i, op := range ops {
		var err error
		out[i], err = device.MapTensors(op, func(f catalog.Tensor, t device.Tensor) device.Tensor {
			if !t.Present() {
				return t
			}
			switch f.Per {
			case catalog.PerRow:
				return t.Slice(lo, hi)
			case catalog.PerCol:
				return t.ColSlice(lo, hi)
			case catalog.PerSpan:
				return b.Ints(1, 2, []int32{0, int32(hi - lo)})
			}
			return t
		})
		if err != nil {
			return nil, fmt.Errorf("contracts: no sub-launch: %w", err)
		}
	}
	return out, b.Err()
}

// SubRanges are the row ranges a kernel of m rows is relaunched alone over, each off any tile
// boundary: for attention whole sequences (the second span, or the second cached sequence);
// otherwise 5 rows (a launch of at most 8 rows takes the small-row function) and, where m allows,
// 30 (a launch of 9-32 rows takes the band function where the backend runs bands, else the
// mid-size one), 50 (33-64 rows: the mid-size one) and 100 (the many-row function, where m is a
// fill function's).
func SubRanges(k hip.Kernel, m int) [][2]int {
	o := k.Ops[0]
	switch {
	case o.Kind == "attention" && o.Flags["cache"]:
		return [][2]int{{m / 2, m}}
	case o.Kind == "attention":
		return [][2]int{{m / 3, m}}
	case m <= 2:
		return [][2]int{{m - 1, m}}
	}
	r := [][2]int{{m/2 + 1, min(m, m/2+6)}}
	if m >= 37 {
		r = append(r, [2]int{7, 37})
	}
	if m >= 63 {
		r = append(r, [2]int{13, 63})
	}
	if hip.FillRows(k) > 0 && m > hip.FillRows(k) {
		r = append(r, [2]int{40, 140})
	}
	return r
}

// hostMirror holds host copies of every buffer some ops touch, updated as their references run.
type hostMirror map[device.Buffer][]float64

// mirrorOf copies every buffer an operand of ops lies in.
func mirrorOf(read Read, ops []device.Op) (hostMirror, error) {
	m := hostMirror{}
	for _, op := range ops {
		ins, outs := Operands(op)
		for _, n := range append(ins, outs...) {
			if _, ok := m[n.T.Buf]; ok {
				continue
			}
			v, err := read(device.Tensor{Buf: n.T.Buf, Rows: 1, Cols: n.T.Buf.Len()})
			if err != nil {
				return nil, err
			}
			m[n.T.Buf] = v
		}
	}
	return m, nil
}

// read is the mirror's copy of t, row-major.
func (m hostMirror) read(t device.Tensor) ([]float64, error) {
	out := make([]float64, 0, t.Rows*t.Cols)
	for r := 0; r < t.Rows; r++ {
		off := t.Off + r*t.RowStride()
		out = append(out, m[t.Buf][off:off+t.Cols]...)
	}
	return out, nil
}

// store writes a reference output into the mirror, rounded to its tensor's dtype.
func (m hostMirror) store(o Output) {
	v := m[o.T.Buf]
	for r := 0; r < o.T.Rows; r++ {
		for c := 0; c < o.T.Cols; c++ {
			v[o.T.Off+r*o.T.RowStride()+c] = Round(o.T.Buf.DType(), o.Want[r*o.T.Cols+c])
		}
	}
}

// storeSlack writes a reference output's slack into a slack mirror (zeros where it has none).
func (m hostMirror) storeSlack(o Output) {
	v := m[o.T.Buf]
	for r := 0; r < o.T.Rows; r++ {
		for c := 0; c < o.T.Cols; c++ {
			v[o.T.Off+r*o.T.RowStride()+c] = at(o.Slack, r*o.T.Cols+c)
		}
	}
}

// cachedPrefix is the keys before a cached attention's rows: ten chunks of the tensor-core cached
// attention (64 keys, kernels/tfc_mma_attention.h) less three, so that its rows fold eleven chunks
// and a few-row launch takes two rounds of its cluster of eight.
const cachedPrefix = 10*64 - 3

// ropePositions bounds the positions a rope kernel is checked at: a context's worth, so even
// the slowest pair turns far enough that a skipped pair shows in BF16.
const ropePositions = 1 << 15
