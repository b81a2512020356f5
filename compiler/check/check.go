// Package check turns a parsed .graph file into an *ir.Module: it resolves names, types the
// config bindings, expands weight templates, infers symbolic shapes and dtypes through every op,
// and proves the shapes equal where ops need them. It reports every problem it finds, not only
// the first.
package check

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/alecthomas/participle/v2/lexer"

	"tfc/compiler/ir"
	"tfc/compiler/syntax"
)

// Loader reads the file of another family, whose graph this file reuses.
type Loader func(family string) (*syntax.File, error)

// Beside reads another family's file from the folder of file name (a path under root):
// graphs/dots_ocr.graph reusing qwen2_vl.decode reads graphs/qwen2_vl.graph.
func Beside(root, name string) Loader {
	return func(family string) (*syntax.File, error) {
		other := path.Join(path.Dir(name), family+".graph")
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(other)))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no family file %s", other)
		}
		if err != nil {
			return nil, err
		}
		f, err := syntax.Parse(other, string(src))
		if err != nil {
			return nil, fmt.Errorf("%s does not parse; check it first: %w", other, err)
		}
		return f, nil
	}
}

// Source parses and checks one file, reading a family it reuses a graph of beside it (from the
// working directory). The module is nil when there are diagnostics.
func Source(name, src string) (*ir.Module, Diagnostics) {
	return SourceWith(name, src, Beside("", name))
}

// SourceWith is Source reading other families' files through load.
func SourceWith(name, src string, load Loader) (*ir.Module, Diagnostics) {
	f, err := syntax.Parse(name, src)
	if err != nil {
		if se, ok := err.(*syntax.Error); ok {
			return nil, Diagnostics{{Pos: pos(se.Pos), Msg: "syntax error: " + se.Msg}}
		}
		return nil, Diagnostics{{Pos: ir.Pos{File: name, Line: 1, Col: 1}, Msg: err.Error()}}
	}
	return FileWith(f, load)
}

// File checks a parsed file that reuses no other family's graph. The module is nil when there
// are diagnostics.
func File(f *syntax.File) (*ir.Module, Diagnostics) { return FileWith(f, nil) }

// FileWith checks a parsed file, reading other families' files through load.
func FileWith(f *syntax.File, load Loader) (*ir.Module, Diagnostics) {
	c := &checker{
		load:     load,
		file:     f,
		mod:      &ir.Module{File: f.Name, Source: f.Source, Pos: ir.Pos{File: f.Name, Line: 1, Col: 1}},
		facts:    ir.NewFacts(),
		config:   map[string]*ir.ConfigValue{},
		prefixes: map[string]*ir.Prefix{},
		weights:  map[string]*ir.Weight{},
		used:     map[*ir.Weight]bool{},
		roots:    map[string]bool{},
		indexVar: map[string]*ir.Weight{},
		declared: map[string]ir.Pos{},
		bad:      map[string]bool{},
	}
	c.run()
	if len(c.diags) > 0 {
		return nil, c.diags.sorted()
	}
	return c.mod, nil
}

type checker struct {
	load     Loader
	file     *syntax.File
	mod      *ir.Module
	diags    Diagnostics
	facts    *ir.Facts
	config   map[string]*ir.ConfigValue
	prefixes map[string]*ir.Prefix
	weights  map[string]*ir.Weight // by key: the name with each layer range as [#]
	used     map[*ir.Weight]bool
	roots    map[string]bool       // first segments of weight names that are not prefixes
	indexVar map[string]*ir.Weight // layer variables of weight ranges, for scope hints
	declared map[string]ir.Pos     // every top-level name: config values, prefixes, graphs
	current  *graphState           // the graph being checked
	bad      map[string]bool       // names and weight keys whose declaration failed; uses stay silent
}

func pos(p lexer.Position) ir.Pos { return ir.Pos{File: p.Filename, Line: p.Line, Col: p.Column} }

func (c *checker) errorf(p lexer.Position, format string, args ...any) {
	c.diags = append(c.diags, Diagnostic{Pos: pos(p), Msg: fmt.Sprintf(format, args...)})
}

