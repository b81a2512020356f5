package check

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/alecthomas/participle/v2/lexer"

	"tfc/compiler/ir"
	"tfc/compiler/syntax"
)

// valKind is what an expression evaluates to.
type valKind uint8

const (
	vInt   valKind = iota + 1 // dim
	vFloat                    // f, or the float config value name
	vBool                     // b, or the bool config value name (negated when not)
	vList                     // list of ints
	vString
	vValue // a graph value (tensor, spans, rows, kv cache, weight view); index selects a cache layer
	vTuple // several values (split)
	vPath  // a weight path such as vis.blocks[i].attn.qkv
	vBad   // a name whose definition failed; uses stay silent
)

type val struct {
	kind  valKind
	pos   lexer.Position
	src   string
	dim   ir.Dim
	f     float64
	b     bool
	name  string
	not   bool
	list  []ir.Dim
	str   string
	v     *ir.Value
	index *ir.Dim
	tuple []*ir.Value
	path  *wpath
}

// wpath is a weight path as written: key has [#] for the layer index, name the index as written.
type wpath struct {
	key, name string
	layer     *ir.Dim
}

func (v val) describe() string {
	switch v.kind {
	case vInt:
		return "an int"
	case vFloat:
		return "a float"
	case vBool:
		return "a bool"
	case vList:
		return "an int list"
	case vString:
		return "a string"
	case vValue:
		switch v.v.Kind {
		case ir.Tensor:
			return "a tensor " + v.v.Shape.String()
		case ir.WeightView:
			return "a weight " + v.v.Shape.String()
		}
		return "a " + v.v.Kind.String() + " value"
	case vTuple:
		return fmt.Sprintf("%d values", len(v.tuple))
	case vPath:
		return "the weight path " + v.path.name
	}
	return "nothing"
}

// scope binds names inside a graph or loop; the config scope is empty.
type scope struct {
	parent  *scope
	names   map[string]val
	graph   *graphState
	newVars bool // unknown names become shape variables (graph parameter shapes)
}

func (c *checker) configScope() *scope { return &scope{names: map[string]val{}} }

func (s *scope) lookup(name string) (val, bool) {
	for x := s; x != nil; x = x.parent {
		if v, ok := x.names[name]; ok {
			return v, true
		}
	}
	return val{}, false
}

func (c *checker) eval(e *syntax.Expr, sc *scope) (val, bool) {
	if e.Then != nil {
		return c.ternary(e, sc)
	}
	if e.Cond.Op != "" {
		c.errorf(e.Cond.Pos, "comparison %s outside a require; comparisons only state requires", syntax.ExprString(e))
		return val{}, false
	}
	return c.evalSum(e.Cond.Left, sc)
}

func (c *checker) evalSum(s *syntax.Sum, sc *scope) (val, bool) {
	acc, ok := c.evalProd(s.Left, sc)
	if !ok {
		return val{}, false
	}
	for _, r := range s.Rest {
		rhs, ok := c.evalProd(r.Right, sc)
		if !ok {
			return val{}, false
		}
		if acc, ok = c.arith(acc, r.Op, rhs, r.Pos, sc); !ok {
			return val{}, false
		}
	}
	acc.src = sumSrc(s)
	acc.pos = s.Pos
	return acc, true
}

func sumSrc(s *syntax.Sum) string {
	return syntax.ExprString(&syntax.Expr{Cond: &syntax.Cmp{Left: s}})
}

func (c *checker) evalProd(p *syntax.Prod, sc *scope) (val, bool) {
	acc, ok := c.evalUnary(p.Left, sc)
	if !ok {
		return val{}, false
	}
	for _, r := range p.Rest {
		rhs, ok := c.evalUnary(r.Right, sc)
		if !ok {
			return val{}, false
		}
		if acc, ok = c.arith(acc, r.Op, rhs, r.Pos, sc); !ok {
			return val{}, false
		}
	}
	if len(p.Rest) > 0 {
		acc.src = sumSrc(&syntax.Sum{Left: p})
		acc.pos = p.Pos
	}
	return acc, true
}

