package glue

import (
	"fmt"
	"regexp"
	"strings"

	. "github.com/dave/jennifer/jen"

	"tfc/compiler/lower"
)

// graphFile writes graph g's runner into f: the config values its forward reads (a type of
// their own, which every family running the graph fills from its values), its weight and plan
// structs (one line a group: their names, shapes and sizes are the program's runner spec) and
// its forward, which the registry declares as the runner of every family running the graph. It returns the config values the runner reads, in declaration
// order.
func (e *emitter) graphFile(f *File, g *lower.Graph) ([]string, error) {
	e.used = map[string]bool{}
	defer func() { e.used = nil }()
	t := lower.GoName(g.Name)
	fwd, sites, err := e.graphForward(g, t)
	if err != nil {
		return nil, err
	}
	if sites != g.Sites() {
		return nil, fmt.Errorf("graph %s: the forward has %d launch sites, the program %d", g.Name, sites, g.Sites())
	}
	var names []string
	for _, prm := range e.p.Params {
		if e.used[prm.Name] {
			names = append(names, prm.Name)
		}
	}
	f.Comment(fmt.Sprintf("%sConfig holds the config values graph %s reads.", t, g.Name))
	f.Type().Id(t + "Config").Struct(e.fieldGroups(names)...)
	f.Add(e.graphWeights(g, t))
	f.Add(e.graphPlan(g))
	for _, c := range fwd {
		f.Add(c)
	}
	return names, nil
}

// oneLine is a struct type of fields names, all of type typ, on one line.
func oneLine(names []string, typ Code) Code {
	var ids []Code
	for _, n := range names {
		ids = append(ids, Id(n))
	}
	return Op("struct{").List(ids...).Add(typ).Op("}")
}

// graphWeights is graph g's weight struct: its single tensors on one line, each per-layer group
// a slice on a line of its own.
func (e *emitter) graphWeights(g *lower.Graph, t string) Code {
	var top, groups []string
	fields := map[string][]string{}
	for _, w := range e.p.WeightsOf(g) {
		if w.Group == "" {
			top = append(top, w.Field)
			continue
		}
		if fields[w.Group] == nil {
			groups = append(groups, w.Group)
		}
		fields[w.Group] = append(fields[w.Group], w.Field)
	}
	var lines []Code
	if top != nil {
		var ids []Code
		for _, n := range top {
			ids = append(ids, Id(n))
		}
		lines = append(lines, List(ids...).Qual(devicePkg, "Tensor"))
	}
	for _, gr := range groups { // a blank line apart, so gofmt aligns nothing
		lines = append(lines, Line().Id(gr).Index().Add(oneLine(fields[gr], Qual(devicePkg, "Tensor"))).Comment("one a layer"))
	}
	return Comment(fmt.Sprintf("%sWeights holds the tensors graph %s reads, as 2-D views.", lowerFirst(t), g.Name)).Line().
		Add(Type().Id(lowerFirst(t) + "Weights").Struct(lines...))
}

// receiverFields is the line that names the runner's fields body reads (c, w and p for g.C, g.W
// and g.P), of those in names; nil when it reads none.
func receiverFields(body []Code, names ...string) []Code {
	src := Block(body...).GoString()
	var ids, vals []Code
	for _, n := range names {
		if regexp.MustCompile(`\b` + n + `\.`).MatchString(src) {
			ids = append(ids, Id(n))
			vals = append(vals, Op("&").Id("g").Dot(strings.ToUpper(n)))
		}
	}
	if ids == nil {
		return nil
	}
	return []Code{List(ids...).Op(":=").List(vals...)}
}
