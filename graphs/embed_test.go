package graphs

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSourceIsTheFile: every graphs/*.graph is carried, byte for byte, under the name the glue
// gives it; other names are refused with the reason.
func TestSourceIsTheFile(t *testing.T) {
	files, _ := filepath.Glob("*.graph")
	if len(files) == 0 {
		t.Fatal("no .graph file in graphs/")
	}
	for _, f := range files {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Source("graphs/" + f)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("Source(graphs/%s): %d bytes, %v; the file has %d", f, len(got), err, len(want))
		}
	}
	for name, want := range map[string]string{
		"qwen2_vl.graph":                        "is not a family source of graphs/",
		"graphs/sub/x.graph":                    "is not a family source of graphs/",
		"graphs/missing.graph":                  "is not in this binary",
		"testdata/compile/qwen2_vl/input.graph": "is not a family source of graphs/",
	} {
		if _, err := Source(name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Source(%s): %v, want %q", name, err, want)
		}
	}
}