func (c *checker) run() {
	var family *syntax.Decl
	for _, d := range c.file.Decls {
		if d.Family == nil {
			continue
		}
		if family != nil {
			c.errorf(d.Pos, "second family header; a file describes one family (the first is at line %d)", family.Pos.Line)
			continue
		}
		family = d
		c.family(d.Family)
	}
	if family == nil {
		c.diags = append(c.diags, Diagnostic{Pos: ir.Pos{File: c.file.Name, Line: 1, Col: 1},
			Msg: "missing family header: start the file with `family NAME { model_type \"…\" architecture \"…\" }`"})
	}
	// Declarations are read in order of dependence: config, prefixes, weights, rules, graphs.
	for _, d := range c.file.Decls {
		if d.Config != nil {
			c.configBlock(d.Config)
		}
	}
	for _, d := range c.file.Decls {
		if d.Prefix != nil {
			c.prefix(d.Prefix)
		}
	}
	for _, d := range c.file.Decls {
		if d.Weights != nil {
			for _, wd := range d.Weights.Items {
				c.weightDecl(wd)
			}
		}
	}
	for _, d := range c.file.Decls {
		if d.Rule != nil {
			c.rule(d.Rule)
		}
	}
	for _, d := range c.file.Decls {
		if d.Graph != nil {
			c.graph(d.Graph)
		}
	}
	if len(c.diags) > 0 {
		return // a use that failed to check may be what leaves a weight unused
	}
	for _, w := range c.mod.Weights {
		if !c.used[w] {
			c.diags = append(c.diags, Diagnostic{Pos: w.Pos,
				Msg: fmt.Sprintf("unused weight: %s is declared but no graph uses it; use it or remove it", w.Name)})
		}
	}
}

func (c *checker) family(f *syntax.Family) {
	c.mod.Family = f.Name
	var ocr ir.OCR
	var promptAt, dpiAt *syntax.FamilyEntry
	for _, e := range f.Entries {
		var vals []string
		for _, v := range e.Values {
			if !strings.HasPrefix(v, `"`) {
				if e.Key != "ocr_dpi" {
					c.errorf(e.Pos, "%s takes strings; quote %s", e.Key, v)
				}
				continue
			}
			s, err := strconv.Unquote(v)
			if err != nil {
				c.errorf(e.Pos, "bad string %s: %v", v, err)
				continue
			}
			vals = append(vals, s)
		}
		if e.Label != "" && e.Key != "ocr_prompt" {
			c.errorf(e.Pos, "%s takes no label; only ocr_prompt names its prompts (`ocr_prompt table: \"…\"`)", e.Key)
			continue
		}
		switch e.Key {
		case "model_type":
			c.mod.ModelTypes = append(c.mod.ModelTypes, vals...)
		case "architecture":
			c.mod.Architectures = append(c.mod.Architectures, vals...)
		case "ocr_prompt":
			prompt := strings.Join(vals, "") // "": the page is sent alone
			if e.Label != "" {
				if ocrTask(ocr.Tasks, e.Label) != nil {
					c.errorf(e.Pos, "second ocr_prompt labelled %s; a label names one prompt", e.Label)
					continue
				}
				ocr.Tasks = append(ocr.Tasks, ir.OCRTask{Name: e.Label, Prompt: prompt})
			}
			if promptAt == nil {
				promptAt, ocr.Prompt = e, prompt
			} else if e.Label == "" {
				c.errorf(e.Pos, "second ocr_prompt without a label; the first is at line %d (a long prompt is several strings on one entry, joined; another prompt a request picks by name is `ocr_prompt NAME: \"…\"`)", promptAt.Pos.Line)
			}
		case "ocr_dpi":
			if dpiAt != nil {
				c.errorf(e.Pos, "second ocr_dpi; the first is at line %d", dpiAt.Pos.Line)
				continue
			}
			dpiAt = e
			n, err := strconv.Atoi(e.Values[0])
			if len(e.Values) != 1 || err != nil || n < minOCRDPI || n > maxOCRDPI {
				c.errorf(e.Pos, "ocr_dpi takes one integer from %d to %d, the resolution PDF pages are rendered at", minOCRDPI, maxOCRDPI)
				continue
			}
			ocr.DPI = n
		default:
			c.errorf(e.Pos, "unknown family entry %s; use model_type, architecture, ocr_prompt or ocr_dpi", e.Key)
		}
	}
	switch {
	case promptAt != nil && dpiAt == nil:
		c.errorf(promptAt.Pos, "ocr_prompt without ocr_dpi; add `ocr_dpi N`, the resolution PDF pages are rendered at")
	case dpiAt != nil && promptAt == nil:
		c.errorf(dpiAt.Pos, "ocr_dpi without ocr_prompt; add `ocr_prompt \"…\"`, the text a page is sent with")
	case promptAt != nil:
		ocr.Pos = pos(promptAt.Pos)
		c.mod.OCR = &ocr
	}
	if len(c.mod.ModelTypes) == 0 && len(c.mod.Architectures) == 0 {
		c.errorf(f.Pos, "family %s names no model_type and no architecture; add `model_type \"…\"`", f.Name)
	}
}

