package glue

import (
	"fmt"
	"strings"

	. "github.com/dave/jennifer/jen"

	"tfc/compiler/ir"
	"tfc/compiler/lower"
	"tfc/runtime/device/catalog"
)

// fwd emits one graph's forward function. It runs twice: the first pass finds each tensor
// variable's scope (the loops around all its uses), the second declares each variable just
// before its first use at that scope's level.
type fwd struct {
	e        *emitter
	g        *lower.Graph
	vars     map[string]string       // value key → Go variable
	names    map[string]int          // Go names taken
	byVal    map[*lower.Value]string // value → Go variable
	n        int
	loops    []*lower.Loop            // the loops around the launch being emitted
	scope    map[string][]*lower.Loop // pass 1: the loops around every use of a variable so far
	depth    map[string]int           // pass 2: how many loops deep each variable is declared
	pending  []decl                   // pass 2: declarations not yet placed
	declared map[string]bool          // the variables declared so far
	sizes    map[string]string        // each size's count in the inputs (in.R)
	refs     map[string]int           // pass 1: how often each variable is read
	inline   map[string]bool          // pass 2: the views read once, written where they are read
	views    map[string]bool          // the variables that are views of another
}

// decl is a variable's declaration, to be placed depth loops deep.
type decl struct {
	depth int
	code  Code
}

func newFwd(e *emitter, g *lower.Graph) *fwd {
	return &fwd{e: e, g: g, vars: map[string]string{}, names: map[string]int{}, byVal: map[*lower.Value]string{}, scope: map[string][]*lower.Loop{}, declared: map[string]bool{}, refs: map[string]int{}, views: map[string]bool{}}
}

// declare records variable name's declaration (pass 2 places it) and a use of it.
func (f *fwd) declare(name string, code Code) {
	f.declared[name] = true
	if f.depth != nil {
		f.pending = append(f.pending, decl{f.depth[name], Id(name).Op(":=").Add(code)})
	}
	f.use(name)
}

// use narrows variable name's scope to the loops it shares with this use (pass 1).
func (f *fwd) use(name string) {
	s, ok := f.scope[name]
	if !ok {
		f.scope[name] = append([]*lower.Loop(nil), f.loops...)
		return
	}
	n := 0
	for n < len(s) && n < len(f.loops) && s[n] == f.loops[n] {
		n++
	}
	f.scope[name] = s[:n]
}

// flush takes the pending declarations of this loop depth, in order.
func (f *fwd) flush() []Code {
	var out []Code
	keep := f.pending[:0]
	for _, d := range f.pending {
		if d.depth == len(f.loops) {
			out = append(out, d.code)
		} else {
			keep = append(keep, d)
		}
	}
	f.pending = keep
	return out
}

var goKeywords = map[string]bool{"break": true, "case": true, "chan": true, "const": true, "continue": true, "default": true, "defer": true, "else": true, "fallthrough": true, "for": true, "func": true, "go": true, "goto": true, "if": true, "import": true, "interface": true, "map": true, "package": true, "range": true, "return": true, "select": true, "struct": true, "switch": true, "type": true, "var": true,
	"b": true, "c": true, "w": true, "m": true, "p": true, "l": true, "g": true, "launch": true, "i": true, "err": true, "out": true, "r": true, "grids": true, "pixels": true, "win": true}

func (f *fwd) fresh(name string) string {
	base := lowerFirst(lower.GoName(name))
	if goKeywords[base] {
		base += "T"
	}
	n := f.names[base]
	f.names[base]++
	if n == 0 {
		return base
	}
	return fmt.Sprintf("%s%d", base, n+1)
}

// ref is x in Go: a size as its count in the inputs (in.R), a limit as l.Lim's.
func (f *fwd) ref(x *lower.Expr) string {
	lim := limitRef("l.Lim")
	return f.e.goExpr(x, func(name string) string {
		if s, ok := f.sizes[name]; ok {
			return s
		}
		return lim(name)
	})
}

// tensor returns the Go expression of a value, declaring its tensor on first use.
func (f *fwd) tensor(v *lower.Value) string {
	x := f.tensorOf(v)
	if name := strings.TrimPrefix(x, "&"); f.declared[name] {
		f.use(name)
		f.refs[name]++
	}
	return x
}

