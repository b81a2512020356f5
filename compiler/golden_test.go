package compiler_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"tfc/compiler"
)

var update = flag.Bool("update", false, "rewrite the expected files of testdata/compile")

// compileCase runs the compiler on testdata/compile/<case>: input.graph, specialised for
// config.json when the case has one. It returns every output by name: the generated files
// (with .golden appended, so that no expected Go file is a package of the module) except the HIP
// text, hip_kernels.json (the kernels as lowering hands them to the HIP renderer), explain.txt,
// and stderr.txt holding the diagnostics.
func compileCase(t *testing.T, dir string) map[string][]byte {
	src, err := os.ReadFile(filepath.Join(dir, "input.graph"))
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.ToSlash(filepath.Join("testdata/compile", filepath.Base(dir), "input.graph"))
	var opts compiler.Options
	if cfg, err := os.ReadFile(filepath.Join(dir, "config.json")); err == nil {
		opts.Specialize = cfg
	}
	out := map[string][]byte{}
	files, diags, err := compiler.Compile(name, src, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(diags) > 0 {
		out["stderr.txt"] = []byte(diags.Format(string(src)))
		return out
	}
	for p, data := range files {
		if strings.HasSuffix(p, ".hip") {
			continue // the HIP text is the hip renderer's; its input is compared below
		}
		out[p+".golden"] = data
	}
	if opts.Specialize != nil {
		ks, err := compiler.HIPKernels(name, src, opts)
		if err != nil {
			t.Fatal(err)
		}
		data, err := json.MarshalIndent(ks, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		out["hip_kernels.json"] = append(data, '\n')
	}
	var explain bytes.Buffer
	if _, err := compiler.Explain(&explain, name, src, compiler.Options{}); err != nil {
		t.Fatal(err)
	}
	out["explain.txt"] = explain.Bytes()
	return out
}

// TestGolden compares the compiler's outputs for each case of testdata/compile with the files
// under the case's want/ folder; -update rewrites them.
func TestGolden(t *testing.T) {
	cases, err := filepath.Glob("../testdata/compile/*/input.graph")
	if err != nil || len(cases) == 0 {
		t.Fatalf("no cases under testdata/compile (%v)", err)
	}
	for _, c := range cases {
		dir := filepath.Dir(c)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			got := compileCase(t, dir)
			wantDir := filepath.Join(dir, "want")
			if *update {
				if err := os.RemoveAll(wantDir); err != nil {
					t.Fatal(err)
				}
				for name, data := range got {
					p := filepath.Join(wantDir, filepath.FromSlash(name))
					if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(p, data, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				return
			}
			want := map[string][]byte{}
			err := filepath.WalkDir(wantDir, func(p string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				data, err := os.ReadFile(p)
				rel, _ := filepath.Rel(wantDir, p)
				want[filepath.ToSlash(rel)] = data
				return err
			})
			if err != nil {
				t.Fatalf("%v; run go test ./compiler -run TestGolden -update", err)
			}
			for _, name := range union(want, got) {
				w, inWant := want[name]
				g, inGot := got[name]
				switch {
				case !inGot:
					t.Errorf("%s: expected but not produced", name)
				case !inWant:
					t.Errorf("%s: produced but not expected (run with -update if it is right)", name)
				case !bytes.Equal(w, g):
					t.Errorf("%s differs (-want +got):\n%s", name, cmp.Diff(strings.Split(string(w), "\n"), strings.Split(string(g), "\n")))
				}
			}
		})
	}
}

func union(a, b map[string][]byte) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range []map[string][]byte{a, b} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestDeterministic compiles the same family twice and expects byte-identical files.
func TestDeterministic(t *testing.T) {
	dir := "../testdata/compile/qwen2_vl"
	a, b := compileCase(t, dir), compileCase(t, dir)
	for _, name := range union(a, b) {
		if !bytes.Equal(a[name], b[name]) {
			t.Errorf("%s differs between two runs", name)
		}
	}
}
