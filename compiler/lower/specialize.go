package lower

import (
	"fmt"
	"strings"

	"tfc/runtime/checkpoint"
)

// Spec is a checkpoint's config bound to the family: the constants the HIP kernels and the
// contract tests are specialised for.
type Spec struct {
	Env         map[string]*Expr // every config value, list elements also as name[k]
	PageSize    int              // KV cache page rows the attention kernels are built for
	WeightDType string           // the checkpoint's float type: BF16, F16 or F32
}

// ConfigReader reads a checkpoint's config.json by dotted path (the glue's model.Config).
type ConfigReader = checkpoint.Values

// weightDTypePaths are where a checkpoint's config names its float type.
const weightDTypePaths = "torch_dtype|dtype|text_config.torch_dtype|text_config.dtype"

// Specialize reads a checkpoint's config.json the way the generated glue will, checks the
// requirements, and records each read value as the param's specialisation.
func Specialize(p *Program, configJSON []byte, pageSize int) (*Spec, error) {
	cfg, err := checkpoint.ParseConfig("config.json", configJSON)
	if err != nil {
		return nil, err
	}
	s, err := Bind(p.Params, p.Requires, cfg, pageSize)
	if err != nil {
		return nil, err
	}
	for _, prm := range p.Params {
		prm.Spec = s.Env[prm.Name]
	}
	p.SpecPageSize = s.PageSize
	return s, nil
}

// Bind reads each param through cfg (derived ones computed, defaults where cfg is silent), and
// checks the requirements: the constants kernels are specialised for. It changes nothing.
func Bind(params []*Param, requires []*Require, cfg ConfigReader, pageSize int) (*Spec, error) {
	if pageSize <= 0 {
		pageSize = 16
	}
	s := &Spec{PageSize: pageSize, WeightDType: "BF16"}
	if cfg.Has(weightDTypePaths) {
		dt, err := cfg.String(weightDTypePaths)
		if err != nil {
			return nil, err
		}
		switch dt {
		case "float16":
			s.WeightDType = "F16"
		case "float32":
			s.WeightDType = "F32"
		}
	}
	env, err := BindValues("the graph", params, requires, cfg)
	if err != nil {
		return nil, err
	}
	s.Env = env
	return s, nil
}

// BindValues reads each param of family through cfg in order (derived ones computed, defaults
// where cfg is silent) and checks the requirements. The values come back by name, list elements
// also as name[k]. A missing or ill-typed value, a list of the wrong length and an unmet
// requirement are refused by name, with the values the requirement reads.
func BindValues(family string, params []*Param, requires []*Require, cfg ConfigReader) (map[string]*Expr, error) {
	env := map[string]*Expr{}
	for _, prm := range params {
		var v *Expr
		var err error
		paths := joinPaths(prm.Paths)
		switch {
		case prm.Derived != nil:
			if v, err = Eval(prm.Derived, env); err != nil {
				return nil, fmt.Errorf("config.json: %s = %s: %v; check the values %s reads", prm.Name, prm.Derived, err, family)
			}
		case !cfg.Has(paths):
			if prm.Default == nil {
				return nil, fmt.Errorf("config.json has no %s; %s needs it as %s", strings.Join(prm.Paths, " or "), family, prm.Name)
			}
			v = prm.Default
		default:
			if v, err = readParam(cfg, prm); err != nil {
				return nil, fmt.Errorf("config.json: %s (%s): %w", prm.Name, strings.Join(prm.Paths, " | "), err)
			}
			if prm.Type == "ints" && prm.Len > 0 && len(v.Args) != prm.Len {
				return nil, fmt.Errorf("%s (%s) has %d values; %s needs %d", prm.Name, strings.Join(prm.Paths, " | "), len(v.Args), family, prm.Len)
			}
		}
		if prm.Type == "float" && v.Op == "int" {
			v = Float(float64(v.Int))
		}
		env[prm.Name] = v
		if v.Op == "list" {
			for k, x := range v.Args {
				env[fmt.Sprintf("%s[%d]", prm.Name, k)] = x
			}
		}
	}
	for _, r := range requires {
		ok, err := Eval(r.Cond, env)
		if err != nil {
			return nil, fmt.Errorf("config.json: %s: %v; check the values %s reads", r.Src, err, family)
		}
		if !ok.Bool {
			have := ""
			for i, name := range r.Cond.Refs() {
				if i > 0 {
					have += ","
				}
				have += fmt.Sprintf(" %s = %v", name, GoValue(env[name]))
			}
			return nil, fmt.Errorf("%s requires %s (%s:%d); this checkpoint has%s", family, r.Src, r.Pos.File, r.Pos.Line, have)
		}
	}
	return env, nil
}

