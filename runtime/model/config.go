package model

import (
	"fmt"
	"reflect"
	"strings"

	"tfc/compiler/lower"
	"tfc/compiler/specialize"
)

// ConfigValue is one value a family binds: where config.json holds it (Path, alternatives
// separated by '|') or how the graph derives it (Derived), the value it has for this checkpoint,
// and the value the committed kernels were specialised for (Kernels; nil when no kernel depends
// on it).
type ConfigValue struct {
	Name    string
	Path    string
	Derived string
	Value   any
	Kernels any
}

// BindProgram reads config.json into the values of a family's compiled program (program.json),
// derives the rest and checks the requirements, refusing an unsupported value by name. It gives
// the values by name (list elements also as name[k]) and their table, in declaration order.
func BindProgram(p *specialize.Program, cfg Config) (map[string]*lower.Expr, []ConfigValue, error) {
	env, err := lower.BindValues(p.Family, p.Params, p.Requires, cfg)
	if err != nil {
		return nil, nil, err
	}
	table := make([]ConfigValue, len(p.Params))
	for i, prm := range p.Params {
		v := ConfigValue{Name: prm.Name, Path: strings.Join(prm.Paths, "|"), Value: lower.GoValue(env[prm.Name])}
		if prm.Derived != nil {
			v.Path, v.Derived = "", prm.Derived.String()
		} else if prm.Kernels != nil {
			k, err := lower.Eval(prm.Kernels, nil)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %s: %w", p.Family, prm.Name, err)
			}
			if prm.Type == "float" && k.Op == "int" {
				k = lower.Float(float64(k.Int))
			}
			v.Kernels = lower.GoValue(k)
		}
		table[i] = v
	}
	return env, table, nil
}

// Values lists vs with the values their fields hold now, for display.
func Values(vs []ConfigValue) []Value {
	out := make([]Value, len(vs))
	for i, v := range vs {
		path := v.Path
		if v.Derived != "" {
			path = "= " + v.Derived
		}
		out[i] = Value{Name: v.Name, Path: path, Value: v.Value}
	}
	return out
}

// Unpinned lists how vs and the KV page size differ from what the committed kernels were
// specialised for (kernelsPageSize 0: none were generated for family).
func Unpinned(vs []ConfigValue, family string, pageSize, kernelsPageSize int) []string {
	if kernelsPageSize == 0 {
		return []string{"no HIP kernels were generated for " + family}
	}
	var bad []string
	for _, v := range vs {
		if v.Kernels == nil {
			continue
		}
		if !reflect.DeepEqual(v.Value, v.Kernels) {
			bad = append(bad, fmt.Sprintf("%s = %v (%s), the kernels have %v", v.Name, v.Value, strings.ReplaceAll(v.Path, "|", " | "), v.Kernels))
		}
	}
	if pageSize != kernelsPageSize {
		bad = append(bad, fmt.Sprintf("PageSize = %d, the kernels have %d", pageSize, kernelsPageSize))
	}
	return bad
}
