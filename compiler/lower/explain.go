package lower

import (
	"fmt"
	"io"
	"strings"
)

// Explain prints the lowered program: per graph, every launch with its kernel, the graph ops it
// fuses and where they are, its operands and their buffers; then the memory plan.
func Explain(w io.Writer, p *Program) {
	fmt.Fprintf(w, "family %s (%s) → package %s, %d kernels\n", p.Family, p.Source, p.Package, len(p.Kernels))
	var pinned []string
	for _, prm := range p.Params {
		if prm.Pin != nil {
			pinned = append(pinned, prm.Name+" = "+prm.Pin.String())
		}
	}
	if len(pinned) > 0 {
		fmt.Fprintf(w, "constants folded into every kernel (the graph requires them): %s\n", strings.Join(pinned, ", "))
	}
	for _, g := range p.Graphs {
		fmt.Fprintf(w, "\ngraph %s (%s, line %d)\n", g.Name, g.Role, g.Pos.Line)
		var dims []string
		for _, d := range g.Sizes {
			dims = append(dims, d.Name+" ≤ "+FromDim(d.Limit).String())
		}
		fmt.Fprintf(w, "  dims    %s\n", strings.Join(dims, ", "))
		for _, in := range g.Inputs {
			switch in.Kind {
			case RowsRef:
				fmt.Fprintf(w, "  input   %-12s %-11s sequence slot, cache position and page table of each row\n", in.Name, in.Role)
			case CacheRef:
				fmt.Fprintf(w, "  input   %-12s %-11s %s layers of paged K and V rows [Parallel × pages × PageSize, %s]\n", in.Name, in.Role, FromDim(in.Rows), FromDim(in.Cols))
			default:
				fmt.Fprintf(w, "  input   %-12s %-11s %s\n", in.Name, in.Role, shape(in))
			}
		}
		n := 0
		explainSteps(w, g.Steps, "  ", &n)
		fmt.Fprintf(w, "  output  %s %s\n", operand(g.Output), shape(g.Output))
		for _, a := range g.Arenas {
			fmt.Fprintf(w, "  memory  %s arena: buffers back to back, elements at the limits; each holds values whose lifetimes do not overlap\n", a.DType)
			for _, b := range a.Buffers {
				var vals []string
				seen := map[string]bool{}
				for _, v := range b.Values {
					if !seen[v.Name] {
						seen[v.Name] = true
						vals = append(vals, v.Name)
					}
				}
				fmt.Fprintf(w, "    %-12s %-34s %s\n", b.Name, b.Size, strings.Join(vals, ", "))
			}
		}
	}
}

func explainSteps(w io.Writer, steps []*Step, indent string, n *int) {
	for _, s := range steps {
		if l := s.Loop; l != nil {
			fmt.Fprintf(w, "%sfor %s < %s (line %d): these launches once a layer\n", indent, l.Var, FromDim(l.Count), l.Pos.Line)
			explainSteps(w, l.Steps, indent+"  ", n)
			continue
		}
		*n++
		fmt.Fprintf(w, "%s%2d %s\n", indent, *n, s.Launch.Kernel.Name)
		for _, op := range s.Launch.Ops {
			var from []string
			for _, f := range op.Fused {
				from = append(from, fmt.Sprintf("%s@%d:%d", f.Op, f.Pos.Line, f.Pos.Col))
			}
			var args []string
			for _, a := range op.Args {
				if a.Field == "Y" && a.Value == op.Out && op.Out.Kind != Alias {
					continue
				}
				args = append(args, a.Field+"="+operand(a.Value))
			}
			for _, a := range op.Attrs {
				args = append(args, a.Field+"="+a.Value.String())
			}
			out := ""
			if op.Out != nil && op.Out.Kind != Alias {
				out = " → " + operand(op.Out)
			}
			fmt.Fprintf(w, "%s     %-9s %s%s   [%s]\n", indent, op.Kind, strings.Join(args, " "), out, strings.Join(from, " "))
		}
	}
}

func shape(v *Value) string {
	s := "[" + FromDim(v.Rows).String() + ", " + FromDim(v.Cols).String() + "]"
	if v.DType != "" && v.DType != "F32" {
		s += " " + v.DType
	}
	return s
}

// operand names a value and where it lives.
func operand(v *Value) string {
	switch v.Kind {
	case WeightRef:
		return v.Weight.Display()
	case Select:
		return v.Cond.String() + "?" + operand(v.Then) + ":" + operand(v.Else)
	case CacheRef:
		return v.Name + "[" + FromDim(*v.Index).String() + "]"
	case RowsRef:
		return v.Name
	case View:
		if v.ColLo != nil {
			return v.Name + "(" + operand(v.Base) + " cols " + FromDim(*v.ColLo).String() + ":" + FromDim(*v.ColHi).String() + ")"
		}
		return v.Name + "(" + operand(v.Base) + " as " + shape(v) + ")"
	}
	if b := v.Buffer(); b != nil && b.Name != v.Name {
		return v.Name + "@" + b.Name
	}
	return v.Name
}
