package hip

import (
	"fmt"
	"regexp"
	"strings"

	"tfc/runtime/device"
	"tfc/runtime/device/catalog"
)

// Kernel is one launch of generated code: its symbol, the graph lines it came from, and its ops.
type Kernel struct {
	Name   string
	Source []string // graph file:line of each fused op
	Ops    []Op
	// Role is the role of the graph the kernel was lowered from: "vision" or "decoder" ("" when
	// unknown). A vision kernel's linear takes the tensor-core GEMM on CUDA (see doc.go).
	Role string
}

// Op is one catalog op with its constants specialised in.
type Op struct {
	Kind   string // catalog op name, as runtime/device's OpName returns it
	Ints   map[string]int
	Floats map[string]float64
	Act    string            // activation name, as runtime/device.Act's String returns it
	Flags  map[string]bool   // has_bias, has_res, cache, per_axis, alternating, round_product, internal
	DTypes map[string]string // operand field → "F32", "BF16" or "F16"; absent means F32
}

// Param is one kernel parameter: what the runtime passes (device.Param) and its C type.
type Param struct {
	device.Param
	CType string
}

// operand is a tensor field of a catalog op and the flag of the op that makes it present
// ("!cache": absent with a cache; "" always).
type operand struct {
	catalog.Tensor
	when string
}

// operandsOf lists the tensor fields of op kind in the catalog's order.
func operandsOf(kind string) []operand {
	var out []operand
	for _, f := range catalog.Find(kind).Tensors {
		x := operand{Tensor: f, when: f.Flag}
		switch {
		case f.WithCache > 0:
			x.when = "cache"
		case f.WithCache < 0:
			x.when = "!cache"
		}
		out = append(out, x)
	}
	return out
}

// rowsOperand is the operand whose Rows is the launch's M, by the kernel's first op.
func rowsOperand(kind string) string { return catalog.Find(kind).Rows }

// required lists the constants op kind must carry: the catalog's, and rope's section count.
func required(kind string) (ints, floats []string, ok bool) {
	spec := catalog.Find(kind)
	if spec == nil {
		return nil, nil, false
	}
	for _, c := range spec.Consts {
		if c.Of == catalog.FloatAttr {
			floats = append(floats, c.Name)
		} else {
			ints = append(ints, c.Name)
		}
	}
	if kind == "rope" {
		ints = append(ints, "sections")
	}
	return ints, floats, true
}

var cTypes = map[string]string{"F32": "float", "BF16": "tfc_bf16", "F16": "__half"}

var acts = map[string]string{"none": "", "silu": "tfc_silu", "gelu": "tfc_gelu", "gelu_tanh": "tfc_gelu_tanh", "quick_gelu": "tfc_quick_gelu"}

func (o Op) present(x operand) bool {
	switch {
	case x.when == "":
		return true
	case strings.HasPrefix(x.when, "!"):
		return !o.Flags[x.when[1:]]
	}
	return o.Flags[x.when]
}

// dtype is the element C type of an operand.
func (o Op) ctype(x operand) (string, error) {
	if x.Index {
		if d, ok := o.DTypes[x.Path]; ok && d != "I32" {
			return "", fmt.Errorf("%s.%s is an index operand and must be I32, not %s", o.Kind, x.Path, d)
		}
		return "int", nil
	}
	d := o.DTypes[x.Path]
	if d == "" {
		d = "F32"
	}
	t, ok := cTypes[d]
	if !ok {
		return "", fmt.Errorf("%s.%s has dtype %q; use F32, BF16 or F16", o.Kind, x.Path, d)
	}
	return t, nil
}

// DType is the element type of operand field: BF16, F16, or F32 when absent.
func (o Op) DType(field string) device.DType {
	switch o.DTypes[field] {
	case "BF16":
		return device.BF16
	case "F16":
		return device.F16
	}
	return device.F32
}

