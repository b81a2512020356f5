package compiler_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestGoldenGlueBuilds builds and tests the expected Go of every testdata/compile case as a
// package of the module (a go build overlay adds each file next to its .golden, nothing is written): the glue
// must compile and vet clean, and the emitted kernel contract tests must pass on the CPU backend.
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
		files, _ := filepath.Glob(filepath.Join(dir, "*.go.golden"))
		if len(files) == 0 {
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
			for _, args := range [][]string{{"vet"}, {"test", "-count=1"}} {
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
