package check

import (
	"fmt"
	"strings"

	"github.com/alecthomas/participle/v2/lexer"

	"tfc/compiler/ir"
)

// out is the kind, shape and dtype of one op output.
type out struct {
	kind  ir.Kind
	shape ir.Shape
	dtype ir.DType
}

func tensor(sh ir.Shape) []out { return []out{{ir.Tensor, sh, ir.F32}} }

// rules holds the shape and dtype rule of every op; operand kinds, dtypes and ranks are already
// checked against the catalog when a rule runs.
var rules map[ir.Op]func(o *opCtx) ([]out, bool)

func init() {
	rules = map[ir.Op]func(o *opCtx) ([]out, bool){
		ir.OpLinear:       linearRule,
		ir.OpRMSNorm:      normRule,
		ir.OpLayerNorm:    normRule,
		ir.OpRope:         ropeRule,
		ir.OpAttention:    attentionRule,
		ir.OpAdd:          binaryRule,
		ir.OpMul:          binaryRule,
		ir.OpSiLU:         unaryRule,
		ir.OpGELU:         unaryRule,
		ir.OpGELUTanh:     unaryRule,
		ir.OpQuickGELU:    unaryRule,
		ir.OpSwiGLU:       swigluRule,
		ir.OpEmbed:        embedRule,
		ir.OpScatter:      scatterRule,
		ir.OpGather:       gatherRule,
		ir.OpSplit:        splitRule,
		ir.OpMerge:        mergeRule,
		ir.OpUnmerge:      unmergeRule,
		ir.OpFlatten:      flattenRule,
		ir.OpUnfold:       unfoldRule,
		ir.OpDeinterleave: deinterleaveRule,
		ir.OpSelect:       selectRule,
	}
}

func (o *opCtx) eq(a, b ir.Dim) bool { return o.c.facts.Equal(a, b) }

// linear: x [R, K], weight [N, K], bias [N] → [R, N].
func linearRule(o *opCtx) ([]out, bool) {
	x, w := o.shape("x"), o.shape("weight")
	if len(w) != 2 {
		o.errorf(o.poses["weight"], "weight %s has shape %s; linear takes [out, in] (flatten(%s) views a conv weight so)", o.src("weight"), w, o.src("weight"))
		return nil, false
	}
	if !o.eq(w[1], x.Last()) {
		o.errorf(o.poses["weight"], "weight has shape %s, input has last dim %s", w, x.Last())
		return nil, false
	}
	if b := o.shape("bias"); b != nil && (len(b) != 1 || !o.eq(b[0], w[0])) {
		o.errorf(o.poses["bias"], "bias has shape %s, want [%s]", b, w[0])
		return nil, false
	}
	return tensor(ir.Shape{x[0], w[0]}), true
}

// rmsnorm and layernorm: x [R, D], weight [D], bias [D] → [R, D].
func normRule(o *opCtx) ([]out, bool) {
	x := o.shape("x")
	for _, role := range []string{"weight", "bias"} {
		w := o.shape(role)
		if w == nil {
			continue
		}
		if len(w) != 1 || !o.eq(w[0], x.Last()) {
			o.errorf(o.poses[role], "%s has shape %s, input has last dim %s", role, w, x.Last())
			return nil, false
		}
	}
	return tensor(x), true
}

// headDim divides width by the heads attribute, or reports that it does not divide.
func (o *opCtx) headDim(width ir.Dim, what string) (ir.Dim, bool) {
	h := o.attrs["heads"]
	if k, isConst := o.c.facts.Const(h.Int); isConst && k <= 0 {
		o.errorf(posOf(h), "heads must be positive; got %s", h.Int)
		return ir.Dim{}, false
	}
	if !o.c.facts.Divides(width, h.Int) {
		o.errorf(posOf(h), "heads %s do not divide the %s width %s; state it with require %s %% %s == 0 if it holds", h.Int, what, width, par(width), par(h.Int))
		return ir.Dim{}, false
	}
	hd := width.Div(h.Int)
	if w := o.attrs["head_dim"]; w != nil && !o.eq(w.Int, hd) {
		o.errorf(posOf(w), "head_dim %s differs from the %s width / heads = %s", w.Int, what, hd)
		return ir.Dim{}, false
	}
	o.setAttr(&ir.Attr{Name: "head_dim", Kind: ir.AttrInt, Int: hd, Inferred: o.attrs["head_dim"] == nil})
	return hd, true
}

