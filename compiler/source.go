package compiler

import (
	"encoding/json"
	"fmt"
	"strings"

	"tfc/compiler/emit/hip"
	"tfc/compiler/lower"
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

// ConfigValues reads a checkpoint's config.json by dotted path, alternatives separated by '|',
// as runtime/model.Config does.
type ConfigValues interface {
	Has(path string) bool
	Int(path string) (int, error)
	Float(path string) (float64, error)
	Bool(path string) (bool, error)
	IntList(path string) ([]int, error)
	String(path string) (string, error)
}

// weightDTypePaths are where lower.Specialize reads the checkpoint's float type.
const weightDTypePaths = "torch_dtype|dtype|text_config.torch_dtype|text_config.dtype"

// KernelSourceFrom is KernelSource for a config read through cfg: the values the graph binds and
// the weight dtype are written back as a config.json of their own, which specialises the kernels.
func KernelSourceFrom(filename string, graph []byte, cfg ConfigValues, pageSize int) (device.Source, error) {
	p, spec, err := specializeFrom(filename, graph, cfg, pageSize)
	if err != nil {
		return device.Source{}, err
	}
	return renderSource(p, spec)
}

// HIPKernelsFrom is the kernel list KernelSourceFrom renders: what a GPU backend serving a checkpoint
// of config cfg launches, at that checkpoint's shapes.
func HIPKernelsFrom(filename string, graph []byte, cfg ConfigValues, pageSize int) ([]hip.Kernel, error) {
	p, spec, err := specializeFrom(filename, graph, cfg, pageSize)
	if err != nil {
		return nil, err
	}
	return kernelsAt(p, spec)
}

// specializeFrom lowers the graph and specialises it for the values cfg gives.
func specializeFrom(filename string, graph []byte, cfg ConfigValues, pageSize int) (*lower.Program, *lower.Spec, error) {
	p, diags, err := Lower(filename, graph)
	if err != nil {
		return nil, nil, err
	}
	if len(diags) > 0 {
		return nil, nil, diags
	}
	configJSON, err := boundConfig(p, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", filename, err)
	}
	spec, err := lower.Specialize(p, configJSON, pageSize)
	if err != nil {
		return nil, nil, fmt.Errorf("specialising %s: %w", filename, err)
	}
	return p, spec, nil
}

// boundConfig is a config.json holding each value p reads from cfg at the first of its paths,
// and the weight dtype; values cfg lacks are left out, so their defaults apply.
func boundConfig(p *lower.Program, cfg ConfigValues) ([]byte, error) {
	root := map[string]any{}
	for _, prm := range p.Params {
		if prm.Derived != nil || len(prm.Paths) == 0 {
			continue
		}
		path := strings.Join(prm.Paths, "|")
		if !cfg.Has(path) {
			continue
		}
		var v any
		var err error
		switch prm.Type {
		case "int":
			v, err = cfg.Int(path)
		case "float":
			v, err = cfg.Float(path)
		case "bool":
			v, err = cfg.Bool(path)
		case "string":
			v, err = cfg.String(path)
		case "ints":
			v, err = cfg.IntList(path)
		default:
			return nil, fmt.Errorf("%s: type %s cannot be specialised", prm.Name, prm.Type)
		}
		if err != nil {
			return nil, err
		}
		if err := put(root, prm.Paths[0], v); err != nil {
			return nil, err
		}
	}
	if cfg.Has(weightDTypePaths) {
		dt, err := cfg.String(weightDTypePaths)
		if err != nil {
			return nil, err
		}
		root["torch_dtype"] = dt
	}
	return json.Marshal(root)
}

// put sets the dotted path of root to v, making the objects on the way; two params read from one
// path read one value, so the second write keeps it.
func put(root map[string]any, path string, v any) error {
	keys := strings.Split(path, ".")
	node := root
	for _, k := range keys[:len(keys)-1] {
		next, ok := node[k].(map[string]any)
		if !ok {
			if _, taken := node[k]; taken {
				return fmt.Errorf("config path %s runs through the value at %s", path, k)
			}
			next = map[string]any{}
			node[k] = next
		}
		node = next
	}
	last := keys[len(keys)-1]
	if _, isObject := node[last].(map[string]any); isObject {
		return fmt.Errorf("config path %s holds an object and a value", path)
	}
	node[last] = v
	return nil
}
