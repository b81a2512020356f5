package ir

import (
	"errors"
	"fmt"
)

// Verify checks a module's structural invariants and returns every violation: operands are
// defined before use (graph params, earlier outputs, and inside a loop its carried values), ops
// come from the catalog with their required operands and attributes, every node has a source
// position and typed outputs, loops carry values consistently, and results are defined values.
func Verify(m *Module) error {
	var errs []error
	for _, g := range m.Graphs {
		v := &verifier{g: g}
		defined := map[*Value]bool{}
		for _, p := range g.Params {
			defined[p] = true
		}
		v.nodes(g.Nodes, defined)
		for _, r := range g.Results {
			if !defined[r] {
				v.errorf(g.Pos, "result %s is not defined", r)
			}
		}
		errs = append(errs, v.errs...)
	}
	return errors.Join(errs...)
}

type verifier struct {
	g    *Graph
	errs []error
}

func (v *verifier) errorf(p Pos, format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf("%s: graph %s: %s", p, v.g.Name, fmt.Sprintf(format, args...)))
}

func (v *verifier) nodes(nodes []*Node, defined map[*Value]bool) {
	for _, n := range nodes {
		if n.Pos.Line == 0 {
			v.errorf(n.Pos, "%s node has no source position", n.Op)
		}
		if n.Op == OpLoop {
			v.loop(n, defined)
			continue
		}
		spec := Spec(n.Op)
		if spec == nil {
			v.errorf(n.Pos, "op %q is not in the catalog", n.Op)
			continue
		}
		for _, a := range n.Args {
			as := spec.ArgSpec(a.Role)
			switch {
			case as == nil:
				v.errorf(n.Pos, "%s has no operand %s", n.Op, a.Role)
			case a.Weight == nil && a.Value == nil:
				v.errorf(n.Pos, "%s operand %s is empty", n.Op, a.Role)
			case a.Value != nil && !defined[a.Value]:
				v.errorf(n.Pos, "%s operand %s uses %s before it is defined", n.Op, a.Role, a.Value)
			}
		}
		for _, as := range spec.Args {
			if !as.Optional && n.Arg(as.Role) == nil {
				v.errorf(n.Pos, "%s lacks operand %s", n.Op, as.Role)
			}
		}
		for _, at := range spec.Attrs {
			if at.Required && n.Attr(at.Name) == nil {
				v.errorf(n.Pos, "%s lacks attribute %s", n.Op, at.Name)
			}
		}
		if len(n.Outs) == 0 {
			v.errorf(n.Pos, "%s has no outputs", n.Op)
		}
		for _, o := range n.Outs {
			if o.Kind == 0 || o.DType == 0 || o.Def != n {
				v.errorf(n.Pos, "%s output %s is not typed or not linked to its node", n.Op, o)
			}
			defined[o] = true
		}
	}
}

func (v *verifier) loop(n *Node, defined map[*Value]bool) {
	l := n.Loop
	if l == nil || l.Index == "" {
		v.errorf(n.Pos, "loop node without a loop")
		return
	}
	body := map[*Value]bool{}
	for k := range defined {
		body[k] = true
	}
	for _, c := range l.Carried {
		if !defined[c.In] {
			v.errorf(n.Pos, "loop carries %s from %s, which is not defined before the loop", c.Name, c.In)
		}
		body[c.Param] = true
	}
	v.nodes(l.Body, body)
	if len(n.Outs) != len(l.Carried) {
		v.errorf(n.Pos, "loop has %d outputs for %d carried values", len(n.Outs), len(l.Carried))
	}
	for i, c := range l.Carried {
		if c.Next == nil || !body[c.Next] {
			v.errorf(n.Pos, "loop carries %s to a value not defined in its body", c.Name)
		}
		if i < len(n.Outs) {
			defined[n.Outs[i]] = true
		}
	}
}
