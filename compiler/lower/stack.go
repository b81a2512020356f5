package lower

import (
	"slices"
	"strings"

	"tfc/compiler/ir"
)

// fuseSiblings turns linears of one block that read the same X, with weights of the same
// columns and layers and all or none with a bias, into one linear over their weights stacked
// row after row (and their biases likewise), launched where the first was: each one's output
// becomes its columns of the stacked output. Every output of a GEMM depends only on its own row
// of X and column of W, so the stacked linear computes the same bits. Only linears whose
// outputs are read by ops that take column slices (siblingReader) are stacked.
func fuseSiblings(p *Program, g *Graph, steps *[]*Step) {
	for i := 0; i < len(*steps); i++ {
		first := sibling(g, (*steps)[i])
		if first == nil {
			continue
		}
		group, at := []*Op{first}, []int{i}
		glu := gluOf(g, first.Out)
		for j := i + 1; j < len(*steps); j++ {
			if op := sibling(g, (*steps)[j]); op != nil && stackable(first, op) && gluOf(g, op.Out) == glu {
				group, at = append(group, op), append(at, j)
			}
		}
		if len(group) < 2 {
			continue
		}
		if glu != nil { // the gate's columns first, then the up's: glu pairs column j with j + F
			if len(group) != 2 || glu.Arg("Gate") == glu.Arg("Up") || !glu.Arg("Gate").Cols.Equal(glu.Arg("Up").Cols) {
				continue
			}
			if group[0].Out != glu.Arg("Gate") {
				group[0], group[1] = group[1], group[0]
			}
		}
		(*steps)[i] = &Step{Launch: &Launch{Ops: []*Op{stackLinears(p, g, group)}}}
		for k := len(at) - 1; k > 0; k-- {
			*steps = slices.Delete(*steps, at[k], at[k]+1)
		}
	}
}

// sibling is the linear step s launches when it may join a stack, or nil: a lone linear with no
// activation or residual, an unconditional weight (and bias) of a layer family or single, and
// an output that only ops taking column slices read.
func sibling(g *Graph, s *Step) *Op {
	if s.Launch == nil {
		return nil
	}
	op := single(s.Launch, "linear")
	if op == nil || op.Attr("Act") != nil || op.Arg("Res") != nil || op.Out == nil || op.Out.Kind != Activation {
		return nil
	}
	for _, f := range []string{"W", "B"} {
		if w := op.Arg(f); w != nil && (w.Kind != WeightRef || w.Weight.Cond != nil) {
			return nil
		}
	}
	if !slicesReadable(g, op.Out) {
		return nil
	}
	return op
}

// stackable reports whether linear b may share a stacked weight with a.
func stackable(a, b *Op) bool {
	wa, wb := a.Arg("W"), b.Arg("W")
	if a.Arg("X") != b.Arg("X") || (a.Arg("B") == nil) != (b.Arg("B") == nil) || a.Out.DType != b.Out.DType {
		return false
	}
	if !wa.Cols.Equal(wb.Cols) || len(wa.Weight.Shape) != len(wb.Weight.Shape) || wa.Weight.Group != wb.Weight.Group {
		return false
	}
	if (wa.Index == nil) != (wb.Index == nil) || wa.Index != nil && !wa.Index.Equal(*wb.Index) {
		return false
	}
	return wa.Weight.Group == "" || wa.Weight.Count.Equal(wb.Weight.Count)
}

// siblingReader reports whether an op reads field as a column slice of a wider output as it
// reads a whole one: a rope rotates the columns it is given in place, attention reads its
// heads through the row stride (and stores K and V rows into the cache from there), and a glu
// whose gate and up are the two halves of one stack pairs their columns in the GEMM's epilogue.
func siblingReader(kind, field string) bool {
	switch kind {
	case "rope":
		return field == "X"
	case "attention":
		return field == "Q" || field == "K" || field == "V"
	case "glu":
		return field == "Gate" || field == "Up"
	}
	return false
}

// gluOf is the glu reading v as its gate or up, or nil.
func gluOf(g *Graph, v *Value) *Op {
	for _, op := range g.Ops() {
		if op.Kind == "glu" && (op.Arg("Gate") == v || op.Arg("Up") == v) {
			return op
		}
	}
	return nil
}

// gluPairs reports whether glu's gate and up are the first and second half of lin's output.
func gluPairs(lin, glu *Op) bool {
	gate, up, y := glu.Arg("Gate"), glu.Arg("Up"), lin.Out
	if gate == nil || up == nil || y == nil || gate.Kind != View || up.Kind != View || gate.Base != y || up.Base != y || gate.ColLo == nil || up.ColLo == nil {
		return false
	}
	return gate.ColLo.IsZero() && up.ColLo.Equal(*gate.ColHi) && up.ColHi.Equal(y.Cols) && gate.Cols.Equal(up.Cols)
}

