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
	s := &Spec{Env: map[string]*Expr{}, PageSize: pageSize, WeightDType: "BF16"}
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
	for _, prm := range params {
		var v *Expr
		var err error
		switch {
		case prm.Derived != nil:
			if v, err = Eval(prm.Derived, s.Env); err != nil {
				return nil, fmt.Errorf("specialising %s: %v", prm.Name, err)
			}
		case !cfg.Has(joinPaths(prm.Paths)):
			if prm.Default == nil {
				return nil, fmt.Errorf("config.json has no %s (%s)", prm.Name, joinPaths(prm.Paths))
			}
			v = prm.Default
		default:
			if v, err = readParam(cfg, prm); err != nil {
				return nil, err
			}
		}
		s.Env[prm.Name] = v
		if v.Op == "list" {
			for k, x := range v.Args {
				s.Env[fmt.Sprintf("%s[%d]", prm.Name, k)] = x
			}
		}
	}
	for _, r := range requires {
		ok, err := Eval(r.Cond, s.Env)
		if err != nil {
			return nil, err
		}
		if !ok.Bool {
			return nil, fmt.Errorf("config.json does not meet %s (%s)", r.Src, r.Pos)
		}
	}
	return s, nil
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
