package glue

import (
	"fmt"

	. "github.com/dave/jennifer/jen"

	"tfc/compiler/lower"
)

func planType(g *lower.Graph) string { return lowerFirst(lower.GoName(g.Name)) + "Plan" }
func planFunc(g *lower.Graph) string { return "plan" + lower.GoName(g.Name) }
func arenaField(g *lower.Graph, a *lower.Arena) string {
	return lowerFirst(lower.GoName(g.Name)) + lower.GoName(a.DType)
}

func dtypeSize(dt string) int {
	if dt == "BF16" || dt == "F16" {
		return 2
	}
	return 4
}

// plan writes each graph's memory plan: buffer offsets and arena sizes in elements as functions
// of the limits, and the byte totals Plan reports.
func (e *emitter) plan(f *File) error {
	for _, g := range e.p.Graphs {
		var fields []Code
		for _, a := range g.Arenas {
			for _, b := range a.Buffers {
				fields = append(fields, Id(lower.GoName(b.Name)).Int().Comment(fmt.Sprintf("%s arena; holds %s", a.DType, holds(b))))
			}
		}
		for _, a := range g.Arenas {
			fields = append(fields, Id("Size"+a.DType).Int().Comment(a.DType+" arena elements"))
		}
		fields = append(fields, Id("buffers").Index().Qual(modelPkg, "PlanBuffer"))
		f.Comment(fmt.Sprintf("%s places the %s graph's buffers (offsets in elements) in its arenas.", planType(g), g.Name))
		f.Type().Id(planType(g)).Struct(fields...)

		body := []Code{}
		for _, d := range g.Dims {
			body = append(body, Id(d.Name).Op(":=").Id(d.Limit.Go(limitRef("l"))), Id("_").Op("=").Id(d.Name))
		}
		ref := func(x *lower.Expr) string { return e.goExpr(x, limitRef("l")) }
		for _, a := range g.Arenas {
			prev := ""
			for _, b := range a.Buffers {
				field := "p." + lower.GoName(b.Name)
				if prev == "" {
					body = append(body, Id(field).Op("=").Lit(0))
				} else {
					body = append(body, Id(field).Op("=").Id(prev))
				}
				size := ref(b.Size)
				prev = field + " + " + parenthesize(size)
				body = append(body, Id("p.buffers").Op("=").Append(Id("p.buffers"), Qual(modelPkg, "PlanBuffer").Values(Dict{
					Id("Name"):  Lit(g.Name + "." + b.Name),
					Id("Bytes"): Lit(dtypeSize(a.DType)).Op("*").Int64().Call(Id(size)),
				})))
			}
			if prev == "" {
				prev = "0"
			}
			body = append(body, Id("p.Size"+a.DType).Op("=").Id(prev))
		}
		body = append(body, Return())
		f.Func().Id(planFunc(g)).Params(Id("c").Op("*").Id("Config"), Id("l").Qual(modelPkg, "Limits")).Params(Id("p").Id(planType(g))).Block(body...)
	}
	return nil
}

func parenthesize(s string) string {
	for _, r := range s {
		if r == '+' || r == '-' || r == ' ' {
			return "(" + s + ")"
		}
	}
	return s
}

func holds(b *lower.Buffer) string {
	var names []string
	seen := map[string]bool{}
	for _, v := range b.Values {
		if !seen[v.Name] {
			seen[v.Name] = true
			names = append(names, v.Name)
		}
	}
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}
