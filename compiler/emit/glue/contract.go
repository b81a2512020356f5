package glue

import (
	"fmt"

	. "github.com/dave/jennifer/jen"

	"tfc/compiler/lower"
)

const contractsPkg = "tfc/contracts"

// ContractTests writes gen/<package>/kernels_test.go (run from gen/<package>, two folders below the
// repository root): the family's kernel contract on the CPU backend (contracts.RunOnCPU), every kernel at the shapes it was specialised for through gates
// 1-4 and every planted control red. The contract builds each kernel's op chain itself.
func ContractTests(p *lower.Program) ([]byte, error) {
	f := NewFile(p.Package + "_test")
	f.HeaderComment(Header(p.Source))
	f.ImportName(contractsPkg, "contracts")
	f.Anon("tfc/contracts/registered")
	f.Comment(fmt.Sprintf("TestKernelContracts runs the kernel contract of %s on the CPU backend.", p.Family))
	f.Func().Id("TestKernelContracts").Params(Id("t").Op("*").Qual("testing", "T")).Block(
		List(Id("summary"), Err()).Op(":=").Qual(contractsPkg, "RunOnCPU").Call(Lit(p.Family), Lit("../.."), Lit(1)),
		If(Err().Op("!=").Nil()).Block(Id("t").Dot("Fatal").Call(Err())),
		Id("t").Dot("Log").Call(Id("summary")),
	)
	return Render(f)
}
