// Package graphs holds the model family sources, one .graph file a family. go generate compiles
// each into its generated package under gen/ and its kernels under kernels/.
package graphs

//go:generate go run ../cmd/tfc compile -C .. -specialize testdata/qwen2-vl-tiny/config.json graphs/qwen2_vl.graph
//go:generate go run ../cmd/tfc compile -C .. -specialize testdata/dots-ocr-tiny/config.json graphs/dots_ocr.graph
