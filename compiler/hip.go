package compiler

import (
	"tfc/compiler/check"
	"tfc/compiler/emit/hip"
	"tfc/compiler/lower"
	"tfc/compiler/specialize"
	"tfc/runtime/device"
)

// HIPKernels checks, lowers and specialises one .graph file and returns its kernels as the HIP
// renderer takes them.
func HIPKernels(filename string, src []byte, opts Options) ([]hip.Kernel, error) {
	p, diags, err := LowerWith(filename, src, check.Beside(opts.Root, filename))
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
	return specialize.FromLowered(p).KernelsAt(spec)
}

// renderSource specialises every kernel of p with spec's constants and renders kernels/<pkg>.hip
// and the schedule beside it.
func renderSource(p *lower.Program, spec *lower.Spec) (device.Source, error) {
	ks, err := specialize.FromLowered(p).KernelsAt(spec)
	if err != nil {
		return device.Source{}, err
	}
	return specialize.Render(p.Family, ks)
}
