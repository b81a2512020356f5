package check

import (
	"fmt"
	"strings"

	"github.com/alecthomas/participle/v2/lexer"

	"tfc/compiler/ir"
	"tfc/compiler/syntax"
)

// graphState is the checker's state inside one graph.
type graphState struct {
	g         *ir.Graph
	nextID    int
	block     *[]*ir.Node
	loops     []loopInfo
	cond      *ir.Cond // the select branch being evaluated
	shapeVars map[string]bool
	results   []ir.Shape
	returned  bool
}

type loopInfo struct {
	index string
	count ir.Dim
}

func (gs *graphState) value(name string, kind ir.Kind, shape ir.Shape, dt ir.DType, p lexer.Position) *ir.Value {
	gs.nextID++
	return &ir.Value{ID: gs.nextID, Name: name, Kind: kind, Shape: shape, DType: dt, Pos: pos(p)}
}

func (c *checker) graph(sg *syntax.Graph) {
	if !c.declare(sg.Name, sg.Pos, "graph") {
		return
	}
	if sg.From != nil {
		c.reuse(sg)
		return
	}
	c.mod.Graphs = append(c.mod.Graphs, c.graphBody(sg))
}

// reuse checks graph sg.From of another family's file against this family's declarations: its
// config values, weights, prefixes and positions bind to this file's. A problem is reported at
// the reuse, naming where the graph meets it.
func (c *checker) reuse(sg *syntax.Graph) {
	ref := sg.From
	what := fmt.Sprintf("graph %s = %s.%s", sg.Name, ref.Family, ref.Graph)
	if ref.Graph != sg.Name {
		c.errorf(ref.Pos, "%s: a reused graph keeps its name; write graph %s = %s.%s", what, ref.Graph, ref.Family, ref.Graph)
		return
	}
	if ref.Family == c.mod.Family {
		c.errorf(ref.Pos, "%s: %s is this family; state the graph here", what, ref.Family)
		return
	}
	if c.load == nil {
		c.errorf(ref.Pos, "%s: no other family's file can be read here", what)
		return
	}
	f, err := c.load(ref.Family)
	if err != nil {
		c.errorf(ref.Pos, "%s: %v", what, err)
		return
	}
	home := homeFamily(f)
	if home != ref.Family {
		c.errorf(ref.Pos, "%s: %s states family %s, not %s", what, f.Name, home, ref.Family)
		return
	}
	var found *syntax.Graph
	var names []string
	for _, d := range f.Decls {
		if d.Graph != nil {
			names = append(names, d.Graph.Name)
			if d.Graph.Name == ref.Graph {
				found = d.Graph
			}
		}
	}
	switch {
	case found == nil:
		c.errorf(ref.Pos, "%s: %s has no graph %s; it has %s", what, f.Name, ref.Graph, strings.Join(names, ", "))
		return
	case found.From != nil:
		c.errorf(ref.Pos, "%s: %s reuses it from %s; name %s.%s", what, f.Name, found.From.Family, found.From.Family, found.Name)
		return
	}
	n := len(c.diags)
	used := c.used
	c.used = map[*ir.Weight]bool{}
	g := c.graphBody(found)
	reads := c.used
	for w := range reads {
		used[w] = true
	}
	c.used = used
	for i := n; i < len(c.diags); i++ {
		d := &c.diags[i]
		d.Msg = fmt.Sprintf("%s: at %s:%d:%d: %s", what, d.Pos.File, d.Pos.Line, d.Pos.Col, d.Msg)
		d.Pos = pos(ref.Pos)
	}
	if len(c.diags) == n {
		c.sameWeights(f, reads, what)
	}
	g.Home = ref.Family
	c.mod.Graphs = append(c.mod.Graphs, g)
}