// ocrTask finds a labelled prompt by name.
func ocrTask(tasks []ir.OCRTask, name string) *ir.OCRTask {
	for i := range tasks {
		if tasks[i].Name == name {
			return &tasks[i]
		}
	}
	return nil
}

// The DPI range ocr_dpi accepts: a page below 36 DPI is not legible, above 1200 a letter page
// passes 100 million pixels.
const minOCRDPI, maxOCRDPI = 36, 1200

// declare reserves a top-level name; false (with a diagnostic) when it is taken.
func (c *checker) declare(name string, p lexer.Position, what string) bool {
	if prev, ok := c.declared[name]; ok {
		c.errorf(p, "redefined name: %s is already declared at line %d; pick another name", name, prev.Line)
		return false
	}
	if ir.Spec(ir.Op(name)) != nil {
		c.errorf(p, "%s %s has the name of an op; pick another name", what, name)
		return false
	}
	c.declared[name] = pos(p)
	return true
}

func (c *checker) configBlock(cb *syntax.Config) {
	for _, it := range cb.Items {
		switch {
		case it.Binding != nil:
			c.binding(it.Binding)
		case it.Require != nil:
			for _, cond := range it.Require.Conds {
				if r := c.require(cond, c.configScope()); r != nil {
					c.mod.Requires = append(c.mod.Requires, r)
				}
			}
		}
	}
}

func (c *checker) binding(b *syntax.Binding) {
	if !c.declare(b.Name, b.Pos, "config value") {
		return
	}
	n := len(c.diags)
	defer func() {
		if c.config[b.Name] == nil {
			c.bad[b.Name] = true
		}
	}()
	cv := &ir.ConfigValue{Name: b.Name, Pos: pos(b.Pos)}
	if b.Type == nil {
		c.derived(b, cv)
		return
	}
	switch b.Type.Name {
	case "int":
		cv.Type = ir.Int
		if b.Type.List {
			cv.Type = ir.IntList
			if b.Type.Len != "" {
				cv.Len, _ = strconv.Atoi(b.Type.Len)
				if cv.Len == 0 {
					c.errorf(b.Type.Pos, "int[0] holds nothing; give the list length, e.g. int[3]")
				}
			}
		}
	case "float", "bool", "string":
		if b.Type.List {
			c.errorf(b.Type.Pos, "unknown config type %s[]; lists are int[n]", b.Type.Name)
			return
		}
		cv.Type = map[string]ir.Type{"float": ir.Float, "bool": ir.Bool, "string": ir.String}[b.Type.Name]
	default:
		c.errorf(b.Type.Pos, "unknown config type %s; use int, float, bool, string or int[n]", b.Type.Name)
		return
	}
	for i, alt := range b.Alts {
		if path, ok := configPath(alt); ok {
			if cv.Default != nil {
				c.errorf(alt.Pos, "config path %s follows the default; the default must come last", path)
			}
			cv.Paths = append(cv.Paths, path)
			continue
		}
		lit, ok := literal(alt)
		if !ok {
			c.errorf(alt.Pos, "bad config path %s: a path is dotted names such as text_config.hidden_size, and only the last alternative may be a literal default", syntax.ExprString(alt))
			continue
		}
		if i != len(b.Alts)-1 {
			c.errorf(alt.Pos, "default %s of %s is not the last alternative; move it to the end", syntax.ExprString(alt), b.Name)
		}
		if def, ok := c.convertDefault(lit, cv, alt); ok {
			cv.Default = def
		}
	}
	if len(cv.Paths) == 0 {
		if len(c.diags) == n {
			c.errorf(b.Pos, "config value %s reads no config.json path; name one, e.g. %s %s = text_config.%s", b.Name, b.Name, b.Type.Name, strings.ToLower(b.Name))
		}
		return
	}
	c.addConfig(cv)
}

