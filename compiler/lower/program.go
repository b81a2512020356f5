// Package lower turns a checked family into what the emitters print: constants folded into
// kernel attributes, elementwise chains fused into kernels, a launch schedule per graph with
// loops kept as per-layer launches, and a memory plan by liveness whose offsets and sizes are
// functions of the limits (rows, patches, parallel sequences, context).
package lower

import (
	"strings"

	"tfc/compiler/ir"
)

// Program is a family lowered for emission.
type Program struct {
	Family        string // the .graph family name, e.g. qwen2_vl
	Package       string // the Go package of its glue, e.g. qwen2vl
	Source        string // the graph file, relative to the repository root
	ModelTypes    []string
	Architectures []string
	OCR           *ir.OCR // the family's OCR prompt and page DPI; nil when it names none
	Params        []*Param
	Requires      []*Require
	Prefixes      []*Prefix
	Weights       []*Weight
	Rules         []*Rule
	Graphs        []*Graph
	Kernels       []*Kernel // every distinct kernel, in schedule order
	SpecPageSize  int       // the KV page size the HIP kernels were built for; 0 when not specialised
}

// Pos is a position in the graph file: the IR's, kept through lowering.
type Pos = ir.Pos

// Param is one config value: read from config.json paths, derived from others, or defaulted.
type Param struct {
	Name    string   `json:"name"`
	Type    string   `json:"type"`              // int, float, bool, ints (an int list), string
	Len     int      `json:"len,omitempty"`     // fixed length of an int list; 0 when free
	Paths   []string `json:"paths,omitempty"`   // alternatives in config.json, first present wins; empty when derived
	Default *Expr    `json:"default,omitempty"` // used when no path is present; nil means required
	Derived *Expr    `json:"derived,omitempty"` // the value computed from other params
	Pin     *Expr    `json:"pin,omitempty"`     // the constant a requirement fixes; folded into every kernel
	Spec    *Expr    `json:"-"`                 // the value the HIP kernels were specialised for; nil when not specialised
	Kernels *Expr    `json:"kernels,omitempty"` // in program.json: Spec of a read value some committed kernel depends on
	Pos     Pos      `json:"pos"`
}

// Require is a condition a checkpoint's config must meet.
type Require struct {
	Cond *Expr  `json:"cond"`
	Src  string `json:"src"` // as written
	Pos  Pos    `json:"pos"`
}

// Prefix is a tensor-name prefix with alternatives; the first whose tensors exist is used.
type Prefix struct {
	Name string
	Alts []string
	Pos  Pos
}

// Weight is one tensor template of the manifest.
type Weight struct {
	Prefix string   // prefix name, or "" when the name is absolute
	Path   string   // the name after the prefix; "{i}" stands for the layer index
	Index  string   // the loop variable of a per-layer family ("" when single)
	Count  ir.Dim   // layers in the family
	Shape  []ir.Dim // as declared
	Cond   *Expr    // the tensor is present only when Cond holds; nil when always
	Group  string   // the per-layer family's name in Go ("" for single tensors)
	Field  string   // the Go field holding the tensor
	Pos    Pos
	// Unfold, when set, is the factor f of an unfold view: columns c*f + k are loaded as k*C + c.
	Unfold *Expr
	// Deinterleave, when set, is the heads n of a deinterleave view: row 2j + e of each head of
	// HD rows loads as row e*HD/2 + j.
	Deinterleave *Expr
	viewAt       *Pos      // where a graph reads it through unfold or deinterleave
	plain        *Pos      // where a graph reads it without
	Parts        []*Weight // a stack: these weights' rows one after another (Prefix and Path unset)
}

// Rows and Cols view a weight as the 2-D tensor the device ops take.
func (w *Weight) Rows() ir.Dim {
	if len(w.Shape) == 1 {
		return ir.Const(1)
	}
	return w.Shape[0]
}

// Cols is the product of every dimension after the first.
func (w *Weight) Cols() ir.Dim {
	if len(w.Shape) == 1 {
		return w.Shape[0]
	}
	return ir.Shape(w.Shape[1:]).Elems()
}