func (f *fwd) tensorOf(v *lower.Value) string {
	switch v.Kind {
	case lower.Alias:
		return f.tensor(v.Base)
	case lower.WeightRef:
		w := v.Weight
		if w.Group != "" {
			return fmt.Sprintf("w.%s[%s].%s", w.Group, f.ref(lower.FromDim(*v.Index)), w.Field)
		}
		return "w." + w.Field
	case lower.Select:
		return fmt.Sprintf("model.Cond(%s, %s, %s)", f.ref(v.Cond), f.tensor(v.Then), f.tensor(v.Else))
	case lower.CacheRef:
		return fmt.Sprintf("&l.KV[%s]", f.ref(lower.FromDim(*v.Index)))
	case lower.RowsRef:
		return "&in.Rows" // the round's rows, which model.Launcher.Round writes
	}
	if name, ok := f.byVal[v]; ok {
		return name
	}
	var key string
	var code Code
	if v.Kind == lower.View {
		base := f.tensor(v.Base)
		if v.ColLo != nil {
			lo, hi := lower.FromDim(*v.ColLo), lower.FromDim(*v.ColHi)
			key = fmt.Sprintf("%s[:, %s:%s]", base, lo, hi)
			code = Id(base).Dot("ColSlice").Call(Id(f.ref(lo)), Id(f.ref(hi)))
		} else {
			rows, cols := lower.FromDim(v.Rows), lower.FromDim(v.Cols)
			key = fmt.Sprintf("%s as %s×%s", base, rows, cols)
			code = Id(base).Dot("Reshape").Call(Id(f.ref(rows)), Id(f.ref(cols)))
		}
	} else {
		buf := v.Buffer()
		key = fmt.Sprintf("%s %s %s×%s", buf.Name, v.StorageName(), lower.FromDim(v.Rows), lower.FromDim(v.Cols))
		rows, cols := f.ref(lower.FromDim(v.Rows)), f.ref(lower.FromDim(v.Cols))
		code = Qual(devicePkg, "Tensor").Values(field("Buf", Id(arenaRef(arenaOf(f.g, buf)))),
			field("Off", Id("p."+lower.GoName(buf.Name))), field("Rows", Id(rows)), field("Cols", Id(cols)))
	}
	if name, ok := f.vars[key]; ok {
		f.byVal[v] = name
		return name
	}
	name := v.Name
	if v.Kind != lower.View {
		name = v.StorageName()
	}
	name = f.fresh(name)
	if f.inline[name] {
		return fmt.Sprintf("%#v", code)
	}
	f.vars[key] = name
	f.byVal[v] = name
	f.views[name] = v.Kind == lower.View
	f.declare(name, code)
	return name
}

func arenaOf(g *lower.Graph, b *lower.Buffer) *lower.Arena {
	for _, a := range g.Arenas {
		for _, x := range a.Buffers {
			if x == b {
				return a
			}
		}
	}
	return nil
}

var enums = map[string]string{
	"silu": "ActSiLU", "gelu": "ActGELU", "gelu_tanh": "ActGELUTanh", "quick_gelu": "ActQuickGELU", "none": "ActNone",
	"sections": "RopeSections", "per_axis": "RopePerAxis", "alternating": "RopeAlternating",
	"sum": "RoundSum", "product": "RoundProduct",
}

func (f *fwd) attr(field string, x *lower.Expr) Code {
	switch {
	case x.Op == "enum":
		return Qual(devicePkg, enums[x.Name])
	case field == "Eps" || field == "Theta" || field == "Scale":
		return Float32().Call(Id(f.ref(x)))
	case x.Op == "list":
		if name := f.e.wholeList(x); name != "" {
			return Id(f.ref(lower.Ref(name)))
		}
	}
	return Id(f.ref(x))
}

// op is the device op struct literal of one lowered op, on one line: operands in field order,
// then attributes.
func (f *fwd) op(op *lower.Op) Code {
	var fs []Code
	for _, a := range op.Args {
		fs = append(fs, field(a.Field, Id(f.tensor(a.Value))))
	}
	for _, a := range op.Attrs {
		if a.Value != nil {
			fs = append(fs, field(a.Field, f.attr(a.Field, a.Value)))
		}
	}
	return Qual(devicePkg, catalog.Find(op.Kind).Type).Values(fs...)
}

// field is one key: value of a struct literal written on one line.
func field(name string, v Code) Code { return Id(name).Op(":").Add(v) }