// arith applies a binary operator: int arithmetic on dims, add and mul nodes on tensors.
func (c *checker) arith(a val, op string, b val, p lexer.Position, sc *scope) (val, bool) {
	if a.kind == vInt && b.kind == vInt {
		out := val{kind: vInt, pos: a.pos}
		switch op {
		case "+":
			out.dim = a.dim.Add(b.dim)
		case "-":
			out.dim = a.dim.Sub(b.dim)
		case "*":
			out.dim = a.dim.Mul(b.dim)
		case "/", "%":
			if k, isConst := c.facts.Const(b.dim); isConst && k == 0 {
				c.errorf(b.pos, "division by zero: %s is 0", b.src)
				return val{}, false
			}
			if op == "/" {
				out.dim = a.dim.Div(b.dim)
			} else {
				out.dim = a.dim.Mod(b.dim)
			}
		}
		return out, true
	}
	if a.kind == vValue && b.kind == vValue && sc.graph != nil && (op == "+" || op == "*") {
		o := ir.OpAdd
		if op == "*" {
			o = ir.OpMul
		}
		return c.opCall(o, p, []opArg{{v: a, pos: a.pos}, {v: b, pos: b.pos}}, sc)
	}
	for _, x := range []val{a, b} {
		if x.kind != vInt && x.kind != vValue {
			c.errorf(x.pos, "operator %s needs ints or tensors; %s is %s", op, x.src, x.describe())
			return val{}, false
		}
	}
	if a.kind == vValue && b.kind == vValue {
		c.errorf(p, "operator %s does not apply to tensors; tensors take + (add) and * (mul)", op)
	} else {
		c.errorf(p, "operator %s mixes an int and a tensor; write the tensor op, e.g. mul(x, y)", op)
	}
	return val{}, false
}

func (c *checker) evalUnary(u *syntax.Unary, sc *scope) (val, bool) {
	v, ok := c.evalPostfix(u.X, sc)
	if !ok || u.Op == "" {
		return v, ok
	}
	src := syntax.ExprString(&syntax.Expr{Cond: &syntax.Cmp{Left: &syntax.Sum{Left: &syntax.Prod{Left: u}}}})
	switch {
	case u.Op == "-" && v.kind == vInt:
		return val{kind: vInt, dim: v.dim.Scale(-1), pos: u.Pos, src: src}, true
	case u.Op == "-" && v.kind == vFloat && v.name == "":
		return val{kind: vFloat, f: -v.f, pos: u.Pos, src: src}, true
	case u.Op == "!" && v.kind == vBool:
		if v.name == "" {
			return val{kind: vBool, b: !v.b, pos: u.Pos, src: src}, true
		}
		return val{kind: vBool, name: v.name, not: !v.not, pos: u.Pos, src: src}, true
	}
	c.errorf(u.Pos, "operator %s does not apply to %s", u.Op, v.describe())
	return val{}, false
}

