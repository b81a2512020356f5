// Package syntax reads .graph files: the lexer, the participle grammar whose structs are the
// AST (every node carries its source position), the comments kept for tfc fmt, and the printer
// of the canonical form.
package syntax

import "github.com/alecthomas/participle/v2/lexer"

// File is one parsed .graph file.
type File struct {
	Pos   lexer.Position
	Decls []*Decl `parser:"@@*"`

	Name     string     // the path it was read from
	Source   string     // its text
	Comments []*Comment // every comment, in source order
}

// Comment is one // comment; Text includes the slashes.
type Comment struct {
	Pos  lexer.Position
	Text string
}

// Decl is one top-level declaration.
type Decl struct {
	Pos     lexer.Position
	EndPos  lexer.Position
	Family  *Family  `parser:"@@"`
	Config  *Config  `parser:"| @@"`
	Prefix  *Prefix  `parser:"| @@"`
	Weights *Weights `parser:"| @@"`
	Rule    *Rule    `parser:"| @@"`
	Graph   *Graph   `parser:"| @@"`
}

// Family is `family NAME { model_type "x" architecture "Y" ocr_prompt "…" ocr_dpi N }`.
type Family struct {
	Pos     lexer.Position
	Name    string         `parser:"\"family\" @Ident"`
	LBrace  *Brace         `parser:"@@"`
	Entries []*FamilyEntry `parser:"@@* \"}\""`
}

// FamilyEntry is one `key "value", "value"` (or `key 200`, or `key label: "value"`) line of a
// family block; values are kept as written, strings quoted.
type FamilyEntry struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Key    string   `parser:"@Ident"`
	Label  string   `parser:"(@Ident \":\")?"`
	Values []string `parser:"@(String | Int) (\",\" @(String | Int))*"`
}

// Config is the `config { … }` block.
type Config struct {
	Pos    lexer.Position
	LBrace *Brace        `parser:"\"config\" @@"`
	Items  []*ConfigItem `parser:"@@* \"}\""`
}

// ConfigItem is a binding or a require line.
type ConfigItem struct {
	Pos     lexer.Position
	EndPos  lexer.Position
	Require *Require `parser:"@@"`
	Binding *Binding `parser:"| @@"`
}

// Require is `require cond, cond, …`.
type Require struct {
	Pos   lexer.Position
	Conds []*Expr `parser:"\"require\" @@ (\",\" @@)*"`
}

// Binding is `NAME TYPE = path | path | literal` (read from config.json) or `NAME = expr`
// (derived, no type).
type Binding struct {
	Pos  lexer.Position
	Name string   `parser:"@Ident"`
	Type *TypeRef `parser:"@@?"`
	Alts []*Expr  `parser:"\"=\" @@ (\"|\" @@)*"`
}

// TypeRef is a config type: int, float, bool, int[] or int[n].
type TypeRef struct {
	Pos  lexer.Position
	Name string `parser:"@Ident"`
	List bool   `parser:"( @\"[\""`
	Len  string `parser:"@Int? \"]\" )?"`
}

// Prefix is `prefix NAME = a.b | c`.
type Prefix struct {
	Pos  lexer.Position
	Name string  `parser:"\"prefix\" @Ident \"=\""`
	Alts []*Path `parser:"@@ (\"|\" @@)*"`
}

// Path is a dotted name such as model.visual.
type Path struct {
	Pos   lexer.Position
	Parts []string `parser:"@(Ident | Int) (\".\" @(Ident | Int))*"`
}

// Weights is the `weights { … }` block.
type Weights struct {
	Pos    lexer.Position
	LBrace *Brace        `parser:"\"weights\" @@"`
	Items  []*WeightDecl `parser:"@@* \"}\""`
}

// WeightDecl is one weight line: a dotted name whose segments may carry a layer range
// (`layers[i < L]`) and whose last segment may be a group `{weight, bias}`, a shape shared by
// the group's leaves, and an optional condition.
type WeightDecl struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Segs   []*Seg `parser:"@@ (\".\" @@)*"`
	Shape  *List  `parser:"@@?"`
	Cond   *Expr  `parser:"(\"if\" @@)?"`
}

// Seg is one segment of a weight name: a word or number with an optional range, or a group.
type Seg struct {
	Pos    lexer.Position
	Name   string  `parser:"(  @(Ident | Int)"`
	Range  *Range  `parser:"((?= \"[\" Ident \"<\") \"[\" @@ \"]\")?"`
	Leaves []*Leaf `parser:"| \"{\" @@ (\",\" @@)* \"}\" )"`
}

// Range is `i < L`.
type Range struct {
	Pos   lexer.Position
	Var   string `parser:"@Ident \"<\""`
	Bound *Expr  `parser:"@@"`
}

// Leaf is one member of a weight group, with its own shape or none (then the line's shape).
type Leaf struct {
	Pos   lexer.Position
	Name  string `parser:"@(Ident | Int)"`
	Shape *List  `parser:"@@?"`
}

// Rule is `image NAME(args)` or `positions NAME(args)`.
type Rule struct {
	Pos  lexer.Position
	Kind string `parser:"@(\"image\" | \"positions\")"`
	Call *Call  `parser:"@@"`
}

// Graph is `graph NAME(params) -> results { body }`, or `graph NAME = FAMILY.NAME`: the graph
// stated in another family's file, checked against this family's declarations.
type Graph struct {
	Pos     lexer.Position
	EndPos  lexer.Position
	Name    string       `parser:"\"graph\" @Ident"`
	From    *GraphRef    `parser:"( \"=\" @@"`
	Params  []*Param     `parser:"| \"(\" (@@ (\",\" @@)*)? \")\""`
	Results []*ParamType `parser:"(\"->\" ( \"(\" @@ (\",\" @@)* \")\" | @@ ))?"`
	LBrace  *Brace       `parser:"@@"`
	Body    []*Stmt      `parser:"@@* \"}\" )"`
}

