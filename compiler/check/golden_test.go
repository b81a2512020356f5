package check

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"tfc/compiler/ir"
	"tfc/compiler/syntax"
)

var update = flag.Bool("update", false, "rewrite the expected diagnostics in testdata/check")

// repoRoot is the module root, where diagnostics name files from.
const repoRoot = "../.."

// TestGoldens checks every testdata/check/<case>.graph and compares the printed diagnostics
// with <case>.out.
func TestGoldens(t *testing.T) {
	cases, err := filepath.Glob(filepath.Join(repoRoot, "testdata/check/*.graph"))
	if err != nil || len(cases) == 0 {
		t.Fatalf("no golden cases under testdata/check: %v", err)
	}
	for _, path := range cases {
		name := strings.TrimSuffix(filepath.Base(path), ".graph")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			rel := filepath.ToSlash(filepath.Join("testdata/check", name+".graph"))
			_, diags := SourceWith(rel, string(src), Beside(repoRoot, rel))
			got := diags.Format(string(src))
			if strings.HasSuffix(name, "_home") {
				// a family other cases reuse a graph of: it checks clean
				if got != "" {
					t.Fatalf("%s is reused by other cases and must check clean:\n%s", rel, got)
				}
				return
			}
			if got == "" {
				t.Fatalf("%s checks clean; a golden case must break something", rel)
			}
			want := strings.TrimSuffix(path, ".graph") + ".out"
			if *update {
				if err := os.WriteFile(want, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			w, err := os.ReadFile(want)
			if err != nil {
				t.Fatalf("%v (run go test ./compiler/check -update to write it)", err)
			}
			if d := cmp.Diff(lines(string(w)), lines(got)); d != "" {
				t.Errorf("%s diagnostics (-want +got):\n%s", rel, d)
			}
		})
	}
}

// TestGraphsClean checks every family under graphs/: no diagnostics, and already in canonical form.
func TestGraphsClean(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(repoRoot, "graphs/*.graph"))
	if len(files) == 0 {
		t.Fatal("no graphs/*.graph")
	}
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel := filepath.ToSlash(filepath.Join("graphs", filepath.Base(path)))
		m, diags := SourceWith(rel, string(src), Beside(repoRoot, rel))
		if len(diags) > 0 {
			t.Errorf("%s:\n%s", rel, diags.Format(string(src)))
			continue
		}
		if m == nil || len(m.Graphs) == 0 {
			t.Errorf("%s: no graphs", rel)
			continue
		}
		if err := ir.Verify(m); err != nil {
			t.Errorf("%s: the module breaks IR invariants:\n%v", rel, err)
		}
		out, err := syntax.FormatSource(rel, string(src))
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(lines(string(src)), lines(string(out))); d != "" {
			t.Errorf("%s is not in canonical form; run tfc fmt -w %s (-file +fmt):\n%s", rel, rel, d)
		}
	}
}

func lines(s string) []string { return strings.Split(s, "\n") }
