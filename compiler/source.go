package compiler

import (
	"fmt"

	"tfc/compiler/check"

	"tfc/compiler/emit/hip"
	"tfc/compiler/lower"
	"tfc/compiler/specialize"
	"tfc/runtime/device"
)

// KernelSource checks and lowers one .graph file and renders its HIP kernels specialised for a
// checkpoint's config.json and a KV cache page size (default 16), with their schedule: what tfc
// compile -specialize writes to kernels/<package>.hip and kernels/<package>.schedule.json.
func KernelSource(filename string, graph, configJSON []byte, pageSize int) (device.Source, error) {
	p, diags, err := Lower(filename, graph)
	if err != nil {
		return device.Source{}, err
	}
	if len(diags) > 0 {
		return device.Source{}, diags
	}
	spec, err := lower.Specialize(p, configJSON, pageSize)
	if err != nil {
		return device.Source{}, fmt.Errorf("specialising %s: %w", filename, err)
	}
	return renderSource(p, spec)
}

// KernelSourceFrom is KernelSource for a config read through cfg, as the glue specialises at load
// (through package specialize, from the program it embeds).
func KernelSourceFrom(filename string, graph []byte, cfg lower.ConfigReader, pageSize int) (device.Source, error) {
	p, err := programOf(filename, graph)
	if err != nil {
		return device.Source{}, err
	}
	return p.Source(cfg, pageSize)
}

// HIPKernelsFrom is the kernel list KernelSourceFrom renders: what a GPU backend serving a checkpoint
// of config cfg launches, at that checkpoint's shapes. filename is a path under root.
func HIPKernelsFrom(root, filename string, graph []byte, cfg lower.ConfigReader, pageSize int) ([]hip.Kernel, error) {
	p, diags, err := LowerWith(filename, graph, check.Beside(root, filename))
	if err == nil && len(diags) > 0 {
		err = diags
	}
	if err != nil {
		return nil, err
	}
	return specialize.FromLowered(p).KernelsFor(cfg, pageSize)
}

// programOf lowers the graph to the program specialising reads.
func programOf(filename string, graph []byte) (specialize.Program, error) {
	p, diags, err := Lower(filename, graph)
	if err != nil {
		return specialize.Program{}, err
	}
	if len(diags) > 0 {
		return specialize.Program{}, diags
	}
	return specialize.FromLowered(p), nil
}