// Display is the weight's name as the graph writes it; a stack's names its parts in braces.
func (w *Weight) Display() string {
	if len(w.Parts) > 0 {
		var names []string
		for _, p := range w.Parts {
			names = append(names, p.Display())
		}
		return braces(names, ".")
	}
	p := w.Path
	if w.Index != "" {
		p = strings.Replace(p, ".{i}", "["+w.Index+"]", 1)
	}
	if w.Prefix != "" {
		return w.Prefix + "." + p
	}
	return p
}

// Rule is a runtime rule the graph names, such as the image processor or the position rule.
type Rule struct {
	Kind string // image, positions
	Name string
	Args []RuleArg
	Pos  Pos
}

// RuleArg is one named argument of a rule.
type RuleArg struct {
	Name  string
	Value *Expr
}

// Arg returns the named argument, or nil.
func (r *Rule) Arg(name string) *Expr {
	for _, a := range r.Args {
		if a.Name == name {
			return a.Value
		}
	}
	return nil
}

// Graph is one lowered graph: its inputs, the launch schedule and its memory plan.
type Graph struct {
	Name     string
	Role     string // vision or decoder
	Inputs   []*Value
	Output   *Value
	Picks    *Value     // a decoder's greedy pick of each logit row: argmax of Output, [1, S] I32
	Sizes    []*Size    // the sizes of its inputs (R, N, ...), each bounded by a limit
	Requires []*Require // checks on the dims at call time
	Steps    []*Step
	Values   []*Value
	Arenas   []*Arena // the memory plan: one arena a dtype
	Pos      Pos
	Home     string // the family whose file states the graph, when another family's (graph NAME = HOME.NAME)
	nextVal  int
}

// Size is a symbolic size of a graph's inputs (R, N), bounded by one of the runtime's limits.
type Size struct {
	Name  string
	Limit ir.Dim // the largest value, in terms of the limits (Rows, Patches, Parallel, Context, PageSize)
}

// Step is one entry of a schedule: a launch, or a loop of steps.
type Step struct {
	Launch *Launch
	Loop   *Loop
}

// Loop repeats its steps Count times with Var bound to 0, 1, ...
type Loop struct {
	Var    string
	Count  ir.Dim
	Steps  []*Step
	Carry  []*Carry
	Pos    Pos
	parent *Loop
	start  int // schedule index of the loop's head
	end    int // schedule index of its back edge
}

// Carry is a value a loop carries from one iteration to the next; all four share a buffer.
type Carry struct {
	Init   *Value // before the loop
	Param  *Value // what the body reads
	Yield  *Value // what the body leaves for the next iteration
	Result *Value // after the loop
}

// Launch is one kernel launch: the ops of a fusion group in order.
type Launch struct {
	Kernel *Kernel
	Ops    []*Op
}

// Kernel is a generated kernel: its symbol, the op chain it runs and the graph lines it came from.
type Kernel struct {
	Name     string
	Graph    string
	Role     string // the graph's role: vision or decoder
	Ops      []*Op
	Sources  []Pos
	internal map[int]bool
}

// Op is one device op after folding and fusion; Fused lists the graph ops it computes.
type Op struct {
	Kind  string // the device op: linear, rmsnorm, layernorm, rope, attention, add, mul, activate, glu, embed, scatter, gather, copy
	Args  []Arg  // tensor operands by device field, in field order
	Attrs []Attr // scalar attributes by device field
	Out   *Value
	Fused []Source
	index int // position in the flattened schedule
}

// Source is one graph op a device op computes.
type Source struct {
	Op  string
	Pos Pos
}

// Arg is a tensor operand.
type Arg struct {
	Field string
	Value *Value
}

// Attr is a scalar attribute.
type Attr struct {
	Field string
	Value *Expr
}

// Arg returns the operand of the given field, or nil.
func (o *Op) Arg(field string) *Value {
	for _, a := range o.Args {
		if a.Field == field {
			return a.Value
		}
	}
	return nil
}

// SetArg sets or adds an operand.
func (o *Op) SetArg(field string, v *Value) {
	for i, a := range o.Args {
		if a.Field == field {
			o.Args[i].Value = v
			return
		}
	}
	o.Args = append(o.Args, Arg{field, v})
}

