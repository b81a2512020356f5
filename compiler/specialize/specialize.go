// Package specialize renders a family's kernels for one checkpoint: the step a GPU backend needs
// at load time. It takes the compiled program (Program: the family's config values, requirements
// and kernels with symbolic constants, which the generated glue embeds as program.json) and a
// config, never the .graph text, so a binary that serves needs none of the compiler's front end.
package specialize

import (
	"bytes"
	"encoding/json"
	"fmt"

	"tfc/compiler/emit/hip"
	"tfc/compiler/lower"
	"tfc/runtime/device"
	"tfc/runtime/device/catalog"
)

// Program is what binding and specialising a family need of its lowered form: its config
// values, requirements and kernels with symbolic constants, and its description (Info, KV cache,
// graphs and the runners of the graphs it states) as expressions over the config values.
type Program struct {
	Family   string           `json:"family"`
	Package  string           `json:"package"`
	Params   []*lower.Param   `json:"params"`
	Requires []*lower.Require `json:"requires"`
	Info     []InfoValue      `json:"info"`
	KVLayers *lower.Expr      `json:"kv_layers,omitempty"` // nil: no KV cache
	KVWidth  *lower.Expr      `json:"kv_width,omitempty"`
	Graphs   []GraphUse       `json:"graphs"`
	Runners  []RunnerSpec     `json:"runners,omitempty"`
	Kernels  []UnboundKernel  `json:"kernels"`
}

// UnboundKernel is a kernel whose constants are still expressions over the config values; At
// binds it to one config.
type UnboundKernel struct {
	Name   string      `json:"name"`
	Role   string      `json:"role,omitempty"`
	Source []string    `json:"source"` // graph file:line of each fused op
	Ops    []UnboundOp `json:"ops"`
}

// UnboundOp is one op of an UnboundKernel: hip.Op with its constants still expressions.
type UnboundOp struct {
	Kind   string                 `json:"kind"`
	Act    string                 `json:"act,omitempty"`
	Ints   map[string]*lower.Expr `json:"ints,omitempty"`
	Floats map[string]*lower.Expr `json:"floats,omitempty"`
	Flags  map[string]bool        `json:"flags,omitempty"`
	// Sections is a rope's int list, spread as Ints sections, section0, section1...
	Sections *lower.Expr `json:"sections,omitempty"`
	// Weights are the operand fields that read weights: they take the checkpoint's float type.
	Weights []string `json:"weights,omitempty"`
	// Paged says the op reads the paged KV cache: Ints page_size is the cache's page rows.
	Paged bool `json:"paged,omitempty"`
}

// FromLowered is the part of a lowered family that specialising reads.
func FromLowered(p *lower.Program) Program {
	out := Program{Family: p.Family, Package: p.Package, Requires: p.Requires}
	baked := lower.KernelParams(p)
	for _, prm := range p.Params {
		if prm.Spec != nil && prm.Derived == nil && baked[prm.Name] {
			c := *prm
			c.Kernels = prm.Spec
			prm = &c
		}
		out.Params = append(out.Params, prm)
	}
	for _, k := range p.Kernels {
		out.Kernels = append(out.Kernels, kernelOf(k))
	}
	family(p, &out)
	return out
}

// kernelOf keeps of k what its HIP rendering needs, constants as expressions.
func kernelOf(k *lower.Kernel) UnboundKernel {
	sk := UnboundKernel{Name: k.Name, Role: k.Role}
	seen := map[string]bool{}
	for _, s := range k.Sources {
		line := fmt.Sprintf("%s:%d", s.File, s.Line)
		if !seen[line] {
			seen[line] = true
			sk.Source = append(sk.Source, line)
		}
	}
	internal := k.Internal()
	for i, op := range k.Ops {
		o := UnboundOp{Kind: op.Kind, Ints: map[string]*lower.Expr{}, Floats: map[string]*lower.Expr{}, Flags: map[string]bool{}}
		if a := op.Attr("Act"); a != nil {
			o.Act = a.Name
		}
		for _, a := range op.Args {
			if a.Value.IsWeight() {
				o.Weights = append(o.Weights, a.Field)
			}
		}
		if internal[i] {
			o.Flags["internal"] = true
		}
		spec := catalog.Find(op.Kind)
		for _, c := range spec.Consts { // the constants the catalog names
			switch c.Of {
			case catalog.Cols:
				o.Ints[c.Name] = lower.FromDim(op.Arg(c.Field).Cols)
			case catalog.RowCount:
				o.Ints[c.Name] = lower.FromDim(op.Arg(c.Field).Rows)
			case catalog.IntAttr:
				o.Ints[c.Name] = op.Attr(c.Field)
			case catalog.FloatAttr:
				o.Floats[c.Name] = op.Attr(c.Field)
			}
		}
		for _, t := range spec.Tensors { // optional tensors, by the flag that says they are present
			if t.Flag != "" {
				o.Flags[t.Flag] = o.Flags[t.Flag] || op.Arg(t.Path) != nil
			}
		}
		switch op.Kind { // what only one template reads
		case "linear":
			if op.Attr("Round") != nil && op.Attr("Round").Name == "product" {
				o.Flags["round_product"] = true
			}
		case "rope":
			o.Sections = op.Attr("Sections")
			o.Flags["per_axis"] = op.Attr("Mode") != nil && op.Attr("Mode").Name == "per_axis"
			if op.Attr("Mode") != nil && op.Attr("Mode").Name == "alternating" {
				o.Flags["alternating"] = true
			}
			if x := op.Arg("X"); i > 0 && x.Kind == lower.View && x.ColLo != nil {
				o.Ints["col"] = lower.FromDim(*x.ColLo)
			} else if i > 0 {
				o.Ints["col"] = lower.Int(0)
			}
		case "glu":
			if g, u := op.Arg("Gate"), op.Arg("Up"); i > 0 && g.Kind == lower.View && g.ColLo != nil && u.Kind == lower.View && u.ColLo != nil {
				o.Ints["gate_col"], o.Ints["up_col"] = lower.FromDim(*g.ColLo), lower.FromDim(*u.ColLo)
			}
		case "attention":
			if op.Arg("Cache") != nil {
				o.Flags["cache"] = true
				o.Paged = true
			}
		}
		sk.Ops = append(sk.Ops, o)
	}
	return sk
}