func (f *fwd) steps(steps []*lower.Step) []Code {
	var out, guarded []Code
	guard := ""
	for _, s := range steps {
		if l := s.Loop; l != nil {
			guard = ""
			f.loops = append(f.loops, l)
			body := f.steps(l.Steps)
			f.loops = f.loops[:len(f.loops)-1]
			out = append(out, f.flush()...)
			out = append(out, For(Id(l.Var).Op(":=").Lit(0), Id(l.Var).Op("<").Id(f.ref(lower.FromDim(l.Count))), Id(l.Var).Op("++")).Block(body...).
				Comment(fmt.Sprintf("%s:%d", l.Pos.File, l.Pos.Line)))
			continue
		}
		f.n++
		l := s.Launch
		var lines []string
		seen := map[int]bool{}
		for _, op := range l.Ops {
			for _, src := range op.Fused {
				if !seen[src.Pos.Line] {
					seen[src.Pos.Line] = true
					lines = append(lines, fmt.Sprint(src.Pos.Line))
				}
			}
		}
		source := f.e.p.Source + ":" + strings.Join(lines, ",")
		site := Id("g").Dot("K").Dot("At").Call(Lit(f.n-1), Lit(strings.TrimPrefix(l.Kernel.Name, f.e.p.Package+"_")), Lit(source))
		// the launch shows its last op's output to Trace by the graph's name for it
		args := []Code{site, Lit(""), Qual(devicePkg, "Tensor").Values()}
		if last := l.Ops[len(l.Ops)-1].Out; last != nil {
			args[1], args[2] = Lit(last.Name), Id(f.tensor(last))
		}
		for _, op := range l.Ops {
			args = append(args, f.op(op))
		}
		launch := Id("l").Dot("Launch").Call(args...)
		decls := f.flush()
		// a launch over rows that may number zero (image rows, logit rows) is skipped then;
		// consecutive launches under one such guard share its block, declarations before it
		rows := launchRows(l.Ops[0])
		if rows == nil || !f.mayBeZero(rows) {
			out, guard = append(append(out, decls...), launch), ""
			continue
		}
		if g := f.ref(rows); g == guard {
			guarded = append(guarded, launch)
			last := out[len(out)-1]
			out = append(append(out[:len(out)-1], decls...), last)
		} else {
			guard, guarded = g, []Code{launch}
			out = append(append(out, decls...), nil)
		}
		out[len(out)-1] = If(Id(guard).Op(">").Lit(0)).Block(guarded...)
	}
	return out
}

// roundRoles is, for each role a decoder graph's inputs take, its field in model.RoundPlan and
// model.RoundIn and the size its rows or (for one-row inputs) columns give, by field of RoundIn.
var roundRoles = map[string]struct{ field, size string }{
	"tokens": {"Tokens", "R"}, "positions": {"Positions", "R"}, "image_rows": {"ImageRows", "I"},
	"image_at": {"ImageAt", "I"}, "logit_rows": {"LogitRows", "S"},
	"row_seq": {"Seq", "R"}, "row_pos": {"Pos", "R"}, "page_table": {"PageTable", ""},
}

// imageRoles is the same for a vision graph's inputs, in model.ImagePlan and model.ImageIn.
var imageRoles = map[string]struct{ field, size string }{
	"pixels": {"Pixels", "N"}, "positions2d": {"Pos", "N"}, "spans": {"Spans", ""},
	"merge_order": {"MergeOrder", "Kept"}, "window_order": {"WindowOrder", "N"}, "window_inverse": {"WindowInverse", ""},
	"window_pos": {"WindowPos", "N"}, "window_spans": {"WindowSpans", ""},
}

// roundFields lists model.RoundPlan's offset fields and imageFields model.ImagePlan's, in order.
var (
	roundFields = []string{"Tokens", "Positions", "ImageRows", "ImageAt", "LogitRows", "Seq", "Pos", "PageTable"}
	imageFields = []string{"Pixels", "Pos", "Spans", "MergeOrder", "WindowOrder", "WindowInverse", "WindowPos", "WindowSpans"}
)

