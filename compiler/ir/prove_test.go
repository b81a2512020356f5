package ir

import "testing"

func TestFactsProve(t *testing.T) {
	D, H, HD, VD, VH, VHD, N, M := Var("D"), Var("H"), Var("HD"), Var("VD"), Var("VH"), Var("VHD"), Var("N"), Var("M")
	f := NewFacts()
	f.Define("HD", D.Div(H))
	f.Define("VHD", VD.Div(VH))
	if f.Equal(H.Mul(HD), D) {
		t.Fatal("H*HD == D proven without D % H == 0")
	}
	f.AssumeDivides(D, H)
	f.AssumeDivides(VD, VH)
	f.AssumeDivides(VHD, Const(4))
	f.AssumeDivides(N, M.Mul(M))
	cases := []struct {
		a, b Dim
	}{
		{H.Mul(HD), D},
		{VHD.Div(Const(4)).Scale(4), VD.Div(VH)},
		{N.Div(M.Mul(M)).Mul(M).Mul(M), N},
		{VHD.Div(Const(4)).Add(VHD.Div(Const(4))), VHD.Div(Const(2))},
	}
	for _, c := range cases {
		if !f.Equal(c.a, c.b) {
			t.Errorf("not proven: %s == %s", c.a, c.b)
		}
	}
	if f.Equal(VD, D) {
		t.Error("VD == D proven from nothing")
	}
	if !f.Divides(VD, VH.Scale(4)) {
		t.Error("VD % (4*VH) == 0 not proven")
	}
	if f.Divides(D, Const(3)) {
		t.Error("D % 3 == 0 proven from nothing")
	}
	sect := Elem("sect", 0).Add(Elem("sect", 1)).Add(Elem("sect", 2))
	f.AssumeEqual(sect, HD.Div(Const(2)))
	if !f.Equal(sect.Scale(2), HD.Div(Const(2)).Scale(2)) || !f.Equal(sect, D.Div(H).Div(Const(2))) {
		t.Error("sum(sect) == HD/2 not used")
	}
}

func TestVerifyFindsUseBeforeDefinition(t *testing.T) {
	x := &Value{ID: 1, Name: "x", Kind: Tensor, DType: F32}
	ghost := &Value{ID: 2, Name: "ghost", Kind: Tensor, DType: F32}
	n := &Node{Op: OpSiLU, Pos: Pos{File: "f", Line: 3, Col: 1}, Args: []*Arg{{Role: "x", Value: ghost}}}
	out := &Value{ID: 3, Kind: Tensor, DType: F32, Def: n}
	n.Outs = []*Value{out}
	m := &Module{Graphs: []*Graph{{Name: "g", Params: []*Value{x}, Nodes: []*Node{n}, Results: []*Value{out}}}}
	err := Verify(m)
	if err == nil || err.Error() != "f:3:1: graph g: silu operand x uses ghost.2 before it is defined" {
		t.Fatalf("Verify = %v", err)
	}
	n.Args[0].Value = x
	if err := Verify(m); err != nil {
		t.Fatal(err)
	}
}
