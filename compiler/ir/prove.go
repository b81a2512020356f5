package ir

import (
	"math/big"
	"sort"
	"strconv"
	"strings"
)

// Facts proves equalities and divisibility of Dims under what a family states: derived values
// (HD = D/H) are expanded, and requires of the form `a % b == 0` and `a == b` are assumed.
// Proofs compare normal forms: a Dim is rewritten as a Laurent polynomial with rational
// coefficients where every division known to be exact becomes a negative power, and every other
// floor division or remainder stays an opaque atom.
type Facts struct {
	defs  map[string]Dim
	quots []laurent // each is known to be an integer
	eqs   []laurent // each is known to be zero
}

// NewFacts returns an empty set of facts.
func NewFacts() *Facts { return &Facts{defs: map[string]Dim{}} }

// Clone returns a copy that can learn more facts without changing f.
func (f *Facts) Clone() *Facts {
	g := &Facts{defs: map[string]Dim{}, quots: append([]laurent(nil), f.quots...), eqs: append([]laurent(nil), f.eqs...)}
	for k, v := range f.defs {
		g.defs[k] = v
	}
	return g
}

// Define records a derived value: name stands for d.
func (f *Facts) Define(name string, d Dim) { f.defs[name] = f.Expand(d) }

// AssumeDivides records n % d == 0.
func (f *Facts) AssumeDivides(n, d Dim) {
	ld := f.laurent(f.Expand(d))
	if len(ld) != 1 {
		return
	}
	f.quots = append(f.quots, f.laurent(f.Expand(n)).divTerm(ld.only()))
}

// AssumeEqual records a == b.
func (f *Facts) AssumeEqual(a, b Dim) {
	f.eqs = append(f.eqs, f.laurent(f.Expand(a)).sub(f.laurent(f.Expand(b))))
}

// Expand replaces derived values by their definitions.
func (f *Facts) Expand(d Dim) Dim {
	if len(f.defs) == 0 {
		return d
	}
	return d.Subst(func(name string) (Dim, bool) {
		r, ok := f.defs[name]
		return r, ok
	})
}

// Equal reports whether a == b is proven.
func (f *Facts) Equal(a, b Dim) bool {
	if a.Equal(b) {
		return true
	}
	diff := f.laurent(f.Expand(a)).sub(f.laurent(f.Expand(b)))
	if len(diff) == 0 {
		return true
	}
	for _, e := range f.eqs {
		if diff.proportional(e) {
			return true
		}
	}
	return false
}

// Divides reports whether n % d == 0 is proven.
func (f *Facts) Divides(n, d Dim) bool {
	if _, ok := n.DivExact(d); ok {
		return true
	}
	ld := f.laurent(f.Expand(d))
	if len(ld) != 1 {
		return false
	}
	return f.integral(f.laurent(f.Expand(n)).divTerm(ld.only()))
}

// Const returns d's value when it is a constant once derived values are expanded.
func (f *Facts) Const(d Dim) (int64, bool) {
	l := f.laurent(f.Expand(d))
	switch len(l) {
	case 0:
		return 0, true
	case 1:
		t := l.only()
		if len(t.m) == 0 && t.c.IsInt() {
			return t.c.Num().Int64(), true
		}
	}
	return 0, false
}

func (f *Facts) laurent(d Dim) laurent {
	out := laurent{}
	for _, t := range d.terms {
		p := laurent{}.addTerm(lterm{c: new(big.Rat).SetInt64(t.coef)})
		for _, a := range t.atoms {
			p = p.mul(f.atom(a))
		}
		out = out.add(p)
	}
	return out
}

func (f *Facts) atom(a atom) laurent {
	switch a.kind {
	case atomVar, atomElem:
		return opaque(a.String())
	}
	n := f.laurent(*a.num)
	d := f.laurent(*a.den)
	exact := len(d) == 1 && f.integral(n.divTerm(d.only()))
	if a.kind == atomMod {
		if exact {
			return laurent{}
		}
		return opaque("(" + n.String() + ")%(" + d.String() + ")")
	}
	if exact {
		return n.divTerm(d.only())
	}
	return opaque("floor((" + n.String() + ")/(" + d.String() + "))")
}