// bindInputs makes g's inputs the fields of in (model.RoundIn or model.ImageIn, which the
// runtime writes from a round or from images) and its sizes in's counts, and returns the plan's
// offset fields: each role's buffer, model.Absent for one the graph does not read.
func (f *fwd) bindInputs(roles map[string]struct{ field, size string }, fields []string) (map[string]Code, error) {
	g := f.g
	offs := map[string]Code{}
	for _, name := range fields {
		offs[name] = Qual(modelPkg, "Absent")
	}
	f.sizes = map[string]string{}
	for _, in := range g.Inputs {
		r, ok := roles[in.Role]
		if !ok || in.Kind != lower.Input {
			continue
		}
		x := "in." + r.field
		if g.Role != "vision" && (r.field == "Seq" || r.field == "Pos" || r.field == "PageTable") {
			x = "in.Rows." + map[string]string{"Seq": "RowSeq", "Pos": "RowPos", "PageTable": "PageTable"}[r.field]
		}
		f.byVal[in] = x
		offs[r.field] = Id("p." + lower.GoName(in.Buffer().Name))
		if r.size == "" {
			continue
		}
		d := lower.FromDim(in.Rows)
		if d.IsInt(1) {
			d = lower.FromDim(in.Cols)
		}
		if d.Op != "ref" {
			return nil, fmt.Errorf("graph %s: input %s is %s rows; a %s input's rows are a size of the graph's own", g.Name, in.Name, d, in.Role)
		}
		if prev, ok := f.sizes[d.Name]; ok && prev != "in."+r.size {
			return nil, fmt.Errorf("graph %s: size %s is both %s and %s", g.Name, d.Name, prev, "in."+r.size)
		}
		f.sizes[d.Name] = "in." + r.size
	}
	for _, d := range g.Sizes {
		if _, ok := f.sizes[d.Name]; !ok {
			return nil, fmt.Errorf("graph %s: no input gives the size %s", g.Name, d.Name)
		}
		if g.Role != "vision" && !d.Limit.Equal(ir.Var("Rows")) {
			return nil, fmt.Errorf("graph %s: size %s is bounded by %s; a round's sizes are bounded by Rows", g.Name, d.Name, lower.FromDim(d.Limit))
		}
	}
	return offs, nil
}

// planLit is the plan literal: the offset fields in order, then the widths and rule sizes.
func planLit(typ string, fields []string, offs map[string]Code, rest ...Code) Code {
	var fs []Code
	for _, name := range fields {
		fs = append(fs, field(name, offs[name]))
	}
	return Qual(modelPkg, typ).Values(append(fs, rest...)...)
}

