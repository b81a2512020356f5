package ir

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Dim is a symbolic non-negative integer: a polynomial with integer coefficients over atoms.
// An atom is a config or shape variable (D, N), an element of a fixed-length config list (sect[0]),
// or a floor division or remainder that does not simplify (N/(M*M), D%H). Every constructor returns
// the normal form, so two Dims are equal as expressions exactly when their String forms are equal.
// The zero Dim is the constant 0.
type Dim struct {
	terms []term // sorted by key; no zero coefficients
}

type term struct {
	coef  int64
	atoms []atom // sorted by key, repeated for powers
}

type atomKind uint8

const (
	atomVar  atomKind = iota // name
	atomElem                 // name[index]
	atomDiv                  // num / den
	atomMod                  // num % den
)

type atom struct {
	kind     atomKind
	name     string
	index    int
	num, den *Dim
}

// Const is the constant n.
func Const(n int64) Dim {
	if n == 0 {
		return Dim{}
	}
	return Dim{terms: []term{{coef: n}}}
}

// Var is the variable name (a config value such as D, or a shape variable such as N).
func Var(name string) Dim { return fromAtom(atom{kind: atomVar, name: name}) }

// Elem is element index of the fixed-length config list name (sect[0]).
func Elem(name string, index int) Dim {
	return fromAtom(atom{kind: atomElem, name: name, index: index})
}

func fromAtom(a atom) Dim { return Dim{terms: []term{{coef: 1, atoms: []atom{a}}}} }

// Add returns d + e.
func (d Dim) Add(e Dim) Dim {
	m := map[string]term{}
	var keys []string
	for _, ts := range [][]term{d.terms, e.terms} {
		for _, t := range ts {
			k := t.key()
			if old, ok := m[k]; ok {
				old.coef += t.coef
				m[k] = old
				continue
			}
			m[k] = t
			keys = append(keys, k)
		}
	}
	return build(m, keys)
}

// Sub returns d - e.
func (d Dim) Sub(e Dim) Dim { return d.Add(e.Scale(-1)) }

// Scale returns c*d.
func (d Dim) Scale(c int64) Dim {
	if c == 0 {
		return Dim{}
	}
	out := make([]term, len(d.terms))
	for i, t := range d.terms {
		out[i] = term{coef: t.coef * c, atoms: t.atoms}
	}
	return Dim{terms: out}
}

// Mul returns d * e.
func (d Dim) Mul(e Dim) Dim {
	m := map[string]term{}
	var keys []string
	for _, a := range d.terms {
		for _, b := range e.terms {
			t := term{coef: a.coef * b.coef, atoms: mergeAtoms(a.atoms, b.atoms)}
			k := t.key()
			if old, ok := m[k]; ok {
				old.coef += t.coef
				m[k] = old
				continue
			}
			m[k] = t
			keys = append(keys, k)
		}
	}
	return build(m, keys)
}

// Div returns the floor of d / e. It cancels common factors and divides exactly where every
// term of d is a multiple of e; otherwise the quotient stays an atom. Division by zero panics.
func (d Dim) Div(e Dim) Dim {
	if e.IsZero() {
		panic("ir: Dim division by zero")
	}
	if q, ok := d.DivExact(e); ok {
		return q
	}
	if a, ok := d.Const(); ok {
		if b, ok := e.Const(); ok {
			return Const(floorDiv(a, b))
		}
	}
	num, den := cancel(d, e)
	if den.IsOne() {
		return num
	}
	// (a/b)/c = a/(b*c) for non-negative integers.
	if len(num.terms) == 1 && num.terms[0].coef == 1 && len(num.terms[0].atoms) == 1 && num.terms[0].atoms[0].kind == atomDiv {
		in := num.terms[0].atoms[0]
		return in.num.Div(in.den.Mul(den))
	}
	return fromAtom(atom{kind: atomDiv, num: &num, den: &den})
}

// Mod returns d mod e (non-negative); 0 when e divides d exactly.
func (d Dim) Mod(e Dim) Dim {
	if e.IsZero() {
		panic("ir: Dim remainder by zero")
	}
	if _, ok := d.DivExact(e); ok {
		return Dim{}
	}
	if a, ok := d.Const(); ok {
		if b, ok := e.Const(); ok {
			return Const(((a % b) + b) % b)
		}
	}
	return fromAtom(atom{kind: atomMod, num: &d, den: &e})
}

