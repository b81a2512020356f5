package lower

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Expr is a symbolic value over config names and graph dims: an integer, float or bool literal, a
// reference, or an operator applied to arguments. Sizes and offsets of the memory plan, op
// attributes and config requirements are Exprs; the emitters print them as Go or as text.
type Expr struct {
	Op    string  `json:"op"` // int, float, bool, enum, ref, list, neg, !, + - * / %, == != < <= > >=, && ||, in, max, sum, ?:
	Int   int64   `json:"int,omitempty"`
	Float float64 `json:"float,omitempty"`
	Bool  bool    `json:"bool,omitempty"`
	Str   string  `json:"str,omitempty"`  // str: a string literal
	Name  string  `json:"name,omitempty"` // ref: a config value or a dim
	Args  []*Expr `json:"args,omitempty"`
}

// Equal reports whether e and f are the same expression tree.
func (e *Expr) Equal(f *Expr) bool {
	if e == nil || f == nil {
		return e == f
	}
	if e.Op != f.Op || e.Int != f.Int || e.Float != f.Float || e.Bool != f.Bool || e.Str != f.Str || e.Name != f.Name || len(e.Args) != len(f.Args) {
		return false
	}
	for i, a := range e.Args {
		if !a.Equal(f.Args[i]) {
			return false
		}
	}
	return true
}

// Int returns the integer literal n.
func Int(n int64) *Expr { return &Expr{Op: "int", Int: n} }

// Float returns the float literal f.
func Float(f float64) *Expr { return &Expr{Op: "float", Float: f} }

// Bool returns the bool literal v.
func Bool(v bool) *Expr { return &Expr{Op: "bool", Bool: v} }

// Ref names a config value or a dim.
func Ref(name string) *Expr { return &Expr{Op: "ref", Name: name} }

// Str returns the string literal s.
func Str(s string) *Expr { return &Expr{Op: "str", Str: s} }

// Enum is a named constant of an op attribute (an activation, a rope mode).
func Enum(name string) *Expr { return &Expr{Op: "enum", Name: name} }

// List is a list literal (int lists such as rope sections).
func List(xs ...*Expr) *Expr { return &Expr{Op: "list", Args: xs} }

// Bin applies a binary operator.
func Bin(op string, a, b *Expr) *Expr { return &Expr{Op: op, Args: []*Expr{a, b}} }

// Mul multiplies, dropping factors of one.
func Mul(xs ...*Expr) *Expr {
	var out *Expr
	for _, x := range xs {
		if x == nil || x.IsInt(1) {
			continue
		}
		if out == nil {
			out = x
		} else {
			out = Bin("*", out, x)
		}
	}
	if out == nil {
		return Int(1)
	}
	return out
}

// Add sums, dropping zero terms.
func Add(xs ...*Expr) *Expr {
	var out *Expr
	for _, x := range xs {
		if x == nil || x.IsInt(0) {
			continue
		}
		if out == nil {
			out = x
		} else {
			out = Bin("+", out, x)
		}
	}
	if out == nil {
		return Int(0)
	}
	return out
}

// Max is the larger of its arguments; equal arguments collapse.
func Max(xs ...*Expr) *Expr {
	var args []*Expr
	seen := map[string]bool{}
	for _, x := range xs {
		if x.Op == "max" {
			for _, a := range x.Args {
				if !seen[a.String()] {
					seen[a.String()] = true
					args = append(args, a)
				}
			}
			continue
		}
		if !seen[x.String()] {
			seen[x.String()] = true
			args = append(args, x)
		}
	}
	if len(args) == 1 {
		return args[0]
	}
	return &Expr{Op: "max", Args: args}
}

// IsInt reports whether e is the integer literal n.
func (e *Expr) IsInt(n int64) bool { return e != nil && e.Op == "int" && e.Int == n }

// Const reports whether e has no references.
func (e *Expr) Const() bool {
	if e == nil {
		return true
	}
	if e.Op == "ref" {
		return false
	}
	for _, a := range e.Args {
		if !a.Const() {
			return false
		}
	}
	return true
}

