package glue

import (
	"fmt"
	"math"

	. "github.com/dave/jennifer/jen"

	"tfc/compiler/lower"
)

const (
	contractsPkg = "tfc/contracts"
	cpuPkg       = "tfc/runtime/device/cpu"
)

// contract emits one kernel's contract case: operands at the specialised shapes, random inputs.
type contract struct {
	spec  *lower.Spec
	env   map[string]*lower.Expr
	k     *lower.Kernel
	vars  map[*lower.Value]string
	body  []Code
	n     int
	err   error
	inner map[*lower.Value]bool // storages the kernel's own ops define
}

// tiny sizes of the graph dims in contract cases: rows of a round, patches, image rows, logit rows.
func dimSizes(g *lower.Graph) map[string]int64 {
	out := map[string]int64{}
	for i, d := range g.Dims {
		n := int64(4 - i%2*2) // 4, 2, 4, 2, ...
		if d.Limit.Op == "ref" && d.Limit.Name == "Patches" {
			n = 8
		}
		out[d.Name] = n
	}
	return out
}

func (c *contract) int(e *lower.Expr) int {
	v, err := lower.Eval(e, c.env)
	if err != nil {
		if c.err == nil {
			c.err = fmt.Errorf("kernel %s: %v", c.k.Name, err)
		}
		return 0
	}
	return int(v.Int)
}

func (c *contract) fresh() string { c.n++; return fmt.Sprintf("t%d", c.n) }

// tensor returns the Go expression of the operand v of field in the case, creating it.
func (c *contract) tensor(field string, v *lower.Value, op *lower.Op) string {
	if name, ok := c.vars[v]; ok {
		return name
	}
	var expr Code
	switch {
	case v.Kind == lower.Alias:
		return c.tensor(field, v.Base, op)
	case v.Kind == lower.View && c.inner[v.Storage()]:
		base := c.tensor(field, v.Base, op)
		if v.ColLo != nil {
			expr = Id(base).Dot("ColSlice").Call(Lit(c.int(v.ColLo)), Lit(c.int(v.ColHi)))
		} else {
			expr = Id(base).Dot("Reshape").Call(Lit(c.int(v.Rows)), Lit(c.int(v.Cols)))
		}
	case v.Kind == lower.WeightRef || v.Kind == lower.Select:
		cols := c.int(v.Cols)
		expr = Id("b").Dot("Normal").Call(Qual(devicePkg, c.spec.WeightDType), Lit(c.int(v.Rows)), Lit(cols), Lit(1/math.Sqrt(float64(cols))))
	case v.Kind == lower.CacheRef:
		width := c.int(v.Cols)
		rows := 2 * 2 * c.spec.PageSize
		name := c.fresh()
		c.body = append(c.body, Id(name).Op(":=").Op("&").Qual(devicePkg, "KVCache").Values(Dict{
			Id("K"): Id("b").Dot("Normal").Call(Qual(devicePkg, "F32"), Lit(rows), Lit(width), Lit(1.0)),
			Id("V"): Id("b").Dot("Normal").Call(Qual(devicePkg, "F32"), Lit(rows), Lit(width), Lit(1.0)),
		}))
		c.vars[v] = name
		return name
	case v.Kind == lower.RowsRef:
		r := c.int(v.RowSeq.Cols)
		name := c.fresh()
		c.body = append(c.body, Id(name).Op(":=").Id("b").Dot("RoundRows").Call(Lit(r), Lit(c.spec.PageSize)))
		c.vars[v] = name
		return name
	case v.DType == "I32":
		rows, cols := c.int(v.Rows), c.int(v.Cols)
		switch field {
		case "Pos":
			expr = Id("b").Dot("Ints").Call(Lit(rows), Lit(cols), Id("b").Dot("RandomInts").Call(Lit(rows*cols), Lit(64)))
		case "Ids":
			expr = Id("b").Dot("Ints").Call(Lit(rows), Lit(cols), Id("b").Dot("RandomInts").Call(Lit(rows*cols), Lit(c.int(op.Arg("Table").Rows))))
		case "Index":
			limit := c.int(op.Out.Rows)
			if op.Kind == "gather" {
				limit = c.int(op.Arg("X").Rows)
			}
			expr = Id("b").Dot("Ints").Call(Lit(rows), Lit(cols), Id("b").Dot("DistinctInts").Call(Lit(rows*cols), Lit(limit)))
		case "Spans":
			n := c.int(op.Arg("Q").Rows)
			expr = Id("b").Dot("Ints").Call(Lit(1), Lit(3), Index().Int32().Values(Lit(0), Lit(n/2), Lit(n)))
		default:
			expr = Id("b").Dot("Ints").Call(Lit(rows), Lit(cols), Id("b").Dot("RandomInts").Call(Lit(rows*cols), Lit(4)))
		}
	case c.inner[v.Storage()] && v.Def != nil:
		expr = Id("b").Dot("Out").Call(Qual(devicePkg, "F32"), Lit(c.int(v.Rows)), Lit(c.int(v.Cols)))
	default:
		expr = Id("b").Dot("Act").Call(Qual(devicePkg, "F32"), Lit(c.int(v.Rows)), Lit(c.int(v.Cols)))
	}
	name := c.fresh()
	c.body = append(c.body, Id(name).Op(":=").Add(expr))
	c.vars[v] = name
	return name
}

