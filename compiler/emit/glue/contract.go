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
		c.body = append(c.body, Id(name).Op(":=").Id("roundRows").Call(Id("b"), Lit(r), Lit(c.spec.PageSize)))
		c.vars[v] = name
		return name
	case v.DType == "I32":
		rows, cols := c.int(v.Rows), c.int(v.Cols)
		switch field {
		case "Pos":
			expr = Id("b").Dot("Ints").Call(Lit(rows), Lit(cols), Id("randomInts").Call(Id("b"), Lit(rows*cols), Lit(64)))
		case "Ids":
			expr = Id("b").Dot("Ints").Call(Lit(rows), Lit(cols), Id("randomInts").Call(Id("b"), Lit(rows*cols), Lit(c.int(op.Arg("Table").Rows))))
		case "Index":
			limit := c.int(op.Out.Rows)
			if op.Kind == "gather" {
				limit = c.int(op.Arg("X").Rows)
			}
			expr = Id("b").Dot("Ints").Call(Lit(rows), Lit(cols), Id("distinctInts").Call(Id("b"), Lit(rows*cols), Lit(limit)))
		case "Spans":
			n := c.int(op.Arg("Q").Rows)
			expr = Id("b").Dot("Ints").Call(Lit(1), Lit(3), Index().Int32().Values(Lit(0), Lit(n/2), Lit(n)))
		default:
			expr = Id("b").Dot("Ints").Call(Lit(rows), Lit(cols), Id("randomInts").Call(Id("b"), Lit(rows*cols), Lit(4)))
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
				If(Err().Op(":=").Id("checkChain").Call(Id("be"), Op("&").Id("kc").Dot("kernel"), Id("ops")), Err().Op("!=").Nil()).Block(Id("t").Dot("Fatal").Call(Err())),
			)),
		),
	)
	f.Comment("TestKernelContractsCatchADroppedOp is the planted control: a backend that skips the last op")
	f.Comment("of every launch must fail every kernel's contract.")
	f.Func().Id("TestKernelContractsCatchADroppedOp").Params(Id("t").Op("*").Qual("testing", "T")).Block(
		For(List(Id("i"), Id("kc")).Op(":=").Range().Id("kernelCases")).Block(
			Id("be").Op(":=").Id("dropLast").Values(Dict{Id("Backend"): Qual(cpuPkg, "New").Call()}),
			Id("b").Op(":=").Op("&").Qual(contractsPkg, "Builder").Values(Dict{Id("Backend"): Id("be"), Id("Rng"): Qual("math/rand", "New").Call(Qual("math/rand", "NewSource").Call(Int64().Call(Id("i").Op("+").Lit(1))))}),
			Id("ops").Op(":=").Id("kc").Dot("build").Call(Id("b")),
			If(Err().Op(":=").Id("checkChain").Call(Id("be"), Op("&").Id("kc").Dot("kernel"), Id("ops")), Err().Op("==").Nil()).Block(
				Id("t").Dot("Errorf").Call(Lit("%s: the contract passed a backend that skips the kernel's last op"), Id("kc").Dot("kernel").Dot("Name")),
			),
			Id("b").Dot("Free").Call(),
		),
	)
	f.Comment("dropLast is a broken backend: it skips the last op of every launch.")
	f.Type().Id("dropLast").Struct(Qual(devicePkg, "Backend"))
	f.Func().Params(Id("d").Id("dropLast")).Id("Launch").Params(Id("k").Op("*").Qual(devicePkg, "Kernel"), Id("ops").Op("...").Qual(devicePkg, "Op")).Error().Block(
		Return(Id("d").Dot("Backend").Dot("Launch").Call(Id("k"), Id("ops").Index(Op(":").Len(Id("ops")).Op("-").Lit(1)).Op("..."))),
	)
	chainHelpers(f)
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

