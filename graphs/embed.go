package graphs

import (
	"embed"
	"fmt"
	"strings"
)

// files holds every family source of this folder, by base name.
//
//go:embed *.graph
var files embed.FS

// Source returns the text of a family source named as the generated glue names it, e.g.
// "graphs/qwen2_vl.graph".
func Source(name string) ([]byte, error) {
	base, ok := strings.CutPrefix(name, "graphs/")
	if !ok || strings.Contains(base, "/") {
		return nil, fmt.Errorf("%s is not a family source of graphs/; the binary carries only graphs/*.graph", name)
	}
	data, err := files.ReadFile(base)
	if err != nil {
		return nil, fmt.Errorf("%s is not in this binary; rebuild tfc from a tree that has it", name)
	}
	return data, nil
}
