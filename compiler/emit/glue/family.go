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
	reg := Dict{
		Id("Name"):          Lit(p.Family),
		Id("ModelTypes"):    strs(p.ModelTypes),
		Id("Architectures"): strs(p.Architectures),
		Id("Graph"):         Lit(p.Source),
		Id("Kernels"):       Lit(p.Package),
		Id("KernelsPage"):   Lit(p.SpecPageSize),
		Id("Prefixes"):      Id("prefixes"),
		Id("Program"):       Id("program"),
	}
	if p.OCR != nil {
		reg[Id("OCR")] = Op("&").Qual(modelPkg, "OCR").Values(Dict{
			Id("Prompt"): Lit(p.OCR.Prompt),
			Id("DPI"):    Lit(p.OCR.DPI),
		})
	}
	f.Comment("family is the registration: names, where the kernels are, prefixes and program; Bind is")
	f.Comment("model.BindWith over bound's methods.")
	f.Var().Id("family").Op("=").Op("&").Qual(modelPkg, "Family").Values(reg)
	f.Func().Id("init").Params().Block(
		Id("family").Dot("Bind").Op("=").Qual(modelPkg, "BindWith").Call(Id("family"), Id("bind")),
		Qual(modelPkg, "Register").Call(Id("family")),
	)
	dec := e.graph("decoder")

	// Model
	fields := []Code{
		Op("*").Qual(modelPkg, "Base").Comment("backend, limits, KV cache and arenas; Close"),
		Id("c").Op("*").Id("Config"),
		Id("w").Id("weights"),
	}
	var newModel, plans []Code
	newModel = append(newModel, field("c", Id("c")))
	for _, g := range p.Graphs {
		v := lowerFirst(lower.GoName(g.Name))
		fields = append(fields, Id(v).Id(planType(g)))
		newModel = append(newModel, field(v, Id(planFunc(g)).Call(Id("c"), Id("l"))))
		plans = append(plans, Id("m").Dot(v).Dot("GraphPlan"))
	}
	fields = append(fields, Line().Comment("Trace, when set, sees the output of every launch, by the graph's name for it."),
		Id("Trace").Func().Params(Id("k").Op("*").Qual(devicePkg, "Kernel"), Id("name").String(), Id("out").Qual(devicePkg, "Tensor")))
	f.Comment(fmt.Sprintf("Model is %s loaded on a backend. Its graphs share nothing but the weights; calls of one", p.Family))
	f.Comment("graph reuse that graph's arenas, so they must not overlap.")
	f.Type().Id("Model").Struct(fields...)

	kv := Return(Lit(0), Lit(0))
	if cache := input(dec, "cache"); cache != nil {
		kv = Return(Id(e.goExpr(lower.FromDim(cache.Rows), nil)), Id(e.goExpr(lower.FromDim(cache.Cols), nil)))
	}
	recv := func(name string) *Statement {
		return f.Func().Params(Id("b").Id("bound")).Id(name)
	}
	f.Comment("bound is the family's config bound to a checkpoint, as model.BindWith takes it.")
	f.Type().Id("bound").Struct(Id("c").Op("*").Id("Config"))
	f.Comment("bind reads config.json through cfg (readConfig).")
	f.Func().Id("bind").Params(Id("cfg").Qual(modelPkg, "Config")).Params(Id("bound"), Error()).Block(
		List(Id("c"), Err()).Op(":=").Id("readConfig").Call(Id("cfg")),
		Return(Id("bound").Values(Id("c")), Err()))
	f.Comment("Table lists every bound value.")
	recv("Table").Params().Index().Qual(modelPkg, "ConfigValue").Block(Return(Id("b").Dot("c").Dot("table").Call()))
	f.Comment("KV is the KV cache's layers and width.")
	recv("KV").Params().Params(Int(), Int()).Block(Id("c").Op(":=").Id("b").Dot("c"), kv)
	f.Comment("Weights is the manifest, names resolved with the chosen prefix alternatives.")
	recv("Weights").Params(Id("chosen").Map(String()).String()).Index().Qual(modelPkg, "Weight").Block(
		Return(Id("tensors").Call(Id("b").Dot("c"), Id("chosen"), Op("&").Id("weights").Values())))
	f.Comment("New is the family at limits l before loading: the manifest loading into its weights, its graphs' plans.")
	recv("New").Params(Id("l").Qual(modelPkg, "Limits"), Id("chosen").Map(String()).String()).Qual(modelPkg, "Parts").Block(
		Id("c").Op(":=").Id("b").Dot("c"),
		Id("m").Op(":=").Op("&").Id("Model").Values(newModel...),
		Return(Qual(modelPkg, "Parts").Values(
			field("Weights", Id("tensors").Call(Id("c"), Id("chosen"), Op("&").Id("m").Dot("w"))),
			field("Graphs", Index().Qual(modelPkg, "GraphPlan").Values(plans...)),
			field("Model", Id("m")),
			field("Attach", Func().Params(Id("b").Op("*").Qual(modelPkg, "Base")).Block(Id("m").Dot("Base").Op("=").Id("b"))))),
	)

	f.Anon("embed")
	f.Comment(fmt.Sprintf("program is %s compiled for specialising at load (package specialize): its config", p.Source))
	f.Comment("values, requirements and kernels with symbolic constants.")
	f.Comment("")
	f.Comment("//go:embed program.json")
	f.Var().Id("program").Index().Byte()

	// Info
	info := Dict{}
	if dec != nil {
		info[Id("Vocab")] = Id(e.goExpr(lower.FromDim(dec.Output.Cols), nil))
		if v := input(dec, "image_rows"); v != nil {
			info[Id("Hidden")] = Id(e.goExpr(lower.FromDim(v.Cols), nil))
		}
		if v := input(dec, "positions"); v != nil {
			info[Id("PositionAxes")] = Id(e.goExpr(lower.FromDim(v.Cols), nil))
		}
		if v := input(dec, "cache"); v != nil {
			info[Id("Layers")] = Id(e.goExpr(lower.FromDim(v.Rows), nil))
			info[Id("KVWidth")] = Id(e.goExpr(lower.FromDim(v.Cols), nil))
		}
	}
	if v := input(e.graph("vision"), "pixels"); v != nil {
		info[Id("PixelCols")] = Id(e.goExpr(lower.FromDim(v.Cols), nil))
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
