package lower

import (
	"fmt"
	"slices"
	"strings"

	"tfc/runtime/device/catalog"
)

// Fuse groups the graph's ops into kernels, block by block (a loop body is a block). A kernel is
// a chain: its first op produces, the later ones are epilogues over its output.
//   - an activation that only consumes a linear becomes the linear's epilogue (Act);
//   - a residual add of a linear's only use becomes the linear's epilogue (Res);
//   - swiglu(gate, up) becomes the gate linear with a silu epilogue times up, or, gate and up
//     being the halves of one stacked linear, that linear's epilogue;
//   - a rope of (columns of) a linear's output, and an elementwise op over a linear's or a
//     norm's output, join that launch.
//
// First, linears reading the same input become one over their weights stacked (fuseSiblings);
// stacked weights are added to p's.
func Fuse(p *Program, g *Graph) {
	fuseBlock(p, g, &g.Steps)
}

func fuseBlock(p *Program, g *Graph, steps *[]*Step) {
	for _, s := range *steps {
		if s.Loop != nil {
			fuseBlock(p, g, &s.Loop.Steps)
		}
	}
	fuseSiblings(p, g, steps)
	for changed := true; changed; {
		changed = fuseEpilogues(g, steps) || fuseGLU(g, steps) || fuseConsumers(g, steps)
	}
}

// users counts the ops, views, loop carries and outputs that read v.
func users(g *Graph, v *Value) int {
	n := 0
	for _, op := range g.Ops() {
		for _, a := range op.Args {
			if a.Value == v && !(a.Field == "Y" && op.Out == v) {
				n++
			}
		}
	}
	for _, w := range g.Values {
		if w.Base == v || w.Then == v || w.Else == v {
			n++
		}
	}
	if g.Output == v || g.Picks == v {
		n++
	}
	g.walkLoops(g.Steps, func(l *Loop) {
		for _, c := range l.Carry {
			if c.Init == v || c.Yield == v {
				n++
			}
		}
	})
	return n
}

// replace makes every reader of old read new.
func replace(g *Graph, old, new *Value) {
	for _, op := range g.Ops() {
		for i, a := range op.Args {
			if a.Value == old {
				op.Args[i].Value = new
			}
		}
	}
	for _, w := range g.Values {
		if w.Base == old {
			w.Base = new
		}
	}
	if g.Output == old {
		g.Output = new
	}
	if g.Picks == old {
		g.Picks = new
	}
	g.walkLoops(g.Steps, func(l *Loop) {
		for _, c := range l.Carry {
			if c.Yield == old {
				c.Yield = new
			}
		}
	})
}

func (g *Graph) walkLoops(steps []*Step, f func(*Loop)) {
	for _, s := range steps {
		if s.Loop != nil {
			f(s.Loop)
			g.walkLoops(s.Loop.Steps, f)
		}
	}
}

// definedBefore reports whether v is available before step index at of steps (defined outside
// the block, or by an earlier step).
func definedBefore(steps []*Step, at int, v *Value) bool {
	s := v.Storage()
	if s.Def == nil {
		return true
	}
	for i, st := range steps {
		if st.Launch == nil {
			continue
		}
		for _, op := range st.Launch.Ops {
			if op == s.Def || op == v.Def {
				return i < at
			}
		}
	}
	return true
}

func single(l *Launch, kind string) *Op {
	if len(l.Ops) == 1 && l.Ops[0].Kind == kind {
		return l.Ops[0]
	}
	return nil
}

func sameShape(a, b *Value) bool {
	return a.Rows.Equal(b.Rows) && a.Cols.Equal(b.Cols)
}

func fuseEpilogues(g *Graph, steps *[]*Step) bool {
	for i, s := range *steps {
		if s.Launch == nil {
			continue
		}
		op := single(s.Launch, "activate")
		if op == nil {
			op = single(s.Launch, "add")
		}
		if op == nil {
			continue
		}
		for j := i - 1; j >= 0; j-- {
			p := (*steps)[j].Launch
			if p == nil || len(p.Ops) != 1 || p.Ops[0].Kind != "linear" {
				continue
			}
			lin := p.Ops[0]
			y := lin.Out
			if op.Kind == "activate" && op.Arg("X") == y && users(g, y) == 1 && lin.Attr("Act") == nil && lin.Arg("Res") == nil {
				lin.SetAttr("Act", op.Attr("Act"))
				lin.Fused = append(lin.Fused, op.Fused...)
				replace(g, op.Out, y)
				*steps = slices.Delete(*steps, i, i+1)
				return true
			}
			if op.Kind == "add" && lin.Arg("Res") == nil && users(g, y) == 1 {
				var res *Value
				switch y {
				case op.Arg("B"):
					res = op.Arg("A")
				case op.Arg("A"):
					res = op.Arg("B")
				}
				if res == nil || !definedBefore(*steps, j, res) || !sameShape(res, y) {
					continue
				}
				lin.SetArg("Res", res)
				lin.Fused = append(lin.Fused, op.Fused...)
				replace(g, op.Out, y)
				*steps = slices.Delete(*steps, i, i+1)
				return true
			}
		}
	}
	return false
}

