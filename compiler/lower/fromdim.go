package lower

import "tfc/compiler/ir"

// FromDim converts an IR dimension from its structure (ir.Build), never through text: terms and
// factors in the normal form's order; list elements become references named "sect[0]".
func FromDim(d ir.Dim) *Expr {
	return ir.Build(d, ir.DimBuilder[*Expr]{
		Int:  func(n int64) *Expr { return Int(n) },
		Name: Ref,
		Op:   Bin,
		Neg:  func(x *Expr) *Expr { return &Expr{Op: "neg", Args: []*Expr{x}} },
	})
}
