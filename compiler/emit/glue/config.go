package glue

import (
	"fmt"

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

// program writes the embedded program: the family's config values, requirements, description,
// graphs and kernels as data (package specialize), which model.Bind reads. It first checks that
// the family binds every config value each graph it reuses reads.
func (e *emitter) program(f *File) error {
	for _, g := range e.p.Graphs {
		if g.Home != "" {
			if _, _, err := e.runnerOf(g); err != nil {
				return err
			}
		}
	}
	f.Anon("embed")
	f.Comment(fmt.Sprintf("Program is %s compiled (package specialize): its config values and", e.p.Source))
	f.Comment("requirements, its description, the graphs it runs with the runners of those it states, and")
	f.Comment("its kernels with symbolic constants.")
	f.Comment("")
	f.Comment("//go:embed program.json")
	f.Var().Id("Program").Index().Byte()
	return nil
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
