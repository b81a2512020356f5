package hip

import (
	"bytes"
	"debug/elf"
	"os"
	"path/filepath"
	"strings"
	"testing"

	tfccompiler "tfc/compiler"
	"tfc/kernels"
	"tfc/runtime/device/gpu"
)

// TestSpecializeFamilyBuilds2B gives the backend kernels/gen/qwen2vl.hip specialised for a checkpoint
// of Qwen2-VL-2B's shape and builds it for gfx90a with the compiler the backend finds: the code
// object defines every kernel, and is cached beside the committed source's under its own key.
func TestSpecializeFamilyBuilds2B(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the HIP compiler")
	}
	comp, err := findCompiler()
	if err != nil {
		t.Skipf("%v", err)
	}
	const target = "gfx90a"
	if !comp.hipcc && deviceLib(comp.libs, target) == "" {
		t.Skipf("no device library for %s in %s; install rocm-device-libs", target, strings.Join(comp.libs, ", "))
	}
	graph, err := os.ReadFile("../../../graphs/qwen2_vl.graph")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile("../../../compiler/testdata/qwen2-vl-2b/config.json")
	if err != nil {
		t.Fatal(err)
	}
	big, err := tfccompiler.KernelSource("graphs/qwen2_vl.graph", graph, cfg, 16)
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	be := fakeBackend(t, kernels.Sources)
	be.build = builder{comp: comp, target: target, cache: gpu.Cache{Dir: cache, Ext: ".hsaco"}}
	if _, err := be.build.build(be.Library().Sources(), "qwen2vl.hip"); err != nil {
		t.Fatal(err)
	}
	if err := be.SpecializeFamily("qwen2vl", big); err != nil {
		t.Fatal(err)
	}
	obj, err := be.build.build(be.Library().Sources(), "qwen2vl.hip")
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(obj))
	if err != nil {
		t.Fatal(err)
	}
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Section != elf.SHN_UNDEF {
			defined[s.Name] = true
		}
	}
	n := 0
	for _, e := range be.Library().Kernels() {
		if e.Family != "qwen2vl.hip" {
			continue
		}
		for _, l := range e.Schedule.Launches {
			n++
			if !defined[l.Symbol] {
				t.Errorf("%s is not defined in the specialised %s code object", l.Symbol, target)
			}
		}
	}
	if n < 20 {
		t.Fatalf("only %d launches in the specialised schedule", n)
	}
	if files, _ := filepath.Glob(filepath.Join(cache, "*.hsaco")); len(files) != 2 {
		t.Fatalf("cache holds %v, want the committed and the specialised code object", files)
	}
	t.Logf("%s: %d specialised kernels, %d bytes", target, n, len(obj))
}
