package syntax

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sources are every .graph file of the repository: the families and the diagnostic goldens.
func sources(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, pat := range []string{"../../graphs/*.graph", "../../testdata/check/*.graph"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m...)
	}
	if len(out) == 0 {
		t.Fatal("no .graph files found")
	}
	return out
}

// TestFormatIdempotent checks fmt(fmt(x)) == fmt(x) on every file that parses, and that every
// comment survives formatting.
func TestFormatIdempotent(t *testing.T) {
	parsed := 0
	for _, path := range sources(t) {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := Parse(path, string(src))
		if err != nil {
			continue // the syntax-error goldens
		}
		parsed++
		once := Format(f)
		twice, err := FormatSource(path, string(once))
		if err != nil {
			t.Fatalf("%s: formatted output does not parse: %v\n%s", path, err, once)
		}
		if d := cmp.Diff(lines(string(once)), lines(string(twice))); d != "" {
			t.Errorf("%s: fmt is not idempotent (-once +twice):\n%s", path, d)
		}
		for _, c := range f.Comments {
			if !strings.Contains(string(once), c.Text) {
				t.Errorf("%s: comment %q lost", path, c.Text)
			}
		}
	}
	if parsed < 10 {
		t.Fatalf("only %d files parsed", parsed)
	}
}

func lines(s string) []string { return strings.Split(s, "\n") }

func TestFormatCanonical(t *testing.T) {
	src := `// head
family  x {   model_type "x"  // the type
}
config {
  D int = hidden_size|text_config.hidden_size // width
  eps float=rms_norm_eps
  HD=D/  H

  require D%H==0
  // trailing comment in block
}
weights { a.weight [ D ] // a
  b[i<D].{weight,bias} [D]
}
graph g(x [N, D], y [N] i32) -> [N, D] { // body
  for i < D {
    x = x+ linear(x,b[i]) // step
  }


  return rmsnorm(x, a, eps: eps)
}
`
	want := `// head
family x {
  model_type "x" // the type
}
config {
  D   int   = hidden_size | text_config.hidden_size // width
  eps float = rms_norm_eps
  HD  = D/H

  require D%H == 0
  // trailing comment in block
}
weights {
  a.weight                [D] // a
  b[i < D].{weight, bias} [D]
}
graph g(x [N, D], y [N] i32) -> [N, D] { // body
  for i < D {
    x = x + linear(x, b[i]) // step
  }

  return rmsnorm(x, a, eps: eps)
}
`
	got, err := FormatSource("t.graph", src)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(lines(want), lines(string(got))); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestFormatHeaderComments(t *testing.T) {
	src := "graph g(a [N], // first\n  b [N] i32, // second\n  c rows) -> [N] { // body\n  return a\n}\n"
	want := "graph g(a [N], // first\n        b [N] i32, // second\n        c rows) -> [N] { // body\n  return a\n}\n"
	got, err := FormatSource("t.graph", src)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestSyntaxErrors(t *testing.T) {
	cases := []struct{ src, want string }{
		{"family x {\n  model_type \"x\"\n", `t.graph:1:10: unterminated block: this { has no matching }`},
		{"graph g() -> [N] {\n  x = a @ b\n}\n", `t.graph:2:9: unexpected character '@'`},
		{"graph g() -> [N] {\n  x = f(a,, b)\n}\n", `t.graph:2:10: unexpected "," (expected ")")`},
		{"graph g() -> [N] {\n  // a × b \xff\xff\xff\x80\n}\n", `t.graph:2:12: invalid UTF-8 byte 0xff`},
	}
	for _, c := range cases {
		_, err := Parse("t.graph", c.src)
		if err == nil || err.Error() != c.want {
			t.Errorf("Parse(%q) = %v, want %s", c.src, err, c.want)
		}
	}
}

func TestDiff(t *testing.T) {
	a := []byte("a\nb\nc\nd\ne\nf\ng\nh\n")
	b := []byte("a\nb\nc\nD\ne\nf\ng\nh\n")
	want := "--- a/x\n+++ b/x\n@@ -1,7 +1,7 @@\n a\n b\n c\n-d\n+D\n e\n f\n g\n"
	if got := Diff("x", a, b); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if Diff("x", a, a) != "" {
		t.Error("diff of equal inputs is not empty")
	}
}