// GraphRef is `FAMILY.NAME`: graph NAME of graphs/FAMILY.graph.
type GraphRef struct {
	Pos    lexer.Position
	Family string `parser:"@Ident \".\""`
	Graph  string `parser:"@Ident"`
}

// Param is one graph parameter.
type Param struct {
	Pos  lexer.Position
	Name string     `parser:"@Ident"`
	Type *ParamType `parser:"@@"`
}

// ParamType is `spans`, `rows`, `kv[layers, width]`, `positions[rows]`, or a tensor `[dims] dtype`.
type ParamType struct {
	Pos       lexer.Position
	Kind      string `parser:"(  @(\"spans\" | \"rows\")"`
	KV        *List  `parser:"| \"kv\" @@"`
	Positions *List  `parser:"| \"positions\" @@"`
	Shape     *List  `parser:"| @@"`
	DType     string `parser:"@(\"f32\" | \"i32\")? )"`
}

// Stmt is one statement of a graph body.
type Stmt struct {
	Pos     lexer.Position
	EndPos  lexer.Position
	For     *For     `parser:"@@"`
	Return  *Return  `parser:"| @@"`
	Require *Require `parser:"| @@"`
	Assign  *Assign  `parser:"| @@"`
}

// For is `for i < n { body }`.
type For struct {
	Pos    lexer.Position
	Var    string  `parser:"\"for\" @Ident \"<\""`
	Bound  *Expr   `parser:"@@"`
	LBrace *Brace  `parser:"@@"`
	Body   []*Stmt `parser:"@@* \"}\""`
}

// Return is `return a, b`.
type Return struct {
	Pos    lexer.Position
	Values []*Expr `parser:"\"return\" @@ (\",\" @@)*"`
}

// Assign is `a, b = expr`.
type Assign struct {
	Pos   lexer.Position
	Names []*Name `parser:"@@ (\",\" @@)* \"=\""`
	Value *Expr   `parser:"@@"`
}

// Brace is an opening brace, kept for the comments that follow it on its line.
type Brace struct {
	Pos lexer.Position
	X   string `parser:"@\"{\""`
}

// Name is an identifier with its position.
type Name struct {
	Pos  lexer.Position
	Name string `parser:"@Ident"`
}

// Expr is `cond ? then : else` or a comparison.
type Expr struct {
	Pos  lexer.Position
	Cond *Cmp  `parser:"@@"`
	Then *Expr `parser:"(\"?\" @@"`
	Else *Expr `parser:"\":\" @@)?"`
}

// Cmp is `a OP b` or a sum; `i in list` tests a layer index against an int list.
type Cmp struct {
	Pos   lexer.Position
	Left  *Sum   `parser:"@@"`
	Op    string `parser:"( @(\"==\" | \"!=\" | \"<=\" | \">=\" | \"<\" | \">\" | \"in\")"`
	Right *Sum   `parser:"@@ )?"`
}

// Sum is a chain of + and -.
type Sum struct {
	Pos  lexer.Position
	Left *Prod    `parser:"@@"`
	Rest []*SumOp `parser:"@@*"`
}

// SumOp is one `+ x` or `- x` of a Sum.
type SumOp struct {
	Pos   lexer.Position
	Op    string `parser:"@(\"+\" | \"-\")"`
	Right *Prod  `parser:"@@"`
}

// Prod is a chain of *, / and %.
type Prod struct {
	Pos  lexer.Position
	Left *Unary    `parser:"@@"`
	Rest []*ProdOp `parser:"@@*"`
}

// ProdOp is one `* x`, `/ x` or `% x` of a Prod.
type ProdOp struct {
	Pos   lexer.Position
	Op    string `parser:"@(\"*\" | \"/\" | \"%\")"`
	Right *Unary `parser:"@@"`
}

// Unary is `-x`, `!x` or x.
type Unary struct {
	Pos lexer.Position
	Op  string   `parser:"@(\"-\" | \"!\")?"`
	X   *Postfix `parser:"@@"`
}

// Postfix is a primary followed by `.field` and `[index]` suffixes.
type Postfix struct {
	Pos    lexer.Position
	X      *Primary  `parser:"@@"`
	Suffix []*Suffix `parser:"@@*"`
}

// Suffix is `.name`, `.0` or `[expr]`.
type Suffix struct {
	Pos   lexer.Position
	Field string `parser:"\".\" @(Ident | Int)"`
	Index *Expr  `parser:"| \"[\" @@ \"]\""`
}

// Primary is a call, a number, a string, a list, a parenthesised expression or a name.
type Primary struct {
	Pos    lexer.Position
	Call   *Call  `parser:"(?= Ident \"(\") @@"`
	Float  string `parser:"| @Float"`
	Int    string `parser:"| @Int"`
	String string `parser:"| @String"`
	List   *List  `parser:"| @@"`
	Paren  *Expr  `parser:"| \"(\" @@ \")\""`
	Ident  string `parser:"| @Ident"`
}

// Call is `name(arg, key: value)`.
type Call struct {
	Pos  lexer.Position
	Name string `parser:"@Ident \"(\""`
	Args []*Arg `parser:"(@@ (\",\" @@)*)? \")\""`
}

// Arg is a positional or a `key: value` argument.
type Arg struct {
	Pos   lexer.Position
	Key   string `parser:"((?= Ident \":\") @Ident \":\")?"`
	Value *Expr  `parser:"@@"`
}

// List is `[a, b, …]`, a shape or an int list.
type List struct {
	Pos   lexer.Position
	Elems []*Expr `parser:"\"[\" (@@ (\",\" @@)*)? \"]\""`
}