// Attr returns the attribute of the given field, or nil.
func (o *Op) Attr(field string) *Expr {
	for _, a := range o.Attrs {
		if a.Field == field {
			return a.Value
		}
	}
	return nil
}

// SetAttr sets or adds an attribute.
func (o *Op) SetAttr(field string, e *Expr) {
	for i, a := range o.Attrs {
		if a.Field == field {
			o.Attrs[i].Value = e
			return
		}
	}
	o.Attrs = append(o.Attrs, Attr{field, e})
}

// ValueKind says where a value's data lives.
type ValueKind uint8

const (
	Activation ValueKind = iota // a planned buffer in the graph's arena
	Input                       // written from the host each call (also planned)
	View                        // columns or a reshape of another value
	Alias                       // the same tensor as another value (an op that works in place)
	WeightRef                   // a weight tensor, indexed by a loop variable for per-layer families
	Select                      // one of two weights by a config condition, or of two spans by a layer index
	CacheRef                    // one layer's KV cache
	RowsRef                     // the round's rows description
)

// Value is one tensor of a graph.
type Value struct {
	ID    int
	Name  string // the graph's name for it
	Kind  ValueKind
	DType string // F32, I32
	Rows  ir.Dim // 0 for a cache, whose rows are the pages'
	Cols  ir.Dim
	Pos   Pos

	Base         *Value  // View and Alias
	ColLo, ColHi *ir.Dim // View: a column range of Base; nil for a reshape

	Weight *Weight // WeightRef
	Index  *ir.Dim // WeightRef and CacheRef: the layer index; nil for a single weight

	Cond       *Expr  // Select
	Then, Else *Value // Select

	Role string // Input: the runtime field it is read from (tokens, positions, ...)

	RowSeq, RowPos, PageTable *Value // RowsRef: its tensors

	Go string // the emitter's name for it

	Def  *Op
	Uses []*Op

	class *class
	first int // schedule index of the definition (-1 for inputs)
	last  int // schedule index of the last use
}

// IsWeight reports whether v is a weight: a weight tensor or a select between weights.
func (v *Value) IsWeight() bool {
	return v.Kind == WeightRef || (v.Kind == Select && v.Then.IsWeight())
}

// Storage follows views and aliases to the value that owns the data.
func (v *Value) Storage() *Value {
	for v.Kind == View || v.Kind == Alias {
		v = v.Base
	}
	return v
}

// Buffer is the arena slot of the value's storage, or nil for weights and caches.
func (v *Value) Buffer() *Buffer {
	s := v.Storage()
	if s.class == nil {
		return nil
	}
	return s.class.buffer
}

// Arena is one backend allocation of a graph, holding the buffers of one dtype.
type Arena struct {
	DType   string
	Size    *Expr // elements
	Buffers []*Buffer
}

// Buffer is a slot of an arena: values whose lifetimes do not overlap share it.
type Buffer struct {
	Name   string
	Offset *Expr // elements from the arena's start
	Size   *Expr // elements
	Values []*Value
}

// WeightsOf lists the weights graph g reads, in p's declaration order.
func (p *Program) WeightsOf(g *Graph) []*Weight {
	used := map[*Weight]bool{}
	var visit func(v *Value)
	visit = func(v *Value) {
		if v == nil {
			return
		}
		switch v.Kind {
		case WeightRef:
			used[v.Weight] = true
		case Select:
			visit(v.Then)
			visit(v.Else)
		case Alias, View:
			visit(v.Base)
		}
	}
	g.Walk(func(l *Launch, _ []*Loop) {
		for _, op := range l.Ops {
			for _, a := range op.Args {
				visit(a.Value)
			}
		}
	})
	var out []*Weight
	for _, w := range p.Weights {
		if used[w] {
			out = append(out, w)
		}
	}
	return out
}

// Sites counts graph g's launch sites: one a launch, loops counted once.
func (g *Graph) Sites() int {
	n := 0
	g.Walk(func(*Launch, []*Loop) { n++ })
	return n
}
