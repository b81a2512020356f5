package glue

import (
	"fmt"
	"regexp"
	"strings"

	. "github.com/dave/jennifer/jen"

	"tfc/compiler/lower"
)

// graphFile writes graph g's runner into f: the config values it reads (a type of their own,
// which every family running the graph fills from its config), its weights and their manifest as
// this family declares them, its memory plan, its launch sites and its forward. It returns the
// config values the runner reads, in declaration order.
func (e *emitter) graphFile(f *File, g *lower.Graph) ([]string, error) {
	e.used = map[string]bool{}
	defer func() { e.used = nil }()
	t := lower.GoName(g.Name)
	w := e.graphWeights(g, t)
	plan := e.graphPlan(g, t)
	fwd, sites, err := e.graphForward(g, t)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, prm := range e.p.Params {
		if e.used[prm.Name] {
			names = append(names, prm.Name)
		}
	}

	f.Comment(fmt.Sprintf("%sConfig holds the config values graph %s (%s) reads; each family running the", t, g.Name, lineOf(g.Pos)))
	f.Comment("graph fills it from its own config.")
	f.Type().Id(t + "Config").Struct(e.fieldGroups(names)...)
	f.Comment(fmt.Sprintf("%s is graph %s at a family's config and limits: its weights, its memory plan and", t, g.Name))
	f.Comment("its kernels.")
	runner := Qual(modelPkg, "Runner").Types(Id(t+"Config"), Id(lowerFirst(t)+"Weights"), Id(planType(g)))
	f.Type().Id(t).Struct(runner)
	f.Comment(fmt.Sprintf("New%s is graph %s at config c and limits l, launching the kernels of", t, g.Name))
	f.Comment("kernels/gen/KERNELS.hip.")
	f.Func().Id("New"+t).Params(Id("c").Id(t+"Config"), Id("l").Qual(modelPkg, "Limits"), Id("kernels").String()).Op("*").Id(t).Block(
		Return(Op("&").Id(t).Values(Qual(modelPkg, "NewRunner").Types(Id(t+"Config"), Id(lowerFirst(t)+"Weights")).Call(Id("c"), Id("l"), Id("kernels"), Lit(sites), Id(planFunc(g))))))
	for _, c := range w {
		f.Add(c)
	}
	for _, c := range plan {
		f.Add(c)
	}
	for _, c := range fwd {
		f.Add(c)
	}
	return names, nil
}

// graphWeightSet lists the weights graph g reads, in declaration order.
func (e *emitter) graphWeightSet(g *lower.Graph) []*lower.Weight {
	used := map[*lower.Weight]bool{}
	var visit func(v *lower.Value)
	visit = func(v *lower.Value) {
		if v == nil {
			return
		}
		switch v.Kind {
		case lower.WeightRef:
			used[v.Weight] = true
		case lower.Select:
			visit(v.Then)
			visit(v.Else)
		case lower.Alias, lower.View:
			visit(v.Base)
		}
	}
	g.Walk(func(l *lower.Launch, _ []*lower.Loop) {
		for _, op := range l.Ops {
			for _, a := range op.Args {
				visit(a.Value)
			}
		}
	})
	var out []*lower.Weight
	for _, w := range e.p.Weights {
		if used[w] {
			out = append(out, w)
		}
	}
	return out
}

