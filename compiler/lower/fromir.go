package lower

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"tfc/compiler/ir"
	"tfc/runtime/device/catalog"
)

// Lower runs the pipeline on a checked module: translate to device ops, fold the pinned config
// constants, fuse, name the kernels, and plan memory.
func Lower(m *ir.Module) (*Program, error) {
	p, err := Translate(m)
	if err != nil {
		return nil, err
	}
	FoldConstants(p)
	for _, g := range p.Graphs {
		Fuse(p, g)
	}
	NameKernels(p)
	for _, g := range p.Graphs {
		if err := g.validate(); err != nil {
			return nil, err
		}
		if err := PlanMemory(g); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// PackageName is the Go package of a family: qwen2_vl → qwen2vl.
func PackageName(family string) string {
	return strings.ToLower(strings.NewReplacer("_", "", "-", "", ".", "").Replace(family))
}

// Translate turns the module into a Program of unfused device ops, one launch each.
func Translate(m *ir.Module) (*Program, error) {
	p := &Program{
		Family:        m.Family,
		Package:       PackageName(m.Family),
		Source:        m.File,
		ModelTypes:    m.ModelTypes,
		Architectures: m.Architectures,
		OCR:           m.OCR,
	}
	for _, c := range m.Config {
		prm := &Param{Name: c.Name, Len: c.Len, Paths: c.Paths, Pos: c.Pos}
		switch c.Type {
		case ir.Int:
			prm.Type = "int"
		case ir.Float:
			prm.Type = "float"
		case ir.Bool:
			prm.Type = "bool"
		case ir.IntList:
			prm.Type = "ints"
		case ir.String:
			prm.Type = "string"
		}
		if c.Default != nil {
			prm.Default = literal(*c.Default)
		}
		if c.Derived != nil {
			prm.Derived = configExpr(c.Derived)
		}
		p.Params = append(p.Params, prm)
	}
	for _, r := range m.Requires {
		var cond *Expr
		switch {
		case r.Cond != nil:
			cond = Ref(r.Cond.Name)
			if r.Cond.Not {
				cond = &Expr{Op: "!", Args: []*Expr{cond}}
			}
		case r.Name != "" && r.Op == ir.IN:
			for _, lit := range r.Strs {
				eq := Bin("==", Ref(r.Name), Str(lit))
				if cond == nil {
					cond = eq
				} else {
					cond = Bin("||", cond, eq)
				}
			}
			if cond == nil {
				cond = Bool(false)
			}
		case r.Name != "" && r.Float != nil:
			cond = Bin(string(r.Op), Ref(r.Name), Float(*r.Float))
		case r.Name != "":
			cond = Bin(string(r.Op), Ref(r.Name), Str(r.Str))
		default:
			cond = Bin(string(r.Op), FromDim(r.Left), FromDim(r.Right))
		}
		p.Requires = append(p.Requires, &Require{Cond: cond, Src: r.Src, Pos: r.Pos})
	}
	for _, pf := range m.Prefixes {
		p.Prefixes = append(p.Prefixes, &Prefix{Name: pf.Name, Alts: pf.Alternatives, Pos: pf.Pos})
	}
	weights := map[*ir.Weight]*Weight{}
	for _, w := range m.Weights {
		lw := &Weight{Index: w.Index, Pos: w.Pos}
		name := w.Name
		if w.Prefix != nil {
			lw.Prefix = w.Prefix.Name
			name = strings.TrimPrefix(name[len(w.Prefix.Name):], ".")
		}
		if w.Layered() {
			lw.Count = w.Count
			at := strings.Index(name, "["+w.Index+"]")
			lw.Group = GoName(lw.Prefix + "." + name[:at])
			lw.Field = GoName(strings.TrimPrefix(name[at+len(w.Index)+2:], "."))
			name = name[:at] + ".{i}" + name[at+len(w.Index)+2:]
		} else {
			lw.Field = GoName(lw.Prefix + "." + name)
		}
		lw.Path = name
		for _, d := range w.Shape {
			lw.Shape = append(lw.Shape, d)
		}
		if w.Cond != nil {
			lw.Cond = Ref(w.Cond.Name)
			if w.Cond.Not {
				lw.Cond = &Expr{Op: "!", Args: []*Expr{lw.Cond}}
			}
		}
		weights[w] = lw
		p.Weights = append(p.Weights, lw)
	}
	for _, r := range []struct {
		kind string
		rule *ir.Rule
	}{{"image", m.Image}, {"positions", m.Positions}} {
		if r.rule == nil {
			continue
		}
		lr := &Rule{Kind: r.kind, Name: r.rule.Name, Pos: r.rule.Pos}
		for _, a := range r.rule.Args {
			lr.Args = append(lr.Args, RuleArg{Name: a.Name, Value: attrExpr(a)})
		}
		p.Rules = append(p.Rules, lr)
	}
	configNames := map[string]bool{}
	for _, c := range m.Config {
		configNames[c.Name] = true
	}
	for _, g := range m.Graphs {
		lg, err := translateGraph(g, weights, configNames)
		if err != nil {
			return nil, err
		}
		lg.Home = g.Home
		p.Graphs = append(p.Graphs, lg)
	}
	for _, w := range p.Weights {
		if (w.Unfold != nil || w.Deinterleave != nil) && w.plain != nil {
			return nil, fmt.Errorf("%s: %s permutes the weight when it is loaded, but line %d reads it as stored", *w.viewAt, w.Display(), w.plain.Line)
		}
	}
	return p, nil
}

func literal(l ir.Literal) *Expr {
	switch l.Type {
	case ir.Int:
		return Int(l.Int)
	case ir.Float:
		return Float(l.Float)
	case ir.Bool:
		return Bool(l.Bool)
	case ir.String:
		return Str(l.Str)
	}
	var xs []*Expr
	for _, n := range l.Ints {
		xs = append(xs, Int(n))
	}
	return List(xs...)
}

func configExpr(e *ir.Expr) *Expr {
	switch e.Type {
	case ir.Int:
		return FromDim(e.Dim)
	case ir.IntList:
		var xs []*Expr
		for _, d := range e.Ints {
			xs = append(xs, FromDim(d))
		}
		return List(xs...)
	case ir.Float:
		if e.Name != "" {
			return Ref(e.Name)
		}
		return Float(e.Float)
	case ir.Bool:
		if e.Name == "" {
			return Bool(e.Bool)
		}
		if e.Not {
			return &Expr{Op: "!", Args: []*Expr{Ref(e.Name)}}
		}
		return Ref(e.Name)
	}
	panic("lower: config expression of type " + e.Type.String())
}

func attrExpr(a *ir.Attr) *Expr {
	switch a.Kind {
	case ir.AttrInt:
		return FromDim(a.Int)
	case ir.AttrFloat:
		switch {
		case a.FloatName != "":
			return Ref(a.FloatName)
		case a.FloatRsqrt != nil:
			return &Expr{Op: "rsqrt", Args: []*Expr{FromDim(*a.FloatRsqrt)}}
		}
		return Float(a.Float)
	case ir.AttrBool:
		if a.BoolIndex != "" {
			return Bin("in", Ref(a.BoolIndex), Ref(a.BoolName))
		}
		if a.BoolName == "" {
			return Bool(a.Bool)
		}
		if a.BoolNot {
			return &Expr{Op: "!", Args: []*Expr{Ref(a.BoolName)}}
		}
		return Ref(a.BoolName)
	case ir.AttrEnum:
		return Enum(a.Enum)
	case ir.AttrInts:
		var xs []*Expr
		for _, d := range a.Ints {
			xs = append(xs, FromDim(d))
		}
		return List(xs...)
	}
	panic("lower: attribute " + a.Name)
}

// shape2 views an IR shape as the device's rows × cols: [n] is one row of n.
func shape2(s ir.Shape) (rows, cols ir.Dim) {
	switch len(s) {
	case 0:
		return ir.Const(1), ir.Const(1)
	case 1:
		return ir.Const(1), s[0]
	}
	r := s[0]
	for _, d := range s[1 : len(s)-1] {
		r = r.Mul(d)
	}
	return r, s[len(s)-1]
}

// MaxPages is the page-table width: pages a sequence of Context tokens needs.
func MaxPages() ir.Dim {
	return ir.Var("Context").Add(ir.Var("PageSize")).Sub(ir.Const(1)).Div(ir.Var("PageSize"))
}

// roles maps a decoder graph's param names to the runtime's round fields.
var decoderRoles = map[string]string{
	"ids": "tokens", "tokens": "tokens",
	"pos": "positions", "positions": "positions",
	"image_rows": "image_rows", "image_at": "image_at",
	"logit_rows": "logit_rows",
}

// visionRoles maps a vision graph's param names to the window layout the runtime computes from
// the image grids and the image rule's window (its side in merged units): the permutation of the
// patch rows into window order, its inverse over the merged rows, the 2-D positions in window
// order and the window spans. The other inputs take their roles by kind and dtype.
var visionRoles = map[string]string{
	"window_order": "window_order", "window_inverse": "window_inverse",
	"window_pos": "window_pos", "window_spans": "window_spans",
	"merge_order": "merge_order",
}

type translator struct {
	b       *Builder
	env     map[*ir.Value]*Value
	uses    map[*ir.Value]int
	weights map[*ir.Weight]*Weight
}

func translateGraph(g *ir.Graph, weights map[*ir.Weight]*Weight, configNames map[string]bool) (*Graph, error) {
	role := "vision"
	for _, prm := range g.Params {
		if prm.Kind == ir.KVCache || prm.Kind == ir.Rows {
			role = "decoder"
		}
	}
	t := &translator{b: NewGraph(g.Name, role, g.Pos), env: map[*ir.Value]*Value{}, uses: map[*ir.Value]int{}, weights: weights}
	limit := ir.Var("Patches")
	if role == "decoder" {
		limit = ir.Var("Rows")
	}
	for _, v := range g.ShapeVars() {
		if !configNames[v] && !strings.Contains(v, "[") {
			t.b.Size(v, limit)
		}
	}
	ir.Walk(g.Nodes, func(n *ir.Node, _ int) {
		for _, a := range n.Args {
			if a.Value != nil {
				t.uses[a.Value]++
			}
		}
		if n.Loop != nil {
			for _, c := range n.Loop.Carried {
				t.uses[c.In]++
				t.uses[c.Next]++
			}
		}
	})
	for _, r := range g.Results {
		t.uses[r]++
	}
	pixels := false
	for _, prm := range g.Params {
		ps := prm.Pos
		rows, cols := shape2(prm.Shape)
		switch prm.Kind {
		case ir.Rows:
			r := ir.Var(t.b.G.Sizes[0].Name)
			v := t.b.Special(prm.Name, "rows", RowsRef, ir.Dim{}, ir.Dim{}, ps)
			v.RowSeq = t.b.Input(prm.Name+"_seq", "row_seq", "I32", ir.Const(1), r, ps)
			v.RowPos = t.b.Input(prm.Name+"_pos", "row_pos", "I32", ir.Const(1), r, ps)
			v.PageTable = t.b.Input(prm.Name+"_pages", "page_table", "I32", ir.Var("Parallel"), MaxPages(), ps)
			t.env[prm] = v
			continue
		case ir.KVCache:
			l, w := shape2(prm.Shape)
			if len(prm.Shape) == 2 {
				l = prm.Shape[0]
			}
			t.env[prm] = t.b.Special(prm.Name, "cache", CacheRef, l, w, ps)
			continue
		case ir.Spans:
			r := "spans"
			if role == "vision" && visionRoles[prm.Name] == "window_spans" {
				r = "window_spans"
			}
			t.env[prm] = t.b.Input(prm.Name, r, "I32", ir.Const(1), ir.Var(t.b.G.Sizes[0].Name).Add(ir.Const(1)), ps)
			continue
		}
		dt := "F32"
		if prm.DType == ir.I32 {
			dt = "I32"
		}
		var r string
		if role == "decoder" {
			r = decoderRoles[prm.Name]
			if r == "" {
				return nil, fmt.Errorf("%s: decoder input %s is not a field of a round; name it one of ids, pos, image_rows, image_at, logit_rows", ps, prm.Name)
			}
		} else {
			switch {
			case visionRoles[prm.Name] != "" && visionRoles[prm.Name] != "window_spans" && dt == "I32":
				r = visionRoles[prm.Name]
			case dt == "F32" && !pixels:
				r, pixels = "pixels", true
			case dt == "I32" && len(prm.Shape) == 2:
				r = "positions2d"
			default:
				return nil, fmt.Errorf("%s: vision input %s: the runtime gives pixels and image grids; declare the pixels [N, C] and the 2-D positions [N, 2] i32, or name a window input window_order, window_inverse, window_pos or window_spans, or merge_order", ps, prm.Name)
			}
		}
		t.env[prm] = t.b.Input(prm.Name, r, dt, rows, cols, ps)
	}
	if err := t.nodes(g.Nodes); err != nil {
		return nil, err
	}
	if len(g.Results) != 1 {
		return nil, fmt.Errorf("%s: graph %s returns %d values; a graph returns one tensor", g.Pos, g.Name, len(g.Results))
	}
	out := t.env[g.Results[0]]
	if g.Results[0].Name == "" {
		name := "out"
		if role == "decoder" {
			name = "logits"
		}
		for v := out; v != nil; v = v.Base {
			v.Name = name
			if v.Kind != Alias {
				break
			}
		}
	}
	if role == "decoder" { // each logit row's greedy pick, which a round of greedy rows reads instead of the logits
		pos := g.Pos
		if out.Def != nil && len(out.Def.Fused) > 0 {
			pos = out.Def.Fused[0].Pos
		}
		picks := t.b.New("picks", "I32", ir.Const(1), out.Rows, pos)
		t.b.Op("argmax", []Arg{{"X", out}, {"Y", picks}}, nil, picks, Source{Op: "argmax", Pos: pos})
		t.b.G.Picks = picks
	}
	t.b.Return(out)
	for _, r := range g.Requires {
		t.b.G.Requires = append(t.b.G.Requires, &Require{Cond: Bin(string(r.Op), FromDim(r.Left), FromDim(r.Right)), Src: r.Src, Pos: r.Pos})
	}
	return t.b.G, nil
}

func (t *translator) nodes(ns []*ir.Node) error {
	for _, n := range ns {
		if err := t.node(n); err != nil {
			return err
		}
	}
	return nil
}

// name picks a readable name for a node's output: its source name, else one from its weight.
func (t *translator) name(n *ir.Node, i int) string {
	if i < len(n.Outs) && n.Outs[i].Name != "" {
		return n.Outs[i].Name
	}
	if a := n.Arg("weight"); a != nil && a.Weight != nil {
		parts := strings.Split(a.Weight.Weight.Name, ".")
		var keep []string
		for _, s := range parts {
			if s != "weight" && s != "bias" {
				keep = append(keep, s)
			}
		}
		last := keep[len(keep)-1]
		if _, err := strconv.Atoi(last); err == nil && len(keep) > 1 {
			last = keep[len(keep)-2] + last
		}
		return last
	}
	return string(n.Op)
}

func (t *translator) arg(n *ir.Node, role string) *Value {
	a := n.Arg(role)
	if a == nil {
		return nil
	}
	if a.Weight != nil {
		if w := t.weights[a.Weight.Weight]; n.Op != ir.OpUnfold && n.Op != ir.OpDeinterleave && w.plain == nil {
			w.plain = &n.Pos
		}
		var idx *ir.Dim
		if a.Weight.Weight.Layered() {
			idx = &a.Weight.Layer
		}
		return t.b.Weight(t.weights[a.Weight.Weight], idx)
	}
	v := t.env[a.Value]
	if v == nil {
		panic("lower: operand " + a.Value.String() + " used before it is defined")
	}
	if a.Index != nil {
		return t.b.Cache(v, *a.Index)
	}
	return v
}

func (t *translator) attr(n *ir.Node, name string) *Expr {
	if a := n.Attr(name); a != nil {
		return attrExpr(a)
	}
	return nil
}

func src(n *ir.Node) []Source { return []Source{{Op: string(n.Op), Pos: n.Pos}} }

// writable returns x, or a copy of it when an in-place op would clobber a value still in use.
func (t *translator) writable(n *ir.Node, role string) *Value {
	x := t.arg(n, role)
	if t.uses[n.Arg(role).Value] <= 1 && x.Kind != Input {
		return x
	}
	c := t.b.New(x.Name+"_copy", x.DType, x.Rows, x.Cols, n.Pos)
	t.b.Op("copy", []Arg{{"X", x}, {"Y", c}}, nil, c, src(n)...)
	return c
}

func (t *translator) node(n *ir.Node) error {
	b, ps := t.b, n.Pos
	set := func(v *Value) { t.env[n.Outs[0]] = v }
	switch n.Op {
	case ir.OpLoop:
		l := n.Loop
		var inits []*Value
		for _, c := range l.Carried {
			inits = append(inits, t.env[c.In])
		}
		params := b.BeginLoop(l.Index, l.Count, ps, inits...)
		for i, c := range l.Carried {
			t.env[c.Param] = params[i]
		}
		if err := t.nodes(l.Body); err != nil {
			return err
		}
		var yields []*Value
		for _, c := range l.Carried {
			yields = append(yields, t.env[c.Next])
		}
		for i, r := range b.EndLoop(yields...) {
			t.env[n.Outs[i]] = r
		}
	case ir.OpSplit:
		x := t.arg(n, "x")
		w := n.Outs[0].Shape.Last()
		for i := range n.Outs {
			lo, hi := w.Scale(int64(i)), w.Scale(int64(i+1))
			t.env[n.Outs[i]] = b.Columns(t.name(n, i), x, lo, hi, ps)
		}
	case ir.OpMerge, ir.OpUnmerge:
		x := t.arg(n, "x")
		if colView(x) { // a row view needs contiguous rows: a column slice is copied first
			c := b.New(x.Name+"_rows", x.DType, x.Rows, x.Cols, ps)
			b.Op("copy", []Arg{{"X", x}, {"Y", c}}, nil, c, src(n)...)
			x = c
		}
		rows, cols := shape2(n.Outs[0].Shape)
		set(b.Reshape(t.name(n, 0), x, rows, cols, ps))
	case ir.OpFlatten:
		set(t.arg(n, "weight"))
	case ir.OpUnfold:
		w := t.weights[n.Arg("weight").Weight.Weight]
		f := attrExpr(n.Attr("factor"))
		if w.Unfold != nil && !w.Unfold.Equal(f) {
			return fmt.Errorf("%s: unfold(%s, factor: %s): another unfold reads it with factor %s", ps, w.Display(), f, w.Unfold)
		}
		w.Unfold, w.viewAt = f, &ps
		set(t.arg(n, "weight"))
	case ir.OpDeinterleave:
		w := t.weights[n.Arg("weight").Weight.Weight]
		h := attrExpr(n.Attr("heads"))
		if w.Deinterleave != nil && !w.Deinterleave.Equal(h) {
			return fmt.Errorf("%s: deinterleave(%s, heads: %s): another deinterleave reads it with heads %s", ps, w.Display(), h, w.Deinterleave)
		}
		w.Deinterleave, w.viewAt = h, &ps
		set(t.arg(n, "weight"))
	case ir.OpSelect:
		set(b.Select(t.attr(n, "cond"), t.arg(n, "a"), t.arg(n, "b")))
	default:
		spec := ir.Spec(n.Op)
		if spec == nil || spec.Device == "" {
			return fmt.Errorf("%s: op %s has no lowering", ps, n.Op)
		}
		t.deviceOp(n, spec)
	}
	return nil
}

// colView reports whether v is, or overwrites, a column slice (its rows not contiguous).
func colView(v *Value) bool {
	for ; v != nil && (v.Kind == View || v.Kind == Alias); v = v.Base {
		if v.ColLo != nil {
			return true
		}
	}
	return false
}

// deviceOp lowers a node to the device op its catalog entry names: each operand and attribute
// to its field, operands in the device catalog's order, the output to Y or, for an op that
// writes an operand in place, to that operand's buffer.
func (t *translator) deviceOp(n *ir.Node, spec *ir.OpSpec) {
	b := t.b
	var y *Value
	args := []Arg{}
	for _, a := range spec.Args {
		var v *Value
		if a.Role == spec.InPlace {
			v = t.writable(n, a.Role)
			y = b.InPlace(t.name(n, 0), v, n.Pos)
			if a.Field == "Y" { // the output field names the new value (scatter); an input field the old (rope)
				v = y
			}
		} else if v = t.arg(n, a.Role); v == nil {
			continue
		}
		args = append(args, Arg{a.Field, v})
	}
	if y == nil {
		rows, cols := shape2(n.Outs[0].Shape)
		y = b.New(t.name(n, 0), "F32", rows, cols, n.Pos)
		args = append(args, Arg{"Y", y})
	}
	order := catalog.Find(spec.Device)
	slices.SortStableFunc(args, func(p, q Arg) int { return fieldIndex(order, p.Field) - fieldIndex(order, q.Field) })
	var attrs []Attr
	for _, a := range spec.Attrs {
		v := t.attr(n, a.Name)
		switch {
		case v != nil:
		case a.Kind == ir.AttrEnum && a.Sparse:
			continue
		case a.Kind == ir.AttrEnum:
			v = Enum(a.Enum[0])
		case spec.Attr(a.Default) != nil:
			v = t.attr(n, a.Default)
		}
		attrs = append(attrs, Attr{a.Field, v})
	}
	if spec.Act != "" {
		attrs = append(attrs, Attr{"Act", Enum(spec.Act)})
	}
	b.Op(spec.Device, args, attrs, y, src(n)...)
	t.env[n.Outs[0]] = y
}

// fieldIndex is the place of field (a tensor, or the parent of dotted ones) in op's tensors.
func fieldIndex(op *catalog.Op, field string) int {
	for i, f := range op.Tensors {
		if f.Path == field || strings.HasPrefix(f.Path, field+".") {
			return i
		}
	}
	return len(op.Tensors)
}

// FoldConstants pins config values that a requirement fixes to a literal (`C == 3`) and folds
// them, and every literal subexpression, into the ops' attributes.
func FoldConstants(p *Program) {
	consts := map[string]*Expr{}
	for _, r := range p.Requires {
		c := r.Cond
		if c.Op != "==" {
			continue
		}
		l, rt := c.Args[0], c.Args[1]
		if l.Op == "ref" && rt.Const() {
			if prm := p.param(l.Name); prm != nil && prm.Derived == nil && (prm.Type == "int" || prm.Type == "float") {
				prm.Pin = rt
				consts[l.Name] = rt
			}
		}
	}
	for _, g := range p.Graphs {
		for _, op := range g.Ops() {
			for i, a := range op.Attrs {
				op.Attrs[i].Value = Fold(a.Value, consts)
			}
		}
	}
}

func (p *Program) param(name string) *Param {
	i := slices.IndexFunc(p.Params, func(x *Param) bool { return x.Name == name })
	if i < 0 {
		return nil
	}
	return p.Params[i]
}
