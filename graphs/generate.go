// Package graphs holds the model family sources, one .graph file a family. go generate compiles
// each into its generated package under gen/ and its kernels under kernels/, specialised for its
// tiny checkpoint testdata/NAME-tiny, and writes gen/registry, which links them all.
package graphs

//go:generate go run ../compiler/cmd/compileall -C ..
