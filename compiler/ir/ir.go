// Package ir is the typed dataflow form of a checked .graph family: what package check produces
// and what lower reads. A Module holds the family's Hugging Face binding, its config bindings,
// its weight templates, its image and position rules, and its Graphs; a Graph is a list of Nodes
// in SSA form over symbolic shapes (Dim) with loops kept as Loop nodes, not unrolled.
//
// The API is stable once written: later changes only add types, fields, ops and methods; nothing
// is renamed or removed.
package ir

import (
	"fmt"
	"strconv"
)

// Pos is a source position; Line and Col count from 1, Col in characters.
type Pos struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Col  int    `json:"col"`
}

// String is "file:line:col".
func (p Pos) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col) }

// Module is one checked family.
type Module struct {
	File          string   // the source path as given, e.g. "graphs/qwen2_vl.graph"
	Family        string   // the family name, e.g. "qwen2_vl"
	ModelTypes    []string // config.json model_type values served
	Architectures []string // config.json architectures served
	OCR           *OCR     // how a document page is read; nil when the family names no OCR prompt
	Config        []*ConfigValue
	Requires      []*Require // checks on config values, in source order
	Prefixes      []*Prefix
	Weights       []*Weight
	Image         *Rule // the image processor rule; nil when the family has no vision input
	Positions     *Rule // the position rule of the decoder
	Graphs        []*Graph
	Source        string // the source text, for quoting lines (Pos.Line) in generated comments
	Pos           Pos
}

// OCR is how the family reads a document page: the prompt a page is sent with and the DPI a PDF
// page is rendered at (the family file's ocr_prompt and ocr_dpi).
type OCR struct {
	Prompt string    // the first ocr_prompt: a page's prompt when the request names no task
	Tasks  []OCRTask // the labelled ocr_prompts (`ocr_prompt table: "…"`), in file order
	DPI    int
	Pos    Pos
}

// OCRTask is a named prompt a page request may pick (tfc's task field of /v1/ocr).
type OCRTask struct {
	Name   string
	Prompt string
}

