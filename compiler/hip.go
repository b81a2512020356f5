package compiler

import (
	"fmt"

	"tfc/compiler/emit/hip"
	"tfc/compiler/lower"
	"tfc/runtime/device"
)

// HIPKernels checks, lowers and specialises one .graph file and returns its kernels as the HIP
// renderer takes them.
func HIPKernels(filename string, src []byte, opts Options) ([]hip.Kernel, error) {
	p, diags, err := Lower(filename, src)
	if err != nil {
		return nil, err
	}
	if len(diags) > 0 {
		return nil, diags
	}
	spec, err := lower.Specialize(p, opts.Specialize, opts.PageSize)
	if err != nil {
		return nil, err
	}
	return kernelsAt(p, spec)
}

// kernelsAt is every kernel of p with its constants evaluated at spec.
func kernelsAt(p *lower.Program, spec *lower.Spec) ([]hip.Kernel, error) {
	var ks []hip.Kernel
	for _, k := range p.Kernels {
		hk, err := HIPKernel(k, spec)
		if err != nil {
			return nil, err
		}
		ks = append(ks, hk)
	}
	return ks, nil
}

// renderSource specialises every kernel of p with spec's constants and renders kernels/<pkg>.hip
// and the schedule beside it.
func renderSource(p *lower.Program, spec *lower.Spec) (device.Source, error) {
	ks, err := kernelsAt(p, spec)
	if err != nil {
		return device.Source{}, err
	}
	text, err := hip.Render(p.Family, ks)
	if err != nil {
		return device.Source{}, err
	}
	sched, err := hip.Schedules(ks)
	if err != nil {
		return device.Source{}, err
	}
	return device.Source{HIP: text, Schedules: sched}, nil
}

// HIPKernel is k with its constants evaluated at spec, as the HIP renderer takes it.
func HIPKernel(k *lower.Kernel, spec *lower.Spec) (hip.Kernel, error) {
	hk := hip.Kernel{Name: k.Name, Role: k.Role}
	seen := map[string]bool{}
	for _, s := range k.Sources {
		line := fmt.Sprintf("%s:%d", s.File, s.Line)
		if !seen[line] {
			seen[line] = true
			hk.Source = append(hk.Source, line)
		}
	}
	var fail error
	ival := func(e *lower.Expr) int {
		n, err := spec.EvalInt(e)
		if err != nil && fail == nil {
			fail = fmt.Errorf("kernel %s: %v", k.Name, err)
		}
		return n
	}
	fval := func(e *lower.Expr) float64 {
		f, err := spec.EvalFloat(e)
		if err != nil && fail == nil {
			fail = fmt.Errorf("kernel %s: %v", k.Name, err)
		}
		return f
	}
	internal := k.Internal()
	for i, op := range k.Ops {
		h := hip.Op{Kind: op.Kind, Ints: map[string]int{}, Floats: map[string]float64{}, Flags: map[string]bool{}, DTypes: map[string]string{}}
		if a := op.Attr("Act"); a != nil {
			h.Act = a.Name
		}
		for _, a := range op.Args {
			if a.Value.Kind == lower.WeightRef || a.Value.Kind == lower.Select {
				h.DTypes[a.Field] = spec.WeightDType
			}
		}
		if internal[i] {
			h.Flags["internal"] = true
		}
		switch op.Kind {
		case "linear":
			h.Ints["N"], h.Ints["K"] = ival(op.Arg("W").Rows), ival(op.Arg("X").Cols)
			h.Flags["has_bias"] = op.Arg("B") != nil
			h.Flags["has_res"] = op.Arg("Res") != nil
		case "rmsnorm":
			h.Ints["D"] = ival(op.Arg("X").Cols)
			h.Floats["eps"] = fval(op.Attr("Eps"))
			h.Flags["has_res"] = op.Arg("Res") != nil
		case "layernorm":
			h.Ints["D"] = ival(op.Arg("X").Cols)
			h.Floats["eps"] = fval(op.Attr("Eps"))
			h.Flags["has_bias"] = op.Arg("B") != nil
		case "rope":
			h.Ints["heads"], h.Ints["head_dim"] = ival(op.Attr("Heads")), ival(op.Attr("HeadDim"))
			h.Floats["theta"] = fval(op.Attr("Theta"))
			secs, err := lower.Eval(op.Attr("Sections"), spec.Env)
			if err != nil {
				return hk, fmt.Errorf("kernel %s: sections: %v", k.Name, err)
			}
			h.Ints["sections"] = len(secs.Args)
			for j, s := range secs.Args {
				h.Ints[fmt.Sprintf("section%d", j)] = int(s.Int)
			}
			h.Flags["per_axis"] = op.Attr("Mode") != nil && op.Attr("Mode").Name == "per_axis"
			if x := op.Arg("X"); i > 0 && x.Kind == lower.View && x.ColLo != nil {
				h.Ints["col"] = ival(x.ColLo)
			} else if i > 0 {
				h.Ints["col"] = 0
			}
		case "attention":
			h.Ints["heads"], h.Ints["kv_heads"], h.Ints["head_dim"] = ival(op.Attr("Heads")), ival(op.Attr("KVHeads")), ival(op.Attr("HeadDim"))
			h.Floats["scale"] = fval(op.Attr("Scale"))
			if op.Arg("Cache") != nil {
				h.Flags["cache"] = true
				h.Ints["page_size"] = spec.PageSize
			}
		case "add", "mul", "activate", "glu", "copy":
			h.Ints["N"] = ival(op.Out.Cols)
		case "embed":
			h.Ints["D"], h.Ints["V"] = ival(op.Out.Cols), ival(op.Arg("Table").Rows)
		case "gather", "scatter":
			h.Ints["D"] = ival(op.Out.Cols)
		}
		hk.Ops = append(hk.Ops, h)
	}
	return hk, fail
}