// graphForward is graph g's Forward: a call of the graph on the launcher's backend and arenas,
// launch by launch with each site's kernel and graph lines. It returns the number of launch sites.
func (e *emitter) graphForward(g *lower.Graph, t string) ([]Code, int, error) {
	roles, fields := roundRoles, roundFields
	if g.Role == "vision" {
		roles, fields = imageRoles, imageFields
	}
	run := func(f *fwd) (offs map[string]Code, launches []Code, result []Code, err error) {
		if offs, err = f.bindInputs(roles, fields); err != nil {
			return nil, nil, nil, err
		}
		launches = f.steps(g.Steps)
		result = []Code{Id(f.tensor(g.Output))}
		if g.Picks != nil {
			result = append(result, Id(f.tensor(g.Picks)))
		}
		return offs, append(launches, f.flush()...), result, nil
	}
	first := newFwd(e, g)
	if _, _, _, err := run(first); err != nil {
		return nil, 0, err
	}
	if g.Role != "vision" && g.Picks == nil {
		return nil, 0, fmt.Errorf("decoder graph %s has no picks", g.Name)
	}
	f := newFwd(e, g)
	f.depth, f.inline = map[string]int{}, map[string]bool{}
	for name, s := range first.scope {
		f.depth[name] = len(s)
	}
	for name, n := range first.refs {
		f.inline[name] = n == 1 && first.views[name]
	}
	offs, launches, result, _ := run(f)

	var body []Code
	if g.Role == "vision" {
		r := e.rule("image")
		merge := "1"
		if r != nil && r.Arg("merge") != nil {
			merge = f.ref(r.Arg("merge"))
		}
		// the patches' order: merge windows together (qwen2_vl, glm4v), or raster order (pixtral)
		order := merge
		if r != nil && r.Name == "pixtral" {
			order = "1"
		}
		if input(g, "pixels") == nil {
			return nil, 0, fmt.Errorf("graph %s has no pixels input", g.Name)
		}
		if input(g, "merge_order") != nil && (r == nil || r.Name != "pixtral") {
			return nil, 0, fmt.Errorf("graph %s reads merge_order, which the pixtral image rule's raster patches need; this family's image rule lists merge windows together already", g.Name)
		}
		window := "0"
		if windowed(g) {
			if r == nil || r.Arg("window") == nil {
				return nil, 0, fmt.Errorf("graph %s reads the window layout; the image rule names no window", g.Name)
			}
			window = f.ref(r.Arg("window"))
		}
		width := f.ref(lower.FromDim(input(g, "pixels").Cols))
		body = append(body, Id("in").Op(":=").Id("l").Dot("Images").Call(Id("pixels"), Id("grids"), planLit("ImagePlan", fields, offs,
			field("Width", Id(width)), field("Merge", Id(merge)), field("Order", Id(order)), field("Window", Id(window)))))
	} else {
		axes, hidden := "0", "0"
		if in := input(g, "positions"); in != nil {
			axes = f.ref(lower.FromDim(in.Cols))
		}
		if in := input(g, "image_rows"); in != nil {
			hidden = f.ref(lower.FromDim(in.Cols))
		}
		body = append(body, Id("in").Op(":=").Id("l").Dot("Round").Call(Id("r"), planLit("RoundPlan", fields, offs, field("Axes", Id(axes)), field("Hidden", Id(hidden)))))
	}
	for _, r := range g.Requires {
		format := fmt.Sprintf("graph %s requires %s (%s); here", g.Name, strings.ReplaceAll(r.Src, "%", "%%"), lineOf(r.Pos))
		var args []Code
		for i, name := range r.Cond.Refs() {
			if i > 0 {
				format += ","
			}
			format += fmt.Sprintf(" %s = %%v", name)
			args = append(args, Id(f.ref(lower.Ref(name))))
		}
		body = append(body, Id("l").Dot("Check").Call(append([]Code{Id(f.ref(r.Cond)), Lit(format)}, args...)...))
	}
	body = append(body, launches...)
	if g.Role == "vision" {
		body = append(body, Return(Id("l").Dot("Finish").Call(result...)))
	} else {
		body = append(body, Return(Id("l").Dot("FinishRound").Call(append([]Code{Id("r")}, result...)...)))
	}
	body = append(receiverFields(body, "c", "w", "p"), body...)
	g0 := Id("g").Op("*").Qual(modelPkg, "Runner").Types(Id(t+"Config"), Id(lowerFirst(t)+"Weights"), Id(planType(g)))
	launcher := Id("l").Op("*").Qual(modelPkg, "Launcher")
	var out []Code
	if g.Role == "vision" {
		out = append(out, Comment(fmt.Sprintf("Forward%s runs graph %s (%s:%d) through l on pixels [N, C] of images with the given (t, h, w) grids.", t, g.Name, g.Pos.File, g.Pos.Line)).Line().Add(Func().Id("Forward"+t).Params(g0, launcher, Id("pixels").Index().Float32(), Id("grids").Index().Index(Lit(3)).Int()).Params(Index().Float32(), Error()).Block(body...)))
	} else {
		out = append(out, Comment(fmt.Sprintf("Forward%s runs graph %s (%s:%d) through l over the rows of one round and returns the logits of r.LogitRows (with r.Greedy, their picks in r.Picks).", t, g.Name, g.Pos.File, g.Pos.Line)).Line().Add(Func().Id("Forward"+t).Params(g0, launcher, Id("r").Op("*").Qual(modelPkg, "Round")).Params(Index().Float32(), Error()).Block(body...)))
	}
	return out, f.n, nil
}

// windowed reports whether vision graph g reads the window layout (positions.WindowLayout).
func windowed(g *lower.Graph) bool {
	for _, in := range g.Inputs {
		if strings.HasPrefix(in.Role, "window_") {
			return true
		}
	}
	return false
}

// launchRows is the row count a launch covers: its first op's rows operand (the catalog's Rows).
func launchRows(op *lower.Op) *lower.Expr {
	if v := op.Arg(catalog.Find(op.Kind).Rows); v != nil {
		return lower.FromDim(v.Rows)
	}
	return nil
}

// mayBeZero reports whether a row count depends on a dim other than the graph's first, which
// the forward function checks to be positive.
func (f *fwd) mayBeZero(rows *lower.Expr) bool {
	for _, r := range rows.Refs() {
		for i, d := range f.g.Sizes {
			if d.Name == r && i > 0 {
				return true
			}
		}
	}
	return false
}

// wholeList is the int list config value whose elements x lists, all of them in order (a
// family's own length, which a runner other families run must not fix); "" when x is another
// list.
func (e *emitter) wholeList(x *lower.Expr) string {
	name := ""
	for i, a := range x.Args {
		if a.Op != "ref" {
			return ""
		}
		base, idx, ok := strings.Cut(a.Name, "[")
		if !ok || idx != fmt.Sprintf("%d]", i) || (name != "" && base != name) {
			return ""
		}
		name = base
	}
	if prm := e.params[name]; prm == nil || prm.Type != "ints" || (prm.Len != 0 && prm.Len != len(x.Args)) {
		return ""
	}
	return name
}