func (c *checker) addConfig(cv *ir.ConfigValue) {
	c.config[cv.Name] = cv
	c.mod.Config = append(c.mod.Config, cv)
}

// configPath reads a dotted path (names and numbers) from an alternative.
func configPath(e *syntax.Expr) (string, bool) {
	pf := bareOperand(e)
	if pf == nil || pf.X.Ident == "" || pf.X.Ident == "true" || pf.X.Ident == "false" {
		return "", false
	}
	parts := []string{pf.X.Ident}
	for _, s := range pf.Suffix {
		if s.Index != nil {
			return "", false
		}
		parts = append(parts, s.Field)
	}
	return strings.Join(parts, "."), true
}

// bareOperand returns the postfix expression e consists of, without operators.
func bareOperand(e *syntax.Expr) *syntax.Postfix {
	if e.Then != nil || e.Cond.Op != "" || len(e.Cond.Left.Rest) > 0 || len(e.Cond.Left.Left.Rest) > 0 {
		return nil
	}
	u := e.Cond.Left.Left.Left
	if u.Op != "" {
		return nil
	}
	return u.X
}

type lit struct {
	typ  ir.Type
	i    int64
	f    float64
	b    bool
	ints []int64
	str  string
	src  string
}

// literal reads a number, true/false, or a list of ints.
func literal(e *syntax.Expr) (lit, bool) {
	src := syntax.ExprString(e)
	if e.Then != nil || e.Cond.Op != "" || len(e.Cond.Left.Rest) > 0 || len(e.Cond.Left.Left.Rest) > 0 {
		return lit{}, false
	}
	u := e.Cond.Left.Left.Left
	if len(u.X.Suffix) > 0 || (u.Op != "" && u.Op != "-") {
		return lit{}, false
	}
	p := u.X.X
	neg := u.Op == "-"
	switch {
	case p.Int != "":
		n, err := strconv.ParseInt(p.Int, 10, 64)
		if err != nil {
			return lit{}, false
		}
		if neg {
			n = -n
		}
		return lit{typ: ir.Int, i: n, f: float64(n), src: src}, true
	case p.Float != "":
		x, err := strconv.ParseFloat(p.Float, 64)
		if err != nil {
			return lit{}, false
		}
		if neg {
			x = -x
		}
		return lit{typ: ir.Float, f: x, src: src}, true
	case neg:
		return lit{}, false
	case p.String != "":
		str, err := strconv.Unquote(p.String)
		if err != nil {
			return lit{}, false
		}
		return lit{typ: ir.String, str: str, src: src}, true
	case p.Ident == "true" || p.Ident == "false":
		return lit{typ: ir.Bool, b: p.Ident == "true", src: src}, true
	case p.List != nil:
		l := lit{typ: ir.IntList, src: src}
		for _, el := range p.List.Elems {
			x, ok := literal(el)
			if !ok || x.typ != ir.Int {
				return lit{}, false
			}
			l.ints = append(l.ints, x.i)
		}
		return l, true
	}
	return lit{}, false
}

func typeName(t ir.Type, n int) string {
	if t == ir.IntList && n > 0 {
		return fmt.Sprintf("int[%d]", n)
	}
	return t.String()
}

func (c *checker) convertDefault(l lit, cv *ir.ConfigValue, e *syntax.Expr) (*ir.Literal, bool) {
	ok := l.typ == cv.Type || (cv.Type == ir.Float && l.typ == ir.Int)
	if ok && cv.Type == ir.IntList && cv.Len > 0 && len(l.ints) != cv.Len {
		ok = false
	}
	if !ok {
		c.errorf(e.Pos, "default %s of %s is %s; %s is %s", l.src, cv.Name, typeName(l.typ, len(l.ints)), cv.Name, typeName(cv.Type, cv.Len))
		return nil, false
	}
	return &ir.Literal{Type: cv.Type, Int: l.i, Float: l.f, Bool: l.b, Ints: l.ints, Str: l.str}, true
}

