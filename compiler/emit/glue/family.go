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
		Id("Bind"):          Id("Bind"),
	}
	if p.OCR != nil {
		reg[Id("OCR")] = Op("&").Qual(modelPkg, "OCR").Values(Dict{
			Id("Prompt"): Lit(p.OCR.Prompt),
			Id("DPI"):    Lit(p.OCR.DPI),
		})
	}
	f.Func().Id("init").Params().Block(
		Qual(modelPkg, "Register").Call(Op("&").Qual(modelPkg, "Family").Values(reg)),
	)
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

	// Bind: the shared model.Glue over this family's tables
	chosen := Dict{}
	for _, pf := range p.Prefixes {
		chosen[Lit(pf.Name)] = Lit(pf.Alts[0])
	}
	newModel := []Code{field("c", Id("c"))}
	var graphs, attach []Code
	for gi, g := range p.Graphs {
		v := lowerFirst(lower.GoName(g.Name))
		newModel = append(newModel, field(v, Id(planFunc(g)).Call(Id("c"), Id("l"))))
		gp := []Code{field("Name", Lit(g.Name)), field("Buffers", Id("md").Dot(v).Dot("buffers"))}
		for _, a := range g.Arenas {
			gp = append(gp, field(a.DType, Id("md").Dot(v).Dot("Size"+a.DType)))
			k := 0
			if a.DType == "I32" {
				k = 1
			}
			attach = append(attach, Id("md").Dot(arenaField(g, a)).Op("=").Id("base").Dot("Arenas").Index(Lit(gi)).Index(Lit(k)))
		}
		graphs = append(graphs, Values(gp...))
	}
	attach = append([]Code{Id("md").Dot("Base").Op("=").Id("base")}, append(attach, Return(Id("md")))...)
	ly := []Code{
		field("Family", Lit(p.Family)), field("Graph", Lit(p.Source)), field("Kernels", Lit(p.Package)),
		field("Weights", Id("tensors").Call(Id("c"), Id("g").Dot("Chosen"), Op("&").Id("md").Dot("w"))),
		field("Graphs", Index().Qual(modelPkg, "GraphPlan").Values(lines(graphs)...)),
		field("Specialize", Qual(specializePkg, "Loader").Call(Id("program"), Id("cfg"), Lit(p.Package))),
		field("Unpinned", Id("c").Dot("unpinned")), field("Resolve", Id("g").Dot("Resolve")),
	}
	if cache := input(dec, "cache"); cache != nil {
		ly = append(ly, field("KVLayers", Id(e.goExpr(lower.FromDim(cache.Rows), nil))), field("KVWidth", Id(e.goExpr(lower.FromDim(cache.Cols), nil))))
	}
	f.Comment("Bind reads config.json through cfg and returns the family bound to its values (model.Glue over")
	f.Comment("the family's tables).")
	f.Func().Id("Bind").Params(Id("cfg").Qual(modelPkg, "Config")).Params(Qual(modelPkg, "Bound"), Error()).Block(
		List(Id("c"), Err()).Op(":=").Id("readConfig").Call(Id("cfg")),
		If(Err().Op("!=").Nil()).Block(Return(Nil(), Err())),
		Id("g").Op(":=").Op("&").Qual(modelPkg, "Glue").Values(field("Family", Lit(p.Family)), field("Table", Id("c").Dot("table").Call()),
			field("Prefixes", Id("prefixes")), field("Chosen", Map(String()).String().Values(chosen))),
		Id("g").Dot("Weights").Op("=").Func().Params().Index().Qual(modelPkg, "Weight").Block(
			Return(Id("tensors").Call(Id("c"), Id("g").Dot("Chosen"), Op("&").Id("weights").Values()))),
		Id("g").Dot("Layout").Op("=").Func().Params(Id("l").Qual(modelPkg, "Limits")).Params(Qual(modelPkg, "Layout"), Func().Params(Op("*").Qual(modelPkg, "Base")).Qual(modelPkg, "Model")).Block(
			Id("md").Op(":=").Op("&").Id("Model").Values(newModel...),
			Id("ly").Op(":=").Qual(modelPkg, "Layout").Values(lines(ly)...),
			Return(Id("ly"), Func().Params(Id("base").Op("*").Qual(modelPkg, "Base")).Qual(modelPkg, "Model").Block(attach...)),
		),
		Return(Id("g"), Nil()),
	)

	f.ImportName(specializePkg, "specialize")
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
