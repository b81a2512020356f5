package model

import (
	"fmt"

	"tfc/compiler/specialize"
	"tfc/runtime/device"
)

// Kernels are one graph's launch sites in one family's HIP source (kernels/gen/PREFIX.hip):
// each site's kernel, made on its first launch.
type Kernels struct {
	prefix string
	sites  []device.Kernel
}

// NewKernels are the n launch sites of a graph in the kernels of prefix.
func NewKernels(prefix string, n int) *Kernels {
	return &Kernels{prefix: prefix, sites: make([]device.Kernel, n)}
}

// At is launch site i's kernel: symbol PREFIX_name, computing the graph lines source.
func (k *Kernels) At(i int, name, source string) *device.Kernel {
	s := &k.sites[i]
	if s.Name == "" {
		*s = device.Kernel{Name: k.prefix + "_" + name, Source: source}
	}
	return s
}

// Graph is one generated graph at a checkpoint's config and the limits: the tensors it reads
// (names resolved with the chosen prefixes, each loading into the graph's weights) and its
// memory plan.
type Graph interface {
	Weights(prefix map[string]string) []Weight
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

// Spec is a generated family at one checkpoint's config: its KV cache, what the runtime needs to
// know of it, and its graphs at given limits, launching the kernels of a prefix.
type Spec struct {
	KVLayers, KVWidth int // no KV cache when KVLayers is 0
	Info              Info
	Vision            func(l Limits, kernels string) VisionGraph // nil without a vision graph
	Decoder           func(l Limits, kernels string) DecoderGraph
}

// FamilyConfig is the methods of a generated family's Config: what it derives and requires of
// the values it binds (its table is the family's program's, ConfigTable), and the family at
// those values.
type FamilyConfig interface {
	Derive(r *Refusals) // fills the derived values, checking each requirement with r
	Spec() Spec
}

// BindWith is the Bind of family f over its generated config type C: it reads config.json into
// a C (ReadConfig over the table of f's program, ConfigTable), derives and checks it, refusing an unsupported value by name, and binds the
// family's spec at it.
func BindWith[C any, P interface {
	*C
	FamilyConfig
}](f *Family) func(cfg Config) (Bound, error) {
	return func(cfg Config) (b Bound, err error) {
		defer func() {
			if r := recover(); r != nil {
				b, err = nil, fmt.Errorf("config.json: %v; check the values %s reads", r, f.Name)
			}
		}()
		c := P(new(C))
		table, err := ConfigTable(f.Program, c)
		if err != nil {
			return nil, err
		}
		if err := ReadConfig(cfg, f.Name, table); err != nil {
			return nil, err
		}
		r := &Refusals{Family: f.Name}
		c.Derive(r)
		if err := r.Err(); err != nil {
			return nil, err
		}
		g := &Glue{
			Family: f.Name, Graph: f.Graph, Kernels: f.Kernels,
			Table: table, Prefixes: f.Prefixes, Spec: c.Spec(),
			Specialize: specialize.Loader(f.Program, cfg, f.Kernels),
			Unpinned: func(l Limits) []string {
				return Unpinned(table, f.Name, l.PageSize, f.KernelsPage)
			},
			Chosen: map[string]string{},
		}
		for _, p := range f.Prefixes {
			g.Chosen[p.Name] = p.Alts[0]
		}
		return g, nil
	}
}

// Glue is a generated family bound to one checkpoint (BindWith): it implements Bound over the
// family's tables and spec.
type Glue struct {
	Family, Graph, Kernels string        // as in Layout
	Table                  []ConfigValue // the bound config values (Values)
	Prefixes               []Prefix      // weight-name prefixes with their alternatives
	Spec                   Spec
	Specialize             func(b device.Specializer, pageSize int) error
	Unpinned               func(Limits) []string
	Chosen                 map[string]string // each prefix's chosen alternative, set by Resolve
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
	m := &Loaded{family: g.Family, info: g.Spec.Info}
	var ws []Weight
	if g.Spec.Vision != nil {
		m.vision = g.Spec.Vision(l, g.Kernels)
		m.graphs = append(m.graphs, m.vision)
	}
	if g.Spec.Decoder != nil {
		m.decoder = g.Spec.Decoder(l, g.Kernels)
		m.graphs = append(m.graphs, m.decoder)
	}
	for _, gr := range m.graphs {
		ws = append(ws, gr.Weights(g.Chosen)...)
	}
	ws, err := MergeWeights(ws)
	return ws, m, err
}

// layout is the family at l, with the model Load attaches the loaded base to.
func (g *Glue) layout(l Limits) (Layout, *Loaded, error) {
	ws, m, err := g.model(l)
	ly := Layout{
		Family: g.Family, Graph: g.Graph, Kernels: g.Kernels,
		Weights: ws, KVLayers: g.Spec.KVLayers, KVWidth: g.Spec.KVWidth,
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
	graphs  []Graph // in the order of Base.Arenas
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
	return m.decoder.Forward(m.Launcher(m.index(m.decoder), m.family), r)
}

func (m *Loaded) index(g Graph) int {
	for i, x := range m.graphs {
		if x == g {
			return i
		}
	}
	return -1
}