func (c *checker) derived(b *syntax.Binding, cv *ir.ConfigValue) {
	if len(b.Alts) != 1 {
		c.errorf(b.Alts[1].Pos, "derived value %s takes one expression; alternatives need a type, e.g. %s int = a | b", b.Name, b.Name)
		return
	}
	v, ok := c.eval(b.Alts[0], c.configScope())
	if !ok {
		return
	}
	e := &ir.Expr{Src: syntax.ExprString(b.Alts[0])}
	switch v.kind {
	case vInt:
		cv.Type, e.Type, e.Dim = ir.Int, ir.Int, v.dim
		c.facts.Define(cv.Name, v.dim)
	case vFloat:
		cv.Type, e.Type, e.Float, e.Name = ir.Float, ir.Float, v.f, v.name
	case vBool:
		cv.Type, e.Type, e.Bool, e.Name, e.Not = ir.Bool, ir.Bool, v.b, v.name, v.not
	case vList:
		cv.Type, cv.Len, e.Type, e.Ints = ir.IntList, len(v.list), ir.IntList, v.list
		for i, d := range v.list {
			c.facts.Define(ir.Elem(cv.Name, i).String(), d)
		}
	default:
		c.errorf(b.Alts[0].Pos, "derived value %s is %s; derived values are int, float, bool or an int list", b.Name, v.describe())
		return
	}
	cv.Derived = e
	c.addConfig(cv)
}

// require checks one condition and records what it states as a fact.
func (c *checker) require(e *syntax.Expr, sc *scope) *ir.Require {
	src := syntax.ExprString(e)
	if e.Then == nil && e.Cond.Op == "" {
		v, ok := c.evalSum(e.Cond.Left, sc)
		switch {
		case !ok:
			return nil
		case v.kind == vBool && v.name != "":
			return &ir.Require{Cond: &ir.Cond{Name: v.name, Not: v.not}, Src: src, Pos: pos(e.Pos)}
		case v.kind == vBool && !v.b:
			c.errorf(e.Pos, "require %s can never hold", src)
			return nil
		}
	}
	if e.Then != nil || e.Cond.Op == "" {
		c.errorf(e.Pos, "require needs a comparison such as D %% H == 0, or a bool config value; got %s", src)
		return nil
	}
	if e.Cond.Op == "in" {
		return c.stringInRequire(e, sc)
	}
	l, ok1 := c.evalSum(e.Cond.Left, sc)
	r, ok2 := c.evalSum(e.Cond.Right, sc)
	if !ok1 || !ok2 {
		return nil
	}
	if l.kind == vString || r.kind == vString {
		return c.stringRequire(e, l, r)
	}
	if l.kind == vFloat || r.kind == vFloat {
		return c.floatRequire(e, l, r)
	}
	for _, v := range []val{l, r} {
		if v.kind != vInt {
			c.errorf(v.pos, "require compares ints; %s is %s", v.src, v.describe())
			return nil
		}
	}
	req := &ir.Require{Left: l.dim, Right: r.dim, Op: ir.CmpOp(e.Cond.Op), Src: syntax.ExprString(e), Pos: pos(e.Pos)}
	if d, ok := c.facts.Const(l.dim.Sub(r.dim)); ok && !holds(req.Op, d) {
		c.errorf(e.Pos, "require %s can never hold: the two sides differ by %d", req.Src, d)
		return nil
	}
	if req.Op == ir.EQ {
		if n, m, ok := c.modOperands(e.Cond.Left, sc); ok && r.dim.IsZero() {
			c.facts.AssumeDivides(n, m)
		}
		c.facts.AssumeEqual(l.dim, r.dim)
	}
	return req
}

// stringRequire is `name == "literal"` or `name != "literal"` over a string config value.
func (c *checker) stringRequire(e *syntax.Expr, l, r val) *ir.Require {
	if l.name == "" {
		l, r = r, l
	}
	op := ir.CmpOp(e.Cond.Op)
	if l.kind != vString || r.kind != vString || l.name == "" || r.name != "" || (op != ir.EQ && op != ir.NE) {
		c.errorf(e.Pos, "a string require compares a string config value with a string literal by == or !=; got %s", syntax.ExprString(e))
		return nil
	}
	return &ir.Require{Op: op, Name: l.name, Str: r.str, Src: syntax.ExprString(e), Pos: pos(e.Pos)}
}