// posOf is where an attribute was written.
func posOf(a *ir.Attr) lexer.Position {
	return lexer.Position{Filename: a.Pos.File, Line: a.Pos.Line, Column: a.Pos.Col}
}

// rope: x [R, heads*hd], pos [R, A] i32 with A = len(sections) and sum(sections) = hd/2 → [R, heads*hd].
func ropeRule(o *opCtx) ([]out, bool) {
	x, p := o.shape("x"), o.shape("pos")
	hd, ok := o.headDim(x.Last(), "row")
	if !ok {
		return nil, false
	}
	if !o.eq(p[0], x[0]) {
		o.errorf(o.poses["pos"], "pos has %s rows, x has %s", p[0], x[0])
		return nil, false
	}
	sect := o.attrs["sections"]
	if k, isConst := o.c.facts.Const(p[1]); !isConst || int(k) != len(sect.Ints) {
		axes := p[1].String() + " axes"
		if isConst && axes != fmt.Sprintf("%d axes", k) {
			axes = fmt.Sprintf("%s (%s)", plural(int(k), "axis"), p[1]) // a positions[R] input: the rule's axes
			axes = strings.Replace(axes, "axiss", "axes", 1)
		}
		o.errorf(o.poses["pos"], "pos has %s, sections has %d entries", axes, len(sect.Ints))
		return nil, false
	}
	sum := ir.Const(0)
	for _, s := range sect.Ints {
		sum = sum.Add(s)
	}
	if !o.eq(sum.Scale(2), hd) {
		o.errorf(posOf(sect), "sections sum to %s, but the head dim %s needs %s rotary pairs", sum, hd, hd.Div(ir.Const(2)))
		return nil, false
	}
	if m := o.attrs["mode"]; m != nil && m.Enum == "alternating" {
		for _, s := range sect.Ints[1:] {
			if !o.eq(s, sect.Ints[0]) {
				o.errorf(posOf(sect), "alternating rope needs equal sections; %s and %s differ", sect.Ints[0], s)
				return nil, false
			}
		}
	}
	if o.attrs["mode"] == nil {
		o.setAttr(&ir.Attr{Name: "mode", Kind: ir.AttrEnum, Enum: "sections", Inferred: true})
	}
	return tensor(x), true
}

// attention: q [R, heads*hd], k and v [R, kv_heads*hd]; spans, or cache[i] with rows → [R, heads*hd].
func attentionRule(o *opCtx) ([]out, bool) {
	q, k, v := o.shape("q"), o.shape("k"), o.shape("v")
	hd, ok := o.headDim(q.Last(), "query")
	if !ok {
		return nil, false
	}
	heads := o.attrs["heads"].Int
	kvh := heads
	if a := o.attrs["kv_heads"]; a != nil {
		kvh = a.Int
		if !o.c.facts.Divides(heads, kvh) {
			o.errorf(posOf(a), "kv_heads %s do not divide heads %s", kvh, heads)
			return nil, false
		}
	} else {
		o.setAttr(&ir.Attr{Name: "kv_heads", Kind: ir.AttrInt, Int: heads, Inferred: true})
	}
	want := kvh.Mul(hd)
	if !o.eq(k.Last(), want) {
		o.errorf(o.poses["k"], "keys have width %s, want kv_heads*head_dim = %s", k.Last(), want)
		return nil, false
	}
	if !o.eq(v.Last(), want) {
		o.errorf(o.poses["v"], "values have width %s, want kv_heads*head_dim = %s", v.Last(), want)
		return nil, false
	}
	if !o.eq(k[0], q[0]) || !o.eq(v[0], q[0]) {
		o.errorf(o.poses["k"], "q, k and v have %s, %s and %s rows; they must match", q[0], k[0], v[0])
		return nil, false
	}
	switch {
	case o.has("spans") && o.has("cache"):
		o.errorf(o.poses["cache"], "takes spans (full attention within spans) or cache and rows (causal), not both")
		return nil, false
	case o.has("spans"):
		if o.has("rows") {
			o.errorf(o.poses["rows"], "rows go with a cache; full attention over spans takes no rows")
			return nil, false
		}
	case o.has("cache"):
		if !o.has("rows") {
			o.errorf(o.poses["cache"], "a cache needs rows: (each row's sequence and position)")
			return nil, false
		}
		c := o.vals["cache"].v
		if !o.eq(c.Shape[1], want) {
			o.errorf(o.poses["cache"], "cache rows have width %s, keys %s", c.Shape[1], want)
			return nil, false
		}
		if ix := o.vals["cache"].index; ix != nil {
			if vars := ix.Vars(); len(vars) == 1 && ix.Equal(ir.Var(vars[0])) {
				if n, ok := o.c.loopCount(vars[0]); ok && !o.eq(n, c.Shape[0]) {
					o.errorf(o.poses["cache"], "cache has %s layers, but loop index %s runs to %s", c.Shape[0], vars[0], n)
					return nil, false
				}
			}
		}
	default:
		o.errorf(o.pos, "needs spans: (full attention within spans) or cache: and rows: (causal over a KV cache)")
		return nil, false
	}
	if o.attrs["scale"] == nil {
		o.setAttr(&ir.Attr{Name: "scale", Kind: ir.AttrFloat, FloatRsqrt: &hd, Inferred: true})
	}
	return tensor(q), true
}

