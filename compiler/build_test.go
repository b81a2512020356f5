package compiler_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestGoldenGlueBuilds builds and tests the expected Go of every testdata/compile case as a
// package of the module (a go build overlay adds each file next to its .golden, nothing is written): the glue
// must compile and vet clean, and its kernel contract test must compile (run, it would check the
// registered family of that name, not the golden's).
func TestGoldenGlueBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds packages with the go command")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	dirs, _ := filepath.Glob("../testdata/compile/*/want/gen/*")
	for _, dir := range dirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*.golden")) // Go files and the program.json they embed
		if len(files) == 0 || !hasGo(files) {
			continue
		}
		name := strings.TrimPrefix(filepath.ToSlash(dir), "../testdata/compile/")
		t.Run(name, func(t *testing.T) {
			pkg, err := filepath.Abs(dir)
			if err != nil {
				t.Fatal(err)
			}
			overlay := map[string]map[string]string{"Replace": {}}
			for _, f := range files {
				abs, _ := filepath.Abs(f)
				overlay["Replace"][filepath.Join(pkg, strings.TrimSuffix(filepath.Base(f), ".golden"))] = abs
			}
			data, _ := json.Marshal(overlay)
			ov := filepath.Join(t.TempDir(), "overlay.json")
			if err := os.WriteFile(ov, data, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"vet"}, {"test", "-count=1", "-run", "^$"}} {
				cmd := exec.Command(goTool, append(args, "-overlay="+ov, pkg)...)
				cmd.Dir = root
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("go %s: %v\n%s", args[0], err, out)
				}
				t.Logf("go %s: %s", args[0], strings.TrimSpace(string(out)))
			}
		})
	}
}

// hasGo reports whether files hold a Go file's golden.
func hasGo(files []string) bool {
	for _, f := range files {
		if strings.HasSuffix(f, ".go.golden") {
			return true
		}
	}
	return false
}

// TestGlueLinksNoFrontEnd: the generated packages, which a serving binary links, specialise their
// kernels through package specialize from the program they embed, so they link neither the
// parser and checker nor the Go emitter and their libraries.
func TestGlueLinksNoFrontEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "list", "-deps", "./gen/...")
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "tfc/compiler/specialize") {
		t.Fatal("the glue does not link tfc/compiler/specialize; this test lists the wrong packages")
	}
	for _, d := range deps {
		for _, banned := range []string{"tfc/compiler/syntax", "tfc/compiler/check", "tfc/compiler/emit/glue", "tfc/graphs", "github.com/alecthomas/participle", "github.com/dave/jennifer", "golang.org/x/tools"} {
			if d == banned || strings.HasPrefix(d, banned+"/") {
				t.Errorf("the generated packages link %s", d)
			}
		}
		if d == "tfc/compiler" {
			t.Error("the generated packages link tfc/compiler")
		}
	}
}