// DivExact returns d / e when e is a single term that divides every term of d.
func (d Dim) DivExact(e Dim) (Dim, bool) {
	if len(e.terms) != 1 {
		if d.Equal(e) {
			return Const(1), true
		}
		return Dim{}, false
	}
	et := e.terms[0]
	out := make([]term, 0, len(d.terms))
	for _, t := range d.terms {
		if t.coef%et.coef != 0 {
			return Dim{}, false
		}
		rest, ok := removeAtoms(t.atoms, et.atoms)
		if !ok {
			return Dim{}, false
		}
		out = append(out, term{coef: t.coef / et.coef, atoms: rest})
	}
	m := map[string]term{}
	var keys []string
	for _, t := range out {
		k := t.key()
		m[k] = t
		keys = append(keys, k)
	}
	return build(m, keys), true
}

// Equal reports whether d and e have the same normal form.
func (d Dim) Equal(e Dim) bool {
	if len(d.terms) != len(e.terms) {
		return false
	}
	for i, t := range d.terms {
		u := e.terms[i]
		if t.coef != u.coef || len(t.atoms) != len(u.atoms) {
			return false
		}
		for j, a := range t.atoms {
			if !a.equal(u.atoms[j]) {
				return false
			}
		}
	}
	return true
}

// equal compares two factors by their structure.
func (a atom) equal(b atom) bool {
	if a.kind != b.kind || a.name != b.name || a.index != b.index {
		return false
	}
	if a.kind == atomDiv || a.kind == atomMod {
		return a.num.Equal(*b.num) && a.den.Equal(*b.den)
	}
	return true
}

// IsZero reports whether d is the constant 0.
func (d Dim) IsZero() bool { return len(d.terms) == 0 }

// IsOne reports whether d is the constant 1.
func (d Dim) IsOne() bool { c, ok := d.Const(); return ok && c == 1 }

// Const returns d's value when d is a constant.
func (d Dim) Const() (int64, bool) {
	switch len(d.terms) {
	case 0:
		return 0, true
	case 1:
		if len(d.terms[0].atoms) == 0 {
			return d.terms[0].coef, true
		}
	}
	return 0, false
}