// fuses reports whether a kernel started by producer may run op next (the catalog's epilogues).
func fuses(producer, op string) bool {
	s := catalog.Find(producer)
	return s != nil && s.Fuses(op)
}

// fuseConsumers moves a launch of one op into the launch right before it when that launch's
// producer accepts it as an epilogue and it reads (columns of) the producer's output.
func fuseConsumers(g *Graph, steps *[]*Step) bool {
	for i := 1; i < len(*steps); i++ {
		s, p := (*steps)[i].Launch, (*steps)[i-1].Launch
		if s == nil || p == nil || len(s.Ops) != 1 {
			continue
		}
		op := s.Ops[0]
		if !fuses(p.Ops[0].Kind, op.Kind) || p.Ops[0].Out == nil {
			continue
		}
		if op.Kind == "glu" && p.Ops[0].Kind == "linear" && (len(p.Ops) != 1 || !gluPairs(p.Ops[0], op)) {
			continue
		}
		if op.Args[0].Value.Storage() != p.Ops[0].Out.Storage() {
			continue
		}
		if colView(op.Args[0].Value) && op.Kind != "rope" && op.Kind != "glu" { // an epilogue spans the chain's columns
			continue
		}
		p.Ops = append(p.Ops, op)
		*steps = slices.Delete(*steps, i, i+1)
		return true
	}
	return false
}

// fuseGLU turns glu(gate, up), gate the only use of a linear, into that linear with the gate's
// activation as epilogue followed by a mul with up, launched where the glu was.
func fuseGLU(g *Graph, steps *[]*Step) bool {
	for i, s := range *steps {
		if s.Launch == nil {
			continue
		}
		op := single(s.Launch, "glu")
		if op == nil {
			continue
		}
		gate := op.Arg("Gate")
		for j := i - 1; j >= 0; j-- {
			p := (*steps)[j].Launch
			if p == nil || len(p.Ops) != 1 || p.Ops[0].Kind != "linear" || p.Ops[0].Out != gate {
				continue
			}
			lin := p.Ops[0]
			if users(g, gate) != 1 || lin.Attr("Act") != nil || lin.Arg("Res") != nil {
				break
			}
			lin.SetAttr("Act", op.Attr("Act"))
			mul := &Op{Kind: "mul", Args: []Arg{{"A", gate}, {"B", op.Arg("Up")}, {"Y", op.Out}}, Out: op.Out, Fused: op.Fused}
			op.Out.Def = mul
			p.Ops = append(p.Ops, mul)
			(*steps)[i] = (*steps)[j]
			*steps = slices.Delete(*steps, j, j+1)
			return true
		}
	}
	return false
}

// NameKernels gives every launch its kernel: launches whose op chains and constant attributes
// agree share one, named <package>_<graph>_<op chain>.
func NameKernels(p *Program) {
	bySig := map[string]*Kernel{}
	taken := map[string]bool{}
	p.Kernels = nil
	for _, g := range p.Graphs {
		g.Walk(func(l *Launch, _ []*Loop) {
			sig := g.Name + "|" + signature(l.Ops)
			k := bySig[sig]
			if k == nil {
				base := p.Package + "_" + g.Name + "_" + chain(l.Ops)
				name := base
				if taken[name] && l.Ops[0].Out != nil {
					name = base + "_" + identifier(l.Ops[0].Out.Name)
				}
				for n := 2; taken[name]; n++ {
					name = fmt.Sprintf("%s_%d", base, n)
				}
				taken[name] = true
				k = &Kernel{Name: name, Graph: g.Name, Role: g.Role, Ops: l.Ops}
				bySig[sig] = k
				p.Kernels = append(p.Kernels, k)
			}
			l.Kernel = k
			for _, op := range l.Ops {
				for _, s := range op.Fused {
					if !slices.Contains(k.Sources, s.Pos) {
						k.Sources = append(k.Sources, s.Pos)
					}
				}
			}
		})
	}
	for _, g := range p.Graphs {
		launches := map[*Kernel][]*Launch{}
		g.Walk(func(l *Launch, _ []*Loop) {
			if l.Kernel.Graph == g.Name {
				launches[l.Kernel] = append(launches[l.Kernel], l)
			}
		})
		markInternal(g, launches)
	}
	for _, k := range p.Kernels {
		slices.SortFunc(k.Sources, func(a, b Pos) int {
			if a.Line != b.Line {
				return a.Line - b.Line
			}
			return a.Col - b.Col
		})
	}
}

