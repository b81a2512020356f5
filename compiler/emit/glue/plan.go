package glue

import (
	"fmt"

	. "github.com/dave/jennifer/jen"

	"tfc/compiler/lower"
)

func planType(g *lower.Graph) string { return lowerFirst(lower.GoName(g.Name)) + "Plan" }

// graphPlan is graph g's plan struct, on one line: the offsets of its buffers in elements,
// which the runner places from its spec.
func (e *emitter) graphPlan(g *lower.Graph) Code {
	var names []string
	for _, a := range g.Arenas {
		for _, b := range a.Buffers {
			names = append(names, lower.GoName(b.Name))
		}
	}
	return Comment(fmt.Sprintf("%s holds the offsets, in elements, of graph %s's buffers in its arenas.", planType(g), g.Name)).Line().
		Add(Type().Id(planType(g)).Add(oneLine(names, Int())))
}

// arenaRef is arena a of the graph in the call's launcher: l.F32 or l.I32.
func arenaRef(a *lower.Arena) string {
	if a.DType == "I32" {
		return "l.I32"
	}
	return "l.F32"
}
