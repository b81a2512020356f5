package model

import (
	"fmt"
	"reflect"

	"tfc/compiler/lower"
	"tfc/compiler/specialize"
	"tfc/runtime/device"
)

// Kernels are one graph's launch sites in one family's HIP source (kernels/gen/PREFIX.hip):
// each site's kernel, made on its first launch.
type Kernels struct {
	prefix string
	sites  []device.KernelRef
}

// NewKernels are the n launch sites of a graph in the kernels of prefix.
func NewKernels(prefix string, n int) *Kernels {
	return &Kernels{prefix: prefix, sites: make([]device.KernelRef, n)}
}

// At is launch site i's kernel: symbol PREFIX_name, computing the graph lines source.
func (k *Kernels) At(i int, name, source string) *device.KernelRef {
	s := &k.sites[i]
	if s.Name == "" {
		*s = device.KernelRef{Name: k.prefix + "_" + name, Source: source}
	}
	return s
}

// Graph is one generated graph at a checkpoint's config and the limits: the tensors it reads
// (names resolved with the chosen prefixes, each loading into the graph's weights) and its
// memory plan.
type Graph interface {
	Weights(prefix map[string]string) ([]Weight, error)
	Plan() GraphPlan
}

// VisionGraph is a graph in the vision role: pixels [N, C] of images of (t, h, w) grids in,
// [N/Merge², Hidden] rows out.
type VisionGraph interface {
	Graph
	Forward(l *Launcher, pixels []float32, grids [][3]int) ([]float32, error)
}

// DecoderGraph is a graph in the decoder role: one round in, the logits of r.LogitRows out.
type DecoderGraph interface {
	Graph
	Forward(l *Launcher, r *Round) ([]float32, error)
}

// Bind is the Bind of family f: it reads config.json into the values of f's program
// (BindProgram), refusing an unsupported value by name, and binds the family at them: its
// description, its KV cache and its graphs' runners, all from the program.
func Bind(f *Family) func(cfg Config) (Bound, error) {
	return func(cfg Config) (Bound, error) {
		p, err := specialize.Decode(f.Program)
		if err != nil {
			return nil, err
		}
		env, table, err := BindProgram(&p, cfg)
		if err != nil {
			return nil, err
		}
		g := &Glue{
			Family: f.Name, Graph: f.Graph, Kernels: f.Kernels,
			Table: table, Prefixes: f.Prefixes, env: env, prog: &p, defs: f.Graphs,
			Specialize: specialize.Loader(f.Program, cfg, f.Kernels),
			Unpinned: func(l Limits) []string {
				return Unpinned(table, f.Name, l.PageSize, f.KernelsPage)
			},
			Chosen: map[string]string{},
		}
		for _, pf := range f.Prefixes {
			g.Chosen[pf.Name] = pf.Alts[0]
		}
		if g.info, err = info(&p, env); err != nil {
			return nil, err
		}
		if p.KVLayers != nil {
			if g.kvLayers, err = evalInt(p.KVLayers, env); err == nil {
				g.kvWidth, err = evalInt(p.KVWidth, env)
			}
			if err != nil {
				return nil, fmt.Errorf("%s: the KV cache: %w", f.Name, err)
			}
		}
		return g, nil
	}
}

// info is the family's description at the values env, each field of Info from its expression.
func info(p *specialize.Program, env map[string]*lower.Expr) (Info, error) {
	var out Info
	s := reflect.ValueOf(&out).Elem()
	for _, iv := range p.Info {
		v, err := lower.Eval(iv.Value, env)
		if err != nil {
			return Info{}, fmt.Errorf("%s: Info.%s: %w", p.Family, iv.Field, err)
		}
		f := s.FieldByName(iv.Field)
		switch {
		case !f.IsValid():
			return Info{}, fmt.Errorf("%s: Info has no field %s", p.Family, iv.Field)
		case f.Kind() == reflect.String && v.Op == "str":
			f.SetString(v.Str)
		case f.Kind() == reflect.Int && v.Op == "int":
			f.SetInt(v.Int)
		default:
			return Info{}, fmt.Errorf("%s: Info.%s cannot hold %s", p.Family, iv.Field, v)
		}
	}
	return out, nil
}

// Glue is a generated family bound to one checkpoint (Bind): it implements Bound over the
// family's program and values.
type Glue struct {
	Family, Graph, Kernels string        // as in Layout
	Table                  []ConfigValue // the bound config values (Values)
	Prefixes               []Prefix      // weight-name prefixes with their alternatives
	Specialize             func(b device.Specializer, pageSize int) error
	Unpinned               func(Limits) []string
	Chosen                 map[string]string // each prefix's chosen alternative, set by Resolve

	env               map[string]*lower.Expr
	prog              *specialize.Program
	defs              []GraphDef
	info              Info
	kvLayers, kvWidth int
}

