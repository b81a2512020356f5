package model

import (
	"fmt"
	"reflect"
	"strings"
	"sync"

	"tfc/compiler/lower"
	"tfc/compiler/specialize"
	"tfc/runtime/device"
)

// Runner is what every generated graph runner is at a family's values and the limits: the
// config values its forward reads (C, each field filled by its graph name), its weights (W,
// filled by Weights from the runner's manifest in its program), the offsets of its buffers in
// its arenas (P, placed from the same program), its launch sites and its memory plan.
type Runner[C, W, P any] struct {
	C    C
	W    W
	P    P
	K    *Kernels
	spec *specialize.RunnerSpec
	env  map[string]*lower.Expr
	plan GraphPlan
}

// GraphDef is a graph's runner as the generated registry declares it for a family (Vision or
// Decoder over the program and forward of the package stating the graph); the family binds it
// to its own values.
type GraphDef interface {
	Name() string
	bind(env map[string]*lower.Expr, l Limits, kernels string) (Graph, error)
}

// def is what a runner's declaration holds: its graph's name and the program of the package
// stating it, whose runner spec is read once.
type def struct {
	name    string
	program []byte
	once    sync.Once
	spec    *specialize.RunnerSpec
	err     error
}

// Name is the graph's name in its home file.
func (d *def) Name() string { return d.name }

// runner is the graph's spec in its home program.
func (d *def) runner() (*specialize.RunnerSpec, error) {
	d.once.Do(func() {
		p, err := specialize.Decode(d.program)
		if err != nil {
			d.err = err
			return
		}
		for i := range p.Runners {
			if p.Runners[i].Name == d.name {
				d.spec = &p.Runners[i]
				return
			}
		}
		d.err = fmt.Errorf("program %s states no graph %s", p.Package, d.name)
	})
	return d.spec, d.err
}

// Vision declares graph name of the package whose program is program as a vision graph run by
// forward.
func Vision[C, W, P any](program []byte, name string, forward func(g *Runner[C, W, P], l *Launcher, pixels []float32, grids [][3]int) ([]float32, error)) GraphDef {
	return &visionDef[C, W, P]{def: def{name: name, program: program}, forward: forward}
}

// Decoder declares graph name of the package whose program is program as a decoder graph run
// by forward.
func Decoder[C, W, P any](program []byte, name string, forward func(g *Runner[C, W, P], l *Launcher, r *Round) ([]float32, error)) GraphDef {
	return &decoderDef[C, W, P]{def: def{name: name, program: program}, forward: forward}
}

type visionDef[C, W, P any] struct {
	def
	forward func(g *Runner[C, W, P], l *Launcher, pixels []float32, grids [][3]int) ([]float32, error)
}

func (d *visionDef[C, W, P]) bind(env map[string]*lower.Expr, l Limits, kernels string) (Graph, error) {
	r, err := newRunner[C, W, P](&d.def, env, l, kernels)
	return &visionRunner[C, W, P]{r, d.forward}, err
}

type visionRunner[C, W, P any] struct {
	*Runner[C, W, P]
	forward func(g *Runner[C, W, P], l *Launcher, pixels []float32, grids [][3]int) ([]float32, error)
}

func (v *visionRunner[C, W, P]) Forward(l *Launcher, pixels []float32, grids [][3]int) ([]float32, error) {
	return v.forward(v.Runner, l, pixels, grids)
}

type decoderDef[C, W, P any] struct {
	def
	forward func(g *Runner[C, W, P], l *Launcher, r *Round) ([]float32, error)
}

func (d *decoderDef[C, W, P]) bind(env map[string]*lower.Expr, l Limits, kernels string) (Graph, error) {
	r, err := newRunner[C, W, P](&d.def, env, l, kernels)
	return &decoderRunner[C, W, P]{r, d.forward}, err
}

type decoderRunner[C, W, P any] struct {
	*Runner[C, W, P]
	forward func(g *Runner[C, W, P], l *Launcher, r *Round) ([]float32, error)
}