func (c *checker) evalPostfix(p *syntax.Postfix, sc *scope) (val, bool) {
	v, ok := c.evalPrimary(p.X, sc)
	if !ok {
		return val{}, false
	}
	for _, s := range p.Suffix {
		switch {
		case v.kind == vPath && s.Index == nil:
			v.path = &wpath{key: v.path.key + "." + s.Field, name: v.path.name + "." + s.Field, layer: v.path.layer}
		case v.kind == vPath:
			if v.path.layer != nil {
				c.errorf(s.Pos, "%s already has a layer index; weight paths take one", v.path.name)
				return val{}, false
			}
			ix, ok := c.eval(s.Index, sc)
			if !ok {
				return val{}, false
			}
			if ix.kind != vInt {
				c.errorf(s.Index.Pos, "a layer index is an int; %s is %s", ix.src, ix.describe())
				return val{}, false
			}
			v.path = &wpath{key: v.path.key + "[#]", name: v.path.name + "[" + ix.src + "]", layer: &ix.dim}
		case v.kind == vValue && v.v.Kind == ir.KVCache && s.Index != nil && v.index == nil:
			ix, ok := c.eval(s.Index, sc)
			if !ok {
				return val{}, false
			}
			if ix.kind != vInt {
				c.errorf(s.Index.Pos, "a cache layer index is an int; %s is %s", ix.src, ix.describe())
				return val{}, false
			}
			v.index = &ix.dim
		case v.kind == vList && s.Index != nil:
			ix, ok := c.eval(s.Index, sc)
			if !ok {
				return val{}, false
			}
			k, isConst := c.facts.Const(ix.dim)
			if ix.kind != vInt || !isConst || k < 0 || int(k) >= len(v.list) {
				c.errorf(s.Index.Pos, "a list index is a constant from 0 to %d; got %s", len(v.list)-1, ix.src)
				return val{}, false
			}
			v = val{kind: vInt, dim: v.list[k]}
		default:
			what := "." + s.Field
			if s.Index != nil {
				what = "[" + syntax.ExprString(s.Index) + "]"
			}
			c.errorf(s.Pos, "%s cannot take %s", v.describe(), what)
			return val{}, false
		}
	}
	v.pos = p.Pos
	v.src = syntax.ExprString(&syntax.Expr{Cond: &syntax.Cmp{Left: &syntax.Sum{Left: &syntax.Prod{Left: &syntax.Unary{X: p}}}}})
	return v, true
}

func (c *checker) evalPrimary(p *syntax.Primary, sc *scope) (val, bool) {
	switch {
	case p.Call != nil:
		return c.call(p.Call, sc)
	case p.Int != "":
		n, err := strconv.ParseInt(p.Int, 10, 64)
		if err != nil {
			c.errorf(p.Pos, "integer %s is out of range", p.Int)
			return val{}, false
		}
		return val{kind: vInt, dim: ir.Const(n), pos: p.Pos, src: p.Int}, true
	case p.Float != "":
		x, err := strconv.ParseFloat(p.Float, 64)
		if err != nil {
			c.errorf(p.Pos, "bad number %s", p.Float)
			return val{}, false
		}
		return val{kind: vFloat, f: x, pos: p.Pos, src: p.Float}, true
	case p.String != "":
		s, _ := strconv.Unquote(p.String)
		return val{kind: vString, str: s, pos: p.Pos, src: p.String}, true
	case p.List != nil:
		out := val{kind: vList, pos: p.Pos, src: syntax.ListString(p.List)}
		for _, e := range p.List.Elems {
			v, ok := c.eval(e, sc)
			if !ok {
				return val{}, false
			}
			if v.kind != vInt {
				c.errorf(e.Pos, "list elements are ints; %s is %s", v.src, v.describe())
				return val{}, false
			}
			out.list = append(out.list, v.dim)
		}
		return out, true
	case p.Paren != nil:
		return c.eval(p.Paren, sc)
	}
	v, ok := c.ident(p.Ident, p.Pos, sc)
	v.pos, v.src = p.Pos, p.Ident
	return v, ok
}

// ident resolves a name: graph bindings, config values, weight roots, then new shape variables.
func (c *checker) ident(name string, p lexer.Position, sc *scope) (val, bool) {
	if v, ok := sc.lookup(name); ok {
		return v, v.kind != vBad
	}
	switch name {
	case "true", "false":
		return val{kind: vBool, b: name == "true"}, true
	}
	if c.bad[name] {
		return val{}, false
	}
	if cv, ok := c.config[name]; ok {
		switch cv.Type {
		case ir.Int:
			return val{kind: vInt, dim: ir.Var(name)}, true
		case ir.Float:
			return val{kind: vFloat, name: name}, true
		case ir.Bool:
			return val{kind: vBool, name: name}, true
		case ir.String:
			return val{kind: vString, name: name}, true
		}
		if cv.Len == 0 {
			c.errorf(p, "int list %s has no fixed length; declare it int[n] to use it here", name)
			return val{}, false
		}
		return val{kind: vList, list: cv.Elems()}, true
	}
	if _, ok := c.prefixes[name]; ok || c.roots[name] {
		return val{kind: vPath, path: &wpath{key: name, name: name}}, true
	}
	if sc.newVars {
		if _, taken := c.declared[name]; !taken && ir.Spec(ir.Op(name)) == nil {
			v := val{kind: vInt, dim: ir.Var(name)}
			sc.names[name] = v
			sc.graph.shapeVars[name] = true
			return v, true
		}
	}
	if w, ok := c.indexVar[name]; ok && sc.graph != nil {
		c.errorf(p, "layer index %s is not in scope here; use it inside `for %s < %s { … }`", name, name, w.Count)
		return val{}, false
	}
	if ir.Spec(ir.Op(name)) != nil {
		c.errorf(p, "%s is an op; call it as %s(…)", name, name)
		return val{}, false
	}
	c.errorf(p, "undefined name %s%s", name, didYouMean(name, c.visibleNames(sc)))
	return val{}, false
}