func (o Op) int(key string) int       { return o.Ints[key] }
func (o Op) float(key string) float64 { return o.Floats[key] }

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// validate checks what every kernel needs before a template renders it.
func (k Kernel) validate() error {
	if !identifier.MatchString(k.Name) {
		return fmt.Errorf("kernel %q: the name must be a C identifier", k.Name)
	}
	if len(k.Ops) == 0 {
		return fmt.Errorf("kernel %s has no ops", k.Name)
	}
	for i, o := range k.Ops {
		reqInts, reqFloats, ok := required(o.Kind)
		if !ok {
			return fmt.Errorf("kernel %s: op %d: unknown op %q (the catalog is runtime/device/catalog)", k.Name, i, o.Kind)
		}
		for _, key := range reqInts {
			if v, ok := o.Ints[key]; !ok || v <= 0 {
				return fmt.Errorf("kernel %s: op %d (%s) needs Ints[%q] > 0", k.Name, i, o.Kind, key)
			}
		}
		for _, key := range reqFloats {
			if _, ok := o.Floats[key]; !ok {
				return fmt.Errorf("kernel %s: op %d (%s) needs Floats[%q]", k.Name, i, o.Kind, key)
			}
		}
		if _, ok := acts[o.actName()]; !ok {
			return fmt.Errorf("kernel %s: op %d (%s): unknown activation %q", k.Name, i, o.Kind, o.Act)
		}
		for _, x := range operandsOf(o.Kind) {
			if _, err := o.ctype(x); err != nil {
				return fmt.Errorf("kernel %s: op %d: %w", k.Name, i, err)
			}
		}
	}
	return nil
}

func (o Op) actName() string {
	if o.Act == "" {
		return "none"
	}
	return o.Act
}

// paramName is the C name of an operand's pointer parameter.
func paramName(op int, field string) string {
	return fmt.Sprintf("op%d_%s", op, strings.ReplaceAll(field, ".", "_"))
}

// Params returns the kernel's parameter list by the package's rule.
func Params(k Kernel) ([]Param, error) {
	if err := k.validate(); err != nil {
		return nil, err
	}
	var ps []Param
	for i, o := range k.Ops {
		for _, x := range operandsOf(o.Kind) {
			if !o.present(x) {
				continue
			}
			t, _ := o.ctype(x)
			if !x.Out {
				t = "const " + t
			}
			name := paramName(i, x.Path)
			ps = append(ps,
				Param{device.Param{Name: name, Kind: device.ParamPointer, Op: i, Field: x.Path}, t + "*"},
				Param{device.Param{Name: name + "_ld", Kind: device.ParamStride, Op: i, Field: x.Path}, "int"})
		}
	}
	ps = append(ps, Param{device.Param{Name: "M", Kind: device.ParamRows, Op: 0, Field: rowsOperand(k.Ops[0].Kind)}, "int"})
	if a := k.Ops[0]; a.Kind == "attention" && !a.Flags["cache"] {
		ps = append(ps, Param{device.Param{Name: "S", Kind: device.ParamSpans, Op: 0, Field: "Spans"}, "int"})
	}
	return ps, nil
}

// Launches returns the launches that run the kernel, in order.
func Launches(k Kernel) ([]device.Launch, error) {
	s, err := ScheduleOf(k)
	if err != nil {
		return nil, err
	}
	return s.Launches, nil
}

// ScheduleOf is how the runtime launches k: its parameters and launches, made here once.
func ScheduleOf(k Kernel) (device.Schedule, error) {
	ps, err := Params(k)
	if err != nil {
		return device.Schedule{}, err
	}
	f, err := planTemplate(k)
	if err != nil {
		return device.Schedule{}, err
	}
	s := device.Schedule{Kernel: k.Name, Tile: f.tile(), Launches: f.launches()}
	for _, p := range ps {
		s.Params = append(s.Params, p.Param)
	}
	return s, s.Check()
}

// Schedules is ScheduleOf of each kernel of ks, in their order: the file beside their source.
func Schedules(ks []Kernel) ([]device.Schedule, error) {
	out := make([]device.Schedule, 0, len(ks))
	for _, k := range ks {
		s, err := ScheduleOf(k)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}
