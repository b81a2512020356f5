package lower_test

import (
	"bytes"
	"strings"
	"testing"

	"tfc/compiler/check"
	"tfc/compiler/ir"
	"tfc/compiler/lower"
	"tfc/compiler/lower/lowertest"
)

// chains lists the kernel of every launch of a graph, "for" marking a loop's launches.
func chains(g *lower.Graph) []string {
	var out []string
	g.Walk(func(l *lower.Launch, loops []*lower.Loop) {
		name := l.Kernel.Name
		if len(loops) > 0 {
			name = "for " + name
		}
		out = append(out, name)
	})
	return out
}

func TestFusionSchedule(t *testing.T) {
	p, err := lower.Lower(lowertest.Tiny())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"vision": {
			"tinyvl_vision_linear",
			"for tinyvl_vision_layernorm",
			"for tinyvl_vision_linear_bias_rope_rope",
			"for tinyvl_vision_attention",
			"for tinyvl_vision_linear_res",
			"for tinyvl_vision_linear_quick_gelu",
			"for tinyvl_vision_linear_res_fc2", // fc2's K differs from proj's: a kernel of its own
			"tinyvl_vision_linear_out",
		},
		"decode": {
			"tinyvl_decode_embed",
			"tinyvl_decode_scatter",
			"for tinyvl_decode_rmsnorm",
			"for tinyvl_decode_linear_bias_rope",
			"for tinyvl_decode_linear_rope", // k and v, stacked; q has a bias they lack
			"for tinyvl_decode_attention",
			"for tinyvl_decode_linear_res",
			"for tinyvl_decode_rmsnorm",
			"for tinyvl_decode_linear_silu_glu", // gate and up, stacked, the glu in the epilogue
			"for tinyvl_decode_linear_res_down_proj",
			"tinyvl_decode_gather",
			"tinyvl_decode_rmsnorm", // the final norm shares the layers' kernel
			"tinyvl_decode_linear",
			"tinyvl_decode_argmax", // each logit row's greedy pick
		},
	}
	for _, g := range p.Graphs {
		got := chains(g)
		if strings.Join(got, "\n") != strings.Join(want[g.Name], "\n") {
			t.Errorf("graph %s launches\n%s\nwant\n%s", g.Name, strings.Join(got, "\n"), strings.Join(want[g.Name], "\n"))
		}
	}
}

// TestFusedSources: a fused kernel lists the graph positions of every op it computes.
func TestFusedSources(t *testing.T) {
	p, err := lower.Lower(lowertest.Tiny())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range p.Kernels {
		if k.Name != "tinyvl_decode_linear_silu_glu" {
			continue
		}
		var ops []string
		for _, op := range k.Ops {
			for _, s := range op.Fused {
				ops = append(ops, s.Op)
			}
		}
		if got := strings.Join(ops, " "); got != "linear linear swiglu" {
			t.Errorf("kernel %s computes %q, want the gate and up linears and the swiglu", k.Name, got)
		}
		return
	}
	t.Fatal("no swiglu kernel")
}

// TestResidualInPlace: the residual stream lives in one buffer through the whole loop, every
// residual add written in place by the linear before it.
func TestResidualInPlace(t *testing.T) {
	p, err := lower.Lower(lowertest.Tiny())
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range p.Graphs {
		var res []*lower.Op
		for _, op := range g.Ops() {
			if op.Kind == "linear" && op.Arg("Res") != nil {
				res = append(res, op)
			}
		}
		if len(res) != 2 {
			t.Fatalf("graph %s: %d linears with a residual, want 2", g.Name, len(res))
		}
		for _, op := range res {
			if op.Arg("Res").Buffer() != op.Out.Buffer() {
				t.Errorf("graph %s: residual linear writes %s, not its residual's buffer %s", g.Name, op.Out.Buffer().Name, op.Arg("Res").Buffer().Name)
			}
		}
	}
}