// ternary is `cond ? a : b` over weights: a select node decided when the config is bound.
func (c *checker) ternary(e *syntax.Expr, sc *scope) (val, bool) {
	if e.Cond.Op == "in" {
		return c.layerTernary(e, sc)
	}
	cond, ok := c.evalSum(e.Cond.Left, sc)
	if !ok || e.Cond.Op != "" {
		if ok {
			c.errorf(e.Cond.Pos, "the condition of ?: is a bool config value; comparisons are not supported")
		}
		return val{}, false
	}
	if cond.kind != vBool || cond.name == "" {
		c.errorf(e.Cond.Pos, "the condition of ?: is a bool config value such as tied; %s is %s", cond.src, cond.describe())
		return val{}, false
	}
	if sc.graph == nil {
		c.errorf(e.Pos, "?: selects weights inside a graph")
		return val{}, false
	}
	g := sc.graph
	saved := g.cond
	g.cond = &ir.Cond{Name: cond.name, Not: cond.not}
	a, ok1 := c.eval(e.Then, sc)
	g.cond = &ir.Cond{Name: cond.name, Not: !cond.not}
	b, ok2 := c.eval(e.Else, sc)
	g.cond = saved
	if !ok1 || !ok2 {
		return val{}, false
	}
	out, ok := c.opCall(ir.OpSelect, e.Pos, []opArg{
		{v: a, pos: e.Then.Pos, cond: &ir.Cond{Name: cond.name, Not: cond.not}},
		{v: b, pos: e.Else.Pos, cond: &ir.Cond{Name: cond.name, Not: !cond.not}},
		{key: "cond", v: cond, pos: e.Cond.Pos, keyPos: e.Cond.Pos}}, sc)
	return out, ok
}