// Refs lists the names e references, sorted.
func (e *Expr) Refs() []string {
	set := map[string]bool{}
	var walk func(*Expr)
	walk = func(x *Expr) {
		if x == nil {
			return
		}
		if x.Op == "ref" {
			set[x.Name] = true
		}
		for _, a := range x.Args {
			walk(a)
		}
	}
	walk(e)
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

var prec = map[string]int{"?:": 1, "||": 2, "&&": 3, "in": 4, "==": 4, "!=": 4, "<": 4, "<=": 4, ">": 4, ">=": 4, "+": 5, "-": 5, "*": 6, "/": 6, "%": 6}

// String prints e in the graph language's notation.
func (e *Expr) String() string { return e.format(func(n string) string { return n }, false) }

// Go prints e as Go source, naming each reference through ref.
func (e *Expr) Go(ref func(name string) string) string { return e.format(ref, true) }

func (e *Expr) format(ref func(string) string, goSyntax bool) string {
	if e == nil {
		return "<nil>"
	}
	sub := func(x *Expr, p int, right bool) string {
		s := x.format(ref, goSyntax)
		if q, ok := prec[x.Op]; ok && (q < p || (right && q == p)) {
			return "(" + s + ")"
		}
		return s
	}
	switch e.Op {
	case "int":
		return strconv.FormatInt(e.Int, 10)
	case "float":
		s := strconv.FormatFloat(e.Float, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eEn") {
			s += ".0"
		}
		return s
	case "bool":
		return strconv.FormatBool(e.Bool)
	case "str":
		return strconv.Quote(e.Str)
	case "ref":
		return ref(e.Name)
	case "enum":
		return e.Name
	case "list":
		parts := make([]string, len(e.Args))
		for i, a := range e.Args {
			parts[i] = a.format(ref, goSyntax)
		}
		if goSyntax {
			return "[]int{" + strings.Join(parts, ", ") + "}"
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case "neg":
		return "-" + sub(e.Args[0], 7, false)
	case "!":
		return "!" + sub(e.Args[0], 7, false)
	case "rsqrt":
		if goSyntax {
			return "model.Rsqrt(" + e.Args[0].format(ref, true) + ")"
		}
		return "1/sqrt(" + e.Args[0].format(ref, false) + ")"
	case "max", "sum":
		parts := make([]string, len(e.Args))
		for i, a := range e.Args {
			parts[i] = a.format(ref, goSyntax)
		}
		if goSyntax && e.Op == "sum" {
			return "model.SumInts(" + strings.Join(parts, ", ") + ")"
		}
		return e.Op + "(" + strings.Join(parts, ", ") + ")"
	case "in":
		if goSyntax {
			return fmt.Sprintf("model.In(%s, %s)", e.Args[0].format(ref, true), e.Args[1].format(ref, true))
		}
	case "?:":
		if goSyntax {
			return fmt.Sprintf("model.Cond(%s, %s, %s)", e.Args[0].format(ref, true), e.Args[1].format(ref, true), e.Args[2].format(ref, true))
		}
		return sub(e.Args[0], 2, false) + " ? " + sub(e.Args[1], 2, false) + " : " + sub(e.Args[2], 1, false)
	}
	if p, ok := prec[e.Op]; ok && len(e.Args) == 2 {
		return sub(e.Args[0], p, false) + " " + e.Op + " " + sub(e.Args[1], p, true)
	}
	return fmt.Sprintf("%s(?)", e.Op)
}

// Fold replaces references that consts defines and evaluates what becomes constant.
func Fold(e *Expr, consts map[string]*Expr) *Expr {
	if e == nil {
		return nil
	}
	if e.Op == "ref" {
		if c, ok := consts[e.Name]; ok {
			return c
		}
		return e
	}
	if len(e.Args) == 0 {
		return e
	}
	args := make([]*Expr, len(e.Args))
	all := true
	for i, a := range e.Args {
		args[i] = Fold(a, consts)
		all = all && args[i].Const()
	}
	out := &Expr{Op: e.Op, Args: args}
	if all && e.Op != "list" {
		if v, err := Eval(out, nil); err == nil {
			return v
		}
	}
	return simplify(out)
}

func simplify(e *Expr) *Expr {
	if len(e.Args) != 2 {
		return e
	}
	a, b := e.Args[0], e.Args[1]
	switch e.Op {
	case "*":
		if a.IsInt(1) {
			return b
		}
		if b.IsInt(1) {
			return a
		}
	case "+":
		if a.IsInt(0) {
			return b
		}
		if b.IsInt(0) {
			return a
		}
	case "/":
		if b.IsInt(1) {
			return a
		}
	}
	return e
}

// Eval computes e with the references env gives; the result is a literal (int, float, bool or list).
func Eval(e *Expr, env map[string]*Expr) (*Expr, error) {
	switch e.Op {
	case "int", "float", "bool", "enum", "str":
		return e, nil
	case "ref":
		if v, ok := env[e.Name]; ok {
			return v, nil
		}
		return nil, fmt.Errorf("%s is not known", e.Name)
	}
	args := make([]*Expr, len(e.Args))
	for i, a := range e.Args {
		v, err := Eval(a, env)
		if err != nil {
			return nil, err
		}
		args[i] = v
	}
	switch e.Op {
	case "list":
		return List(args...), nil
	case "neg":
		if args[0].Op == "float" {
			return Float(-args[0].Float), nil
		}
		return Int(-args[0].Int), nil
	case "!":
		return Bool(!args[0].Bool), nil
	case "?:":
		if args[0].Bool {
			return args[1], nil
		}
		return args[2], nil
	case "rsqrt":
		return Float(1 / math.Sqrt(num(args[0]))), nil
	case "sum":
		var s int64
		for _, a := range args {
			if a.Op == "list" {
				for _, x := range a.Args {
					s += x.Int
				}
			} else {
				s += a.Int
			}
		}
		return Int(s), nil
	case "max":
		m := args[0]
		for _, a := range args[1:] {
			if num(a) > num(m) {
				m = a
			}
		}
		return m, nil
	case "in":
		for _, x := range args[1].Args {
			if x.Op == "int" && x.Int == args[0].Int {
				return Bool(true), nil
			}
		}
		return Bool(false), nil
	case "&&":
		return Bool(args[0].Bool && args[1].Bool), nil
	case "||":
		return Bool(args[0].Bool || args[1].Bool), nil
	}
	a, b := args[0], args[1]
	if a.Op == "str" || b.Op == "str" {
		switch e.Op {
		case "==":
			return Bool(a.Str == b.Str), nil
		case "!=":
			return Bool(a.Str != b.Str), nil
		}
		return nil, fmt.Errorf("cannot evaluate %s", e)
	}
	if a.Op == "int" && b.Op == "int" {
		x, y := a.Int, b.Int
		switch e.Op {
		case "+":
			return Int(x + y), nil
		case "-":
			return Int(x - y), nil
		case "*":
			return Int(x * y), nil
		case "/", "%":
			if y == 0 {
				return nil, fmt.Errorf("division by zero in %s", e)
			}
			if e.Op == "/" {
				return Int(x / y), nil
			}
			return Int(x % y), nil
		}
	}
	x, y := num(a), num(b)
	switch e.Op {
	case "+":
		return Float(x + y), nil
	case "-":
		return Float(x - y), nil
	case "*":
		return Float(x * y), nil
	case "/":
		return Float(x / y), nil
	case "==":
		return Bool(x == y && a.Bool == b.Bool), nil
	case "!=":
		return Bool(x != y || a.Bool != b.Bool), nil
	case "<":
		return Bool(x < y), nil
	case "<=":
		return Bool(x <= y), nil
	case ">":
		return Bool(x > y), nil
	case ">=":
		return Bool(x >= y), nil
	}
	return nil, fmt.Errorf("cannot evaluate %s", e)
}

func num(e *Expr) float64 {
	if e.Op == "float" {
		return e.Float
	}
	return float64(e.Int)
}
