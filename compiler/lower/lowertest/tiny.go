// Package lowertest holds a hand-built module of the shape the checker produces, for tests of the
// passes and emitters that must not depend on the front end.
package lowertest

import (
	"tfc/compiler/ir"
)

type modBuilder struct {
	m     *ir.Module
	g     *ir.Graph
	nodes *[]*ir.Node
	id    int
}

var (
	vD, vH, vKV, vF, vV, vL, vHD, vR, vS, vI = ir.Var("D"), ir.Var("H"), ir.Var("KV"), ir.Var("F"), ir.Var("V"), ir.Var("L"), ir.Var("HD"), ir.Var("R"), ir.Var("S"), ir.Var("I")
	vVD, vVH, vVHD, vVL, vN, vM, vCin        = ir.Var("VD"), ir.Var("VH"), ir.Var("VHD"), ir.Var("VL"), ir.Var("N"), ir.Var("M"), ir.Var("Cin")
)

func at(line, col int) ir.Pos { return ir.Pos{File: "graphs/tiny.graph", Line: line, Col: col} }

func (b *modBuilder) val(name string, kind ir.Kind, dt ir.DType, shape ...ir.Dim) *ir.Value {
	b.id++
	return &ir.Value{ID: b.id, Name: name, Kind: kind, DType: dt, Shape: shape}
}

func (b *modBuilder) t(name string, shape ...ir.Dim) *ir.Value {
	return b.val(name, ir.Tensor, ir.F32, shape...)
}

func (b *modBuilder) node(op ir.Op, line int, args []*ir.Arg, attrs []*ir.Attr, outs ...*ir.Value) *ir.Value {
	n := &ir.Node{Op: op, Args: args, Attrs: attrs, Outs: outs, Pos: at(line, 5)}
	for _, o := range outs {
		o.Def = n
	}
	*b.nodes = append(*b.nodes, n)
	return outs[0]
}

func va(role string, v *ir.Value) *ir.Arg { return &ir.Arg{Role: role, Value: v} }

func wa(role string, w *ir.Weight) *ir.Arg {
	ref := &ir.WeightRef{Weight: w, Name: w.Name}
	if w.Layered() {
		ref.Layer = ir.Var(w.Index)
	}
	return &ir.Arg{Role: role, Weight: ref}
}

func aInt(name string, d ir.Dim) *ir.Attr { return &ir.Attr{Name: name, Kind: ir.AttrInt, Int: d} }
func aFloat(name string, f float64) *ir.Attr {
	return &ir.Attr{Name: name, Kind: ir.AttrFloat, Float: f}
}
func aFloatName(name, cfg string) *ir.Attr {
	return &ir.Attr{Name: name, Kind: ir.AttrFloat, FloatName: cfg}
}

func (b *modBuilder) weight(prefix *ir.Prefix, name string, layered ir.Dim, shape ...ir.Dim) *ir.Weight {
	w := &ir.Weight{Name: name, Prefix: prefix, Shape: shape, Pos: at(20, 3)}
	if !layered.IsZero() {
		w.Index, w.Count = "i", layered
	}
	b.m.Weights = append(b.m.Weights, w)
	return w
}

