// Command compileall is tfc compile -all without the tfc binary, which links every generated
// family: it compiles every graphs/*.graph for its fixture and writes gen/ and kernels/gen/, so
// go generate works when a family's graph was removed or its generated package does not build.
//
//	compileall [-C DIR] [-page-size N]
package main

import (
	"flag"
	"fmt"
	"os"

	"tfc/compiler"
)

func main() {
	dir := flag.String("C", ".", "the repository root")
	pageSize := flag.Int("page-size", 16, "the KV cache page rows the attention kernels are built for")
	flag.Parse()
	files, err := compiler.CompileAll(*dir, *pageSize)
	if err == nil {
		err = compiler.WriteAll(*dir, files)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "compileall:", err)
		os.Exit(1)
	}
}