// layerTernary is `i in list ? a : b` over spans: a select node decided at each layer, a when
// the loop index i is an element of the int list config value list, else b.
func (c *checker) layerTernary(e *syntax.Expr, sc *scope) (val, bool) {
	if sc.graph == nil {
		c.errorf(e.Pos, "?: selects inside a graph")
		return val{}, false
	}
	left := bareOperand(&syntax.Expr{Cond: &syntax.Cmp{Left: e.Cond.Left}})
	index := ""
	if left != nil && len(left.Suffix) == 0 && left.X.Ident != "" {
		if _, inLoop := c.loopCount(left.X.Ident); inLoop {
			index = left.X.Ident
		}
	}
	if index == "" {
		c.errorf(e.Cond.Left.Pos, "the left of in is a loop index (for i < N); %s is not", sumSrc(e.Cond.Left))
		return val{}, false
	}
	right := bareOperand(&syntax.Expr{Cond: &syntax.Cmp{Left: e.Cond.Right}})
	list := ""
	if right != nil && len(right.Suffix) == 0 && right.X.Ident != "" {
		if cv, ok := c.config[right.X.Ident]; ok && cv.Type == ir.IntList {
			list = right.X.Ident
		}
	}
	if list == "" {
		c.errorf(e.Cond.Right.Pos, "the right of in is an int list config value such as fullatt; %s is not", sumSrc(e.Cond.Right))
		return val{}, false
	}
	a, ok1 := c.eval(e.Then, sc)
	b, ok2 := c.eval(e.Else, sc)
	if !ok1 || !ok2 {
		return val{}, false
	}
	for _, x := range []struct {
		v val
		p lexer.Position
	}{{a, e.Then.Pos}, {b, e.Else.Pos}} {
		if x.v.kind != vValue || x.v.v.Kind != ir.Spans {
			c.errorf(x.p, "%s ? a : b by a layer index selects spans; %s is %s", syntax.ExprString(&syntax.Expr{Cond: e.Cond}), x.v.src, x.v.describe())
			return val{}, false
		}
	}
	gs := sc.graph
	n := &ir.Node{Op: ir.OpSelect, Pos: pos(e.Pos),
		Args:  []*ir.Arg{{Role: "a", Value: a.v, Pos: pos(e.Then.Pos)}, {Role: "b", Value: b.v, Pos: pos(e.Else.Pos)}},
		Attrs: []*ir.Attr{{Name: "cond", Kind: ir.AttrBool, BoolName: list, BoolIndex: index, Pos: pos(e.Cond.Pos)}}}
	out := gs.value("", ir.Spans, a.v.Shape, a.v.DType, e.Pos)
	out.Def = n
	n.Outs = []*ir.Value{out}
	*gs.block = append(*gs.block, n)
	return val{kind: vValue, v: out, pos: e.Pos, src: syntax.ExprString(e)}, true
}

// call evaluates `name(args)`: sum over an int list, or an op.
func (c *checker) call(call *syntax.Call, sc *scope) (val, bool) {
	if call.Name == "sum" {
		if len(call.Args) != 1 || call.Args[0].Key != "" {
			c.errorf(call.Pos, "sum takes one int list")
			return val{}, false
		}
		l, ok := c.eval(call.Args[0].Value, sc)
		if !ok {
			return val{}, false
		}
		if l.kind != vList {
			c.errorf(call.Args[0].Pos, "sum takes an int list; %s is %s", l.src, l.describe())
			return val{}, false
		}
		s := ir.Const(0)
		for _, d := range l.list {
			s = s.Add(d)
		}
		return val{kind: vInt, dim: s, pos: call.Pos}, true
	}
	op := ir.Op(call.Name)
	if ir.Spec(op) == nil {
		var names []string
		for _, o := range ir.Ops() {
			names = append(names, string(o))
		}
		if hint := didYouMean(call.Name, names); hint != "" {
			c.errorf(call.Pos, "unknown op %s%s", call.Name, hint)
		} else {
			c.errorf(call.Pos, "unknown op %s; the ops are %s", call.Name, strings.Join(names, ", "))
		}
		return val{}, false
	}
	if sc.graph == nil {
		c.errorf(call.Pos, "op %s is used outside a graph; ops compute graph values", call.Name)
		return val{}, false
	}
	var args []opArg
	ok := true
	for _, a := range call.Args {
		if a.Key != "" && ir.Spec(op).ArgSpec(a.Key) == nil {
			args = append(args, opArg{key: a.Key, expr: a.Value, pos: a.Value.Pos, keyPos: a.Pos})
			continue
		}
		v, good := c.eval(a.Value, sc)
		if !good {
			ok = false
			continue
		}
		args = append(args, opArg{key: a.Key, v: v, pos: a.Value.Pos, keyPos: a.Pos, cond: sc.graph.cond})
	}
	if !ok {
		return val{}, false
	}
	return c.opCall(op, call.Pos, args, sc)
}

// visibleNames lists the names an expression could mean in scope sc, for suggestions.
func (c *checker) visibleNames(sc *scope) []string {
	var out []string
	for x := sc; x != nil; x = x.parent {
		for n, v := range x.names {
			if v.kind != vBad {
				out = append(out, n)
			}
		}
	}
	for n := range c.config {
		out = append(out, n)
	}
	for n := range c.prefixes {
		out = append(out, n)
	}
	for n := range c.roots {
		out = append(out, n)
	}
	return out
}
