package glue

import (
	"fmt"
	"strings"

	. "github.com/dave/jennifer/jen"

	"tfc/compiler/lower"
)

func planType(g *lower.Graph) string { return lowerFirst(lower.GoName(g.Name)) + "Plan" }
func planFunc(g *lower.Graph) string { return "plan" + lower.GoName(g.Name) }

// arenaRef is arena a of the graph in the call's launcher: l.F32 or l.I32.
func arenaRef(a *lower.Arena) string {
	if a.DType == "I32" {
		return "l.I32"
	}
	return "l.F32"
}

func dtypeSize(dt string) int {
	if dt == "BF16" || dt == "F16" {
		return 2
	}
	return 4
}

// graphPlan is graph g's memory plan: buffer offsets and arena sizes in elements as functions of
// the limits, and the byte totals Plan reports.
func (e *emitter) graphPlan(g *lower.Graph, t string) []Code {
	var fields []Code
	for _, a := range g.Arenas {
		for _, b := range a.Buffers {
			fields = append(fields, Id(lower.GoName(b.Name)).Int().Comment(fmt.Sprintf("%s arena; holds %s", a.DType, holds(b))))
		}
	}
	fields = append(fields, Qual(modelPkg, "GraphPlan").Comment("the arenas' elements and buffers"))
	var out []Code
	out = append(out, Comment(fmt.Sprintf("%s places the %s graph's buffers (offsets in elements) in its arenas.", planType(g), g.Name)).Line().Add(Type().Id(planType(g)).Struct(fields...)))

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
	plan := Dict{Id("Name"): Lit(g.Name)}
	var bufs []Code
	for _, a := range g.Arenas {
		plan[Id(a.DType)] = Id(arena(a)).Dot("Size")
		bufs = append(bufs, Id(arena(a)).Dot("Buffers"))
	}
	all := bufs[0]
	for _, b := range bufs[1:] {
		all = Append(all, Add(b).Op("..."))
	}
	plan[Id("Buffers")] = all
	body = append(body, Id("p.GraphPlan").Op("=").Qual(modelPkg, "GraphPlan").Values(plan))
	body = append(body, Return())
	out = append(out, Func().Id(planFunc(g)).Params(Id("c").Op("*").Id(t+"Config"), Id("l").Qual(modelPkg, "Limits")).Params(Id("p").Id(planType(g))).Block(body...))
	return out
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