// integral reports whether every term of q is an integer polynomial term, or such a term times a
// quotient known to be an integer.
func (f *Facts) integral(q laurent) bool {
	for _, t := range q {
		if t.integral() {
			continue
		}
		ok := false
		for _, k := range f.quots {
			if len(k) == 1 && t.div(k.only()).integral() {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// laurent is a sum of terms with rational coefficients and integer (possibly negative) powers.
type laurent map[string]lterm

type lterm struct {
	c *big.Rat
	m []pow // sorted by name, no zero exponents
}

type pow struct {
	name string
	exp  int
}

func opaque(name string) laurent {
	return laurent{}.addTerm(lterm{c: big.NewRat(1, 1), m: []pow{{name, 1}}})
}

func (t lterm) key() string {
	parts := make([]string, len(t.m))
	for i, p := range t.m {
		parts[i] = p.name + "^" + strconv.Itoa(p.exp)
	}
	return strings.Join(parts, "*")
}

func (t lterm) integral() bool {
	if !t.c.IsInt() {
		return false
	}
	for _, p := range t.m {
		if p.exp < 0 {
			return false
		}
	}
	return true
}

func (t lterm) mul(u lterm) lterm {
	exps := map[string]int{}
	for _, p := range t.m {
		exps[p.name] += p.exp
	}
	for _, p := range u.m {
		exps[p.name] += p.exp
	}
	return lterm{c: new(big.Rat).Mul(t.c, u.c), m: sortPows(exps)}
}

func (t lterm) div(u lterm) lterm {
	inv := lterm{c: new(big.Rat).Inv(u.c), m: make([]pow, len(u.m))}
	for i, p := range u.m {
		inv.m[i] = pow{p.name, -p.exp}
	}
	return t.mul(inv)
}

func sortPows(exps map[string]int) []pow {
	out := make([]pow, 0, len(exps))
	for n, e := range exps {
		if e != 0 {
			out = append(out, pow{n, e})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func (l laurent) addTerm(t lterm) laurent {
	out := laurent{}
	for k, v := range l {
		out[k] = v
	}
	k := t.key()
	if old, ok := out[k]; ok {
		t = lterm{c: new(big.Rat).Add(old.c, t.c), m: t.m}
	}
	if t.c.Sign() == 0 {
		delete(out, k)
	} else {
		out[k] = t
	}
	return out
}

func (l laurent) add(m laurent) laurent {
	out := l
	for _, t := range m {
		out = out.addTerm(t)
	}
	return out
}

func (l laurent) sub(m laurent) laurent {
	out := l
	for _, t := range m {
		out = out.addTerm(lterm{c: new(big.Rat).Neg(t.c), m: t.m})
	}
	return out
}

func (l laurent) mul(m laurent) laurent {
	out := laurent{}
	for _, a := range l {
		for _, b := range m {
			out = out.addTerm(a.mul(b))
		}
	}
	return out
}

func (l laurent) divTerm(t lterm) laurent {
	out := laurent{}
	for _, a := range l {
		out = out.addTerm(a.div(t))
	}
	return out
}

func (l laurent) only() lterm {
	for _, t := range l {
		return t
	}
	return lterm{}
}

// proportional reports whether l = r*m for some rational r.
func (l laurent) proportional(m laurent) bool {
	if len(l) != len(m) || len(l) == 0 {
		return false
	}
	var r *big.Rat
	for k, t := range l {
		u, ok := m[k]
		if !ok {
			return false
		}
		q := new(big.Rat).Quo(t.c, u.c)
		if r == nil {
			r = q
		} else if r.Cmp(q) != 0 {
			return false
		}
	}
	return true
}

func (l laurent) String() string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = l[k].c.RatString() + "*" + k
	}
	return strings.Join(parts, " + ")
}
