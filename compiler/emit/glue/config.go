package glue

import (
	"fmt"
	"sort"
	"strings"

	. "github.com/dave/jennifer/jen"

	"tfc/compiler/lower"
)

// fieldGroups declares the fields of names (config values of e) grouped by type, one line a
// type, in the order the types first appear.
func (e *emitter) fieldGroups(names []string) []Code {
	var order []string
	byType := map[string][]Code{}
	types := map[string]Code{}
	for _, n := range names {
		prm := e.params[n]
		if _, ok := byType[prm.Type]; !ok {
			order = append(order, prm.Type)
			types[prm.Type] = goType(prm)
		}
		byType[prm.Type] = append(byType[prm.Type], Id(lower.GoName(n)))
	}
	var out []Code
	for _, t := range order {
		out = append(out, List(byType[t]...).Add(types[t]))
	}
	return out
}

// config writes the Config struct (its table, where config.json holds each value, its default and
// the value the committed kernels have, is the embedded program's: model.ConfigTable), Derive
// (the derived values and the requirements), Spec (the family at those values: its KV cache,
// description and graphs) and the embedded program.
func (e *emitter) config(f *File) error {
	p := e.p
	var names []string
	for _, prm := range p.Params {
		names = append(names, prm.Name)
	}
	f.Comment(fmt.Sprintf("Config holds the values %s binds from config.json (its config block, in that order", p.Source))
	f.Comment("within each type).")
	f.Type().Id("Config").Struct(e.fieldGroups(names)...)

	var body []Code
	for _, prm := range p.Params {
		if prm.Derived != nil {
			body = append(body, Id("c."+lower.GoName(prm.Name)).Op("=").Id(e.goExpr(prm.Derived, nil)))
		}
	}
	for _, r := range p.Requires {
		refs := r.Cond.Refs()
		format := fmt.Sprintf("%s (%s); this checkpoint has", strings.ReplaceAll(r.Src, "%", "%%"), lineOf(r.Pos))
		var args []Code
		for i, name := range refs {
			sep := ","
			if i == 0 {
				sep = ""
			}
			format += fmt.Sprintf("%s %s = %%v", sep, name)
			args = append(args, Id(e.ref(nil)(name)))
		}
		body = append(body, Id("r").Dot("Require").Call(append([]Code{Id(e.goExpr(r.Cond, nil)), Lit(format)}, args...)...))
	}
	f.Comment("Derive fills the derived values and checks the requirements with r; an unsupported value is")
	f.Comment("refused by name.")
	f.Func().Params(Id("c").Op("*").Id("Config")).Id("Derive").Params(Id("r").Op("*").Qual(modelPkg, "Refusals")).Block(body...)

	spec, err := e.spec()
	if err != nil {
		return err
	}
	f.Comment(fmt.Sprintf("Spec is %s at c: its KV cache, its description and its graphs.", p.Family))
	f.Func().Params(Id("c").Op("*").Id("Config")).Id("Spec").Params().Qual(modelPkg, "Spec").Block(Return(spec))

	f.Anon("embed")
	f.Comment(fmt.Sprintf("Program is %s compiled for specialising at load (package specialize): its", p.Source))
	f.Comment("config values (model.ConfigTable reads them into a Config), requirements and kernels with")
	f.Comment("symbolic constants.")
	f.Comment("")
	f.Comment("//go:embed program.json")
	f.Var().Id("Program").Index().Byte()
	return nil
}

