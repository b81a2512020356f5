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

	// Plan
	dec := e.graph("decoder")
	var planBody []Code
	planBody = append(planBody, Id("c").Op(":=").Id("m").Dot("c"), Var().Id("out").Qual(modelPkg, "Plan"),
		For(List(Id("_"), Id("t")).Op(":=").Range().Id("m").Dot("tensors").Call(Op("&").Id("weights").Values())).Block(
			Id("out").Dot("Weights").Op("+=").Lit(2).Op("*").Int64().Call(Qual(modelPkg, "Elements").Call(Id("t").Dot("Shape"))),
		))
	for _, g := range p.Graphs {
		v := lowerFirst(lower.GoName(g.Name))
		planBody = append(planBody, Id(v).Op(":=").Id(planFunc(g)).Call(Id("c"), Id("l")))
		for _, a := range g.Arenas {
			planBody = append(planBody, Id("out").Dot("Activations").Op("+=").Lit(dtypeSize(a.DType)).Op("*").Int64().Call(Id(v).Dot("Size"+a.DType)))
		}
		planBody = append(planBody, Id("out").Dot("Buffers").Op("=").Append(Id("out").Dot("Buffers"), Id(v).Dot("buffers").Op("...")))
	}
	if cache := input(dec, "cache"); cache != nil {
		planBody = append(planBody, Id("out").Dot("KVCache").Op("=").Lit(2*4).Op("*").Int64().Call(Id(e.goExpr(cache.Rows, nil))).Op("*").Int64().Call(Id("cachePages").Call(Id("l")).Op("*").Id("l").Dot("PageSize").Op("*").Parens(Id(e.goExpr(cache.Cols, nil)))))
	}
	planBody = append(planBody, Return(Id("out")))
	f.Comment("Plan gives the bytes weights (as BF16), activations and the KV cache need at l.")
	f.Func().Params(Id("m").Op("*").Id("bound")).Id("Plan").Params(Id("l").Qual(modelPkg, "Limits")).Qual(modelPkg, "Plan").Block(planBody...)

	// Model
	fields := []Code{
		Id("b").Qual(devicePkg, "Backend"),
		Id("c").Op("*").Id("Config"),
		Id("lim").Qual(modelPkg, "Limits"),
		Id("w").Id("weights"),
		Id("kv").Index().Qual(devicePkg, "KVCache").Comment("one a layer"),
		Id("bufs").Op("*").Qual(modelPkg, "Buffers").Comment("everything Close frees"),
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

	// Load
	fail := func(msg string, args ...Code) Code {
		return Block(Id("md").Dot("Close").Call(), Return(Nil(), Qual("fmt", "Errorf").Call(append([]Code{Lit(msg)}, args...)...)))
	}
	load := []Code{
		Id("c").Op(":=").Id("m").Dot("c"),
		If(Err().Op(":=").Qual(modelPkg, "CheckLimits").Call(Lit(p.Family), Id("l")), Err().Op("!=").Nil()).Block(Return(Nil(), Err())),
		If(List(Id("sp"), Id("ok")).Op(":=").Id("b").Assert(Qual(devicePkg, "Specializer")), Id("ok")).Block(
			If(Err().Op(":=").Id("m").Dot("specialize").Call(Id("sp"), Id("l")), Err().Op("!=").Nil()).Block(Return(Nil(), Err())),
		).Else().If(Id("b").Dot("Name").Call().Op("!=").Lit("cpu")).Block(
			If(Id("bad").Op(":=").Id("c").Dot("unpinned").Call(Id("l")), Len(Id("bad")).Op(">").Lit(0)).Block(
				Return(Nil(), Qual("fmt", "Errorf").Call(Lit(fmt.Sprintf("the %%s backend runs kernels/%s.hip, specialised for other values: %%s; it cannot build kernels at load, so use the cpu, cuda or hip backend, or regenerate kernels/%s.hip for this checkpoint with tfc compile -specialize <checkpoint>/config.json %s and rebuild", p.Package, p.Package, p.Source)), Id("b").Dot("Name").Call(), Qual("strings", "Join").Call(Id("bad"), Lit("; ")))),
			),
		),
		If(Err().Op(":=").Id("m").Dot("Resolve").Call(Func().Params(Id("name").String()).Bool().Block(
			List(Id("_"), Id("_"), Err()).Op(":=").Id("get").Call(Id("name")),
			Return(Err().Op("==").Nil()),
		)), Err().Op("!=").Nil()).Block(Return(Nil(), Err())),
		Id("md").Op(":=").Op("&").Id("Model").Values(Dict{Id("b"): Id("b"), Id("c"): Id("c"), Id("lim"): Id("l"), Id("bufs"): Qual(modelPkg, "NewBuffers").Call(Id("b"))}),
		If(Err().Op(":=").Qual(modelPkg, "Upload").Call(Id("md").Dot("bufs"), Id("m").Dot("tensors").Call(Op("&").Id("md").Dot("w")), Id("get"), Lit(p.Family), Lit(p.Source)), Err().Op("!=").Nil()).Block(
			Id("md").Dot("Close").Call(), Return(Nil(), Err()),
		),
	}
	load = append(load, Var().Err().Error(), Id("_").Op("=").Err())
	for _, g := range p.Graphs {
		v := "md." + lowerFirst(lower.GoName(g.Name))
		load = append(load, Id(v).Op("=").Id(planFunc(g)).Call(Id("c"), Id("l")))
		for _, a := range g.Arenas {
			load = append(load,
				If(List(Id("md").Dot(arenaField(g, a)), Err()).Op("=").Id("md").Dot("bufs").Dot("Alloc").Call(Qual(devicePkg, a.DType), Id(v).Dot("Size"+a.DType)), Err().Op("!=").Nil()).Add(
					fail(fmt.Sprintf("%s arena of graph %s: %%w", a.DType, g.Name), Err()),
				))
		}
	}
	if cache := input(dec, "cache"); cache != nil {
		load = append(load,
			If(List(Id("md").Dot("kv"), Err()).Op("=").Qual(modelPkg, "KVCaches").Call(Id("md").Dot("bufs"), Id(e.goExpr(cache.Rows, nil)), Id("cachePages").Call(Id("l")).Op("*").Id("l").Dot("PageSize"), Id(e.goExpr(cache.Cols, nil))), Err().Op("!=").Nil()).Block(
				Id("md").Dot("Close").Call(), Return(Nil(), Err()),
			),
		)
	}
	load = append(load, Return(Id("md"), Nil()))
	f.Comment("Load uploads the weights through get and allocates the arenas and the KV cache for l. A backend")
	f.Comment(fmt.Sprintf("that builds kernels at run time is first given kernels/%s.hip specialised for this checkpoint.", p.Package))
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
	f.Comment("Close frees every buffer the model allocated.")
	f.Func().Params(Id("m").Op("*").Id("Model")).Id("Close").Params().Block(Id("m").Dot("bufs").Dot("Free").Call())

	// helpers
	f.Comment("cachePages is the number of KV cache pages: every sequence slot can hold Context tokens.")
	f.Func().Id("cachePages").Params(Id("l").Qual(modelPkg, "Limits")).Int().Block(
		Return(Id("l").Dot("Parallel").Op("*").Id(lower.MaxPages().Go(limitRef("l")))),
	)
	f.Comment("rsqrt is 1/√x.")
	f.Func().Id("rsqrt").Params(Id("x").Int()).Float64().Block(Return(Lit(1).Op("/").Qual("math", "Sqrt").Call(Float64().Call(Id("x")))))
	f.Comment("sumInts adds its arguments and the elements of int lists among them.")
	f.Func().Id("sumInts").Params(Id("xs").Op("...").Any()).Int().Block(
		Id("s").Op(":=").Lit(0),
		For(List(Id("_"), Id("x")).Op(":=").Range().Id("xs")).Block(
			Switch(Id("x").Op(":=").Id("x").Assert(Type())).Block(
				Case(Int()).Block(Id("s").Op("+=").Id("x")),
				Case(Index().Int()).Block(For(List(Id("_"), Id("v")).Op(":=").Range().Id("x")).Block(Id("s").Op("+=").Id("v"))),
			),
		),
		Return(Id("s")),
	)
	f.Comment("pick is cond ? a : b.")
	f.Func().Id("pick").Types(Id("T").Any()).Params(Id("cond").Bool(), Id("a"), Id("b").Id("T")).Id("T").Block(
		If(Id("cond")).Block(Return(Id("a"))),
		Return(Id("b")),
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