// sameWeights checks that each weight a reused graph reads is declared here as the graph's home
// file f declares it (layer count, shape, condition): the graph's runner, generated once with the
// home family, loads the tensors by the home's declarations at this family's values. A difference
// is reported at this file's declaration.
func (c *checker) sameWeights(f *syntax.File, reads map[*ir.Weight]bool, what string) {
	h := &checker{file: f, mod: &ir.Module{File: f.Name}, facts: c.facts, config: c.config, prefixes: c.prefixes,
		weights: map[string]*ir.Weight{}, used: map[*ir.Weight]bool{}, roots: map[string]bool{}, indexVar: map[string]*ir.Weight{},
		declared: map[string]ir.Pos{}, bad: map[string]bool{}}
	for _, d := range f.Decls {
		if d.Weights != nil {
			for _, wd := range d.Weights.Items {
				h.weightDecl(wd)
			}
		}
	}
	key := func(w *ir.Weight) string {
		if w.Index == "" {
			return w.Name
		}
		return strings.ReplaceAll(w.Name, "["+w.Index+"]", "[#]")
	}
	home := map[string]*ir.Weight{}
	for _, w := range h.mod.Weights {
		home[key(w)] = w
	}
	dims := func(s ir.Shape) string {
		var parts []string
		for _, d := range s {
			parts = append(parts, d.String())
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	describe := func(w *ir.Weight) string {
		out := dims(w.Shape)
		if w.Index != "" {
			out += " × " + w.Count.String() + " layers"
		}
		if w.Cond != nil {
			out += " if "
			if w.Cond.Not {
				out += "!"
			}
			out += w.Cond.Name
		}
		return out
	}
	var ws []*ir.Weight
	for _, w := range c.mod.Weights {
		if reads[w] {
			ws = append(ws, w)
		}
	}
	for _, w := range ws {
		hw := home[key(w)]
		switch {
		case hw == nil:
			c.diags = append(c.diags, Diagnostic{Pos: w.Pos, Msg: fmt.Sprintf("%s reads weight %s, which %s does not declare at a shape this family's values give", what, w.Name, f.Name)})
		case describe(w) != describe(hw):
			c.diags = append(c.diags, Diagnostic{Pos: w.Pos, Msg: fmt.Sprintf("weight %s is %s here; %s reads it as %s:%d declares it, %s; declare it so",
				w.Name, describe(w), what, hw.Pos.File, hw.Pos.Line, describe(hw))})
		}
	}
}

// homeFamily is the name in a file's family header.
func homeFamily(f *syntax.File) string {
	for _, d := range f.Decls {
		if d.Family != nil {
			return d.Family.Name
		}
	}
	return ""
}

// graphBody checks a graph's parameters, results and statements.
func (c *checker) graphBody(sg *syntax.Graph) *ir.Graph {
	saved := c.facts
	c.facts = saved.Clone()
	defer func() { c.facts = saved }()

	g := &ir.Graph{Name: sg.Name, Pos: pos(sg.Pos)}
	gs := &graphState{g: g, block: &g.Nodes, shapeVars: map[string]bool{}}
	c.current = gs
	defer func() { c.current = nil }()
	sc := &scope{names: map[string]val{}, graph: gs}
	params := &scope{parent: sc, names: sc.names, graph: gs, newVars: true}
	ok := true
	for _, p := range sg.Params {
		if _, dup := sc.names[p.Name]; dup {
			c.errorf(p.Pos, "redefined name: parameter %s is declared twice", p.Name)
			ok = false
			continue
		}
		if !c.localName(p.Name, p.Pos, sc) {
			ok = false
			continue
		}
		v, good := c.paramType(p.Name, p.Type, params, gs)
		if !good {
			ok = false
			sc.names[p.Name] = val{kind: vBad}
			continue
		}
		g.Params = append(g.Params, v)
		sc.names[p.Name] = val{kind: vValue, v: v}
	}
	for _, r := range sg.Results {
		if r.Shape == nil {
			c.errorf(r.Pos, "graph results are tensors `[dims]`; got %s", syntax.ParamTypeString(r))
			ok = false
			continue
		}
		sh, good := c.shape(r.Shape, sc, "result")
		if !good {
			ok = false
			continue
		}
		gs.results = append(gs.results, sh)
	}
	if !ok {
		gs.results = nil // results are not checked against a declaration that failed
	}
	c.stmts(sg.Body, sc, gs)
	if !gs.returned {
		c.errorf(sg.Pos, "graph %s has no return; end it with `return …`", sg.Name)
	}
	return g
}

// localName reports whether a graph may bind name.
func (c *checker) localName(name string, p lexer.Position, sc *scope) bool {
	what := ""
	switch {
	case c.config[name] != nil:
		what = "a config value"
	case c.prefixes[name] != nil:
		what = "a weight prefix"
	case c.roots[name]:
		what = "the start of a weight name"
	case ir.Spec(ir.Op(name)) != nil:
		what = "an op"
	case name == "sum":
		what = "a function"
	}
	if v, ok := sc.lookup(name); ok && what == "" {
		if v.kind == vInt && sc.graph != nil && sc.graph.shapeVars[name] {
			what = "a shape variable"
		}
		for _, l := range sc.graph.loops {
			if l.index == name {
				what = "a loop index"
			}
		}
	}
	if what == "" {
		if _, ok := c.declared[name]; ok {
			what = "a graph"
		}
	}
	if what != "" {
		c.errorf(p, "redefined name: %s is %s; pick another name", name, what)
		return false
	}
	return true
}

func (c *checker) paramType(name string, t *syntax.ParamType, sc *scope, gs *graphState) (*ir.Value, bool) {
	switch {
	case t.Kind == "spans":
		return gs.value(name, ir.Spans, nil, ir.I32, t.Pos), true
	case t.Kind == "rows":
		return gs.value(name, ir.Rows, nil, ir.I32, t.Pos), true
	case t.KV != nil:
		sh, ok := c.shape(t.KV, c.configScope(), "kv cache")
		if !ok {
			return nil, false
		}
		if len(sh) != 2 {
			c.errorf(t.KV.Pos, "a kv cache is kv[layers, width]; got %s", plural(len(sh), "dimension"))
			return nil, false
		}
		return gs.value(name, ir.KVCache, sh, ir.F32, t.Pos), true
	case t.Positions != nil:
		rows, ok := c.shape(t.Positions, sc, "positions")
		if !ok {
			return nil, false
		}
		if len(rows) != 1 {
			c.errorf(t.Positions.Pos, "positions take one dimension, the rows: positions[R]; got %s", plural(len(rows), "dimension"))
			return nil, false
		}
		axes := c.config[ir.PositionAxes]
		if axes == nil {
			if c.mod.Positions == nil {
				c.errorf(t.Pos, "%s positions%s: the family names no positions rule; add `positions RULE(…)`", name, syntax.ListString(t.Positions))
			}
			return nil, false
		}
		return gs.value(name, ir.Tensor, ir.Shape{rows[0], axes.Dim()}, ir.I32, t.Pos), true
	}
	sh, ok := c.shape(t.Shape, sc, "parameter")
	if !ok {
		return nil, false
	}
	dt := ir.F32
	if t.DType == "i32" {
		dt = ir.I32
	}
	return gs.value(name, ir.Tensor, sh, dt, t.Pos), true
}

func (c *checker) stmts(body []*syntax.Stmt, sc *scope, gs *graphState) {
	for _, s := range body {
		if gs.returned {
			c.errorf(s.Pos, "statement after return; return ends the graph")
			return
		}
		switch {
		case s.Assign != nil:
			c.assign(s.Assign, sc)
		case s.Require != nil:
			for _, cond := range s.Require.Conds {
				if r := c.require(cond, sc); r != nil {
					gs.g.Requires = append(gs.g.Requires, r)
				}
			}
		case s.For != nil:
			c.loop(s.For, sc, gs)
		case s.Return != nil:
			if len(gs.loops) > 0 {
				c.errorf(s.Pos, "return inside a loop; return after the loop ends")
				continue
			}
			c.ret(s.Return, sc, gs)
		}
	}
}

func (c *checker) assign(a *syntax.Assign, sc *scope) {
	v, ok := c.eval(a.Value, sc)
	for _, n := range a.Names {
		if !c.localName(n.Name, n.Pos, sc) {
			ok = false
		}
	}
	if !ok {
		// Bind the names to nothing so later uses do not report them as undefined.
		for _, n := range a.Names {
			c.bind(n.Name, val{kind: vBad}, sc)
		}
		return
	}
	if v.kind == vTuple {
		if len(a.Names) != len(v.tuple) {
			c.errorf(a.Pos, "tuple arity mismatch: the right side gives %s, the left side names %d", plural(len(v.tuple), "value"), len(a.Names))
			return
		}
		for i, n := range a.Names {
			c.bind(n.Name, val{kind: vValue, v: v.tuple[i]}, sc)
		}
		return
	}
	if len(a.Names) != 1 {
		c.errorf(a.Pos, "tuple arity mismatch: the right side gives 1 value, the left side names %d", len(a.Names))
		return
	}
	c.bind(a.Names[0].Name, v, sc)
}

// bind names a value in the innermost scope; an unnamed node output takes the name.
func (c *checker) bind(name string, v val, sc *scope) {
	if v.kind == vValue && v.v.Name == "" {
		v.v.Name = name
	}
	// A rebinding inside a loop of a name from outside updates the outer binding (carried).
	for x := sc; x != nil; x = x.parent {
		if _, ok := x.names[name]; ok {
			x.names[name] = v
			return
		}
	}
	sc.names[name] = v
}

func (c *checker) loop(f *syntax.For, sc *scope, gs *graphState) {
	if !c.localName(f.Var, f.Pos, sc) {
		return
	}
	b, ok := c.eval(f.Bound, sc)
	if !ok {
		return
	}
	if b.kind != vInt || !c.configOnly(b.dim) {
		what := b.describe()
		if b.kind == vInt {
			what = "not a config value"
		}
		c.errorf(f.Bound.Pos, "loop bound must be a config int; %s is %s", b.src, what)
		return
	}
	node := &ir.Node{Op: ir.OpLoop, Pos: pos(f.Pos), Loop: &ir.Loop{Index: f.Var, Count: b.dim}}
	body := &scope{parent: sc, names: map[string]val{f.Var: {kind: vInt, dim: ir.Var(f.Var)}}, graph: gs}
	// Names bound outside and assigned inside are carried from one iteration to the next.
	var carried []*ir.Carried
	for _, name := range assigned(f.Body) {
		outer, ok := sc.lookup(name)
		if !ok || outer.kind != vValue {
			continue
		}
		in := outer.v
		param := gs.value(name, in.Kind, in.Shape, in.DType, f.Pos)
		carried = append(carried, &ir.Carried{Name: name, In: in, Param: param})
		c.bind(name, val{kind: vValue, v: param}, sc)
	}
	savedBlock := gs.block
	gs.block = &node.Loop.Body
	gs.loops = append(gs.loops, loopInfo{index: f.Var, count: b.dim})
	c.stmts(f.Body, body, gs)
	gs.loops = gs.loops[:len(gs.loops)-1]
	gs.block = savedBlock
	for _, cv := range carried {
		next, _ := sc.lookup(cv.Name)
		if next.kind != vValue {
			continue
		}
		cv.Next = next.v
		if !c.shapeEqual(cv.In.Shape, next.v.Shape) || cv.In.DType != next.v.DType {
			c.errorf(f.Pos, "loop changes %s from %s %s to %s %s; a carried value keeps its shape", cv.Name, cv.In.Shape, cv.In.DType, next.v.Shape, next.v.DType)
		}
		out := gs.value(cv.Name, cv.In.Kind, cv.In.Shape, cv.In.DType, f.Pos)
		out.Def = node
		node.Outs = append(node.Outs, out)
		c.bind(cv.Name, val{kind: vValue, v: out}, sc)
	}
	node.Loop.Carried = carried
	*gs.block = append(*gs.block, node)
}

// assigned lists the names assigned anywhere in body, in first-assignment order.
func assigned(body []*syntax.Stmt) []string {
	var out []string
	seen := map[string]bool{}
	var walk func([]*syntax.Stmt)
	walk = func(ss []*syntax.Stmt) {
		for _, s := range ss {
			if s.Assign != nil {
				for _, n := range s.Assign.Names {
					if !seen[n.Name] {
						seen[n.Name] = true
						out = append(out, n.Name)
					}
				}
			}
			if s.For != nil {
				walk(s.For.Body)
			}
		}
	}
	walk(body)
	return out
}

// configOnly reports whether d depends on config values alone.
func (c *checker) configOnly(d ir.Dim) bool {
	for _, v := range d.Vars() {
		name := strings.SplitN(v, "[", 2)[0]
		if c.config[name] == nil {
			return false
		}
	}
	return true
}

func (c *checker) ret(r *syntax.Return, sc *scope, gs *graphState) {
	gs.returned = true
	var vals []val
	for _, e := range r.Values {
		v, ok := c.eval(e, sc)
		if !ok {
			return
		}
		if v.kind == vTuple {
			for _, t := range v.tuple {
				vals = append(vals, val{kind: vValue, v: t, pos: v.pos, src: v.src})
			}
			continue
		}
		vals = append(vals, v)
	}
	if gs.results != nil && len(vals) != len(gs.results) {
		c.errorf(r.Pos, "tuple arity mismatch: return gives %s, graph %s declares %d results", plural(len(vals), "value"), gs.g.Name, len(gs.results))
		return
	}
	for i, v := range vals {
		if v.kind != vValue || v.v.Kind != ir.Tensor {
			c.errorf(v.pos, "return gives %s; graphs return tensors", v.describe())
			continue
		}
		if gs.results != nil && !c.shapeEqual(v.v.Shape, gs.results[i]) {
			c.errorf(v.pos, "wrong result shape: result %d has shape %s, graph %s declares %s", i+1, v.v.Shape, gs.g.Name, gs.results[i])
			continue
		}
		gs.g.Results = append(gs.g.Results, v.v)
	}
}

func (c *checker) shapeEqual(a, b ir.Shape) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !c.facts.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// opArg is one argument of an op call: an evaluated operand, or an attribute still to evaluate.
type opArg struct {
	key    string
	v      val
	expr   *syntax.Expr
	pos    lexer.Position
	keyPos lexer.Position
	cond   *ir.Cond
}

// opCtx is an op call being checked.
type opCtx struct {
	c     *checker
	op    ir.Op
	pos   lexer.Position
	node  *ir.Node
	vals  map[string]val // operands by role
	poses map[string]lexer.Position
	attrs map[string]*ir.Attr
}

func (o *opCtx) errorf(p lexer.Position, format string, args ...any) {
	o.c.errorf(p, string(o.op)+": "+format, args...)
}

func (o *opCtx) has(role string) bool { _, ok := o.vals[role]; return ok }

func (o *opCtx) shape(role string) ir.Shape {
	if a := o.node.Arg(role); a != nil {
		return a.Shape()
	}
	return nil
}

func (o *opCtx) src(role string) string { return o.vals[role].src }

func (o *opCtx) setAttr(a *ir.Attr) {
	if old := o.node.Attr(a.Name); old != nil {
		*old = *a
		return
	}
	o.node.Attrs = append(o.node.Attrs, a)
	o.attrs[a.Name] = a
}

func (c *checker) opCall(op ir.Op, p lexer.Position, args []opArg, sc *scope) (val, bool) {
	spec := ir.Spec(op)
	gs := sc.graph
	o := &opCtx{c: c, op: op, pos: p, node: &ir.Node{Op: op, Pos: pos(p)},
		vals: map[string]val{}, poses: map[string]lexer.Position{}, attrs: map[string]*ir.Attr{}}
	roles := map[string]opArg{}
	attrs := map[string]opArg{}
	next := 0
	ok := true
	for _, a := range args {
		switch {
		case a.key == "":
			if next >= len(spec.Args) {
				c.errorf(a.pos, "%s takes %d operands; %s is one too many (attributes are written name: value)", op, len(spec.Args), a.v.src)
				return val{}, false
			}
			roles[spec.Args[next].Role] = a
			next++
		case spec.ArgSpec(a.key) != nil:
			if _, dup := roles[a.key]; dup {
				c.errorf(a.keyPos, "%s: operand %s is given twice", op, a.key)
				ok = false
			}
			roles[a.key] = a
		case spec.Attr(a.key) != nil:
			if _, dup := attrs[a.key]; dup {
				c.errorf(a.keyPos, "%s: attribute %s is given twice", op, a.key)
				ok = false
			}
			attrs[a.key] = a
		default:
			var names []string
			for _, at := range spec.Attrs {
				names = append(names, at.Name)
			}
			for _, as := range spec.Args {
				names = append(names, as.Role)
			}
			if hint := didYouMean(a.key, names); hint != "" {
				c.errorf(a.keyPos, "unknown attribute %s of %s%s", a.key, op, hint)
			} else {
				c.errorf(a.keyPos, "unknown attribute %s of %s; %s", a.key, op, attrList(spec))
			}
			ok = false
		}
	}
	for _, as := range spec.Args {
		a, present := roles[as.Role]
		if !present {
			if !as.Optional && !(as.Role == "bias" && o.node.Arg("bias") != nil) {
				if as.Role == "bias" && o.node.Arg("weight") != nil {
					o.errorf(p, "missing operand bias: %s.bias is not declared", strings.TrimSuffix(o.node.Arg("weight").Weight.Name, ".weight"))
				} else {
					o.errorf(p, "missing operand %s", as.Role)
				}
				ok = false
			}
			continue
		}
		if !c.operand(o, as, a, gs) {
			ok = false
		}
	}
	for _, at := range spec.Attrs {
		a, present := attrs[at.Name]
		if !present {
			if at.Required {
				o.errorf(p, "missing attribute %s (%s)", at.Name, at.Doc)
				ok = false
			}
			continue
		}
		if !c.attr(o, at, a, sc) {
			ok = false
		}
	}
	if !ok {
		return val{}, false
	}
	outs, ok := rules[op](o)
	if !ok {
		return val{}, false
	}
	out := val{pos: p}
	for _, sh := range outs {
		v := gs.value("", sh.kind, sh.shape, sh.dtype, p)
		v.Def = o.node
		o.node.Outs = append(o.node.Outs, v)
	}
	*gs.block = append(*gs.block, o.node)
	if len(outs) == 1 {
		out.kind, out.v = vValue, o.node.Outs[0]
	} else {
		out.kind, out.tuple = vTuple, o.node.Outs
	}
	return out, true
}

func attrList(spec *ir.OpSpec) string {
	if len(spec.Attrs) == 0 {
		return "it takes no attributes"
	}
	var names []string
	for _, a := range spec.Attrs {
		names = append(names, a.Name)
	}
	return "it takes " + strings.Join(names, ", ")
}

// operand converts one argument into the node's Arg for role as, checking its kind and dtype.
func (c *checker) operand(o *opCtx, as ir.ArgSpec, a opArg, gs *graphState) bool {
	v := a.v
	wantWeight := len(as.Kinds) == 1 && as.Kinds[0] == ir.WeightView
	if wantWeight {
		switch {
		case v.kind == vPath:
			return c.weightOperand(o, as.Role, v, a.pos, a.cond)
		case v.kind == vValue && v.v.Kind == ir.WeightView:
			o.node.Args = append(o.node.Args, &ir.Arg{Role: as.Role, Value: v.v, Pos: pos(a.pos)})
			o.vals[as.Role], o.poses[as.Role] = v, a.pos
			return true
		}
		o.errorf(a.pos, "%s must be a weight; %s is %s", as.Role, v.src, v.describe())
		return false
	}
	if v.kind != vValue || !kindIn(v.v.Kind, as.Kinds) {
		want := make([]string, len(as.Kinds))
		for i, k := range as.Kinds {
			want[i] = "a " + k.String() + " value"
		}
		if as.Kinds[0] == ir.Tensor {
			want = []string{"a tensor"}
		}
		o.errorf(a.pos, "%s must be %s; %s is %s", as.Role, strings.Join(want, " or "), v.src, v.describe())
		return false
	}
	if v.v.Kind == ir.KVCache && v.index == nil {
		o.errorf(a.pos, "%s is a cache of every layer; pick one: %s[i]", v.src, v.src)
		return false
	}
	if as.DType != 0 && v.v.DType != as.DType {
		o.errorf(a.pos, "%s has dtype %s, want %s", v.src, v.v.DType, as.DType)
		return false
	}
	if v.v.Kind == ir.Tensor {
		want := 2
		if as.DType == ir.I32 && (as.Role == "ids" || as.Role == "index") {
			want = 1
		}
		if len(v.v.Shape) != want {
			o.errorf(a.pos, "%s has rank %d (%s); %s takes a rank-%d %s", v.src, len(v.v.Shape), v.v.Shape, o.op, want, as.Role)
			return false
		}
	}
	o.node.Args = append(o.node.Args, &ir.Arg{Role: as.Role, Value: v.v, Index: v.index, Pos: pos(a.pos)})
	o.vals[as.Role], o.poses[as.Role] = v, a.pos
	return true
}

func kindIn(k ir.Kind, ks []ir.Kind) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

// weightOperand resolves a weight path for role: the path itself when it names a declared
// weight, else its .weight (and, for ops with a bias operand not given, its .bias when declared).
func (c *checker) weightOperand(o *opCtx, role string, v val, p lexer.Position, cond *ir.Cond) bool {
	path := v.path
	w, exact := c.weights[path.key]
	group := false
	if !exact && (role == "weight" || role == "table" || role == "a" || role == "b") {
		w, group = c.weights[path.key+".weight"]
	}
	if w == nil && (c.bad[path.key] || c.bad[path.key+".weight"]) {
		return false
	}
	if w == nil {
		if key, ok := c.needsIndex(path.key); ok {
			c.errorf(p, "%s is a per-layer weight; index its layer: %s", path.name, key)
			return false
		}
		if flat := strings.Replace(path.key, "[#]", "", 1); flat != path.key && (c.weights[flat] != nil || c.weights[flat+".weight"] != nil) {
			c.errorf(p, "%s is not per-layer; drop the layer index", dropIndex(path.name))
			return false
		}
		name := path.name
		if role == "weight" || role == "table" || role == "a" || role == "b" {
			if !c.hasWeightUnder(path.key) {
				name += ".weight"
			}
		}
		if c.hasWeightUnder(path.key) {
			c.errorf(p, "undeclared weight: %s names a group of weights, not one; pick one of them", path.name)
			return false
		}
		c.errorf(p, "undeclared weight: %s is not declared in weights", name)
		return false
	}
	ref, ok := c.weightRef(w, path, group, p, cond)
	if !ok {
		return false
	}
	o.node.Args = append(o.node.Args, &ir.Arg{Role: role, Weight: ref, Pos: pos(p)})
	o.vals[role], o.poses[role] = v, p
	if group && role == "weight" && ir.Spec(o.op).ArgSpec("bias") != nil {
		if b, hasBias := c.weights[path.key+".bias"]; hasBias {
			bref, ok := c.weightRef(b, path, true, p, cond)
			if !ok {
				return false
			}
			bref.Name = path.name + ".bias"
			o.node.Args = append(o.node.Args, &ir.Arg{Role: "bias", Weight: bref, Pos: pos(p)})
			o.vals["bias"], o.poses["bias"] = v, p
		}
	}
	return true
}

// needsIndex finds the declared weight key is missing a layer index for, and returns it written
// with the weight's layer variable.
func (c *checker) needsIndex(key string) (string, bool) {
	if strings.Contains(key, "[#]") {
		return "", false
	}
	parts := strings.Split(key, ".")
	for i := range parts {
		try := append([]string{}, parts...)
		try[i] += "[#]"
		k := strings.Join(try, ".")
		for wk, w := range c.weights {
			if wk == k || wk == k+".weight" || strings.HasPrefix(wk, k+".") {
				return strings.Replace(k, "[#]", "["+w.Index+"]", 1), true
			}
		}
	}
	return "", false
}

func (c *checker) hasWeightUnder(key string) bool {
	for k := range c.weights {
		if strings.HasPrefix(k, key+".") {
			return true
		}
	}
	return false
}

// weightRef checks the use of w through path: its layer index and its condition, and marks it used.
func (c *checker) weightRef(w *ir.Weight, path *wpath, group bool, p lexer.Position, cond *ir.Cond) (*ir.WeightRef, bool) {
	name := path.name
	if group {
		name += ".weight"
	}
	switch {
	case w.Layered() && path.layer == nil:
		c.errorf(p, "%s is a per-layer weight (%s layers); index it, e.g. inside for %s < %s", w.Name, w.Count, w.Index, w.Count)
		return nil, false
	case !w.Layered() && path.layer != nil:
		c.errorf(p, "%s is not per-layer; drop the layer index", w.Name)
		return nil, false
	}
	ref := &ir.WeightRef{Weight: w, Name: name, Pos: pos(p)}
	if path.layer != nil {
		ref.Layer = *path.layer
		vars := path.layer.Vars()
		if len(vars) == 1 && path.layer.Equal(ir.Var(vars[0])) {
			if count, ok := c.loopCount(vars[0]); ok && !c.facts.Equal(count, w.Count) {
				c.errorf(p, "%s has %s layers, but loop index %s runs to %s", w.Name, w.Count, vars[0], count)
				return nil, false
			}
		}
	}
	if w.Cond != nil && (cond == nil || *cond != *w.Cond) {
		other := ir.Cond{Name: w.Cond.Name, Not: !w.Cond.Not}
		c.errorf(p, "%s exists only if %s; use it where that holds, e.g. %s ? … : %s", w.Name, w.Cond, other, name)
		return nil, false
	}
	c.used[w] = true
	return ref, true
}

// loopCount is the bound of the enclosing loop over index, if any.
func (c *checker) loopCount(index string) (ir.Dim, bool) {
	gs := c.current
	if gs == nil {
		return ir.Dim{}, false
	}
	for i := len(gs.loops) - 1; i >= 0; i-- {
		if gs.loops[i].index == index {
			return gs.loops[i].count, true
		}
	}
	return ir.Dim{}, false
}

// attr evaluates one attribute against its spec and records it on the node.
func (c *checker) attr(o *opCtx, at ir.AttrSpec, a opArg, sc *scope) bool {
	out := &ir.Attr{Name: at.Name, Kind: at.Kind, Pos: pos(a.keyPos)}
	if at.Kind == ir.AttrEnum {
		word := ""
		if pf := bareOperand(a.expr); pf != nil && len(pf.Suffix) == 0 {
			word = pf.X.Ident
		}
		if !contains(at.Enum, word) {
			o.errorf(a.expr.Pos, "attribute %s is one of %s; got %s", at.Name, strings.Join(at.Enum, ", "), syntax.ExprString(a.expr))
			return false
		}
		out.Enum = word
		o.setAttr(out)
		return true
	}
	v := a.v
	if a.expr != nil {
		var ok bool
		if v, ok = c.eval(a.expr, sc); !ok {
			return false
		}
	}
	good := false
	switch at.Kind {
	case ir.AttrInt:
		good = v.kind == vInt
		out.Int = v.dim
	case ir.AttrFloat:
		switch v.kind {
		case vFloat:
			good, out.Float, out.FloatName = true, v.f, v.name
		case vInt:
			if k, isConst := c.facts.Const(v.dim); isConst {
				good, out.Float = true, float64(k)
			}
		}
	case ir.AttrBool:
		good = v.kind == vBool
		out.Bool, out.BoolName, out.BoolNot = v.b, v.name, v.not
	case ir.AttrInts:
		good = v.kind == vList
		out.Ints = v.list
	}
	if !good {
		o.errorf(v.pos, "wrong attribute type: %s is %s (%s), got %s %s", at.Name, kindArticle(at.Kind), at.Doc, v.describe(), v.src)
		return false
	}
	o.setAttr(out)
	return true
}

func kindArticle(k ir.AttrKind) string {
	switch k {
	case ir.AttrInt:
		return "an int"
	case ir.AttrInts:
		return "an int list"
	}
	return fmt.Sprintf("a %s", k)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// par prints d for a message, in parentheses when it is a sum.
func par(d ir.Dim) string {
	s := d.String()
	if strings.ContainsAny(s, " ") {
		return "(" + s + ")"
	}
	return s
}

// dropIndex removes the first [index] of a weight path as written: tok[0].x → tok.x.
func dropIndex(name string) string {
	i, j := strings.Index(name, "["), strings.Index(name, "]")
	if i < 0 || j < i {
		return name
	}
	return name[:i] + name[j+1:]
}