// slicesReadable reports whether every reader of v, and of the values an op writing it in place
// leaves, is a siblingReader: v may become a column slice.
func slicesReadable(g *Graph, v *Value) bool {
	if g.Output == v {
		return false
	}
	carried := false
	g.walkLoops(g.Steps, func(l *Loop) {
		for _, c := range l.Carry {
			carried = carried || c.Init == v || c.Yield == v
		}
	})
	if carried {
		return false
	}
	for _, op := range g.Ops() {
		for _, a := range op.Args {
			if a.Value == v && !(a.Field == "Y" && op.Out == v) && !siblingReader(op.Kind, a.Field) {
				return false
			}
		}
	}
	for _, w := range g.Values {
		if w.Then == v || w.Else == v {
			return false
		}
		if w.Base == v && (w.Kind != Alias || w.Def == nil || !siblingReader(w.Def.Kind, "X") || !slicesReadable(g, w)) {
			return false
		}
	}
	return true
}

// stackLinears is one linear over the stacked weights (and biases) of group, whose outputs become
// column ranges of its output.
func stackLinears(p *Program, g *Graph, group []*Op) *Op {
	first := group[0]
	var ws, bs []*Weight
	var names []string
	var fused []Source
	cols := ir.Const(0)
	for _, op := range group {
		ws = append(ws, op.Arg("W").Weight)
		if b := op.Arg("B"); b != nil {
			bs = append(bs, b.Weight)
		}
		names = append(names, op.Out.Name)
		fused = append(fused, op.Fused...)
		cols = cols.Add(op.Out.Cols)
	}
	w := first.Arg("W")
	out := g.add(&Value{Name: strings.Join(names, "_"), Kind: Activation, DType: first.Out.DType, Rows: first.Out.Rows, Cols: cols, Pos: first.Out.Pos})
	args := []Arg{{"X", first.Arg("X")}, {"W", g.weightRef(p.stack(ws), w.Index)}}
	if len(bs) > 0 {
		args = append(args, Arg{"B", g.weightRef(p.stack(bs), w.Index)})
	}
	args = append(args, Arg{"Y", out})
	op := &Op{Kind: "linear", Args: args, Out: out, Fused: fused}
	out.Def = op
	lo := ir.Const(0)
	for _, part := range group {
		v := part.Out
		from, to := lo, lo.Add(v.Cols)
		v.Kind, v.Base, v.ColLo, v.ColHi, v.Def = View, out, &from, &to, nil
		lo = to
	}
	return op
}

// add registers a value made after translation.
func (g *Graph) add(v *Value) *Value {
	v.ID = g.nextVal
	g.nextVal++
	g.Values = append(g.Values, v)
	return v
}

// weightRef refers to weight w at layer index.
func (g *Graph) weightRef(w *Weight, index *ir.Dim) *Value {
	return g.add(&Value{Name: w.Display(), Kind: WeightRef, Weight: w, Index: index, Rows: w.Rows(), Cols: w.Cols()})
}

// stack is the weight made of parts' rows one after another, one for every graph stacking them.
func (p *Program) stack(parts []*Weight) *Weight {
	for _, w := range p.Weights {
		if slices.Equal(w.Parts, parts) {
			return w
		}
	}
	first := parts[0]
	rows := ir.Const(0)
	var names []string
	for _, w := range parts {
		rows = rows.Add(w.Shape[0])
		name := w.Path
		if w.Group != "" {
			name = name[strings.Index(name, "{i}")+len("{i}"):]
		} else if w.Prefix != "" {
			name = w.Prefix + "." + name
		}
		names = append(names, strings.Trim(name, "."))
	}
	w := &Weight{Index: first.Index, Count: first.Count, Group: first.Group, Pos: first.Pos, Parts: parts}
	w.Shape = append([]ir.Dim{rows}, first.Shape[1:]...)
	w.Field = GoName(strings.NewReplacer("{", "", "}", "", ", ", "_").Replace(braces(names, ".")))
	p.Weights = append(p.Weights, w)
	return w
}

// braces joins names that share leading and trailing sep-separated parts as one name with their
// differing middles in braces: a.q.w, a.k.w → a.{q, k}.w.
func braces(names []string, sep string) string {
	split := make([][]string, len(names))
	for i, n := range names {
		split[i] = strings.Split(n, sep)
	}
	shortest := len(split[0])
	for _, s := range split {
		shortest = min(shortest, len(s))
	}
	head, tail := 0, 0
	for head < shortest-1 && all(split, func(s []string) string { return s[head] }) {
		head++
	}
	for tail < shortest-1-head && all(split, func(s []string) string { return s[len(s)-1-tail] }) {
		tail++
	}
	var mids []string
	for _, s := range split {
		mids = append(mids, strings.Join(s[head:len(s)-tail], sep))
	}
	parts := append(slices.Clone(split[0][:head]), "{"+strings.Join(mids, ", ")+"}")
	return strings.Join(append(parts, split[0][len(split[0])-tail:]...), sep)
}

// all reports whether f gives every element of ss the same string.
func all(ss [][]string, f func([]string) string) bool {
	for _, s := range ss[1:] {
		if f(s) != f(ss[0]) {
			return false
		}
	}
	return true
}