// floatRequire is `name == literal` or `name != literal` over a float config value.
func (c *checker) floatRequire(e *syntax.Expr, l, r val) *ir.Require {
	if l.name == "" {
		l, r = r, l
	}
	op := ir.CmpOp(e.Cond.Op)
	lit := r.f
	if n, ok := c.facts.Const(r.dim); r.kind == vInt && ok { // an int literal reads as a float
		lit, r.kind = float64(n), vFloat
	}
	if l.kind != vFloat || l.name == "" || r.kind != vFloat || r.name != "" || (op != ir.EQ && op != ir.NE) {
		c.errorf(e.Pos, "a float require compares a float config value with a number literal by == or !=; got %s", syntax.ExprString(e))
		return nil
	}
	return &ir.Require{Op: op, Name: l.name, Float: &lit, Src: syntax.ExprString(e), Pos: pos(e.Pos)}
}

// stringInRequire is `name in ["a", "b", …]` over a string config value.
func (c *checker) stringInRequire(e *syntax.Expr, sc *scope) *ir.Require {
	l, ok := c.evalSum(e.Cond.Left, sc)
	if !ok {
		return nil
	}
	list := listOf(e.Cond.Right)
	if l.kind != vString || l.name == "" || list == nil {
		c.errorf(e.Pos, "require's in takes a string config value and a list of string literals, e.g. rstype in [\"mrope\", \"default\"]; in over layer indices selects spans inside a graph (i in list ? a : b)")
		return nil
	}
	req := &ir.Require{Op: ir.IN, Name: l.name, Src: syntax.ExprString(e), Pos: pos(e.Pos)}
	if len(list.Elems) == 0 {
		c.errorf(e.Pos, "require %s can never hold: the list is empty", req.Src)
		return nil
	}
	for _, x := range list.Elems {
		v, ok := c.eval(x, sc)
		if !ok {
			return nil
		}
		if v.kind != vString || v.name != "" {
			c.errorf(x.Pos, "require's in lists string literals; %s is %s", v.src, v.describe())
			return nil
		}
		req.Strs = append(req.Strs, v.str)
	}
	return req
}

// listOf is the list literal a sum is, or nil.
func listOf(s *syntax.Sum) *syntax.List {
	if s == nil || len(s.Rest) > 0 || len(s.Left.Rest) > 0 || s.Left.Left.Op != "" || len(s.Left.Left.X.Suffix) > 0 {
		return nil
	}
	return s.Left.Left.X.X.List
}

func holds(op ir.CmpOp, diff int64) bool {
	switch op {
	case ir.EQ:
		return diff == 0
	case ir.NE:
		return diff != 0
	case ir.LT:
		return diff < 0
	case ir.LE:
		return diff <= 0
	case ir.GT:
		return diff > 0
	}
	return diff >= 0
}

// modOperands reads `n % m` from a sum that is exactly one remainder.
func (c *checker) modOperands(s *syntax.Sum, sc *scope) (ir.Dim, ir.Dim, bool) {
	if len(s.Rest) > 0 || len(s.Left.Rest) == 0 || s.Left.Rest[len(s.Left.Rest)-1].Op != "%" {
		return ir.Dim{}, ir.Dim{}, false
	}
	head := &syntax.Prod{Pos: s.Left.Pos, Left: s.Left.Left, Rest: s.Left.Rest[:len(s.Left.Rest)-1]}
	n, ok1 := c.evalProd(head, sc)
	m, ok2 := c.evalUnary(s.Left.Rest[len(s.Left.Rest)-1].Right, sc)
	if !ok1 || !ok2 || n.kind != vInt || m.kind != vInt {
		return ir.Dim{}, ir.Dim{}, false
	}
	return n.dim, m.dim, true
}

func (c *checker) prefix(p *syntax.Prefix) {
	if !c.declare(p.Name, p.Pos, "prefix") {
		return
	}
	pr := &ir.Prefix{Name: p.Name, Pos: pos(p.Pos)}
	for _, a := range p.Alts {
		pr.Alternatives = append(pr.Alternatives, strings.Join(a.Parts, "."))
	}
	c.prefixes[p.Name] = pr
	c.mod.Prefixes = append(c.mod.Prefixes, pr)
}