// chain names an op sequence: linear_bias_quick_gelu, rmsnorm, linear_rope_linear_rope_linear.
func chain(ops []*Op) string {
	var parts []string
	for _, op := range ops {
		parts = append(parts, op.Kind)
		if op.Kind == "linear" {
			if op.Arg("B") != nil {
				parts = append(parts, "bias")
			}
			if a := op.Attr("Act"); a != nil && a.Op == "enum" {
				parts = append(parts, a.Name)
			}
			if op.Arg("Res") != nil {
				parts = append(parts, "res")
			}
		}
		if op.Kind == "activate" || op.Kind == "glu" {
			if a := op.Attr("Act"); a != nil && a.Op == "enum" {
				parts[len(parts)-1] = a.Name
				if op.Kind == "glu" {
					parts[len(parts)-1] = a.Name + "_glu"
				}
			}
		}
	}
	return strings.Join(parts, "_")
}

// signature is what makes two launches the same kernel: the op kinds, the operands present with
// their widths (and a weight's rows), and every attribute, since a GPU kernel is specialised for
// all of them; only the row counts of activations are left to the launch.
func signature(ops []*Op) string {
	var b strings.Builder
	for _, op := range ops {
		b.WriteString(op.Kind + "(")
		for _, a := range op.Args {
			b.WriteString(a.Field)
			if v := a.Value; !v.Cols.IsZero() {
				b.WriteString(":" + FromDim(v.Cols).String())
			}
			if v := a.Value; v.IsWeight() {
				b.WriteString("x" + FromDim(v.Rows).String())
			}
			if v := a.Value; v.Kind == View && v.ColLo != nil {
				b.WriteString("@" + FromDim(*v.ColLo).String())
			}
			b.WriteString(",")
		}
		for _, a := range op.Attrs {
			b.WriteString(a.Field + "=" + a.Value.String() + ",")
		}
		b.WriteString(")")
	}
	return b.String()
}

// Internal reports, by op index, the ops whose output only later ops of the same launch read,
// in every launch of the kernel: a fused GPU kernel need not store them.
func (k *Kernel) Internal() map[int]bool { return k.internal }

// markInternal records, for each launch of g, which op outputs no other launch reads.
func markInternal(g *Graph, launches map[*Kernel][]*Launch) {
	readers := map[*Value]map[*Launch]bool{}
	escapes := map[*Value]bool{g.Output.Storage(): true}
	if g.Picks != nil {
		escapes[g.Picks.Storage()] = true
	}
	g.walkLoops(g.Steps, func(l *Loop) {
		for _, c := range l.Carry {
			escapes[c.Init.Storage()] = true
			escapes[c.Yield.Storage()] = true
		}
	})
	g.Walk(func(l *Launch, _ []*Loop) {
		for _, op := range l.Ops {
			for _, a := range op.Args {
				if a.Field == "Y" && a.Value == op.Out {
					continue
				}
				for _, v := range operands(a.Value) {
					s := v.Storage()
					if readers[s] == nil {
						readers[s] = map[*Launch]bool{}
					}
					readers[s][l] = true
				}
			}
		}
	})
	for k, ls := range launches {
		k.internal = map[int]bool{}
		for i := range k.Ops {
			all := len(ls) > 0
			for _, l := range ls {
				out := l.Ops[i].Out
				if out == nil || i == len(l.Ops)-1 || escapes[out.Storage()] {
					all = false
					break
				}
				for r := range readers[out.Storage()] {
					if r != l {
						all = false
					}
				}
			}
			k.internal[i] = all
		}
	}
}

// identifier keeps the letters, digits and underscores of s.
func identifier(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}