// GoValue is literal x as a Go value: int, float64, bool, string or []int; nil for none.
func GoValue(x *Expr) any {
	if x == nil {
		return nil
	}
	switch x.Op {
	case "int":
		return int(x.Int)
	case "float":
		return x.Float
	case "bool":
		return x.Bool
	case "str", "enum":
		return x.Str + x.Name
	case "list":
		out := make([]int, len(x.Args))
		for i, a := range x.Args {
			out[i] = int(a.Int)
		}
		return out
	}
	return nil
}

func joinPaths(paths []string) string {
	out := ""
	for i, p := range paths {
		if i > 0 {
			out += "|"
		}
		out += p
	}
	return out
}

func readParam(cfg ConfigReader, prm *Param) (*Expr, error) {
	path := joinPaths(prm.Paths)
	switch prm.Type {
	case "int":
		n, err := cfg.Int(path)
		return Int(int64(n)), err
	case "float":
		f, err := cfg.Float(path)
		return Float(f), err
	case "bool":
		b, err := cfg.Bool(path)
		return Bool(b), err
	case "string":
		v, err := cfg.String(path)
		return Str(v), err
	case "ints":
		l, err := cfg.IntList(path)
		var xs []*Expr
		for _, n := range l {
			xs = append(xs, Int(int64(n)))
		}
		return List(xs...), err
	}
	return nil, fmt.Errorf("%s: type %s cannot be specialised", prm.Name, prm.Type)
}

// EvalInt evaluates an integer expression with the spec's values.
func (s *Spec) EvalInt(e *Expr) (int, error) {
	v, err := Eval(e, s.Env)
	if err != nil {
		return 0, err
	}
	if v.Op != "int" {
		return 0, fmt.Errorf("%s is not an integer", e)
	}
	return int(v.Int), nil
}

// EvalFloat evaluates a float expression with the spec's values.
func (s *Spec) EvalFloat(e *Expr) (float64, error) {
	v, err := Eval(e, s.Env)
	if err != nil {
		return 0, err
	}
	return num(v), nil
}

// KernelParams lists the config values the kernels' constants depend on: those their attributes
// and operand widths name, and through derived values the values those come from.
func KernelParams(p *Program) map[string]bool {
	out := map[string]bool{}
	var add func(name string)
	add = func(name string) {
		if i := strings.IndexByte(name, '['); i >= 0 {
			name = name[:i]
		}
		prm := p.param(name)
		if prm == nil || out[name] {
			return
		}
		out[name] = true
		if prm.Derived != nil {
			for _, r := range prm.Derived.Refs() {
				add(r)
			}
		}
	}
	addExpr := func(e *Expr) {
		if e != nil {
			for _, r := range e.Refs() {
				add(r)
			}
		}
	}
	for _, k := range p.Kernels {
		for _, op := range k.Ops {
			for _, a := range op.Attrs {
				addExpr(a.Value)
			}
			for _, a := range op.Args {
				addExpr(FromDim(a.Value.Cols))
				if a.Value.IsWeight() {
					addExpr(FromDim(a.Value.Rows))
				}
				if a.Value.ColLo != nil {
					addExpr(FromDim(*a.Value.ColLo))
				}
			}
		}
	}
	return out
}