func TestExplain(t *testing.T) {
	p, err := lower.Lower(lowertest.Tiny())
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	lower.Explain(&b, p)
	for _, want := range []string{
		"for i < L (line 63)",
		"linear    X=a@image_rows W=lm.layers[i].self_attn.o_proj.weight Res=x → o_proj@x",
		"[linear@69:5 add@69:5]",
		"memory  F32 arena",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("explain lacks %q:\n%s", want, b.String())
		}
	}
}

func TestExprFoldAndGo(t *testing.T) {
	m := ir.Var("M")
	e := lower.FromDim(ir.Var("N").Div(m.Mul(m)).Add(ir.Elem("sect", 0).Scale(2)).Sub(ir.Const(3)))
	got := e.Go(func(n string) string { return "c." + n })
	if got != "2 * c.sect[0] + c.N / (c.M * c.M) - 3" {
		t.Errorf("Go form %q", got)
	}
	// a floor division stays one factor of its term: D·(N/(M·M)), not (D·N)/(M·M)
	if got := lower.FromDim(ir.Var("D").Mul(ir.Var("N").Div(m.Mul(m)))).String(); got != "D * (N / (M * M))" {
		t.Errorf("product with a division: %s", got)
	}
	f := lower.Fold(e, map[string]*lower.Expr{"M": lower.Int(2), "N": lower.Int(16), "sect[0]": lower.Int(5)})
	if !f.IsInt(11) {
		t.Errorf("folded to %s, want 11", f)
	}
	if !e.Equal(lower.FromDim(ir.Var("N").Div(m.Mul(m)).Add(ir.Elem("sect", 0).Scale(2)).Sub(ir.Const(3)))) || e.Equal(f) || e.Equal(nil) {
		t.Error("Equal does not compare the trees")
	}
	if m := lower.Max(lower.Ref("a"), lower.Ref("a"), lower.Ref("b")); m.String() != "max(a, b)" {
		t.Errorf("max: %s", m)
	}
}

// unmergeSrc is a vision graph that norms each head of its rows, as Qwen3's q_norm does, or, with
// SPLIT, each head of a column slice.
const unmergeSrc = `family t {
  model_type "t"
}

config {
  D int = hidden_size
  H int = num_heads
  HD = D/H
  require D%H == 0
}

weights {
  qkv.weight  [3*D, D]
  norm.weight [HD]
}

graph vision(px [N, D], pos [N, 2] i32) -> [N, D] {
  q = SPLIT
  return merge(rmsnorm(unmerge(q, factor: H), norm, eps: 1e-6), factor: H)
}
`