// Forward plays the tape of a round of r's shape where one was recorded, else runs the
// generated forward (recording its launches where the backend keeps tapes).
func (d *decoderRunner[C, W, P]) Forward(l *Launcher, r *Round) ([]float32, error) {
	if t, ok := l.replay(r); ok {
		return l.FinishRound(r, t.logits, t.picks)
	}
	return d.forward(d.Runner, l, r)
}

// newRunner is d's runner at the values env and limits l, launching the kernels of
// kernels/gen/KERNELS.hip: C filled from env and the buffers placed.
func newRunner[C, W, P any](d *def, env map[string]*lower.Expr, l Limits, kernels string) (*Runner[C, W, P], error) {
	spec, err := d.runner()
	if err != nil {
		return nil, err
	}
	r := &Runner[C, W, P]{spec: spec, env: env, K: NewKernels(kernels, spec.Sites)}
	if err := fill(&r.C, env); err != nil {
		return nil, fmt.Errorf("graph %s: %w", d.name, err)
	}
	r.plan, err = r.place(l)
	if err != nil {
		return nil, fmt.Errorf("graph %s: %w", d.name, err)
	}
	return r, nil
}

// Plan is the graph's memory plan.
func (r *Runner[C, W, P]) Plan() GraphPlan { return r.plan }

// place lays out the graph's buffers at limits l, each offset into its field of P.
func (r *Runner[C, W, P]) place(l Limits) (GraphPlan, error) {
	env := map[string]*lower.Expr{}
	for k, v := range map[string]int{"Rows": l.Rows, "Patches": l.Patches, "Parallel": l.Parallel, "Context": l.Context, "PageSize": l.PageSize} {
		env[k] = lower.Int(int64(v))
	}
	for _, s := range r.spec.Sizes {
		v, err := lower.Eval(s.Limit, env)
		if err != nil {
			return GraphPlan{}, fmt.Errorf("size %s: %w", s.Name, err)
		}
		env[s.Name] = v
	}
	for k, v := range r.env { // config values shadow sizes, as in the forward
		env[k] = v
	}
	a := NewArenas(r.spec.Name)
	p := reflect.ValueOf(&r.P).Elem()
	for _, b := range r.spec.Buffers {
		n, err := evalInt(b.Size, env)
		if err != nil {
			return GraphPlan{}, fmt.Errorf("buffer %s: %w", b.Name, err)
		}
		off := a.F32(b.Name, n)
		if b.DType == "I32" {
			off = a.I32(b.Name, n)
		}
		f := p.FieldByName(b.Field)
		if !f.IsValid() {
			return GraphPlan{}, fmt.Errorf("the plan has no field %s for buffer %s", b.Field, b.Name)
		}
		f.SetInt(int64(off))
	}
	return a.Plan(), nil
}

