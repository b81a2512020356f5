// Package graphs holds the model family sources, one .graph file a family. go generate compiles
// each into its generated package under gen/ and its kernels under kernels/.
package graphs

//go:generate go run ../cmd/tfc compile -C .. graphs/qwen2_vl.graph
