package specialize

import (
	"fmt"
	"sort"

	"tfc/compiler/lower"
)

// InfoValue is one field of the family's runtime description (model.Info) as an expression
// over the config values: an int, or a string literal.
type InfoValue struct {
	Field string      `json:"field"`
	Value *lower.Expr `json:"value"`
}

// GraphUse is a graph the family runs: its role and the package whose runner runs it (the
// family's own, or the home family's for a reused graph).
type GraphUse struct {
	Role string `json:"role"`
	Home string `json:"home"`
	Name string `json:"name"`
}

// RunnerSpec is what a graph's runner reads at bind time: its launch sites, its weights and
// its buffers. Only the package stating the graph lists it.
type RunnerSpec struct {
	Name    string       `json:"name"`
	Sites   int          `json:"sites"`
	Weights []WeightSpec `json:"weights"`
	Sizes   []SizeSpec   `json:"sizes"`
	Buffers []BufferSpec `json:"buffers"`
}

// WeightSpec is one tensor a runner reads: the Go field it loads into (Group, when set, is the
// per-layer slice holding the field), its name (Prefix's chosen alternative, then Path with
// "{i}" the layer), its shape, the layers (Count, with a Group) and when it is present. A
// stacked weight has no name of its own: its Parts' tensors are loaded row after row.
type WeightSpec struct {
	Group  string        `json:"group,omitempty"`
	Field  string        `json:"field,omitempty"`
	Prefix string        `json:"prefix,omitempty"`
	Path   string        `json:"path,omitempty"`
	Count  *lower.Expr   `json:"count,omitempty"`
	Shape  []*lower.Expr `json:"shape"`
	Cond   *lower.Expr   `json:"cond,omitempty"`
	// Unfold, when set, is the factor f of an unfold view: column c*f + k loads as k*C + c.
	Unfold *lower.Expr `json:"unfold,omitempty"`
	// Deinterleave, when set, is the heads n of a deinterleave view: row 2j + e of each head
	// loads as row e*HD/2 + j.
	Deinterleave *lower.Expr  `json:"deinterleave,omitempty"`
	Parts        []WeightSpec `json:"parts,omitempty"`
	Pos          string       `json:"pos"`
}

// SizeSpec is a symbolic size of a graph's inputs at its largest: an expression of the limits
// (Rows, Patches, Parallel, Context, PageSize).
type SizeSpec struct {
	Name  string      `json:"name"`
	Limit *lower.Expr `json:"limit"`
}

// BufferSpec is one buffer of a graph's memory plan: the plan struct's Go field holding its
// offset, its name, its arena (F32 or I32) and its elements, of the config values and sizes.
type BufferSpec struct {
	Field string      `json:"field"`
	Name  string      `json:"name"`
	DType string      `json:"dtype"`
	Size  *lower.Expr `json:"size"`
	Holds string      `json:"holds"`
}

// family fills out's description of p: its Info, KV cache, graphs and the runners of the
// graphs p states.
func family(p *lower.Program, out *Program) {
	out.Info = info(p)
	if dec := graphOf(p, "decoder"); dec != nil {
		if c := input(dec, "cache"); c != nil {
			out.KVLayers, out.KVWidth = lower.FromDim(c.Rows), lower.FromDim(c.Cols)
		}
	}
	for _, g := range p.Graphs {
		home := p.Package
		if g.Home != "" {
			home = lower.PackageName(g.Home)
		} else {
			out.Runners = append(out.Runners, runner(p, g))
		}
		out.Graphs = append(out.Graphs, GraphUse{Role: g.Role, Home: home, Name: g.Name})
	}
}

