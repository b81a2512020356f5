package glue

import (
	"fmt"
	"strings"

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
		for _, d := range g.Sizes {
			body = append(body, Id(d.Name).Op(":=").Id(lower.FromDim(d.Limit).Go(limitRef("l"))), Id("_").Op("=").Id(d.Name))
		}
		ref := func(x *lower.Expr) string { return e.goExpr(x, limitRef("l")) }
		arena := func(a *lower.Arena) string { return strings.ToLower(a.DType) }
		var names []Code
		for _, a := range g.Arenas {
			names = append(names, Id(arena(a)))
		}
		body = append(body, Var().List(names...).Qual(modelPkg, "Arena"))
		for _, a := range g.Arenas {
			for _, b := range a.Buffers {
				body = append(body, Id("p."+lower.GoName(b.Name)).Op("=").Id(arena(a)).Dot("Place").Call(Lit(g.Name+"."+b.Name), Lit(dtypeSize(a.DType)), Id(ref(b.Size))))
			}
		}
		var sizes, vals, bufs []Code
		for _, a := range g.Arenas {
			sizes = append(sizes, Id("p.Size"+a.DType))
			vals = append(vals, Id(arena(a)).Dot("Size"))
			bufs = append(bufs, Id(arena(a)).Dot("Buffers"))
		}
		body = append(body, List(sizes...).Op("=").List(vals...))
		all := Id(arena(g.Arenas[0])).Dot("Buffers")
		if len(bufs) > 1 {
			all = Append(bufs[0], Add(bufs[1]).Op("..."))
			for _, b := range bufs[2:] {
				all = Append(all, Add(b).Op("..."))
			}
		}
		body = append(body, Id("p.buffers").Op("=").Add(all))
		body = append(body, Return())
		f.Func().Id(planFunc(g)).Params(Id("c").Op("*").Id("Config"), Id("l").Qual(modelPkg, "Limits")).Params(Id("p").Id(planType(g))).Block(body...)
	}
	return nil
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
