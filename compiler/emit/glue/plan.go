package glue

import (
	"fmt"

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

// graphPlan is graph g's memory plan: the offsets of its buffers in elements (a struct the
// runner keeps) and its arenas' sizes, as functions of the limits, placed by model.Arenas.
func (e *emitter) graphPlan(g *lower.Graph, t string) []Code {
	var fields []Code
	for _, a := range g.Arenas {
		for _, b := range a.Buffers {
			fields = append(fields, Id(lower.GoName(b.Name)).Int().Comment(fmt.Sprintf("%s arena; holds %s", a.DType, holds(b))))
		}
	}
	var out []Code
	out = append(out, Comment(fmt.Sprintf("%s holds the offsets, in elements, of the %s graph's buffers in its arenas.", planType(g), g.Name)).Line().Add(Type().Id(planType(g)).Struct(fields...)))

	ref := func(x *lower.Expr) string { return e.goExpr(x, limitRef("l")) }
	read := map[string]bool{}
	for _, a := range g.Arenas {
		for _, b := range a.Buffers {
			for _, r := range b.Size.Refs() {
				read[r] = true
			}
		}
	}
	body := []Code{}
	for _, d := range g.Sizes {
		if read[d.Name] {
			body = append(body, Id(d.Name).Op(":=").Id(lower.FromDim(d.Limit).Go(limitRef("l"))))
		}
	}
	body = append(body, Var().Id("p").Id(planType(g)), Id("a").Op(":=").Qual(modelPkg, "NewArenas").Call(Lit(g.Name)))
	for _, a := range g.Arenas {
		place := "F32"
		if a.DType == "I32" {
			place = "I32"
		}
		for _, b := range a.Buffers {
			body = append(body, Id("p."+lower.GoName(b.Name)).Op("=").Id("a").Dot(place).Call(Lit(b.Name), Id(ref(b.Size))))
		}
	}
	body = append(body, Return(Id("p"), Id("a").Dot("Plan").Call()))
	out = append(out, Comment(fmt.Sprintf("%s places graph %s's buffers at config c and limits l.", planFunc(g), g.Name)).Line().
		Add(Func().Id(planFunc(g)).Params(Id("c").Op("*").Id(t+"Config"), Id("l").Qual(modelPkg, "Limits")).Params(Id(planType(g)), Qual(modelPkg, "GraphPlan")).Block(body...)))
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