// weightKeys lists the lookup keys a weight line declares, read from its syntax alone.
func weightKeys(wd *syntax.WeightDecl) []string {
	var parts []string
	var leaves []string
	for _, s := range wd.Segs {
		switch {
		case s.Leaves != nil:
			for _, l := range s.Leaves {
				leaves = append(leaves, l.Name)
			}
		case s.Range != nil:
			parts = append(parts, s.Name+"[#]")
		default:
			parts = append(parts, s.Name)
		}
	}
	if leaves == nil {
		return []string{strings.Join(parts, ".")}
	}
	var out []string
	for _, l := range leaves {
		out = append(out, strings.Join(append(append([]string{}, parts...), l), "."))
	}
	return out
}

func (c *checker) weightDecl(wd *syntax.WeightDecl) {
	// The root is known even when the line fails, so later uses are not reported as undefined.
	if root := wd.Segs[0].Name; root != "" && c.prefixes[root] == nil && c.config[root] == nil && !c.bad[root] {
		c.roots[root] = true
	}
	defer func() {
		for _, k := range weightKeys(wd) {
			if c.weights[k] == nil {
				c.bad[k] = true
			}
		}
	}()
	var names, keys []string
	var index string
	var count ir.Dim
	var leaves []*syntax.Leaf
	ok := true
	for i, s := range wd.Segs {
		if s.Leaves != nil {
			if i != len(wd.Segs)-1 {
				c.errorf(s.Pos, "a weight group {…} must end the name")
				return
			}
			leaves = s.Leaves
			continue
		}
		name, key := s.Name, s.Name
		if s.Range != nil {
			if index != "" {
				c.errorf(s.Range.Pos, "weight names take one layer range; %s already has [%s < …]", syntax.WeightName(wd), index)
				return
			}
			index = s.Range.Var
			b, good := c.eval(s.Range.Bound, c.configScope())
			switch {
			case !good:
				ok = false
			case b.kind != vInt:
				c.errorf(s.Range.Bound.Pos, "layer bound must be a config int; %s is %s", b.src, b.describe())
				ok = false
			default:
				count = b.dim
			}
			name += "[" + index + "]"
			key += "[#]"
		}
		names = append(names, name)
		keys = append(keys, key)
	}
	if !ok {
		return
	}
	type leaf struct {
		name, key string
		shape     *syntax.List
		p         lexer.Position
	}
	var all []leaf
	if leaves == nil {
		all = append(all, leaf{strings.Join(names, "."), strings.Join(keys, "."), wd.Shape, wd.Pos})
	}
	for _, l := range leaves {
		sh := l.Shape
		if sh == nil {
			sh = wd.Shape
		} else if wd.Shape != nil {
			c.errorf(l.Pos, "%s has its own shape and the line's shape; keep one", l.Name)
		}
		all = append(all, leaf{strings.Join(append(names, l.Name), "."), strings.Join(append(keys, l.Name), "."), sh, l.Pos})
	}
	var cond *ir.Cond
	if wd.Cond != nil {
		v, good := c.eval(wd.Cond, c.configScope())
		if good && (v.kind != vBool || v.name == "") {
			c.errorf(wd.Cond.Pos, "a weight condition is a bool config value or its negation, e.g. if !tied; got %s", v.src)
			good = false
		}
		if !good {
			return
		}
		cond = &ir.Cond{Name: v.name, Not: v.not}
	}
	for _, l := range all {
		if l.shape == nil {
			c.errorf(l.p, "weight %s has no shape; add one, e.g. %s [D]", l.name, l.name)
			continue
		}
		shape, good := c.shape(l.shape, c.configScope(), "weight shape")
		if !good {
			continue
		}
		if prev, dup := c.weights[l.key]; dup {
			c.errorf(l.p, "duplicate weight: %s is already declared at line %d", l.name, prev.Pos.Line)
			continue
		}
		w := &ir.Weight{Name: l.name, Index: index, Count: count, Shape: shape, Cond: cond, Pos: pos(l.p)}
		root := strings.SplitN(l.name, ".", 2)[0]
		if p, isPrefix := c.prefixes[root]; isPrefix {
			w.Prefix = p
		} else {
			root = strings.SplitN(root, "[", 2)[0]
			if _, taken := c.config[root]; taken {
				c.errorf(l.p, "weight %s starts with config value %s; rename one of them", l.name, root)
				continue
			}
			c.roots[root] = true
		}
		if index != "" {
			c.indexVar[index] = w
		}
		c.weights[l.key] = w
		c.mod.Weights = append(c.mod.Weights, w)
	}
}

