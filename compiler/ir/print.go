package ir

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Walk calls f on every node of nodes in order, entering loop bodies after the loop node itself;
// depth is the loop nesting of the node.
func Walk(nodes []*Node, f func(n *Node, depth int)) {
	var walk func([]*Node, int)
	walk = func(ns []*Node, depth int) {
		for _, n := range ns {
			f(n, depth)
			if n.Loop != nil {
				walk(n.Loop.Body, depth+1)
			}
		}
	}
	walk(nodes, 0)
}

// String prints an attribute's value as the source would write it.
func (a *Attr) String() string {
	switch a.Kind {
	case AttrInt:
		return a.Int.String()
	case AttrFloat:
		switch {
		case a.FloatName != "":
			return a.FloatName
		case a.FloatRsqrt != nil:
			return "1/sqrt(" + a.FloatRsqrt.String() + ")"
		}
		return strconv.FormatFloat(a.Float, 'g', -1, 64)
	case AttrBool:
		if a.BoolIndex != "" {
			return a.BoolIndex + " in " + a.BoolName
		}
		if a.BoolName != "" {
			if a.BoolNot {
				return "!" + a.BoolName
			}
			return a.BoolName
		}
		return strconv.FormatBool(a.Bool)
	case AttrEnum:
		return a.Enum
	case AttrInts:
		parts := make([]string, len(a.Ints))
		for i, d := range a.Ints {
			parts[i] = d.String()
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return "?"
}

// Fprint writes a readable dump of m: config, weights, and every graph's nodes with shapes.
func Fprint(w io.Writer, m *Module) {
	fmt.Fprintf(w, "family %s model_types=%v architectures=%v\n", m.Family, m.ModelTypes, m.Architectures)
	for _, c := range m.Config {
		t := c.Type.String()
		if c.Type == IntList && c.Len > 0 {
			t = fmt.Sprintf("int[%d]", c.Len)
		}
		switch {
		case c.Derived != nil:
			fmt.Fprintf(w, "config %s %s = %s\n", c.Name, t, c.Derived.Src)
		default:
			def := ""
			if c.Default != nil {
				def = " default " + c.Default.String()
			}
			fmt.Fprintf(w, "config %s %s = %s%s\n", c.Name, t, strings.Join(c.Paths, " | "), def)
		}
	}
	for _, r := range m.Requires {
		fmt.Fprintf(w, "require %s %s %s\n", r.Left, r.Op, r.Right)
	}
	for _, p := range m.Prefixes {
		fmt.Fprintf(w, "prefix %s = %s\n", p.Name, strings.Join(p.Alternatives, " | "))
	}
	for _, wt := range m.Weights {
		extra := ""
		if wt.Layered() {
			extra = fmt.Sprintf(" for %s < %s", wt.Index, wt.Count)
		}
		if wt.Cond != nil {
			extra += " if " + wt.Cond.String()
		}
		fmt.Fprintf(w, "weight %s %s%s\n", wt.Name, wt.Shape, extra)
	}
	for _, r := range []*Rule{m.Image, m.Positions} {
		if r != nil {
			fmt.Fprintf(w, "rule %s(%s)\n", r.Name, attrList(r.Args))
		}
	}
	for _, g := range m.Graphs {
		params := make([]string, len(g.Params))
		for i, p := range g.Params {
			params[i] = valueDecl(p)
		}
		fmt.Fprintf(w, "graph %s(%s)\n", g.Name, strings.Join(params, ", "))
		for _, r := range g.Requires {
			fmt.Fprintf(w, "  require %s %s %s\n", r.Left, r.Op, r.Right)
		}
		printNodes(w, g.Nodes, "  ")
		res := make([]string, len(g.Results))
		for i, v := range g.Results {
			res[i] = v.String()
		}
		fmt.Fprintf(w, "  return %s\n", strings.Join(res, ", "))
	}
}

func printNodes(w io.Writer, nodes []*Node, indent string) {
	for _, n := range nodes {
		if n.Loop != nil {
			fmt.Fprintf(w, "%sloop %s < %s {\n", indent, n.Loop.Index, n.Loop.Count)
			for _, c := range n.Loop.Carried {
				fmt.Fprintf(w, "%s  carry %s = %s -> %s\n", indent, c.Param, c.In, c.Next)
			}
			printNodes(w, n.Loop.Body, indent+"  ")
			outs := make([]string, len(n.Outs))
			for i, o := range n.Outs {
				outs[i] = o.String()
			}
			fmt.Fprintf(w, "%s} -> %s\n", indent, strings.Join(outs, ", "))
			continue
		}
		outs := make([]string, len(n.Outs))
		for i, o := range n.Outs {
			outs[i] = valueDecl(o)
		}
		args := make([]string, 0, len(n.Args)+len(n.Attrs))
		for _, a := range n.Args {
			args = append(args, a.Role+": "+argString(a))
		}
		if s := attrList(n.Attrs); s != "" {
			args = append(args, s)
		}
		fmt.Fprintf(w, "%s%s = %s(%s)  // %d:%d\n", indent, strings.Join(outs, ", "), n.Op, strings.Join(args, ", "), n.Pos.Line, n.Pos.Col)
	}
}

func argString(a *Arg) string {
	if a.Weight != nil {
		return a.Weight.Name
	}
	s := a.Value.String()
	if a.Index != nil {
		s += "[" + a.Index.String() + "]"
	}
	return s
}

func attrList(attrs []*Attr) string {
	parts := make([]string, len(attrs))
	for i, a := range attrs {
		parts[i] = a.Name + ": " + a.String()
	}
	return strings.Join(parts, ", ")
}

func valueDecl(v *Value) string {
	switch v.Kind {
	case Tensor, WeightView:
		return fmt.Sprintf("%s %s %s", v, v.Shape, v.DType)
	}
	if v.Kind == KVCache {
		return fmt.Sprintf("%s kv%s", v, v.Shape)
	}
	return fmt.Sprintf("%s %s", v, v.Kind)
}