// graphWeights is graph g's weight struct (its per-layer families a type each) and its manifest:
// every tensor it reads, named as this family declares it.
func (e *emitter) graphWeights(g *lower.Graph, t string) []Code {
	ws := e.graphWeightSet(g)
	var groups []string
	seen := map[string]bool{}
	var top []Code
	groupFields := map[string][]Code{}
	for _, w := range ws {
		c := Id(w.Field).Qual(devicePkg, "Tensor").Comment(w.Display() + " " + shapeText(w.Shape))
		if w.Group == "" {
			top = append(top, c)
			continue
		}
		if !seen[w.Group] {
			seen[w.Group] = true
			groups = append(groups, w.Group)
		}
		groupFields[w.Group] = append(groupFields[w.Group], c)
	}
	gtype := func(group string) string { return lowerFirst(t) + group }
	for _, gr := range groups {
		top = append(top, Id(gr).Index().Id(gtype(gr)).Comment("one a layer"))
	}
	var out []Code
	out = append(out, Comment(fmt.Sprintf("%sWeights holds the tensors graph %s reads, as 2-D views.", lowerFirst(t), g.Name)).Line().Add(Type().Id(lowerFirst(t)+"Weights").Struct(top...)))
	for _, gr := range groups {
		out = append(out, Comment(fmt.Sprintf("%s is one layer of %s.", gtype(gr), gr)).Line().Add(Type().Id(gtype(gr)).Struct(groupFields[gr]...)))
	}

	var body []Code
	body = append(body, Var().Id("out").Index().Qual(modelPkg, "Weight"))
	count := map[string]*lower.Expr{}
	for _, w := range ws {
		if w.Group != "" && count[w.Group] == nil {
			count[w.Group] = lower.FromDim(w.Count)
		}
	}
	for _, gr := range groups {
		body = append(body, Id("w").Dot(gr).Op("=").Make(Index().Id(gtype(gr)), Id(e.goExpr(count[gr], nil))))
	}
	name := func(w *lower.Weight) Code {
		pfx := Lit("")
		path := w.Path
		if w.Prefix != "" {
			pfx = Id("prefix").Index(Lit(w.Prefix))
			path = "." + path
		}
		if w.Index == "" && w.Prefix == "" {
			return Lit(path)
		}
		if w.Index == "" {
			return Add(pfx).Op("+").Lit(path)
		}
		parts := strings.SplitN(path, "{i}", 2)
		return Add(pfx).Op("+").Lit(parts[0]).Op("+").Qual("strconv", "Itoa").Call(Id("i")).Op("+").Lit(parts[1])
	}
	weight := func(w *lower.Weight, dst Code) Code {
		var shape []Code
		for _, d := range w.Shape {
			shape = append(shape, Id(e.goExpr(lower.FromDim(d), nil)))
		}
		stmt := Id("out").Op("=").Append(Id("out"), Qual(modelPkg, "WeightAt").Call(name(w), Index().Int().Values(shape...), dst))
		if w.Cond != nil {
			stmt = If(Id(e.goExpr(w.Cond, nil))).Block(stmt)
		}
		return stmt.Comment(lineOf(w.Pos))
	}
	emitted := map[string]bool{}
	for _, w := range ws {
		if w.Group == "" {
			body = append(body, weight(w, Op("&").Id("w").Dot(w.Field)))
			continue
		}
		if emitted[w.Group] {
			continue
		}
		emitted[w.Group] = true
		loop := []Code{Id("l").Op(":=").Op("&").Id("w").Dot(w.Group).Index(Id("i"))}
		for _, x := range ws {
			if x.Group == w.Group {
				loop = append(loop, weight(x, Op("&").Id("l").Dot(x.Field)))
			}
		}
		body = append(body, For(Id("i").Op(":=").Lit(0), Id("i").Op("<").Id(e.goExpr(count[w.Group], nil)), Id("i").Op("++")).Block(loop...))
	}
	body = append(body, Return(Id("out")))
	body = append(receiverFields(body, "c", "w"), body...)
	out = append(out, Comment(fmt.Sprintf("Weights lists the tensors graph %s reads, named as %s declares them with", g.Name, e.p.Source)).Line().
		Comment("the chosen prefixes, each loading into g's weights.").Line().Add(Func().Params(Id("g").Op("*").Id(t)).Id("Weights").Params(Id("prefix").Map(String()).String()).Index().Qual(modelPkg, "Weight").Block(body...)))
	return out
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