// Values lists the bound config values in declaration order.
func (g *Glue) Values() []Value { return Values(g.Table) }

// Resolve picks each prefix's alternative by which tensor names the checkpoint has.
func (g *Glue) Resolve(has func(string) bool) error {
	return ResolvePrefixes(has, g.Family, g.Prefixes, g.Chosen)
}

// Manifest lists every tensor the checkpoint must hold, with its shape.
func (g *Glue) Manifest() []TensorSpec {
	m, _, err := g.model(Limits{PageSize: 1}) // the manifest does not depend on the limits
	if err != nil {
		panic(err) // the compiler checks that every graph reads a tensor at one shape
	}
	return Manifest(m)
}

// model is the family at l before loading: its manifest, each entry loading into the graphs'
// weights, and the model over its graphs.
func (g *Glue) model(l Limits) ([]Weight, *Loaded, error) {
	m := &Loaded{family: g.Family, info: g.info}
	var ws []Weight
	for _, use := range g.prog.Graphs {
		var d GraphDef
		for _, x := range g.defs {
			if x.Name() == use.Name {
				d = x
			}
		}
		if d == nil {
			return nil, nil, fmt.Errorf("%s runs graph %s.%s, which is not linked", g.Family, use.Home, use.Name)
		}
		gr, err := d.bind(g.env, l, g.Kernels)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", g.Family, err)
		}
		switch gr := gr.(type) {
		case VisionGraph:
			m.vision = gr
		case DecoderGraph:
			m.decoder = gr
		}
		m.graphs = append(m.graphs, gr)
		w, err := gr.Weights(g.Chosen)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: graph %s: %w", g.Family, use.Name, err)
		}
		ws = append(ws, w...)
	}
	ws, err := MergeWeights(ws)
	return ws, m, err
}

// layout is the family at l, with the model Load attaches the loaded base to.
func (g *Glue) layout(l Limits) (Layout, *Loaded, error) {
	ws, m, err := g.model(l)
	ly := Layout{
		Family: g.Family, Graph: g.Graph, Kernels: g.Kernels,
		Weights: ws, KVLayers: g.kvLayers, KVWidth: g.kvWidth,
		Specialize: g.Specialize, Unpinned: g.Unpinned, Resolve: g.Resolve,
	}
	for _, gr := range m.graphs {
		ly.Graphs = append(ly.Graphs, gr.Plan())
	}
	return ly, m, err
}

// Plan gives the bytes weights (as BF16), activations and the KV cache need at l.
func (g *Glue) Plan(l Limits) Plan {
	ly, _, _ := g.layout(l)
	return ly.Plan(l)
}

// Load uploads the weights through get and allocates the arenas and the KV cache for l (LoadBase).
func (g *Glue) Load(b device.Backend, l Limits, get func(name string) ([]byte, device.DType, error)) (Model, error) {
	ly, m, err := g.layout(l)
	if err != nil {
		return nil, err
	}
	if m.Base, err = LoadBase(b, l, ly, get); err != nil {
		return nil, err
	}
	return m, nil
}

// Loaded is a generated family loaded on a backend: its graphs over one base, each with its own
// arenas. Calls of one graph reuse that graph's arenas, so they must not overlap.
type Loaded struct {
	*Base
	family  string
	info    Info
	vision  VisionGraph
	decoder DecoderGraph
	graphs  []Graph   // in the order of Base.Arenas
	logits  []float32 // the last round's logits, read into again by the next
}

// Info describes the loaded family to the runtime.
func (m *Loaded) Info() Info { return m.info }

// Vision runs the vision graph.
func (m *Loaded) Vision(pixels []float32, grids [][3]int) ([]float32, error) {
	if m.vision == nil {
		return nil, fmt.Errorf("%s has no vision graph", m.family)
	}
	return m.vision.Forward(m.Launcher(m.index(m.vision), m.family), pixels, grids)
}

// Forward runs the decoder graph over one round.
func (m *Loaded) Forward(r *Round) ([]float32, error) {
	if m.decoder == nil {
		return nil, fmt.Errorf("%s has no decoder graph", m.family)
	}
	l := m.Launcher(m.index(m.decoder), m.family)
	l.into = &m.logits
	return m.decoder.Forward(l, r)
}

func (m *Loaded) index(g Graph) int {
	for i, x := range m.graphs {
		if x == g {
			return i
		}
	}
	return -1
}