func binaryRule(o *opCtx) ([]out, bool) {
	a, b := o.shape("a"), o.shape("b")
	if !o.c.shapeEqual(a, b) {
		o.errorf(o.pos, "shapes %s and %s differ", a, b)
		return nil, false
	}
	return tensor(a), true
}

func unaryRule(o *opCtx) ([]out, bool) { return tensor(o.shape("x")), true }

func swigluRule(o *opCtx) ([]out, bool) {
	g, u := o.shape("gate"), o.shape("up")
	if !o.c.shapeEqual(g, u) {
		o.errorf(o.poses["up"], "gate has shape %s, up %s; they must match", g, u)
		return nil, false
	}
	return tensor(g), true
}

// embed: ids [R] i32, table [V, D] → [R, D].
func embedRule(o *opCtx) ([]out, bool) {
	ids, t := o.shape("ids"), o.shape("table")
	if len(t) != 2 {
		o.errorf(o.poses["table"], "table has shape %s; embed takes [vocab, width]", t)
		return nil, false
	}
	return tensor(ir.Shape{ids[0], t[1]}), true
}

// scatter: x [R, D], src [I, D], index [I] i32 → [R, D].
func scatterRule(o *opCtx) ([]out, bool) {
	x, src, ix := o.shape("x"), o.shape("src"), o.shape("index")
	if !o.eq(src[1], x[1]) {
		o.errorf(o.poses["src"], "src rows have width %s, x rows %s", src[1], x[1])
		return nil, false
	}
	if !o.eq(ix[0], src[0]) {
		o.errorf(o.poses["index"], "index has %s entries, src has %s rows", ix[0], src[0])
		return nil, false
	}
	return tensor(x), true
}

// gather: x [R, D], index [S] i32 → [S, D].
func gatherRule(o *opCtx) ([]out, bool) {
	x, ix := o.shape("x"), o.shape("index")
	return tensor(ir.Shape{ix[0], x[1]}), true
}

// split: x [R, C], parts p (a constant dividing C) → p × [R, C/p].
func splitRule(o *opCtx) ([]out, bool) {
	x := o.shape("x")
	pa := o.attrs["parts"]
	p, isConst := o.c.facts.Const(pa.Int)
	if !isConst || p < 2 {
		o.errorf(posOf(pa), "parts is a constant of at least 2; got %s", pa.Int)
		return nil, false
	}
	if !o.c.facts.Divides(x[1], pa.Int) {
		o.errorf(posOf(pa), "%d parts do not divide the width %s", p, x[1])
		return nil, false
	}
	outs := make([]out, p)
	for i := range outs {
		outs[i] = out{ir.Tensor, ir.Shape{x[0], x[1].Div(pa.Int)}, ir.F32}
	}
	return outs, true
}

