package ir

import "testing"

func TestDimNormalForm(t *testing.T) {
	D, H, N, M, VD := Var("D"), Var("H"), Var("N"), Var("M"), Var("VD")
	cases := []struct {
		got  Dim
		want string
	}{
		{Const(3).Mul(VD), "3*VD"},
		{VD.Add(VD).Add(VD), "3*VD"},
		{H.Mul(D.Div(H)), "H*D/H"},
		{H.Mul(D).Div(H), "D"},
		{N.Div(M.Mul(M)), "N/(M*M)"},
		{N.Div(M).Div(M), "N/(M*M)"},
		{VD.Mul(M).Mul(M).Div(M.Mul(M)), "VD"},
		{Const(2).Mul(N).Div(Const(4).Mul(M)), "N/(2*M)"},
		{D.Sub(D), "0"},
		{Const(7).Div(Const(2)), "3"},
		{Const(7).Mod(Const(2)), "1"},
		{D.Mul(H).Mod(H), "0"},
		{D.Mod(H), "D%H"},
		{D.Add(Const(1)).Mul(D.Sub(Const(1))), "D*D - 1"},
		{Elem("sect", 0).Add(Elem("sect", 1)).Add(Elem("sect", 2)), "sect[0] + sect[1] + sect[2]"},
		{D.Add(H).Div(Const(2)), "(D + H)/2"},
	}
	for _, c := range cases {
		if s := c.got.String(); s != c.want {
			t.Errorf("got %q, want %q", s, c.want)
		}
	}
}

func TestDimEqualAndEval(t *testing.T) {
	VD, VH := Var("VD"), Var("VH")
	a := VD.Div(VH).Div(Const(4)).Scale(2)
	b := VD.Div(VH.Scale(4)).Mul(Const(2))
	if !a.Equal(b) {
		t.Fatalf("%s != %s", a, b)
	}
	env := MapEnv{Ints: map[string]int64{"VD": 1280, "VH": 16}, Lists: map[string][]int64{"sect": {16, 24, 24}}}
	if v, err := a.Eval(env); err != nil || v != 40 {
		t.Fatalf("eval %s = %d, %v; want 40", a, v, err)
	}
	s := Elem("sect", 0).Add(Elem("sect", 2))
	if v, err := s.Eval(env); err != nil || v != 40 {
		t.Fatalf("eval %s = %d, %v; want 40", s, v, err)
	}
	if _, err := Var("X").Eval(env); err == nil || err.Error() != "no value for X" {
		t.Fatalf("missing variable: %v", err)
	}
	hd := Var("D").Div(Var("H"))
	sub := Var("HD").Mul(Var("H")).Subst(func(n string) (Dim, bool) {
		if n == "HD" {
			return hd, true
		}
		return Dim{}, false
	})
	if sub.String() != "H*D/H" {
		t.Fatalf("subst: %s", sub)
	}
}

func TestTensorName(t *testing.T) {
	p := &Prefix{Name: "vis", Alternatives: []string{"model.visual", "visual"}}
	w := &Weight{Name: "vis.blocks[i].attn.qkv.weight", Prefix: p, Index: "i", Count: Var("VL")}
	if got := w.TensorName("model.visual", 3); got != "model.visual.blocks.3.attn.qkv.weight" {
		t.Fatal(got)
	}
}