// spec is the model.Spec literal of the family at c.
func (e *emitter) spec() (Code, error) {
	d := Dict{}
	if dec := e.graph("decoder"); dec != nil {
		if cache := input(dec, "cache"); cache != nil {
			d[Id("KVLayers")] = Id(e.goExpr(lower.FromDim(cache.Rows), nil))
			d[Id("KVWidth")] = Id(e.goExpr(lower.FromDim(cache.Cols), nil))
		}
	}
	d[Id("Info")] = e.info()
	for _, g := range e.p.Graphs {
		key, iface := "Vision", "VisionGraph"
		if g.Role == "decoder" {
			key, iface = "Decoder", "DecoderGraph"
		}
		pkg, names, err := e.runnerOf(g)
		if err != nil {
			return nil, err
		}
		var fields []Code
		for _, n := range names {
			fields = append(fields, field(lower.GoName(n), Id(e.ref(nil)(n))))
		}
		t := lower.GoName(g.Name)
		cfg := Qual(pkg, t+"Config").Values(fields...)
		d[Id(key)] = Func().Params(Id("l").Qual(modelPkg, "Limits"), Id("kernels").String()).Qual(modelPkg, iface).Block(
			Return(Qual(pkg, "New"+t).Call(cfg, Id("l"), Id("kernels"))))
	}
	return Qual(modelPkg, "Spec").Values(d), nil
}

// runnerOf is the package of graph g's runner and the config values it reads: this family's
// package, or the home family's for a reused graph.
func (e *emitter) runnerOf(g *lower.Graph) (string, []string, error) {
	p, hg := e.p, g
	if g.Home != "" {
		p = e.homes[g.Home]
		if p == nil {
			return "", nil, fmt.Errorf("graph %s: the program of family %s, which states it, is not at hand", g.Name, g.Home)
		}
		hg = nil
		for _, x := range p.Graphs {
			if x.Name == g.Name {
				hg = x
			}
		}
		if hg == nil {
			return "", nil, fmt.Errorf("family %s has no graph %s", g.Home, g.Name)
		}
	}
	names, err := newEmitter(p).graphFile(NewFile(p.Package), hg)
	if err != nil {
		return "", nil, err
	}
	for _, n := range names {
		if e.params[n] == nil {
			return "", nil, fmt.Errorf("graph %s (from %s) reads config value %s, which %s does not bind", g.Name, p.Source, n, e.p.Source)
		}
	}
	return "tfc/gen/" + p.Package, names, nil
}

// info is the model.Info literal of the family at c, on one line.
func (e *emitter) info() Code {
	info := map[string]Code{}
	ref := func(x *lower.Expr) Code { return Id(e.goExpr(x, nil)) }
	if dec := e.graph("decoder"); dec != nil {
		info["Vocab"] = ref(lower.FromDim(dec.Output.Cols))
		if v := input(dec, "image_rows"); v != nil {
			info["Hidden"] = ref(lower.FromDim(v.Cols))
		}
		if v := input(dec, "positions"); v != nil {
			info["PositionAxes"] = ref(lower.FromDim(v.Cols))
		}
		if v := input(dec, "cache"); v != nil {
			info["Layers"] = ref(lower.FromDim(v.Rows))
			info["KVWidth"] = ref(lower.FromDim(v.Cols))
		}
	}
	if v := input(e.graph("vision"), "pixels"); v != nil {
		info["PixelCols"] = ref(lower.FromDim(v.Cols))
	}
	if r := e.rule("image"); r != nil {
		info["Image"] = Lit(r.Name)
		if a := r.Arg("merge"); a != nil {
			info["Merge"] = ref(a)
		}
		if a := r.Arg("image_token"); a != nil {
			info["ImageToken"] = ref(a)
		}
	}
	if r := e.rule("positions"); r != nil {
		info["Positions"] = Lit(r.Name)
		for _, k := range []struct{ arg, field string }{{"image_token", "ImageToken"}, {"vision_start", "VisionStart"}, {"vision_start_token", "VisionStart"}} {
			if a := r.Arg(k.arg); a != nil {
				info[k.field] = ref(a)
			}
		}
	}
	var keys []string
	for k := range info {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var fs []Code
	for _, k := range keys {
		fs = append(fs, field(k, info[k]))
	}
	return Qual(modelPkg, "Info").Values(fs...)
}