func (c *contract) attr(field string, x *lower.Expr) Code {
	v, err := lower.Eval(x, c.env)
	if err != nil {
		if c.err == nil {
			c.err = fmt.Errorf("kernel %s: %s: %v", c.k.Name, field, err)
		}
		return Nil()
	}
	switch {
	case v.Op == "enum":
		return Qual(devicePkg, enums[v.Name])
	case v.Op == "list":
		var xs []Code
		for _, a := range v.Args {
			xs = append(xs, Lit(int(a.Int)))
		}
		return Index().Int().Values(xs...)
	case field == "Eps" || field == "Theta" || field == "Scale":
		return Float32().Call(Lit(v.Float))
	}
	return Lit(int(v.Int))
}

// ContractTests writes gen/<package>/kernels_test.go: every kernel's op chain on the CPU backend at
// the specialised shapes, against the float64 references of the ops it fuses.
func ContractTests(p *lower.Program, spec *lower.Spec) ([]byte, error) {
	e := &emitter{p: p, params: map[string]*lower.Param{}}
	f := e.newFile()
	var cases []Code
	for _, g := range p.Graphs {
		seen := map[*lower.Kernel]bool{}
		var err error
		g.Walk(func(l *lower.Launch, _ []*lower.Loop) {
			if seen[l.Kernel] || err != nil {
				return
			}
			seen[l.Kernel] = true
			env := map[string]*lower.Expr{}
			for k, v := range spec.Env {
				env[k] = v
			}
			for k, v := range dimSizes(g) {
				env[k] = lower.Int(v)
			}
			env["i"] = lower.Int(0)
			c := &contract{spec: spec, env: env, k: l.Kernel, vars: map[*lower.Value]string{}, inner: map[*lower.Value]bool{}}
			for _, op := range l.Ops {
				if op.Out != nil {
					c.inner[op.Out.Storage()] = true
				}
			}
			var ops []Code
			for _, op := range l.Ops {
				d := Dict{}
				for _, a := range op.Args {
					d[Id(a.Field)] = Id(c.tensor(a.Field, a.Value, op))
				}
				for _, a := range op.Attrs {
					d[Id(a.Field)] = c.attr(a.Field, a.Value)
				}
				ops = append(ops, Qual(devicePkg, deviceOps[op.Kind]).Values(d))
			}
			if c.err != nil {
				err = c.err
				return
			}
			body := append(c.body, Return(Index().Qual(devicePkg, "Op").Values(ops...)))
			cases = append(cases, Values(Dict{
				Id("kernel"): Qual(devicePkg, "Kernel").Values(Dict{Id("Name"): Lit(l.Kernel.Name), Id("Source"): Lit(sourceLines(l.Kernel))}),
				Id("build"):  Func().Params(Id("b").Op("*").Qual(contractsPkg, "Builder")).Index().Qual(devicePkg, "Op").Block(body...),
			}))
		})
		if err != nil {
			return nil, err
		}
	}
	f.Comment("kernelCases builds each kernel's op chain over random operands at the shapes of the checkpoint")
	f.Comment("the kernels were specialised for; rows, patches and indices are small.")
	f.Var().Id("kernelCases").Op("=").Index().Struct(
		Id("kernel").Qual(devicePkg, "Kernel"),
		Id("build").Func().Params(Op("*").Qual(contractsPkg, "Builder")).Index().Qual(devicePkg, "Op"),
	).Values(cases...)

	f.Comment("TestKernelContracts runs every kernel's op chain as one launch on the CPU backend and checks it")
	f.Comment("against the float64 references of the ops it fuses.")
	f.Func().Id("TestKernelContracts").Params(Id("t").Op("*").Qual("testing", "T")).Block(
		For(List(Id("i"), Id("kc")).Op(":=").Range().Id("kernelCases")).Block(
			Id("t").Dot("Run").Call(Id("kc").Dot("kernel").Dot("Name"), Func().Params(Id("t").Op("*").Qual("testing", "T")).Block(
				Id("be").Op(":=").Qual(cpuPkg, "New").Call(),
				Id("b").Op(":=").Op("&").Qual(contractsPkg, "Builder").Values(Dict{Id("Backend"): Id("be"), Id("Rng"): Qual("math/rand", "New").Call(Qual("math/rand", "NewSource").Call(Int64().Call(Id("i").Op("+").Lit(1))))}),
				Defer().Id("b").Dot("Free").Call(),
				Id("ops").Op(":=").Id("kc").Dot("build").Call(Id("b")),
				If(Err().Op(":=").Id("b").Dot("Err").Call(), Err().Op("!=").Nil()).Block(Id("t").Dot("Fatal").Call(Err())),
				If(Err().Op(":=").Qual(contractsPkg, "CheckLaunch").Call(Id("be"), Op("&").Id("kc").Dot("kernel"), Id("ops")), Err().Op("!=").Nil()).Block(Id("t").Dot("Fatal").Call(Err())),
			)),
		),
	)
	f.Comment("TestKernelContractsCatchADroppedOp is the planted control: a backend that skips the last op")
	f.Comment("of every launch must fail every kernel's contract.")
	f.Func().Id("TestKernelContractsCatchADroppedOp").Params(Id("t").Op("*").Qual("testing", "T")).Block(
		For(List(Id("i"), Id("kc")).Op(":=").Range().Id("kernelCases")).Block(
			Id("be").Op(":=").Qual(contractsPkg, "DropLast").Values(Dict{Id("Backend"): Qual(cpuPkg, "New").Call()}),
			Id("b").Op(":=").Op("&").Qual(contractsPkg, "Builder").Values(Dict{Id("Backend"): Id("be"), Id("Rng"): Qual("math/rand", "New").Call(Qual("math/rand", "NewSource").Call(Int64().Call(Id("i").Op("+").Lit(1))))}),
			Id("ops").Op(":=").Id("kc").Dot("build").Call(Id("b")),
			If(Err().Op(":=").Qual(contractsPkg, "CheckLaunch").Call(Id("be"), Op("&").Id("kc").Dot("kernel"), Id("ops")), Err().Op("==").Nil()).Block(
				Id("t").Dot("Errorf").Call(Lit("%s: the contract passed a backend that skips the kernel's last op"), Id("kc").Dot("kernel").Dot("Name")),
			),
			Id("b").Dot("Free").Call(),
		),
	)
	return Render(f)
}

func sourceLines(k *lower.Kernel) string {
	out := ""
	for i, s := range k.Sources {
		if i == 0 {
			out = fmt.Sprintf("%s:%d", s.File, s.Line)
		} else {
			out += fmt.Sprintf(",%d", s.Line)
		}
	}
	return out
}