// runner is graph g's RunnerSpec.
func runner(p *lower.Program, g *lower.Graph) RunnerSpec {
	r := RunnerSpec{Name: g.Name, Sites: g.Sites()}
	for _, w := range p.WeightsOf(g) {
		r.Weights = append(r.Weights, weightSpec(w))
	}
	for _, d := range g.Sizes {
		r.Sizes = append(r.Sizes, SizeSpec{Name: d.Name, Limit: lower.FromDim(d.Limit)})
	}
	for _, a := range g.Arenas {
		for _, b := range a.Buffers {
			r.Buffers = append(r.Buffers, BufferSpec{Field: lower.GoName(b.Name), Name: b.Name, DType: a.DType, Size: b.Size, Holds: holds(b)})
		}
	}
	return r
}

// weightSpec is weight w's WeightSpec.
func weightSpec(w *lower.Weight) WeightSpec {
	s := WeightSpec{Group: w.Group, Field: w.Field, Prefix: w.Prefix, Path: w.Path, Cond: w.Cond, Unfold: w.Unfold, Deinterleave: w.Deinterleave, Pos: fmt.Sprintf("%s:%d", w.Pos.File, w.Pos.Line)}
	if w.Group != "" {
		s.Count = lower.FromDim(w.Count)
	}
	for _, d := range w.Shape {
		s.Shape = append(s.Shape, lower.FromDim(d))
	}
	for _, part := range w.Parts {
		ps := weightSpec(part)
		ps.Group, ps.Field, ps.Count = "", "", nil
		s.Parts = append(s.Parts, ps)
	}
	return s
}

// holds names the values buffer b holds, in order, each once.
func holds(b *lower.Buffer) string {
	out := ""
	seen := map[string]bool{}
	for _, v := range b.Values {
		if !seen[v.Name] {
			if len(seen) > 0 {
				out += ", "
			}
			seen[v.Name] = true
			out += v.Name
		}
	}
	return out
}

// info is the family's model.Info as expressions, by field name.
func info(p *lower.Program) []InfoValue {
	m := map[string]*lower.Expr{}
	if dec := graphOf(p, "decoder"); dec != nil {
		m["Vocab"] = lower.FromDim(dec.Output.Cols)
		if v := input(dec, "image_rows"); v != nil {
			m["Hidden"] = lower.FromDim(v.Cols)
		}
		if v := input(dec, "positions"); v != nil {
			m["PositionAxes"] = lower.FromDim(v.Cols)
		}
		if v := input(dec, "cache"); v != nil {
			m["Layers"] = lower.FromDim(v.Rows)
			m["KVWidth"] = lower.FromDim(v.Cols)
		}
	}
	if v := input(graphOf(p, "vision"), "pixels"); v != nil {
		m["PixelCols"] = lower.FromDim(v.Cols)
	}
	if r := ruleOf(p, "image"); r != nil {
		m["Image"] = lower.Str(r.Name)
		if a := r.Arg("merge"); a != nil {
			m["Merge"] = a
		}
		if a := r.Arg("image_token"); a != nil {
			m["ImageToken"] = a
		}
	}
	if r := ruleOf(p, "positions"); r != nil {
		m["Positions"] = lower.Str(r.Name)
		for _, k := range []struct{ arg, field string }{{"image_token", "ImageToken"}, {"vision_start", "VisionStart"}, {"vision_start_token", "VisionStart"}} {
			if a := r.Arg(k.arg); a != nil {
				m[k.field] = a
			}
		}
	}
	var out []InfoValue
	for k, v := range m {
		out = append(out, InfoValue{Field: k, Value: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Field < out[j].Field })
	return out
}

func graphOf(p *lower.Program, role string) *lower.Graph {
	for _, g := range p.Graphs {
		if g.Role == role {
			return g
		}
	}
	return nil
}

func ruleOf(p *lower.Program, kind string) *lower.Rule {
	for _, r := range p.Rules {
		if r.Kind == kind {
			return r
		}
	}
	return nil
}

func input(g *lower.Graph, role string) *lower.Value {
	if g == nil {
		return nil
	}
	for _, v := range g.Inputs {
		if v.Role == role {
			return v
		}
	}
	return nil
}