// Vars lists the variables d depends on (list elements as name[i]), sorted, without repeats.
func (d Dim) Vars() []string {
	seen := map[string]bool{}
	var walk func(Dim)
	walk = func(x Dim) {
		for _, t := range x.terms {
			for _, a := range t.atoms {
				switch a.kind {
				case atomVar, atomElem:
					seen[a.String()] = true
				default:
					walk(*a.num)
					walk(*a.den)
				}
			}
		}
	}
	walk(d)
	out := make([]string, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// Subst replaces variables by Dims: f gets a variable's name (list elements as name[i]) and
// returns its replacement and true, or false to keep it. The result is in normal form.
func (d Dim) Subst(f func(name string) (Dim, bool)) Dim {
	out := Dim{}
	for _, t := range d.terms {
		p := Const(t.coef)
		for _, a := range t.atoms {
			p = p.Mul(a.subst(f))
		}
		out = out.Add(p)
	}
	return out
}

func (a atom) subst(f func(string) (Dim, bool)) Dim {
	switch a.kind {
	case atomVar, atomElem:
		if r, ok := f(a.String()); ok {
			return r
		}
		return fromAtom(a)
	case atomDiv:
		return a.num.Subst(f).Div(a.den.Subst(f))
	default:
		return a.num.Subst(f).Mod(a.den.Subst(f))
	}
}

// Env gives values to the variables of Dims.
type Env interface {
	// Int is the value of a scalar variable.
	Int(name string) (int64, bool)
	// IntList is the value of a list variable, for its elements.
	IntList(name string) ([]int64, bool)
}

// MapEnv is an Env held in maps.
type MapEnv struct {
	Ints  map[string]int64
	Lists map[string][]int64
}

func (m MapEnv) Int(name string) (int64, bool)       { v, ok := m.Ints[name]; return v, ok }
func (m MapEnv) IntList(name string) ([]int64, bool) { v, ok := m.Lists[name]; return v, ok }

// Eval computes d in env; it fails naming the first variable env lacks or a division by zero.
func (d Dim) Eval(env Env) (int64, error) {
	var sum int64
	for _, t := range d.terms {
		p := t.coef
		for _, a := range t.atoms {
			v, err := a.eval(env)
			if err != nil {
				return 0, err
			}
			p *= v
		}
		sum += p
	}
	return sum, nil
}

func (a atom) eval(env Env) (int64, error) {
	switch a.kind {
	case atomVar:
		v, ok := env.Int(a.name)
		if !ok {
			return 0, fmt.Errorf("no value for %s", a.name)
		}
		return v, nil
	case atomElem:
		l, ok := env.IntList(a.name)
		if !ok || a.index >= len(l) {
			return 0, fmt.Errorf("no value for %s", a)
		}
		return l[a.index], nil
	}
	n, err := a.num.Eval(env)
	if err != nil {
		return 0, err
	}
	m, err := a.den.Eval(env)
	if err != nil {
		return 0, err
	}
	if m == 0 {
		return 0, fmt.Errorf("%s: division by zero", a)
	}
	if a.kind == atomDiv {
		return floorDiv(n, m), nil
	}
	return ((n % m) + m) % m, nil
}

// String prints the normal form: terms by falling degree, factors joined by *, "a/b" and "a%b"
// with parentheses around compound operands, e.g. "3*VD", "N/(M*M)", "H*HD + 1".
func (d Dim) String() string {
	if len(d.terms) == 0 {
		return "0"
	}
	var b strings.Builder
	for i, t := range d.terms {
		s := t.String()
		if i > 0 {
			if strings.HasPrefix(s, "-") {
				b.WriteString(" - ")
				s = s[1:]
			} else {
				b.WriteString(" + ")
			}
		}
		b.WriteString(s)
	}
	return b.String()
}

// isProduct reports whether d prints without + or -, so it needs no parentheses as a factor.
func (d Dim) isProduct() bool {
	return len(d.terms) == 1 && d.terms[0].coef > 0
}

func (t term) String() string {
	if len(t.atoms) == 0 {
		return strconv.FormatInt(t.coef, 10)
	}
	as := make([]string, len(t.atoms))
	for i, a := range t.atoms {
		as[i] = a.String()
	}
	body := strings.Join(as, "*")
	switch t.coef {
	case 1:
		return body
	case -1:
		return "-" + body
	}
	return strconv.FormatInt(t.coef, 10) + "*" + body
}

func (a atom) String() string {
	switch a.kind {
	case atomVar:
		return a.name
	case atomElem:
		return a.name + "[" + strconv.Itoa(a.index) + "]"
	}
	op := "/"
	if a.kind == atomMod {
		op = "%"
	}
	return paren(*a.num, false) + op + paren(*a.den, true)
}

// paren wraps compound operands: sums always, a numerator holding / or %, a denominator holding * / or %.
func paren(d Dim, den bool) string {
	s := d.String()
	special := "/%"
	if den {
		special = "*/%"
	}
	if !d.isProduct() || strings.ContainsAny(s, special) {
		return "(" + s + ")"
	}
	return s
}

// key orders terms: higher degree first, then by atom names; constants last.
func (t term) key() string {
	as := make([]string, len(t.atoms))
	for i, a := range t.atoms {
		as[i] = a.key()
	}
	return fmt.Sprintf("%03d:%s", 999-len(t.atoms), strings.Join(as, "*"))
}

func (a atom) key() string {
	switch a.kind {
	case atomVar:
		return "a" + a.name
	case atomElem:
		return fmt.Sprintf("b%s[%03d]", a.name, a.index)
	case atomDiv:
		return "c(" + a.num.String() + ")/(" + a.den.String() + ")"
	}
	return "d(" + a.num.String() + ")%(" + a.den.String() + ")"
}

func build(m map[string]term, keys []string) Dim {
	sort.Strings(keys)
	out := make([]term, 0, len(keys))
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k] {
			continue
		}
		seen[k] = true
		if t := m[k]; t.coef != 0 {
			out = append(out, t)
		}
	}
	return Dim{terms: out}
}