// Weights lists the tensors the graph reads, named with the chosen prefixes, each loading into
// its field of W: single tensors in declaration order, a per-layer group's where its first
// tensor is declared, layer by layer.
func (r *Runner[C, W, P]) Weights(prefix map[string]string) ([]Weight, error) {
	w := reflect.ValueOf(&r.W).Elem()
	var out []Weight
	tensor := func(s *specialize.WeightSpec, layer int) (Weight, error) {
		shape := make([]int, len(s.Shape))
		for i, d := range s.Shape {
			n, err := evalInt(d, r.env)
			if err != nil {
				return Weight{}, err
			}
			shape[i] = n
		}
		name := strings.Replace(s.Path, "{i}", fmt.Sprint(layer), 1)
		if s.Prefix != "" {
			name = prefix[s.Prefix] + "." + name
		}
		w := Weight{Name: name, Shape: shape}
		if s.Unfold != nil {
			f, err := evalInt(s.Unfold, r.env)
			if err != nil {
				return Weight{}, err
			}
			w.Unfold = f
		}
		if s.Deinterleave != nil {
			h, err := evalInt(s.Deinterleave, r.env)
			if err != nil {
				return Weight{}, err
			}
			w.Deinterleave = h
		}
		return w, nil
	}
	add := func(s *specialize.WeightSpec, layer int, dst reflect.Value) error {
		if s.Cond != nil {
			ok, err := lower.Eval(s.Cond, r.env)
			if err != nil || !ok.Bool {
				return err
			}
		}
		t := dst.FieldByName(s.Field).Addr().Interface().(*device.Tensor)
		if len(s.Parts) == 0 {
			w, err := tensor(s, layer)
			w.Dst = t
			out = append(out, w)
			return err
		}
		var parts []Weight
		for i := range s.Parts {
			w, err := tensor(&s.Parts[i], layer)
			if err != nil {
				return err
			}
			parts = append(parts, w)
		}
		out = append(out, StackAt(parts, t))
		return nil
	}
	done := map[string]bool{}
	for i := range r.spec.Weights {
		s := &r.spec.Weights[i]
		if s.Group == "" {
			if err := add(s, 0, w); err != nil {
				return nil, fmt.Errorf("%s: %w", s.Pos, err)
			}
			continue
		}
		if done[s.Group] {
			continue
		}
		done[s.Group] = true
		count, err := evalInt(s.Count, r.env)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Pos, err)
		}
		g := w.FieldByName(s.Group)
		g.Set(reflect.MakeSlice(g.Type(), count, count))
		for layer := 0; layer < count; layer++ {
			for j := range r.spec.Weights[i:] {
				if x := &r.spec.Weights[i+j]; x.Group == s.Group {
					if err := add(x, layer, g.Index(layer)); err != nil {
						return nil, fmt.Errorf("%s: %w", x.Pos, err)
					}
				}
			}
		}
	}
	return out, nil
}

// fill sets each field of *c to the value of the config value whose Go name it is.
func fill(c any, env map[string]*lower.Expr) error {
	byGo := map[string]*lower.Expr{}
	for k, v := range env {
		if !strings.Contains(k, "[") {
			byGo[lower.GoName(k)] = v
		}
	}
	s := reflect.ValueOf(c).Elem()
	for i := 0; i < s.NumField(); i++ {
		f := s.Type().Field(i)
		v := lower.GoValue(byGo[f.Name])
		if v == nil {
			return fmt.Errorf("the family binds no value for %s", f.Name)
		}
		x := reflect.ValueOf(v)
		if n, ok := v.(int); ok && f.Type.Kind() == reflect.Float64 {
			x = reflect.ValueOf(float64(n))
		}
		if !x.Type().AssignableTo(f.Type) {
			return fmt.Errorf("%s is a %T, not a %s", f.Name, v, f.Type)
		}
		s.Field(i).Set(x)
	}
	return nil
}

// evalInt is integer expression x with the values env.
func evalInt(x *lower.Expr, env map[string]*lower.Expr) (int, error) {
	v, err := lower.Eval(x, env)
	if err != nil {
		return 0, err
	}
	if v.Op != "int" {
		return 0, fmt.Errorf("%s is not an integer", x)
	}
	return int(v.Int), nil
}

// Arenas lays out one graph's buffers in its F32 and I32 arenas, for its memory plan.
type Arenas struct {
	graph    string
	f32, i32 Arena
}

// NewArenas are the empty arenas of graph.
func NewArenas(graph string) *Arenas { return &Arenas{graph: graph} }

// F32 places buffer name of n float32 elements and returns its offset in the F32 arena.
func (a *Arenas) F32(name string, n int) int { return a.f32.Place(a.graph+"."+name, 4, n) }

// I32 places buffer name of n int32 elements and returns its offset in the I32 arena.
func (a *Arenas) I32(name string, n int) int { return a.i32.Place(a.graph+"."+name, 4, n) }

// Plan is the graph's memory plan: both arenas' elements and their buffers, F32 first.
func (a *Arenas) Plan() GraphPlan {
	return GraphPlan{
		Name:    a.graph,
		F32:     a.f32.Size,
		I32:     a.i32.Size,
		Buffers: append(append([]PlanBuffer(nil), a.f32.Buffers...), a.i32.Buffers...),
	}
}
