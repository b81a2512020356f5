package check

import (
	"os"
	"path/filepath"
	"testing"

	"tfc/compiler/syntax"
)

// FuzzSource checks that no input panics the checker, and that whatever parses formats to
// something that parses again, formats to itself, and keeps every comment.
func FuzzSource(f *testing.F) {
	for _, pat := range []string{"../../graphs/*.graph", "../../testdata/check/*.graph"} {
		files, _ := filepath.Glob(pat)
		for _, p := range files {
			src, err := os.ReadFile(p)
			if err == nil {
				f.Add(string(src))
			}
		}
	}
	f.Fuzz(func(t *testing.T, src string) {
		Source("f.graph", src)
		file, err := syntax.Parse("f.graph", src)
		if err != nil {
			return
		}
		once := syntax.Format(file)
		again, err := syntax.Parse("f.graph", string(once))
		if err != nil {
			t.Fatalf("formatted output does not parse: %v\n%s", err, once)
		}
		if twice := syntax.Format(again); string(twice) != string(once) {
			t.Fatalf("not idempotent:\n%s\n---\n%s", once, twice)
		}
		if len(again.Comments) != len(file.Comments) {
			t.Fatalf("%d comments became %d:\n%s", len(file.Comments), len(again.Comments), once)
		}
	})
}