// chainHelpers writes checkChain and the operand helpers into the test file.
func chainHelpers(f *File) {
	T := func() *Statement { return Qual(devicePkg, "Tensor") }
	f.Comment("checkChain launches ops as one kernel and compares every tensor they write with the float64")
	f.Comment("references of the ops applied in order, each op's outputs rounded to their dtype before the")
	f.Comment("next op reads them; the bound is four times the sum of the ops' contract bounds.")
	f.Func().Id("checkChain").Params(Id("be").Qual(devicePkg, "Backend"), Id("k").Op("*").Qual(devicePkg, "Kernel"), Id("ops").Index().Qual(devicePkg, "Op")).Error().Block(
		For(List(Id("_"), Id("op")).Op(":=").Range().Id("ops")).Block(
			If(Err().Op(":=").Qual(contractsPkg, "Poison").Call(Id("be"), Id("op")), Err().Op("!=").Nil()).Block(Return(Err())),
		),
		Id("read").Op(":=").Qual(contractsPkg, "HostRead").Call(Id("be")),
		Id("mirror").Op(":=").Map(Qual(devicePkg, "Buffer")).Index().Float64().Values(),
		For(List(Id("_"), Id("op")).Op(":=").Range().Id("ops")).Block(
			List(Id("ins"), Id("outs")).Op(":=").Qual(contractsPkg, "Operands").Call(Id("op")),
			For(List(Id("_"), Id("n")).Op(":=").Range().Append(Id("ins"), Id("outs").Op("..."))).Block(
				If(List(Id("_"), Id("ok")).Op(":=").Id("mirror").Index(Id("n").Dot("T").Dot("Buf")), Id("ok")).Block(Continue()),
				List(Id("v"), Err()).Op(":=").Id("read").Call(T().Values(Dict{Id("Buf"): Id("n").Dot("T").Dot("Buf"), Id("Rows"): Lit(1), Id("Cols"): Id("n").Dot("T").Dot("Buf").Dot("Len").Call()})),
				If(Err().Op("!=").Nil()).Block(Return(Err())),
				Id("mirror").Index(Id("n").Dot("T").Dot("Buf")).Op("=").Id("v"),
			),
		),
		Id("fromMirror").Op(":=").Func().Params(Id("t").Add(T())).Params(Index().Float64(), Error()).Block(
			Id("out").Op(":=").Make(Index().Float64(), Lit(0), Id("t").Dot("Rows").Op("*").Id("t").Dot("Cols")),
			For(Id("r").Op(":=").Lit(0), Id("r").Op("<").Id("t").Dot("Rows"), Id("r").Op("++")).Block(
				Id("off").Op(":=").Id("t").Dot("Off").Op("+").Id("r").Op("*").Id("t").Dot("RowStride").Call(),
				Id("out").Op("=").Append(Id("out"), Id("mirror").Index(Id("t").Dot("Buf")).Index(Id("off").Op(":").Id("off").Op("+").Id("t").Dot("Cols")).Op("...")),
			),
			Return(Id("out"), Nil()),
		),
		Type().Id("final").Struct(Id("out").Qual(contractsPkg, "Output"), Id("tol").Float64()),
		Var().Id("finals").Index().Id("final"),
		Id("tol").Op(":=").Lit(0.0),
		For(List(Id("_"), Id("op")).Op(":=").Range().Id("ops")).Block(
			List(Id("want"), Err()).Op(":=").Qual(contractsPkg, "Expect").Call(Id("op"), Id("fromMirror")),
			If(Err().Op("!=").Nil()).Block(Return(Qual("fmt", "Errorf").Call(Lit("reference of %s: %w"), Id("op").Dot("OpName").Call(), Err()))),
			For(List(Id("_"), Id("w")).Op(":=").Range().Id("want")).Block(
				Id("tol").Op("+=").Id("w").Dot("Tolerance").Call(),
				Id("m").Op(":=").Id("mirror").Index(Id("w").Dot("T").Dot("Buf")),
				For(Id("r").Op(":=").Lit(0), Id("r").Op("<").Id("w").Dot("T").Dot("Rows"), Id("r").Op("++")).Block(
					For(Id("c").Op(":=").Lit(0), Id("c").Op("<").Id("w").Dot("T").Dot("Cols"), Id("c").Op("++")).Block(
						Id("m").Index(Id("w").Dot("T").Dot("Off").Op("+").Id("r").Op("*").Id("w").Dot("T").Dot("RowStride").Call().Op("+").Id("c")).Op("=").
							Qual(contractsPkg, "Round").Call(Id("w").Dot("T").Dot("Buf").Dot("DType").Call(), Id("w").Dot("Want").Index(Id("r").Op("*").Id("w").Dot("T").Dot("Cols").Op("+").Id("c"))),
					),
				),
				For(Id("i").Op(":=").Range().Id("finals")).Block(
					If(Id("finals").Index(Id("i")).Dot("out").Dot("T").Op("==").Id("w").Dot("T")).Block(
						Id("finals").Op("=").Qual("slices", "Delete").Call(Id("finals"), Id("i"), Id("i").Op("+").Lit(1)),
						Break(),
					),
				),
				Id("finals").Op("=").Append(Id("finals"), Id("final").Values(Id("w"), Id("tol"))),
			),
		),
		If(Err().Op(":=").Id("be").Dot("Launch").Call(Id("k"), Id("ops").Op("...")), Err().Op("!=").Nil()).Block(Return(Err())),
		If(Err().Op(":=").Id("be").Dot("Sync").Call(), Err().Op("!=").Nil()).Block(Return(Err())),
		For(List(Id("_"), Id("f")).Op(":=").Range().Id("finals")).Block(
			List(Id("got"), Err()).Op(":=").Id("read").Call(Id("f").Dot("out").Dot("T")),
			If(Err().Op("!=").Nil()).Block(Return(Err())),
			Id("o").Op(":=").Id("f").Dot("out"),
			Comment("later ops may have rewritten part of the tensor (a rope over columns of a linear's output)"),
			List(Id("o").Dot("Want"), Id("_")).Op("=").Id("fromMirror").Call(Id("o").Dot("T")),
			Id("f").Dot("tol").Op("=").Id("tol"),
			Id("dt").Op(":=").Id("o").Dot("T").Dot("Buf").Dot("DType").Call(),
			For(Id("r").Op(":=").Lit(0), Id("r").Op("<").Id("o").Dot("T").Dot("Rows"), Id("r").Op("++")).Block(
				Id("row").Op(":=").Id("o").Dot("Want").Index(Id("r").Op("*").Id("o").Dot("T").Dot("Cols").Op(":").Parens(Id("r").Op("+").Lit(1)).Op("*").Id("o").Dot("T").Dot("Cols")),
				Id("scale").Op(":=").Lit(0x1p-126),
				For(List(Id("_"), Id("w")).Op(":=").Range().Id("row")).Block(Id("scale").Op("=").Qual("math", "Max").Call(Id("scale"), Qual("math", "Abs").Call(Id("w")))),
				For(List(Id("j"), Id("w")).Op(":=").Range().Id("row")).Block(
					Id("g").Op(":=").Id("got").Index(Id("r").Op("*").Id("o").Dot("T").Dot("Cols").Op("+").Id("j")),
					Id("w").Op("=").Qual(contractsPkg, "Round").Call(Id("dt"), Id("w")),
					If(Id("e").Op(":=").Qual("math", "Abs").Call(Id("g").Op("-").Id("w")).Op("/").Id("scale"), Qual("math", "IsNaN").Call(Id("g")).Op("||").Id("e").Op(">").Lit(4).Op("*").Id("f").Dot("tol")).Block(
						Return(Qual("fmt", "Errorf").Call(Lit("%s: %s[%d,%d] = %.9g, want %.9g: error %.3g of the row's scale exceeds %.3g"), Id("k").Dot("Name"), Id("o").Dot("Name"), Id("r"), Id("j"), Id("g"), Id("w"), Id("e"), Lit(4).Op("*").Id("f").Dot("tol"))),
					),
				),
			),
		),
		Return(Nil()),
	)

	f.Comment("randomInts returns n values in [0, limit).")
	f.Func().Id("randomInts").Params(Id("b").Op("*").Qual(contractsPkg, "Builder"), Id("n"), Id("limit").Int()).Index().Int32().Block(
		Id("out").Op(":=").Make(Index().Int32(), Id("n")),
		For(Id("i").Op(":=").Range().Id("out")).Block(Id("out").Index(Id("i")).Op("=").Int32().Call(Id("b").Dot("Rng").Dot("Intn").Call(Id("limit")))),
		Return(Id("out")),
	)
	f.Comment("distinctInts returns n distinct values in [0, limit).")
	f.Func().Id("distinctInts").Params(Id("b").Op("*").Qual(contractsPkg, "Builder"), Id("n"), Id("limit").Int()).Index().Int32().Block(
		Id("perm").Op(":=").Id("b").Dot("Rng").Dot("Perm").Call(Id("limit")),
		Id("out").Op(":=").Make(Index().Int32(), Id("n")),
		For(Id("i").Op(":=").Range().Id("out")).Block(Id("out").Index(Id("i")).Op("=").Int32().Call(Id("perm").Index(Id("i")))),
		Return(Id("out")),
	)
	f.Comment("roundRows describes r rows of two sequences (slots 0 and 1) over two pages each, at positions")
	f.Comment("after a cached prefix: slot 0 holds the first half of the rows, slot 1 the rest.")
	f.Func().Id("roundRows").Params(Id("b").Op("*").Qual(contractsPkg, "Builder"), Id("r"), Id("pageSize").Int()).Op("*").Qual(devicePkg, "Rows").Block(
		List(Id("seq"), Id("pos")).Op(":=").List(Make(Index().Int32(), Id("r")), Make(Index().Int32(), Id("r"))),
		For(Id("i").Op(":=").Range().Id("seq")).Block(
			If(Id("i").Op(">=").Id("r").Op("/").Lit(2)).Block(Id("seq").Index(Id("i")).Op("=").Lit(1)),
			Id("pos").Index(Id("i")).Op("=").Int32().Call(Id("pageSize").Op("-").Lit(1).Op("+").Id("i")),
		),
		Return(Op("&").Qual(devicePkg, "Rows").Values(Dict{
			Id("RowSeq"):    Id("b").Dot("Ints").Call(Lit(1), Id("r"), Id("seq")),
			Id("RowPos"):    Id("b").Dot("Ints").Call(Lit(1), Id("r"), Id("pos")),
			Id("PageTable"): Id("b").Dot("Ints").Call(Lit(2), Lit(2), Index().Int32().Values(Lit(2), Lit(0), Lit(3), Lit(1))),
			Id("PageSize"):  Id("pageSize"),
		})),
	)
}