func TestUnmergeRowView(t *testing.T) {
	lin := "linear(px, qkv.weight)"
	src := strings.Replace(unmergeSrc, "3*D, D", "D, D", 1)
	m, diags := check.Source("t.graph", strings.Replace(src, "SPLIT", lin, 1))
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	p, err := lower.Lower(m)
	if err != nil {
		t.Fatal(err)
	}
	var norm *lower.Op
	for _, op := range p.Graphs[0].Ops() {
		if op.Kind == "rmsnorm" {
			norm = op
		}
	}
	if norm == nil {
		t.Fatal("no rmsnorm")
	}
	x := norm.Arg("X")
	if x.Kind != lower.View || x.Base.Def == nil || x.Base.Def.Kind != "linear" {
		t.Fatalf("rmsnorm reads %s, not a row view of the linear's output", x.Name)
	}
	if got, want := lower.FromDim(x.Rows).String(), "H * N"; got != want {
		t.Errorf("rows %s, want %s", got, want)
	}
	if got, want := lower.FromDim(x.Cols).String(), "D / H"; got != want {
		t.Errorf("cols %s, want %s", got, want)
	}
	if out := p.Graphs[0].Output; out.Kind != lower.View || out.Base != norm.Out {
		t.Errorf("the result is not a row view of the norm's output")
	}

	m, diags = check.Source("t.graph", strings.Replace(unmergeSrc, "SPLIT", "split(linear(px, qkv.weight), parts: 3)", 1))
	if len(diags) == 0 {
		t.Fatal("a split's three outputs bound to one name checked clean")
	}
	src = strings.Replace(unmergeSrc, "q = SPLIT", "q, k, v = split(linear(px, qkv.weight), parts: 3)\n  x = k + v", 1)
	src = strings.Replace(src, "return merge(", "return x + merge(", 1)
	m, diags = check.Source("t.graph", src)
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	// a column slice is copied to contiguous rows, which the unmerge then views
	p, err = lower.Lower(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range p.Graphs[0].Ops() {
		if op.Kind == "rmsnorm" {
			norm = op
		}
	}
	x = norm.Arg("X")
	if x.Kind != lower.View || x.Base.Def == nil || x.Base.Def.Kind != "copy" || x.Base.Def.Arg("X").ColLo == nil {
		t.Errorf("rmsnorm reads %s, not a row view of a copy of the column slice", x.Name)
	}
	// the copy spans a third of the linear's columns, so it is no epilogue of the linear's launch
	p.Graphs[0].Walk(func(l *lower.Launch, _ []*lower.Loop) {
		for i, op := range l.Ops {
			if op.Kind == "copy" && i > 0 {
				t.Errorf("the column slice's copy runs as an epilogue of %s", l.Ops[0].Kind)
			}
		}
	})
}

const unfoldSrc = `family t {
  model_type "t"
}

config {
  D int = hidden_size
}

weights {
  merging.weight [D, 4*D]
}

graph vision(px [N, D], pos [N, 2] i32) -> [N/4, D] {
  require N%4 == 0
  x = merge(px, factor: 4)
  return PLAIN + linear(x, unfold(merging.weight, factor: 4))
}
`

func TestUnfoldWeight(t *testing.T) {
	m, diags := check.Source("t.graph", strings.Replace(unfoldSrc, "PLAIN + ", "", 1))
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	p, err := lower.Lower(m)
	if err != nil {
		t.Fatal(err)
	}
	if u := p.Weights[0].Unfold; u == nil || u.String() != "4" {
		t.Errorf("merging.weight unfolds by %v, want 4", u)
	}
	m, diags = check.Source("t.graph", strings.Replace(unfoldSrc, "PLAIN", "linear(x, merging.weight)", 1))
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	if _, err := lower.Lower(m); err == nil || !strings.Contains(err.Error(), "reads it as stored") {
		t.Errorf("a weight read both unfolded and as stored lowered (err %v)", err)
	}
}

// deinterleaveSrc reads a q weight of H heads through deinterleave, and PLAIN where a test reads
// it as stored too.
const deinterleaveSrc = `family t {
  model_type "t"
}

config {
  D int = hidden_size
  H int = num_heads
  HD = D/H
  require D%H == 0, HD%2 == 0
}

weights {
  q.weight [D, D]
}

graph vision(px [N, D], pos [N, 1] i32) -> [N, D] {
  return PLAIN + rope(linear(px, deinterleave(q.weight, heads: H)), pos, heads: H, theta: 10000.0, sections: [HD/2])
}
`

func TestDeinterleaveWeight(t *testing.T) {
	m, diags := check.Source("t.graph", strings.Replace(deinterleaveSrc, "PLAIN + ", "", 1))
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	p, err := lower.Lower(m)
	if err != nil {
		t.Fatal(err)
	}
	if h := p.Weights[0].Deinterleave; h == nil || h.String() != "H" {
		t.Errorf("q.weight deinterleaves by %v heads, want H", h)
	}
	m, diags = check.Source("t.graph", strings.Replace(deinterleaveSrc, "PLAIN", "linear(px, q.weight)", 1))
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	if _, err := lower.Lower(m); err == nil || !strings.Contains(err.Error(), "reads it as stored") {
		t.Errorf("a weight read both deinterleaved and as stored lowered (err %v)", err)
	}
}