func mergeAtoms(a, b []atom) []atom {
	out := append(append(make([]atom, 0, len(a)+len(b)), a...), b...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	return out
}

// removeAtoms removes each atom of sub from all once; false if one is missing.
func removeAtoms(all, sub []atom) ([]atom, bool) {
	rest := append([]atom(nil), all...)
	for _, s := range sub {
		found := false
		for i, a := range rest {
			if a.key() == s.key() {
				rest = append(rest[:i], rest[i+1:]...)
				found = true
				break
			}
		}
		if !found {
			return nil, false
		}
	}
	return rest, true
}

// cancel divides d and e by their common content (constant gcd and shared atoms), which leaves
// floor(d/e) unchanged for positive values.
func cancel(d, e Dim) (Dim, Dim) {
	g := int64(0)
	var common []atom
	for i, t := range append(append([]term{}, d.terms...), e.terms...) {
		g = gcd(g, abs(t.coef))
		if i == 0 {
			common = append([]atom(nil), t.atoms...)
			continue
		}
		common = intersectAtoms(common, t.atoms)
	}
	if g <= 1 && len(common) == 0 {
		return d, e
	}
	if g == 0 {
		g = 1
	}
	f := term{coef: g, atoms: common}
	div := Dim{terms: []term{f}}
	a, _ := d.DivExact(div)
	b, _ := e.DivExact(div)
	return a, b
}

func intersectAtoms(a, b []atom) []atom {
	var out []atom
	rest := append([]atom(nil), b...)
	for _, x := range a {
		for i, y := range rest {
			if x.key() == y.key() {
				out = append(out, x)
				rest = append(rest[:i], rest[i+1:]...)
				break
			}
		}
	}
	return out
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func abs(a int64) int64 {
	if a < 0 {
		return -a
	}
	return a
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// Shape is a tensor shape of symbolic dimensions.
type Shape []Dim

// Equal reports whether s and t have the same rank and equal dimensions.
func (s Shape) Equal(t Shape) bool {
	if len(s) != len(t) {
		return false
	}
	for i := range s {
		if !s[i].Equal(t[i]) {
			return false
		}
	}
	return true
}

// Last is the last dimension (0 for a scalar shape).
func (s Shape) Last() Dim {
	if len(s) == 0 {
		return Dim{}
	}
	return s[len(s)-1]
}

// Elems is the product of the dimensions.
func (s Shape) Elems() Dim {
	p := Const(1)
	for _, d := range s {
		p = p.Mul(d)
	}
	return p
}

// String prints "[3*VD, VD]".
func (s Shape) String() string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = d.String()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// DimBuilder makes another package's expression from a Dim's normal form: Int for a constant,
// Name for a variable or list element ("sect[0]"), Op for + - * / % (a/b and a%b floor, as
// Dim's), Neg for a negated product.
type DimBuilder[E any] struct {
	Int  func(int64) E
	Name func(string) E
	Op   func(op string, a, b E) E
	Neg  func(E) E
}

// Build is d as an expression of b's kind, with String's shape: terms left to right, each the
// product of its coefficient and factors left to right, a term of negative coefficient after the
// first subtracted; but built from the structure, so a floor division or remainder stays one
// factor of its term instead of taking the factors before it into its numerator.
func Build[E any](d Dim, b DimBuilder[E]) E {
	if len(d.terms) == 0 {
		return b.Int(0)
	}
	var out E
	for i, t := range d.terms {
		switch {
		case i == 0:
			out = buildTerm(t, t.coef, b)
		case t.coef < 0:
			out = b.Op("-", out, buildTerm(t, -t.coef, b))
		default:
			out = b.Op("+", out, buildTerm(t, t.coef, b))
		}
	}
	return out
}

// buildTerm is t with coefficient coef: coef alone, the factors (negated when coef is -1, as
// String writes "-D"), or coef times the factors.
func buildTerm[E any](t term, coef int64, b DimBuilder[E]) E {
	if len(t.atoms) == 0 {
		return b.Int(coef)
	}
	var out E
	for i, a := range t.atoms {
		x := buildAtom(a, b)
		switch {
		case i > 0:
			out = b.Op("*", out, x)
		case coef == 1:
			out = x
		case coef == -1:
			out = b.Neg(x)
		default:
			out = b.Op("*", b.Int(coef), x)
		}
	}
	return out
}

// buildAtom is one factor: a name, or a floor division or remainder of two Dims.
func buildAtom[E any](a atom, b DimBuilder[E]) E {
	switch a.kind {
	case atomVar:
		return b.Name(a.name)
	case atomElem:
		return b.Name(a.name + "[" + strconv.Itoa(a.index) + "]")
	case atomDiv:
		return b.Op("/", Build(*a.num, b), Build(*a.den, b))
	}
	return b.Op("%", Build(*a.num, b), Build(*a.den, b))
}