// merge: x [R, C], factor f dividing R → [R/f, C*f].
func mergeRule(o *opCtx) ([]out, bool) {
	x := o.shape("x")
	f := o.attrs["factor"].Int
	if !o.c.facts.Divides(x[0], f) {
		o.errorf(posOf(o.attrs["factor"]), "factor %s does not divide the row count %s; state it with require %s %% %s == 0", f, x[0], par(x[0]), parProduct(f))
		return nil, false
	}
	return tensor(ir.Shape{x[0].Div(f), x[1].Mul(f)}), true
}

// unmerge: x [R, C], factor f dividing C → [R*f, C/f].
func unmergeRule(o *opCtx) ([]out, bool) {
	x := o.shape("x")
	f := o.attrs["factor"].Int
	if !o.c.facts.Divides(x[1], f) {
		o.errorf(posOf(o.attrs["factor"]), "factor %s does not divide the width %s; state it with require %s %% %s == 0", f, x[1], par(x[1]), parProduct(f))
		return nil, false
	}
	return tensor(ir.Shape{x[0].Mul(f), x[1].Div(f)}), true
}

// flatten: weight [d0, d1, …] → [d0, d1*…], a view.
func flattenRule(o *opCtx) ([]out, bool) {
	w := o.shape("weight")
	if len(w) < 2 {
		o.errorf(o.poses["weight"], "weight %s has shape %s; flatten needs two dimensions or more", o.src("weight"), w)
		return nil, false
	}
	return []out{{ir.WeightView, ir.Shape{w[0], ir.Shape(w[1:]).Elems()}, ir.Stored}}, true
}

// unfold: weight [O, C*f] (or [O, C, …], flattened), f dividing the width → [O, C*f], its
// columns read in merge's order.
func unfoldRule(o *opCtx) ([]out, bool) {
	w := o.shape("weight")
	if len(w) < 2 {
		o.errorf(o.poses["weight"], "weight %s has shape %s; unfold takes [out, in] or a convolution's [out, in, …]", o.src("weight"), w)
		return nil, false
	}
	w = ir.Shape{w[0], ir.Shape(w[1:]).Elems()}
	if o.vals["weight"].v != nil {
		o.errorf(o.poses["weight"], "unfold takes a declared weight, not a view")
		return nil, false
	}
	f := o.attrs["factor"].Int
	if !o.c.facts.Divides(w[1], f) {
		o.errorf(posOf(o.attrs["factor"]), "factor %s does not divide the width %s; state it with require %s %% %s == 0", f, w[1], par(w[1]), parProduct(f))
		return nil, false
	}
	return []out{{ir.WeightView, w, ir.Stored}}, true
}

// deinterleave: weight [heads*HD, …] or bias [heads*HD], HD even → the same shape, each head's
// rows read in rope's halves order.
func deinterleaveRule(o *opCtx) ([]out, bool) {
	w := o.shape("weight")
	if len(w) > 2 {
		o.errorf(o.poses["weight"], "weight %s has shape %s; deinterleave takes a linear's [out, in] or its bias [out]", o.src("weight"), w)
		return nil, false
	}
	if o.vals["weight"].v != nil {
		o.errorf(o.poses["weight"], "deinterleave takes a declared weight, not a view")
		return nil, false
	}
	h := o.attrs["heads"].Int
	if pairs := h.Mul(ir.Const(2)); !o.c.facts.Divides(w[0], pairs) {
		o.errorf(posOf(o.attrs["heads"]), "2·heads (%s) does not divide the rows %s: each head needs an even number of rows; state it with require %s %% %s == 0", parProduct(pairs), w[0], par(w[0]), parProduct(pairs))
		return nil, false
	}
	return []out{{ir.WeightView, w, ir.Stored}}, true
}

// select: cond ? a : b over weights of equal shape.
func selectRule(o *opCtx) ([]out, bool) {
	a, b := o.shape("a"), o.shape("b")
	if !o.c.shapeEqual(a, b) {
		o.errorf(o.poses["b"], "the branches have shapes %s and %s; they must match", a, b)
		return nil, false
	}
	if o.attrs["cond"].BoolName == "" {
		o.errorf(o.pos, "the condition is a bool config value")
		return nil, false
	}
	return []out{{ir.WeightView, a, ir.Stored}}, true
}

// parProduct prints d for a message after %, in parentheses when it is more than one factor.
func parProduct(d ir.Dim) string {
	s := d.String()
	if strings.ContainsAny(s, " */%") {
		return "(" + s + ")"
	}
	return s
}