// Tiny is the fixture: config, prefixes, weights and the graphs vision and decode.
func Tiny() *ir.Module {
	m := &ir.Module{File: "graphs/tiny.graph", Family: "tiny_vl", ModelTypes: []string{"tiny_vl"}, Architectures: []string{"TinyVL"}}
	b := &modBuilder{m: m}
	for _, c := range []struct {
		name string
		typ  ir.Type
		path string
	}{{"D", ir.Int, "hidden_size"}, {"H", ir.Int, "num_attention_heads"}, {"KV", ir.Int, "num_key_value_heads"}, {"F", ir.Int, "intermediate_size"},
		{"V", ir.Int, "vocab_size"}, {"L", ir.Int, "num_hidden_layers"}, {"eps", ir.Float, "rms_norm_eps"}, {"theta", ir.Float, "rope_theta"},
		{"sect", ir.IntList, "rope_scaling.mrope_section"}, {"image_token", ir.Int, "image_token_id"}, {"tied", ir.Bool, "tie_word_embeddings"},
		{"VD", ir.Int, "vision_config.embed_dim"}, {"VH", ir.Int, "vision_config.num_heads"}, {"VL", ir.Int, "vision_config.depth"},
		{"M", ir.Int, "vision_config.spatial_merge_size"}, {"Cin", ir.Int, "vision_config.in_chans"}} {
		cv := &ir.ConfigValue{Name: c.name, Type: c.typ, Paths: []string{"text_config." + c.path, c.path}, Pos: at(5, 3)}
		if c.typ == ir.IntList {
			cv.Len = 3
		}
		if c.name == "tied" {
			cv.Default = &ir.Literal{Type: ir.Bool, Bool: false}
		}
		m.Config = append(m.Config, cv)
	}
	m.Config = append(m.Config,
		&ir.ConfigValue{Name: "HD", Type: ir.Int, Derived: &ir.Expr{Type: ir.Int, Dim: vD.Div(vH), Src: "D / H"}},
		&ir.ConfigValue{Name: "VHD", Type: ir.Int, Derived: &ir.Expr{Type: ir.Int, Dim: vVD.Div(vVH), Src: "VD / VH"}})
	m.Requires = []*ir.Require{
		{Left: vD.Mod(vH), Op: ir.EQ, Right: ir.Const(0), Src: "D % H == 0", Pos: at(9, 11)},
		{Left: vCin, Op: ir.EQ, Right: ir.Const(3), Src: "Cin == 3", Pos: at(9, 24)},
		{Left: ir.Elem("sect", 0).Add(ir.Elem("sect", 1)).Add(ir.Elem("sect", 2)), Op: ir.EQ, Right: vHD.Div(ir.Const(2)), Src: "sum(sect) == HD / 2", Pos: at(9, 34)},
	}
	vis := &ir.Prefix{Name: "vis", Alternatives: []string{"model.visual", "visual"}}
	lm := &ir.Prefix{Name: "lm", Alternatives: []string{"model.language_model", "model"}}
	m.Prefixes = []*ir.Prefix{vis, lm}
	var none ir.Dim
	patch := b.weight(vis, "vis.patch_embed.proj.weight", none, vVD, vCin, ir.Const(2), ir.Const(14), ir.Const(14))
	n1w := b.weight(vis, "vis.blocks[i].norm1.weight", vVL, vVD)
	n1b := b.weight(vis, "vis.blocks[i].norm1.bias", vVL, vVD)
	qkvw := b.weight(vis, "vis.blocks[i].attn.qkv.weight", vVL, vVD.Scale(3), vVD)
	qkvb := b.weight(vis, "vis.blocks[i].attn.qkv.bias", vVL, vVD.Scale(3))
	projw := b.weight(vis, "vis.blocks[i].attn.proj.weight", vVL, vVD, vVD)
	fc1 := b.weight(vis, "vis.blocks[i].mlp.fc1.weight", vVL, vVD.Scale(4), vVD)
	fc2 := b.weight(vis, "vis.blocks[i].mlp.fc2.weight", vVL, vVD, vVD.Scale(4))
	mw := b.weight(vis, "vis.merger.mlp.0.weight", none, vD, vVD.Mul(vM).Mul(vM))
	embed := b.weight(lm, "lm.embed_tokens.weight", none, vV, vD)
	inln := b.weight(lm, "lm.layers[i].input_layernorm.weight", vL, vD)
	qw := b.weight(lm, "lm.layers[i].self_attn.q_proj.weight", vL, vH.Mul(vHD), vD)
	qb := b.weight(lm, "lm.layers[i].self_attn.q_proj.bias", vL, vH.Mul(vHD))
	kw := b.weight(lm, "lm.layers[i].self_attn.k_proj.weight", vL, vKV.Mul(vHD), vD)
	vw := b.weight(lm, "lm.layers[i].self_attn.v_proj.weight", vL, vKV.Mul(vHD), vD)
	ow := b.weight(lm, "lm.layers[i].self_attn.o_proj.weight", vL, vD, vH.Mul(vHD))
	postln := b.weight(lm, "lm.layers[i].post_attention_layernorm.weight", vL, vD)
	gate := b.weight(lm, "lm.layers[i].mlp.gate_proj.weight", vL, vF, vD)
	up := b.weight(lm, "lm.layers[i].mlp.up_proj.weight", vL, vF, vD)
	down := b.weight(lm, "lm.layers[i].mlp.down_proj.weight", vL, vD, vF)
	norm := b.weight(lm, "lm.norm.weight", none, vD)
	head := b.weight(nil, "lm_head.weight", none, vV, vD)
	head.Cond = &ir.Cond{Name: "tied", Not: true}
	m.Image = &ir.Rule{Name: "qwen2_vl", Args: []*ir.Attr{aInt("merge", vM)}}
	m.Positions = &ir.Rule{Name: "mrope", Args: []*ir.Attr{aInt("image_token", ir.Var("image_token")), aInt("merge", vM)}}

	// vision
	g := &ir.Graph{Name: "vision", Pos: at(40, 1)}
	b.g, b.nodes = g, &g.Nodes
	px := b.t("px", vN, vCin.Scale(392))
	pos := b.val("pos", ir.Tensor, ir.I32, vN, ir.Const(2))
	spans := b.val("spans", ir.Spans, ir.I32)
	g.Params = []*ir.Value{px, pos, spans}
	flat := b.node(ir.OpFlatten, 41, []*ir.Arg{wa("weight", patch)}, nil, b.val("", ir.WeightView, ir.Stored, vVD, vCin.Scale(392)))
	_ = flat
	x := b.node(ir.OpLinear, 41, []*ir.Arg{va("x", px), {Role: "weight", Weight: &ir.WeightRef{Weight: patch, Name: patch.Name}}}, nil, b.t("x", vN, vVD))
	loop := &ir.Loop{Index: "i", Count: vVL}
	xp := b.t("x", vN, vVD)
	outer := b.nodes
	b.nodes = &loop.Body
	h := b.node(ir.OpLayerNorm, 43, []*ir.Arg{va("x", xp), wa("weight", n1w), wa("bias", n1b)}, []*ir.Attr{aFloat("eps", 1e-6)}, b.t("h", vN, vVD))
	qkv := b.node(ir.OpLinear, 44, []*ir.Arg{va("x", h), wa("weight", qkvw), wa("bias", qkvb)}, nil, b.t("", vN, vVD.Scale(3)))
	q, k, v := b.t("q", vN, vVD), b.t("k", vN, vVD), b.t("v", vN, vVD)
	b.node(ir.OpSplit, 44, []*ir.Arg{va("x", qkv)}, []*ir.Attr{aInt("parts", ir.Const(3))}, q, k, v)
	ropeAttrs := []*ir.Attr{aInt("heads", vVH), aInt("head_dim", vVHD), aFloat("theta", 10000),
		{Name: "sections", Kind: ir.AttrInts, Ints: []ir.Dim{vVHD.Div(ir.Const(4)), vVHD.Div(ir.Const(4))}}, {Name: "mode", Kind: ir.AttrEnum, Enum: "per_axis"}}
	q2 := b.node(ir.OpRope, 45, []*ir.Arg{va("x", q), va("pos", pos)}, ropeAttrs, b.t("q", vN, vVD))
	k2 := b.node(ir.OpRope, 46, []*ir.Arg{va("x", k), va("pos", pos)}, ropeAttrs, b.t("k", vN, vVD))
	a := b.node(ir.OpAttention, 47, []*ir.Arg{va("q", q2), va("k", k2), va("v", v), va("spans", spans)},
		[]*ir.Attr{aInt("heads", vVH), aInt("kv_heads", vVH), aInt("head_dim", vVHD), {Name: "scale", Kind: ir.AttrFloat, FloatRsqrt: &vVHD}}, b.t("a", vN, vVD))
	pr := b.node(ir.OpLinear, 48, []*ir.Arg{va("x", a), wa("weight", projw)}, nil, b.t("", vN, vVD))
	x1 := b.node(ir.OpAdd, 48, []*ir.Arg{va("a", xp), va("b", pr)}, nil, b.t("x", vN, vVD))
	f1 := b.node(ir.OpLinear, 49, []*ir.Arg{va("x", x1), wa("weight", fc1)}, nil, b.t("", vN, vVD.Scale(4)))
	gl := b.node(ir.OpQuickGELU, 49, []*ir.Arg{va("x", f1)}, nil, b.t("", vN, vVD.Scale(4)))
	f2 := b.node(ir.OpLinear, 49, []*ir.Arg{va("x", gl), wa("weight", fc2)}, nil, b.t("", vN, vVD))
	x2 := b.node(ir.OpAdd, 49, []*ir.Arg{va("a", x1), va("b", f2)}, nil, b.t("x", vN, vVD))
	b.nodes = outer
	xo := b.t("x", vN, vVD)
	loop.Carried = []*ir.Carried{{Name: "x", In: x, Param: xp, Next: x2}}
	*b.nodes = append(*b.nodes, &ir.Node{Op: ir.OpLoop, Loop: loop, Outs: []*ir.Value{xo}, Pos: at(42, 3)})
	mg := b.node(ir.OpMerge, 51, []*ir.Arg{va("x", xo)}, []*ir.Attr{aInt("factor", vM.Mul(vM))}, b.t("", vN.Div(vM.Mul(vM)), vVD.Mul(vM).Mul(vM)))
	mo := b.node(ir.OpLinear, 52, []*ir.Arg{va("x", mg), wa("weight", mw)}, nil, b.t("", vN.Div(vM.Mul(vM)), vD))
	g.Results = []*ir.Value{mo}
	m.Graphs = append(m.Graphs, g)

	// decode
	g = &ir.Graph{Name: "decode", Pos: at(60, 1)}
	b.g, b.nodes = g, &g.Nodes
	ids := b.val("ids", ir.Tensor, ir.I32, vR)
	dpos := b.val("pos", ir.Tensor, ir.I32, vR, ir.Const(3))
	irows := b.t("image_rows", vI, vD)
	iat := b.val("image_at", ir.Tensor, ir.I32, vI)
	lrows := b.val("logit_rows", ir.Tensor, ir.I32, vS)
	rows := b.val("rows", ir.Rows, 0)
	cache := b.val("cache", ir.KVCache, ir.F32, vL, vKV.Mul(vHD))
	g.Params = []*ir.Value{ids, dpos, irows, iat, lrows, rows, cache}
	e := b.node(ir.OpEmbed, 61, []*ir.Arg{va("ids", ids), wa("table", embed)}, nil, b.t("", vR, vD))
	x = b.node(ir.OpScatter, 61, []*ir.Arg{va("x", e), va("src", irows), va("index", iat)}, nil, b.t("x", vR, vD))
	loop = &ir.Loop{Index: "i", Count: vL}
	xp = b.t("x", vR, vD)
	outer = b.nodes
	b.nodes = &loop.Body
	eps := aFloatName("eps", "eps")
	sect := &ir.Attr{Name: "sections", Kind: ir.AttrInts, Ints: []ir.Dim{ir.Elem("sect", 0), ir.Elem("sect", 1), ir.Elem("sect", 2)}}
	h = b.node(ir.OpRMSNorm, 64, []*ir.Arg{va("x", xp), wa("weight", inln)}, []*ir.Attr{eps}, b.t("h", vR, vD))
	ql := b.node(ir.OpLinear, 65, []*ir.Arg{va("x", h), wa("weight", qw), wa("bias", qb)}, nil, b.t("", vR, vH.Mul(vHD)))
	q = b.node(ir.OpRope, 65, []*ir.Arg{va("x", ql), va("pos", dpos)}, []*ir.Attr{aInt("heads", vH), aInt("head_dim", vHD), aFloatName("theta", "theta"), sect}, b.t("q", vR, vH.Mul(vHD)))
	kl := b.node(ir.OpLinear, 66, []*ir.Arg{va("x", h), wa("weight", kw)}, nil, b.t("", vR, vKV.Mul(vHD)))
	k = b.node(ir.OpRope, 66, []*ir.Arg{va("x", kl), va("pos", dpos)}, []*ir.Attr{aInt("heads", vKV), aInt("head_dim", vHD), aFloatName("theta", "theta"), sect}, b.t("k", vR, vKV.Mul(vHD)))
	v = b.node(ir.OpLinear, 67, []*ir.Arg{va("x", h), wa("weight", vw)}, nil, b.t("v", vR, vKV.Mul(vHD)))
	idx := ir.Var("i")
	a = b.node(ir.OpAttention, 68, []*ir.Arg{va("q", q), va("k", k), va("v", v), {Role: "cache", Value: cache, Index: &idx}, va("rows", rows)},
		[]*ir.Attr{aInt("heads", vH), aInt("kv_heads", vKV), aInt("head_dim", vHD), {Name: "scale", Kind: ir.AttrFloat, FloatRsqrt: &vHD}}, b.t("a", vR, vH.Mul(vHD)))
	o := b.node(ir.OpLinear, 69, []*ir.Arg{va("x", a), wa("weight", ow)}, nil, b.t("", vR, vD))
	x1 = b.node(ir.OpAdd, 69, []*ir.Arg{va("a", xp), va("b", o)}, nil, b.t("x", vR, vD))
	h2 := b.node(ir.OpRMSNorm, 70, []*ir.Arg{va("x", x1), wa("weight", postln)}, []*ir.Attr{eps}, b.t("h", vR, vD))
	gt := b.node(ir.OpLinear, 71, []*ir.Arg{va("x", h2), wa("weight", gate)}, nil, b.t("", vR, vF))
	u := b.node(ir.OpLinear, 71, []*ir.Arg{va("x", h2), wa("weight", up)}, nil, b.t("", vR, vF))
	sw := b.node(ir.OpSwiGLU, 71, []*ir.Arg{va("gate", gt), va("up", u)}, nil, b.t("", vR, vF))
	dn := b.node(ir.OpLinear, 71, []*ir.Arg{va("x", sw), wa("weight", down)}, nil, b.t("", vR, vD))
	x2 = b.node(ir.OpAdd, 71, []*ir.Arg{va("a", x1), va("b", dn)}, nil, b.t("x", vR, vD))
	b.nodes = outer
	xo = b.t("x", vR, vD)
	loop.Carried = []*ir.Carried{{Name: "x", In: x, Param: xp, Next: x2}}
	*b.nodes = append(*b.nodes, &ir.Node{Op: ir.OpLoop, Loop: loop, Outs: []*ir.Value{xo}, Pos: at(63, 3)})
	gx := b.node(ir.OpGather, 73, []*ir.Arg{va("x", xo), va("index", lrows)}, nil, b.t("", vS, vD))
	fx := b.node(ir.OpRMSNorm, 73, []*ir.Arg{va("x", gx), wa("weight", norm)}, []*ir.Attr{eps}, b.t("x", vS, vD))
	hd := b.node(ir.OpSelect, 74, []*ir.Arg{wa("a", embed), wa("b", head)}, []*ir.Attr{{Name: "cond", Kind: ir.AttrBool, BoolName: "tied"}}, b.val("", ir.WeightView, ir.Stored, vV, vD))
	lg := b.node(ir.OpLinear, 74, []*ir.Arg{va("x", fx), {Role: "weight", Value: hd}}, nil, b.t("", vS, vV))
	g.Results = []*ir.Value{lg}
	m.Graphs = append(m.Graphs, g)
	return m
}
