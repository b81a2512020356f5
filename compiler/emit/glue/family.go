package glue

import (
	"fmt"

	. "github.com/dave/jennifer/jen"

	"tfc/compiler/lower"
)

func (e *emitter) graph(role string) *lower.Graph {
	for _, g := range e.p.Graphs {
		if g.Role == role {
			return g
		}
	}
	return nil
}

func (e *emitter) rule(kind string) *lower.Rule {
	for _, r := range e.p.Rules {
		if r.Kind == kind {
			return r
		}
	}
	return nil
}

func input(g *lower.Graph, role string) *lower.Value {
	if g == nil {
		return nil
	}
	for _, v := range g.Inputs {
		if v.Role == role {
			return v
		}
	}
	return nil
}

// lines puts each item of a composite literal on a line of its own.
func lines(items []Code) []Code {
	var out []Code
	for _, c := range items {
		out = append(out, Line().Add(c))
	}
	return append(out, Line())
}

// family writes the registration, Bind, the bound family (Values, Plan, Load) and the Model.
func (e *emitter) family(f *File) error {
	p := e.p
	f.Func().Id("init").Params().Block(
		Qual(modelPkg, "Register").Call(Op("&").Qual(modelPkg, "Family").Values(Dict{
			Id("Name"):          Lit(p.Family),
			Id("ModelTypes"):    strs(p.ModelTypes),
			Id("Architectures"): strs(p.Architectures),
			Id("Graph"):         Lit(p.Source),
			Id("Bind"):          Id("Bind"),
		})),
	)
	prefixes := Dict{}
	for _, pf := range p.Prefixes {
		prefixes[Lit(pf.Name)] = Lit(pf.Alts[0])
	}
	f.Comment("Bind reads config.json through cfg and returns the family bound to its values.")
	f.Func().Id("Bind").Params(Id("cfg").Qual(modelPkg, "Config")).Params(Qual(modelPkg, "Bound"), Error()).Block(
		List(Id("c"), Err()).Op(":=").Id("readConfig").Call(Id("cfg")),
		If(Err().Op("!=").Nil()).Block(Return(Nil(), Err())),
		Return(Op("&").Id("bound").Values(Dict{Id("cfg"): Id("cfg"), Id("c"): Id("c"), Id("prefix"): Map(String()).String().Values(prefixes)}), Nil()),
	)
	f.Comment("bound is the family bound to one checkpoint's config (cfg, read into c); prefix holds the chosen alternative of each name prefix.")
	f.Type().Id("bound").Struct(Id("cfg").Qual(modelPkg, "Config"), Id("c").Op("*").Id("Config"), Id("prefix").Map(String()).String())
	f.Comment("Values lists the bound config values in declaration order.")
	f.Func().Params(Id("m").Op("*").Id("bound")).Id("Values").Params().Index().Qual(modelPkg, "Value").Block(Return(Id("m").Dot("c").Dot("values").Call()))

	dec := e.graph("decoder")

	// Model
	fields := []Code{
		Op("*").Qual(modelPkg, "Base").Comment("backend, limits, KV cache and arenas; Close"),
		Id("c").Op("*").Id("Config"),
		Id("w").Id("weights"),
	}
	for _, g := range p.Graphs {
		fields = append(fields, Id(lowerFirst(lower.GoName(g.Name))).Id(planType(g)))
		for _, a := range g.Arenas {
			fields = append(fields, Id(arenaField(g, a)).Qual(devicePkg, "Buffer"))
		}
	}
	fields = append(fields, Line().Comment("Trace, when set, sees the output of every launch, by the graph's name for it."),
		Id("Trace").Func().Params(Id("k").Op("*").Qual(devicePkg, "Kernel"), Id("name").String(), Id("out").Qual(devicePkg, "Tensor")))
	f.Comment(fmt.Sprintf("Model is %s loaded on a backend. Its graphs share nothing but the weights; calls of one", p.Family))
	f.Comment("graph reuse that graph's arenas, so they must not overlap.")
	f.Type().Id("Model").Struct(fields...)

	// layout
	newModel := []Code{field("c", Id("c"))}
	var graphs []Code
	for _, g := range p.Graphs {
		v := lowerFirst(lower.GoName(g.Name))
		newModel = append(newModel, field(v, Id(planFunc(g)).Call(Id("c"), Id("l"))))
		gp := []Code{field("Name", Lit(g.Name)), field("Buffers", Id("md").Dot(v).Dot("buffers"))}
		for _, a := range g.Arenas {
			gp = append(gp, field(a.DType, Id("md").Dot(v).Dot("Size"+a.DType)))
		}
		graphs = append(graphs, Values(gp...))
	}
	ly := []Code{
		field("Family", Lit(p.Family)), field("Graph", Lit(p.Source)), field("Kernels", Lit(p.Package)),
		field("Weights", Id("m").Dot("tensors").Call(Op("&").Id("md").Dot("w"))),
		field("Graphs", Index().Qual(modelPkg, "GraphPlan").Values(lines(graphs)...)),
		field("Specialize", Id("m").Dot("specialize")), field("Unpinned", Id("m").Dot("c").Dot("unpinned")), field("Resolve", Id("m").Dot("Resolve")),
	}
	if cache := input(dec, "cache"); cache != nil {
		ly = append(ly, field("KVLayers", Id(e.goExpr(cache.Rows, nil))), field("KVWidth", Id(e.goExpr(cache.Cols, nil))))
	}
	f.Comment("layout is the family at l before loading, and what Load and Plan share.")
	f.Func().Params(Id("m").Op("*").Id("bound")).Id("layout").Params(Id("l").Qual(modelPkg, "Limits")).Params(Op("*").Id("Model"), Qual(modelPkg, "Layout")).Block(
		Id("c").Op(":=").Id("m").Dot("c"),
		Id("md").Op(":=").Op("&").Id("Model").Values(newModel...),
		Return(Id("md"), Qual(modelPkg, "Layout").Values(lines(ly)...)),
	)
	f.Comment("Plan gives the bytes weights (as BF16), activations and the KV cache need at l.")
	f.Func().Params(Id("m").Op("*").Id("bound")).Id("Plan").Params(Id("l").Qual(modelPkg, "Limits")).Qual(modelPkg, "Plan").Block(
		List(Id("_"), Id("ly")).Op(":=").Id("m").Dot("layout").Call(Id("l")),
		Return(Id("ly").Dot("Plan").Call(Id("l"))),
	)

	// Load
	load := []Code{
		List(Id("md"), Id("ly")).Op(":=").Id("m").Dot("layout").Call(Id("l")),
		List(Id("base"), Err()).Op(":=").Qual(modelPkg, "LoadBase").Call(Id("b"), Id("l"), Id("ly"), Id("get")),
		If(Err().Op("!=").Nil()).Block(Return(Nil(), Err())),
		Id("md").Dot("Base").Op("=").Id("base"),
	}
	for gi, g := range p.Graphs {
		for _, a := range g.Arenas {
			k := 0
			if a.DType == "I32" {
				k = 1
			}
			load = append(load, Id("md").Dot(arenaField(g, a)).Op("=").Id("base").Dot("Arenas").Index(Lit(gi)).Index(Lit(k)))
		}
	}
	load = append(load, Return(Id("md"), Nil()))
	f.Comment("Load uploads the weights through get and allocates the arenas and the KV cache for l (model.LoadBase).")
	f.Func().Params(Id("m").Op("*").Id("bound")).Id("Load").Params(
		Id("b").Qual(devicePkg, "Backend"), Id("l").Qual(modelPkg, "Limits"),
		Id("get").Func().Params(Id("name").String()).Params(Index().Byte(), Qual(devicePkg, "DType"), Error()),
	).Params(Qual(modelPkg, "Model"), Error()).Block(load...)

	f.ImportName(specializePkg, "specialize")
	f.Anon("embed")
	f.Comment(fmt.Sprintf("program is %s compiled for specialising at load (package specialize): its config", p.Source))
	f.Comment("values, requirements and kernels with symbolic constants.")
	f.Comment("")
	f.Comment("//go:embed program.json")
	f.Var().Id("program").Index().Byte()
	f.Comment(fmt.Sprintf("specialize renders the kernels of %s for this checkpoint's config and l's page size and", p.Source))
	f.Comment(fmt.Sprintf("gives them to b as kernels/%s.hip and its schedule.", p.Package))
	f.Func().Params(Id("m").Op("*").Id("bound")).Id("specialize").Params(Id("b").Qual(devicePkg, "Specializer"), Id("l").Qual(modelPkg, "Limits")).Error().Block(
		List(Id("prog"), Err()).Op(":=").Qual(specializePkg, "Decode").Call(Id("program")),
		If(Err().Op("!=").Nil()).Block(Return(Err())),
		List(Id("ks"), Err()).Op(":=").Id("prog").Dot("Source").Call(Id("m").Dot("cfg"), Id("l").Dot("PageSize")),
		If(Err().Op("!=").Nil()).Block(Return(Qual("fmt", "Errorf").Call(Lit(fmt.Sprintf("specialising kernels/%s.hip for this checkpoint: %%w", p.Package)), Err()))),
		Return(Id("b").Dot("SpecializeFamily").Call(Lit(p.Package), Id("ks"))),
	)

	// Info
	info := Dict{}
	if dec != nil {
		info[Id("Vocab")] = Id(e.goExpr(dec.Output.Cols, nil))
		if v := input(dec, "image_rows"); v != nil {
			info[Id("Hidden")] = Id(e.goExpr(v.Cols, nil))
		}
		if v := input(dec, "positions"); v != nil {
			info[Id("PositionAxes")] = Id(e.goExpr(v.Cols, nil))
		}
		if v := input(dec, "cache"); v != nil {
			info[Id("Layers")] = Id(e.goExpr(v.Rows, nil))
			info[Id("KVWidth")] = Id(e.goExpr(v.Cols, nil))
		}
	}
	if v := input(e.graph("vision"), "pixels"); v != nil {
		info[Id("PixelCols")] = Id(e.goExpr(v.Cols, nil))
	}
	if r := e.rule("image"); r != nil {
		info[Id("Image")] = Lit(r.Name)
		if a := r.Arg("merge"); a != nil {
			info[Id("Merge")] = Id(e.goExpr(a, nil))
		}
		if a := r.Arg("image_token"); a != nil {
			info[Id("ImageToken")] = Id(e.goExpr(a, nil))
		}
	}
	if r := e.rule("positions"); r != nil {
		info[Id("Positions")] = Lit(r.Name)
		for _, k := range []struct{ arg, field string }{{"image_token", "ImageToken"}, {"vision_start", "VisionStart"}, {"vision_start_token", "VisionStart"}} {
			if a := r.Arg(k.arg); a != nil {
				info[Id(k.field)] = Id(e.goExpr(a, nil))
			}
		}
	}
	f.Comment("Info describes the loaded family to the runtime.")
	f.Func().Params(Id("m").Op("*").Id("Model")).Id("Info").Params().Qual(modelPkg, "Info").Block(
		Id("c").Op(":=").Id("m").Dot("c"), Id("_").Op("=").Id("c"),
		Return(Qual(modelPkg, "Info").Values(info)),
	)
	return nil
}

const (
	specializePkg = "tfc/compiler/specialize"
)

func strs(xs []string) Code {
	var out []Code
	for _, x := range xs {
		out = append(out, Lit(x))
	}
	return Index().String().Values(out...)
}
