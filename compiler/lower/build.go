package lower

import (
	"fmt"
	"strings"

	"tfc/compiler/ir"
)

// Builder appends device ops to a graph in program order; each op starts as its own launch and
// the fusion pass groups them. The IR translation and the tests build graphs through it.
type Builder struct {
	G     *Graph
	stack []*[]*Step
	loops []*Loop
}

// NewGraph starts a graph.
func NewGraph(name, role string, pos Pos) *Builder {
	g := &Graph{Name: name, Role: role, Pos: pos}
	b := &Builder{G: g}
	b.stack = []*[]*Step{&g.Steps}
	return b
}

func (b *Builder) value(v *Value) *Value {
	v.ID = b.G.nextVal
	b.G.nextVal++
	b.G.Values = append(b.G.Values, v)
	return v
}

// Size declares a symbolic size bounded by limit.
func (b *Builder) Size(name string, limit ir.Dim) {
	b.G.Sizes = append(b.G.Sizes, &Size{Name: name, Limit: limit})
}

// Input declares a graph input read from the runtime field role.
func (b *Builder) Input(name, role, dtype string, rows, cols ir.Dim, pos Pos) *Value {
	v := b.value(&Value{Name: name, Kind: Input, Role: role, DType: dtype, Rows: rows, Cols: cols, Pos: pos})
	b.G.Inputs = append(b.G.Inputs, v)
	return v
}

// Special declares a rows or cache input (no buffer of its own).
func (b *Builder) Special(name, role string, kind ValueKind, rows, cols ir.Dim, pos Pos) *Value {
	v := b.value(&Value{Name: name, Kind: kind, Role: role, Rows: rows, Cols: cols, Pos: pos})
	b.G.Inputs = append(b.G.Inputs, v)
	return v
}

// Cache is the cache input indexed by a layer.
func (b *Builder) Cache(cache *Value, index ir.Dim) *Value {
	return b.value(&Value{Name: cache.Name, Kind: CacheRef, Base: cache, Index: &index, Cols: cache.Cols, Pos: cache.Pos})
}

// Weight refers to a weight tensor, indexed by index for per-layer families.
func (b *Builder) Weight(w *Weight, index *ir.Dim) *Value {
	return b.value(&Value{Name: w.Display(), Kind: WeightRef, Weight: w, Index: index, Rows: w.Rows(), Cols: w.Cols()})
}

// Select picks one of two weights by a config condition.
func (b *Builder) Select(cond *Expr, then, els *Value) *Value {
	return b.value(&Value{Name: then.Name, Kind: Select, Cond: cond, Then: then, Else: els, Rows: then.Rows, Cols: then.Cols})
}

// Columns views columns [lo, hi) of x.
func (b *Builder) Columns(name string, x *Value, lo, hi ir.Dim, pos Pos) *Value {
	return b.value(&Value{Name: name, Kind: View, Base: x, ColLo: &lo, ColHi: &hi, DType: x.DType, Rows: x.Rows, Cols: hi.Sub(lo), Pos: pos})
}

// Reshape views a contiguous x as rows×cols.
func (b *Builder) Reshape(name string, x *Value, rows, cols ir.Dim, pos Pos) *Value {
	return b.value(&Value{Name: name, Kind: View, Base: x, DType: x.DType, Rows: rows, Cols: cols, Pos: pos})
}

// New makes an activation value (the output of an op).
func (b *Builder) New(name, dtype string, rows, cols ir.Dim, pos Pos) *Value {
	return b.value(&Value{Name: name, Kind: Activation, DType: dtype, Rows: rows, Cols: cols, Pos: pos})
}

// InPlace makes the output of an op that overwrites x.
func (b *Builder) InPlace(name string, x *Value, pos Pos) *Value {
	return b.value(&Value{Name: name, Kind: Alias, Base: x, DType: x.DType, Rows: x.Rows, Cols: x.Cols, Pos: pos})
}

// Op appends one device op as its own launch and returns it.
func (b *Builder) Op(kind string, args []Arg, attrs []Attr, out *Value, src ...Source) *Op {
	op := &Op{Kind: kind, Args: args, Attrs: attrs, Out: out, Fused: src}
	if out != nil && out.Def == nil {
		out.Def = op
	}
	top := b.stack[len(b.stack)-1]
	*top = append(*top, &Step{Launch: &Launch{Ops: []*Op{op}}})
	return op
}

// BeginLoop opens a loop that carries inits; ops go into its body until EndLoop. It returns
// the values the body reads for the carried ones.
func (b *Builder) BeginLoop(v string, count ir.Dim, pos Pos, inits ...*Value) []*Value {
	l := &Loop{Var: v, Count: count, Pos: pos}
	if len(b.loops) > 0 {
		l.parent = b.loops[len(b.loops)-1]
	}
	top := b.stack[len(b.stack)-1]
	*top = append(*top, &Step{Loop: l})
	b.stack = append(b.stack, &l.Steps)
	b.loops = append(b.loops, l)
	var params []*Value
	for _, in := range inits {
		p := b.InPlace(in.Name, in, pos)
		l.Carry = append(l.Carry, &Carry{Init: in, Param: p})
		params = append(params, p)
	}
	return params
}

// EndLoop closes the innermost loop with the values the body yields for its carried ones, and
// returns the values they have after the loop.
func (b *Builder) EndLoop(yields ...*Value) []*Value {
	l := b.loops[len(b.loops)-1]
	b.loops = b.loops[:len(b.loops)-1]
	b.stack = b.stack[:len(b.stack)-1]
	var results []*Value
	for i, y := range yields {
		r := b.InPlace(y.Name, y, l.Pos)
		l.Carry[i].Yield, l.Carry[i].Result = y, r
		results = append(results, r)
	}
	return results
}

// Return sets the graph's output.
func (b *Builder) Return(v *Value) { b.G.Output = v }

// Walk visits every launch in schedule order.
func (g *Graph) Walk(f func(l *Launch, loops []*Loop)) { walkSteps(g.Steps, nil, f) }

func walkSteps(steps []*Step, loops []*Loop, f func(*Launch, []*Loop)) {
	for _, s := range steps {
		if s.Launch != nil {
			f(s.Launch, loops)
		} else {
			walkSteps(s.Loop.Steps, append(loops, s.Loop), f)
		}
	}
}

// Ops lists every op in schedule order.
func (g *Graph) Ops() []*Op {
	var ops []*Op
	g.Walk(func(l *Launch, _ []*Loop) { ops = append(ops, l.Ops...) })
	return ops
}

// GoName turns a dotted or snake name into an exported Go identifier: "norm1.weight" → Norm1Weight.
func GoName(s string) string {
	var b strings.Builder
	up := true
	for _, r := range s {
		switch {
		case r == '.' || r == '_' || r == '-' || r == '{' || r == '}' || r == '[' || r == ']':
			up = true
		case up:
			b.WriteString(strings.ToUpper(string(r)))
			up = false
		default:
			b.WriteRune(r)
		}
	}
	out := b.String()
	if out == "" || (out[0] >= '0' && out[0] <= '9') {
		out = "T" + out
	}
	return out
}

// validate checks the invariants the emitters rely on.
func (g *Graph) validate() error {
	for _, op := range g.Ops() {
		for _, a := range op.Args {
			if a.Value == nil {
				return fmt.Errorf("%s: %s has no operand %s", g.Name, op.Kind, a.Field)
			}
		}
	}
	if g.Output == nil {
		return fmt.Errorf("graph %s has no output", g.Name)
	}
	return nil
}
