package model

import (
	"fmt"
	"reflect"
	"strings"

	"tfc/compiler/lower"
	"tfc/compiler/specialize"
)

// ConfigValue is one value a family binds, as its generated table lists it: where config.json
// holds it (Path, alternatives separated by '|') or how the graph derives it (Derived); the field
// it fills (Into: *int, *float64, *bool, *string or *[]int); the default when config.json is
// silent (nil: required); an int list's length (0: any); and the value the committed kernels
// were specialised for (Kernels; nil when no kernel depends on it).
type ConfigValue struct {
	Name    string
	Path    string
	Derived string
	Into    any
	Default any
	Len     int
	Kernels any
}

// ConfigTable is the table of the values a family binds, read from its compiled program
// (program.json: each value's paths or derivation, default, list length and the value the
// committed kernels have) over the fields of cfg, a pointer to the family's generated Config:
// each value fills the field of its Go name.
func ConfigTable(program []byte, cfg any) ([]ConfigValue, error) {
	p, err := specialize.Decode(program)
	if err != nil {
		return nil, err
	}
	st := reflect.ValueOf(cfg)
	if st.Kind() != reflect.Pointer || st.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("%s: the config is a %T, not a struct's pointer", p.Family, cfg)
	}
	out := make([]ConfigValue, len(p.Params))
	for i, prm := range p.Params {
		f := st.Elem().FieldByName(lower.GoName(prm.Name))
		if !f.IsValid() {
			return nil, fmt.Errorf("%s: the config has no field %s for %s", p.Family, lower.GoName(prm.Name), prm.Name)
		}
		v := ConfigValue{Name: prm.Name, Path: strings.Join(prm.Paths, "|"), Into: f.Addr().Interface(), Len: prm.Len}
		if prm.Type != "ints" {
			v.Len = 0
		}
		if prm.Derived != nil {
			v.Path, v.Derived = "", prm.Derived.String()
		} else if v.Default, err = constant(prm.Type, prm.Default); err == nil {
			v.Kernels, err = constant(prm.Type, prm.Kernels)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", p.Family, prm.Name, err)
		}
		out[i] = v
	}
	return out, nil
}

// constant is the Go value of literal x as a value of type typ (int, float, bool, string or
// ints); nil for no literal.
func constant(typ string, x *lower.Expr) (any, error) {
	if x == nil {
		return nil, nil
	}
	x, err := lower.Eval(x, nil)
	if err != nil {
		return nil, err
	}
	switch {
	case typ == "int" && x.Op == "int":
		return int(x.Int), nil
	case typ == "float" && x.Op == "int":
		return float64(x.Int), nil
	case typ == "float" && x.Op == "float":
		return x.Float, nil
	case typ == "bool" && x.Op == "bool":
		return x.Bool, nil
	case typ == "string" && x.Op == "str":
		return x.Str, nil
	case typ == "ints" && x.Op == "list":
		out := make([]int, len(x.Args))
		for i, a := range x.Args {
			if a.Op != "int" {
				return nil, fmt.Errorf("%s is not a list of ints", x)
			}
			out[i] = int(a.Int)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s is not a literal %s", x, typ)
}

// ReadConfig fills the field of every value of vs that config.json holds, in order, through cfg;
// derived values are left to the caller. A missing required value, a value of the wrong type and
// an int list of the wrong length are refused by name.
func ReadConfig(cfg Config, family string, vs []ConfigValue) error {
	for _, v := range vs {
		if v.Path == "" {
			continue
		}
		paths := strings.ReplaceAll(v.Path, "|", " | ")
		if !cfg.Has(v.Path) {
			if v.Default == nil {
				return fmt.Errorf("config.json has no %s; %s needs it as %s", strings.ReplaceAll(v.Path, "|", " or "), family, v.Name)
			}
			if err := set(v.Into, v.Default); err != nil {
				return fmt.Errorf("%s: the default of %s: %w", family, v.Name, err)
			}
			continue
		}
		var got any
		var err error
		switch v.Into.(type) {
		case *int:
			got, err = cfg.Int(v.Path)
		case *float64:
			got, err = cfg.Float(v.Path)
		case *bool:
			got, err = cfg.Bool(v.Path)
		case *string:
			got, err = cfg.String(v.Path)
		case *[]int:
			got, err = cfg.IntList(v.Path)
		default:
			return fmt.Errorf("%s: %s fills a %T", family, v.Name, v.Into)
		}
		if err != nil {
			return fmt.Errorf("config.json: %s (%s): %w", v.Name, paths, err)
		}
		if err := set(v.Into, got); err != nil {
			return err
		}
		if l, ok := got.([]int); ok && v.Len > 0 && len(l) != v.Len {
			return fmt.Errorf("%s (%s) has %d values; %s needs %d", v.Name, paths, len(l), family, v.Len)
		}
	}
	return nil
}

// set stores x in the field p points to; an int goes into a float64 field as its value.
func set(p, x any) error {
	dst := reflect.ValueOf(p)
	if dst.Kind() != reflect.Pointer {
		return fmt.Errorf("%T is not a field's pointer", p)
	}
	src := reflect.ValueOf(x)
	if n, ok := x.(int); ok && dst.Elem().Kind() == reflect.Float64 {
		src = reflect.ValueOf(float64(n))
	}
	if !src.Type().AssignableTo(dst.Elem().Type()) {
		return fmt.Errorf("a %T does not fit a %s", x, dst.Elem().Type())
	}
	dst.Elem().Set(src)
	return nil
}

// Values lists vs with the values their fields hold now, for display.
func Values(vs []ConfigValue) []Value {
	out := make([]Value, len(vs))
	for i, v := range vs {
		path := v.Path
		if v.Derived != "" {
			path = "= " + v.Derived
		}
		out[i] = Value{Name: v.Name, Path: path, Value: reflect.ValueOf(v.Into).Elem().Interface()}
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
		have := reflect.ValueOf(v.Into).Elem().Interface()
		if !reflect.DeepEqual(have, v.Kernels) {
			bad = append(bad, fmt.Sprintf("%s = %v (%s), the kernels have %v", v.Name, have, strings.ReplaceAll(v.Path, "|", " | "), v.Kernels))
		}
	}
	if pageSize != kernelsPageSize {
		bad = append(bad, fmt.Sprintf("PageSize = %d, the kernels have %d", pageSize, kernelsPageSize))
	}
	return bad
}

// Refusals collects a config's failed requirements; the first is the refusal.
type Refusals struct {
	Family string
	err    error
}

// Require keeps "FAMILY requires " + the formatted text when ok is false.
func (r *Refusals) Require(ok bool, format string, args ...any) {
	if !ok && r.err == nil {
		r.err = fmt.Errorf(r.Family+" requires "+format, args...)
	}
}

// Err is the first refusal, or nil.
func (r *Refusals) Err() error { return r.err }