// knownRules are the runtime rules a family may name, with their arguments; a trailing ? marks
// an optional one.
var knownRules = map[string]map[string][]string{
	"image":     {"qwen2_vl": {"patch", "temporal", "merge", "image_token?", "window?"}, "pixtral": {"patch", "merge", "image_token?"}, "glm4v": {"patch", "temporal", "merge", "image_token?"}},
	"positions": {"mrope": {"image_token", "merge", "vision_start?"}, "sequence": {}},
}

// positionAxes are the axes a row's position has under each positions rule.
var positionAxes = map[string]int{"mrope": 3, "sequence": 1}

func (c *checker) rule(r *syntax.Rule) {
	known := knownRules[r.Kind]
	args, ok := known[r.Call.Name]
	if !ok {
		var names []string
		for n := range known {
			names = append(names, n)
		}
		sort.Strings(names)
		c.errorf(r.Call.Pos, "unknown %s rule %s; the runtime has %s", r.Kind, r.Call.Name, strings.Join(names, ", "))
		return
	}
	rule := &ir.Rule{Name: r.Call.Name, Pos: pos(r.Pos)}
	seen := map[string]bool{}
	for _, a := range r.Call.Args {
		if len(args) == 0 {
			c.errorf(a.Pos, "%s rule %s takes no arguments", r.Kind, r.Call.Name)
			break
		}
		if a.Key == "" {
			c.errorf(a.Pos, "%s rule arguments are named: %s(%s: …)", r.Kind, r.Call.Name, strings.TrimSuffix(args[0], "?"))
			continue
		}
		if !contains(args, a.Key) && !contains(args, a.Key+"?") {
			c.errorf(a.Pos, "unknown argument %s of %s rule %s; it takes %s", a.Key, r.Kind, r.Call.Name, strings.ReplaceAll(strings.Join(args, ", "), "?", " (optional)"))
			continue
		}
		seen[a.Key] = true
		v, good := c.eval(a.Value, c.configScope())
		if !good {
			continue
		}
		at := &ir.Attr{Name: a.Key, Pos: pos(a.Pos)}
		switch v.kind {
		case vInt:
			at.Kind, at.Int = ir.AttrInt, v.dim
		case vFloat:
			at.Kind, at.Float, at.FloatName = ir.AttrFloat, v.f, v.name
		case vBool:
			at.Kind, at.Bool, at.BoolName, at.BoolNot = ir.AttrBool, v.b, v.name, v.not
		case vList:
			at.Kind, at.Ints = ir.AttrInts, v.list
		default:
			c.errorf(a.Value.Pos, "argument %s is %s; rule arguments are config values or literals", a.Key, v.describe())
			continue
		}
		rule.Args = append(rule.Args, at)
	}
	for _, a := range args {
		if !seen[a] && !strings.HasSuffix(a, "?") {
			c.errorf(r.Call.Pos, "%s rule %s needs argument %s", r.Kind, r.Call.Name, a)
		}
	}
	if r.Kind == "image" {
		if c.mod.Image != nil {
			c.errorf(r.Pos, "second image rule; the first is at line %d", c.mod.Image.Pos.Line)
		}
		c.mod.Image = rule
	} else {
		if c.mod.Positions != nil {
			c.errorf(r.Pos, "second positions rule; the first is at line %d", c.mod.Positions.Pos.Line)
			return
		}
		c.mod.Positions = rule
		// the rule's axes are the config value positions.axes, the width of a positions[R] input
		n := int64(positionAxes[rule.Name])
		c.facts.Define(ir.PositionAxes, ir.Const(n))
		c.addConfig(&ir.ConfigValue{Name: ir.PositionAxes, Type: ir.Int, Pos: rule.Pos,
			Derived: &ir.Expr{Type: ir.Int, Dim: ir.Const(n), Src: strconv.FormatInt(n, 10)}})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// shape evaluates a list of int expressions.
func (c *checker) shape(l *syntax.List, sc *scope, what string) (ir.Shape, bool) {
	var out ir.Shape
	ok := true
	for _, e := range l.Elems {
		v, good := c.eval(e, sc)
		if !good {
			ok = false
			continue
		}
		if v.kind != vInt {
			c.errorf(e.Pos, "%s dimensions are ints; %s is %s", what, v.src, v.describe())
			ok = false
			continue
		}
		out = append(out, v.dim)
	}
	return out, ok
}