// ConfigByName finds a config value.
func (m *Module) ConfigByName(name string) *ConfigValue {
	for _, c := range m.Config {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Graph finds a graph by name.
func (m *Module) Graph(name string) *Graph {
	for _, g := range m.Graphs {
		if g.Name == name {
			return g
		}
	}
	return nil
}

// Type is the type of a config value.
type Type uint8

const (
	Int     Type = iota + 1 // int
	Float                   // float (float64 in config.json terms)
	Bool                    // bool
	IntList                 // int[n], or int[] when Len is unknown
	String                  // string, checked by requires only (e.g. hidden_act == "silu")
)

func (t Type) String() string {
	switch t {
	case Int:
		return "int"
	case Float:
		return "float"
	case Bool:
		return "bool"
	case IntList:
		return "int[]"
	case String:
		return "string"
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}

// ConfigValue is one named config binding. It is either read (Paths non-empty, Default optional)
// or derived (Derived set, Paths empty).
type ConfigValue struct {
	Name    string
	Type    Type
	Len     int      // IntList only: the fixed length, or 0 when any length is accepted
	Paths   []string // dotted config.json paths tried in order, e.g. "text_config.hidden_size"
	Default *Literal // used when no path is present; nil means the value is required
	Derived *Expr    // the defining expression of a derived value
	Pos     Pos
}

// Read reports whether the value comes from config.json.
func (c *ConfigValue) Read() bool { return len(c.Paths) > 0 }

// Dim is the value as a symbolic dimension: Var(Name) for an int.
func (c *ConfigValue) Dim() Dim { return Var(c.Name) }

// PositionAxes is the config value a positions rule defines: the axes of a row's position (3 for
// mrope, 1 for sequence), the width of a graph's positions[R] input.
const PositionAxes = "positions.axes"

// Elems is an int list of fixed length as its element Dims, name[0] … name[Len-1].
func (c *ConfigValue) Elems() []Dim {
	out := make([]Dim, c.Len)
	for i := range out {
		out[i] = Elem(c.Name, i)
	}
	return out
}

// Literal is a literal config value.
type Literal struct {
	Type  Type
	Int   int64
	Float float64
	Bool  bool
	Ints  []int64
	Str   string
}

func (c Literal) String() string {
	switch c.Type {
	case String:
		return strconv.Quote(c.Str)
	case Int:
		return strconv.FormatInt(c.Int, 10)
	case Float:
		return strconv.FormatFloat(c.Float, 'g', -1, 64)
	case Bool:
		return strconv.FormatBool(c.Bool)
	}
	return fmt.Sprint(c.Ints)
}

// Expr is a derived config expression or a require's side. Int expressions are a Dim; a Float
// or Bool expression is a constant or one config name, possibly negated (Not) for a Bool.
type Expr struct {
	Type  Type
	Dim   Dim     // Type Int
	Ints  []Dim   // Type IntList: the elements
	Float float64 // Type Float constant, when Name is empty
	Bool  bool    // Type Bool constant, when Name is empty
	Name  string  // Type Float or Bool: the config value it names
	Not   bool    // Type Bool with Name: the negation
	Src   string  // the expression as written
}

// CmpOp is a comparison of a Require.
type CmpOp string

const (
	EQ CmpOp = "=="
	NE CmpOp = "!="
	LT CmpOp = "<"
	LE CmpOp = "<="
	GT CmpOp = ">"
	GE CmpOp = ">="
	IN CmpOp = "in" // a string config value against a list of literals
)

// Require is a check the bound config (or a graph's inputs) must pass. The glue refuses a
// checkpoint that fails it, naming Src. It is one of three forms:
//   - ints: Left Op Right (Cond nil, Name empty);
//   - bool: Cond holds (Cond set);
//   - string: config value Name Op Str, Op EQ or NE (Name set); or Name in Strs, Op IN.
type Require struct {
	Left, Right Dim
	Op          CmpOp
	Src         string // as written, e.g. "D % H == 0"
	Pos         Pos
	Cond        *Cond    // bool form
	Name        string   // string or float form: the config value
	Str         string   // string form: the literal it is compared with
	Float       *float64 // float form: the literal it is compared with
	Strs        []string // string form with Op IN: the literals it may equal
}

// Prefix is a named weight-name prefix with alternatives tried in order: the first whose
// tensors exist in the checkpoint is used (e.g. vis = model.visual | visual).
type Prefix struct {
	Name         string
	Alternatives []string
	Pos          Pos
}

// Weight is one declared weight template. Name is the full pattern with the prefix name left in,
// e.g. "vis.blocks[i].attn.qkv.weight"; Index names the layer variable ("i") and Count its bound
// (VL) for a per-layer family, both empty for a single tensor.
type Weight struct {
	Name   string
	Prefix *Prefix // nil when the name starts with no declared prefix
	Index  string
	Count  Dim
	Shape  Shape
	Cond   *Cond // nil: always present
	Pos    Pos
}

// Layered reports whether w is a per-layer family.
func (w *Weight) Layered() bool { return w.Index != "" }

// TensorName expands the template for one prefix alternative and layer: alt replaces the prefix name,
// layer the index variable.
func (w *Weight) TensorName(alt string, layer int) string {
	name := w.Name
	if w.Prefix != nil {
		name = alt + name[len(w.Prefix.Name):]
	}
	if w.Layered() {
		name = replaceIndex(name, w.Index, layer)
	}
	return name
}

func replaceIndex(name, index string, layer int) string {
	pat := "[" + index + "]"
	for i := 0; i+len(pat) <= len(name); i++ {
		if name[i:i+len(pat)] == pat {
			return name[:i] + "." + strconv.Itoa(layer) + name[i+len(pat):]
		}
	}
	return name
}

// Cond is a bool config condition: Name, or !Name when Not.
type Cond struct {
	Name string
	Not  bool
}

func (c Cond) String() string {
	if c.Not {
		return "!" + c.Name
	}
	return c.Name
}

// Rule names a runtime rule (image processing, positions) with its arguments.
type Rule struct {
	Name string
	Args []*Attr
	Pos  Pos
}

// Graph is one entry point: params in order, nodes in SSA order, results in order.
type Graph struct {
	Name     string
	Params   []*Value
	Requires []*Require // checks on the param shape variables at call time
	Nodes    []*Node
	Results  []*Value
	Pos      Pos
	Home     string // the family whose file states the graph, when another family's (graph NAME = HOME.NAME)
}

// ShapeVars lists the variables of the params' shapes in first-use order: the shape variables
// (N, R, …) and the config values and list elements (D, sect[0]) that appear there.
func (g *Graph) ShapeVars() []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range g.Params {
		for _, d := range p.Shape {
			for _, v := range d.Vars() {
				if !seen[v] {
					seen[v] = true
					out = append(out, v)
				}
			}
		}
	}
	return out
}

// Kind is the kind of a value.
type Kind uint8

const (
	Tensor     Kind = iota + 1 // a row-major tensor
	Spans                      // cumulative row offsets of independent spans, [S+1] I32
	Rows                       // the rows of a decoder round: sequence slot and cache position per row, page table
	KVCache                    // per-layer paged key/value caches; Shape is [layers, KV width]
	WeightView                 // a reshaped or selected weight (flatten, select); stored dtype
)

func (k Kind) String() string {
	return [...]string{"?", "tensor", "spans", "rows", "kv", "weight"}[k]
}

// DType is an element type.
type DType uint8

const (
	F32    DType = iota + 1 // activations
	I32                     // ids, positions, indices
	Stored                  // a weight's checkpoint float type (BF16, F16 or F32), fixed at load
)

func (d DType) String() string {
	return [...]string{"?", "f32", "i32", "stored"}[d]
}

// Value is an SSA value: a graph param, a node output, or a loop-carried value.
type Value struct {
	ID    int    // unique within its graph
	Name  string // the source name it was bound to; "" for an unnamed intermediate
	Kind  Kind
	Shape Shape
	DType DType
	Def   *Node // the defining node; nil for params and loop-carried values
	Pos   Pos
}

// String is "name.ID", or "%ID" for an unnamed value.
func (v *Value) String() string {
	if v.Name == "" {
		return "%" + strconv.Itoa(v.ID)
	}
	return v.Name + "." + strconv.Itoa(v.ID)
}

// WeightRef is a use of a declared weight, for a layer when the weight is a per-layer family.
type WeightRef struct {
	Weight *Weight
	Layer  Dim    // the layer index expression, e.g. Var("i"); zero Dim for a single tensor
	Name   string // as used, e.g. "vis.blocks[i].attn.qkv.weight"
	Pos    Pos
}

// Arg is one operand of a node: a Value or a WeightRef, in a role named by the op's catalog
// entry. Index selects a layer of a KVCache value (cache[i]).
type Arg struct {
	Role   string
	Value  *Value
	Weight *WeightRef
	Index  *Dim
	Pos    Pos
}

// Shape is the operand's shape (a weight's declared shape, a cache layer's [rows, width] as
// [KV width]).
func (a *Arg) Shape() Shape {
	if a.Weight != nil {
		return a.Weight.Weight.Shape
	}
	return a.Value.Shape
}

// AttrKind is the kind of an attribute value.
type AttrKind uint8

const (
	AttrInt   AttrKind = iota + 1 // Int
	AttrFloat                     // Float, FloatName or FloatRsqrt
	AttrBool                      // Bool, or BoolName (negated by BoolNot) for a bool config value
	AttrEnum                      // Enum, one of the op's listed words
	AttrInts                      // Ints
)

func (k AttrKind) String() string {
	return [...]string{"?", "int", "float", "bool", "word", "int list"}[k]
}

// Attr is one attribute of a node or one argument of a rule. Nodes carry every attribute their
// op takes, with defaults and inferred values (head_dim, scale) filled in by the checker.
type Attr struct {
	Name       string
	Kind       AttrKind
	Int        Dim
	Float      float64 // the value when FloatName is empty and FloatRsqrt is nil
	FloatName  string  // a float config value
	FloatRsqrt *Dim    // the value is 1/sqrt(*FloatRsqrt), e.g. attention's default scale
	Bool       bool
	BoolName   string
	BoolNot    bool
	BoolIndex  string // the condition is "BoolIndex in BoolName": a loop index in an int list config value
	Enum       string
	Ints       []Dim
	Inferred   bool // filled in by the checker rather than written
	Pos        Pos
}

// Node is one operation. Loop nodes carry Loop; every other node's Op is from the catalog.
type Node struct {
	Op    Op
	Args  []*Arg
	Attrs []*Attr
	Outs  []*Value
	Loop  *Loop
	Pos   Pos
}

// Attr finds an attribute by name.
func (n *Node) Attr(name string) *Attr {
	for _, a := range n.Attrs {
		if a.Name == name {
			return a
		}
	}
	return nil
}

// Arg finds an operand by role.
func (n *Node) Arg(role string) *Arg {
	for _, a := range n.Args {
		if a.Role == role {
			return a
		}
	}
	return nil
}

// Loop is `for Index < Count { Body }`. Carried values thread through the iterations: In holds
// the value before the loop, Param the value at the start of an iteration (used by Body), Next
// the value at the end of an iteration; the loop node's Outs are the values after the last one,
// in the order of Carried.
type Loop struct {
	Index   string
	Count   Dim
	Body    []*Node
	Carried []*Carried
}

// Carried is one loop-carried value.
type Carried struct {
	Name            string
	In, Param, Next *Value
}