// At is k with its constants evaluated at spec, as the HIP renderer takes it.
func (k UnboundKernel) At(spec *lower.Spec) (hip.Kernel, error) {
	hk := hip.Kernel{Name: k.Name, Role: k.Role, Source: k.Source}
	for _, o := range k.Ops {
		h := hip.Op{Kind: o.Kind, Act: o.Act, Ints: map[string]int{}, Floats: map[string]float64{}, Flags: map[string]bool{}, DTypes: map[string]string{}}
		for f, v := range o.Flags {
			h.Flags[f] = v
		}
		for _, f := range o.Weights {
			h.DTypes[f] = spec.WeightDType
		}
		for name, e := range o.Ints {
			n, err := spec.EvalInt(e)
			if err != nil {
				return hk, fmt.Errorf("kernel %s: %v", k.Name, err)
			}
			h.Ints[name] = n
		}
		for name, e := range o.Floats {
			f, err := spec.EvalFloat(e)
			if err != nil {
				return hk, fmt.Errorf("kernel %s: %v", k.Name, err)
			}
			h.Floats[name] = f
		}
		if o.Sections != nil {
			secs, err := lower.Eval(o.Sections, spec.Env)
			if err != nil {
				return hk, fmt.Errorf("kernel %s: sections: %v", k.Name, err)
			}
			h.Ints["sections"] = len(secs.Args)
			for j, s := range secs.Args {
				h.Ints[fmt.Sprintf("section%d", j)] = int(s.Int)
			}
		}
		if o.Paged {
			h.Ints["page_size"] = spec.PageSize
		}
		hk.Ops = append(hk.Ops, h)
	}
	return hk, nil
}

// KernelsAt is every kernel of p with its constants evaluated at spec.
func (p Program) KernelsAt(spec *lower.Spec) ([]hip.Kernel, error) {
	ks := make([]hip.Kernel, 0, len(p.Kernels))
	for _, k := range p.Kernels {
		hk, err := k.At(spec)
		if err != nil {
			return nil, err
		}
		ks = append(ks, hk)
	}
	return ks, nil
}

// KernelsFor binds p to the config cfg reads (refusing one its requirements refuse) and returns its
// kernels at that config and a KV cache of pageSize-row pages (0: 16).
func (p Program) KernelsFor(cfg lower.ConfigReader, pageSize int) ([]hip.Kernel, error) {
	spec, err := lower.Bind(p.Params, p.Requires, cfg, pageSize)
	if err != nil {
		return nil, fmt.Errorf("specialising %s: %w", p.Family, err)
	}
	return p.KernelsAt(spec)
}

// Source is kernels/<package>.hip and its schedule for the config cfg reads.
func (p Program) Source(cfg lower.ConfigReader, pageSize int) (device.Source, error) {
	ks, err := p.KernelsFor(cfg, pageSize)
	if err != nil {
		return device.Source{}, err
	}
	return Render(p.Family, ks)
}

// Render is the HIP text and the schedule of the kernels ks of family (opts: hip.Render's, a
// planted control).
func Render(family string, ks []hip.Kernel, opts ...hip.Option) (device.Source, error) {
	text, err := hip.Render(family, ks, opts...)
	if err != nil {
		return device.Source{}, err
	}
	sched, err := hip.Schedules(ks)
	if err != nil {
		return device.Source{}, err
	}
	return device.Source{HIP: text, Schedules: sched}, nil
}

// Encode writes p as the program.json the glue embeds.
func Encode(p Program) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", " ")
	if err := enc.Encode(p); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Decode reads what Encode wrote, refusing unknown fields.
func Decode(data []byte) (Program, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Program
	if err := dec.Decode(&p); err != nil {
		return Program{}, fmt.Errorf("program.json: %w", err)
	}
	return p, nil
}

// Loader is what a family's glue gives the loader: it specialises the embedded program for
// cfg and a page size and hands the source to b as kernels/PKG.hip and its schedule.
func Loader(program []byte, cfg lower.ConfigReader, pkg string) func(b device.Specializer, pageSize int) error {
	return func(b device.Specializer, pageSize int) error {
		prog, err := Decode(program)
		if err != nil {
			return err
		}
		ks, err := prog.Source(cfg, pageSize)
		if err != nil {
			return fmt.Errorf("specialising kernels/gen/%s.hip for this checkpoint: %w", pkg, err)
		}
		return b.SpecializeFamily(pkg, ks)
	}
}
