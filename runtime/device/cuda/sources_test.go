package cuda

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"tfc/runtime/device"
	"tfc/runtime/device/gpu"
)

func TestNVCCArgs(t *testing.T) {
	got := strings.Join(nvccArgs("sm_90", "/tmp/x/qwen2vl.hip", "/tmp/x/kernels.cubin", nil), " ")
	want := "-arch=sm_90a -cubin -O3 -std=c++17 -o /tmp/x/kernels.cubin -x cu /tmp/x/qwen2vl.hip"
	if got != want {
		t.Fatalf("nvcc %s\nwant %s", got, want)
	}
	got = strings.Join(nvccArgs("sm_90", "/tmp/x/qwen2vl.hip", "/tmp/x/kernels.cubin", []string{"-DTFC_ROWS_BLOCKS=4"}), " ")
	want = "-arch=sm_90a -cubin -O3 -std=c++17 -o /tmp/x/kernels.cubin -DTFC_ROWS_BLOCKS=4 -x cu /tmp/x/qwen2vl.hip"
	if got != want {
		t.Fatalf("nvcc with TFC_NVCC_FLAGS %s\nwant %s", got, want)
	}
	got = strings.Join(nvccArgs("sm_80", "a.hip", "a.cubin", nil), " ")
	want = "-arch=sm_80 -cubin -O3 -std=c++17 -o a.cubin -x cu a.hip"
	if got != want {
		t.Fatalf("nvcc for sm_80 %s\nwant %s", got, want)
	}
}

func TestErrorNames(t *testing.T) {
	for code, want := range map[int32]string{0: "CUDA_SUCCESS", 2: "CUDA_ERROR_OUT_OF_MEMORY", 201: "CUDA_ERROR_INVALID_CONTEXT",
		209: "CUDA_ERROR_NO_BINARY_FOR_GPU", 700: "CUDA_ERROR_ILLEGAL_ADDRESS", 715: "CUDA_ERROR_ILLEGAL_INSTRUCTION", 719: "CUDA_ERROR_LAUNCH_FAILED", 999: "CUDA_ERROR_UNKNOWN"} {
		if got := ErrorName(code); got != want {
			t.Errorf("ErrorName(%d) = %s, want %s", code, got, want)
		}
	}
	if got := ErrorName(4242); got != "CUDA_ERROR_UNKNOWN_CODE_4242" {
		t.Errorf("ErrorName(4242) = %s", got)
	}
	if check("cuInit", 0) != nil {
		t.Error("CUDA_SUCCESS is an error")
	}
	err := check("cuMemAlloc_v2", 2)
	var ce *Error
	if !errors.As(err, &ce) || ce.Code != 2 || err.Error() != "cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2)" {
		t.Fatalf("got %v", err)
	}
}

// TestDriverSymbols: every bound export has a function variable of its own, every function
// variable is bound, and the stream, event and graph entry points are among them.
func TestDriverSymbols(t *testing.T) {
	d := &driver{}
	seen := map[string]bool{}
	vars := map[uintptr]bool{}
	for _, s := range d.symbols() {
		if seen[s.name] || !strings.HasPrefix(s.name, "cu") {
			t.Errorf("symbol %q repeated or not a driver export", s.name)
		}
		seen[s.name] = true
		vars[reflect.ValueOf(s.fn).Pointer()] = true
	}
	if len(vars) != len(seen) {
		t.Errorf("%d symbols bind %d function variables", len(seen), len(vars))
	}
	v := reflect.ValueOf(d).Elem()
	for i := 0; i < v.NumField(); i++ {
		if f := v.Field(i); f.Kind() == reflect.Func && !vars[f.UnsafeAddr()] {
			t.Errorf("driver.%s is bound to no symbol", v.Type().Field(i).Name)
		}
	}
	for _, want := range []string{"cuLaunchKernel", "cuModuleLoadData", "cuMemAlloc_v2", "cuDevicePrimaryCtxRetain",
		"cuStreamCreate", "cuStreamSynchronize", "cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync_v2", "cuMemsetD8Async",
		"cuEventCreate", "cuEventRecord", "cuEventElapsedTime", "cuStreamBeginCapture_v2", "cuStreamEndCapture",
		"cuGraphInstantiateWithFlags", "cuGraphLaunch", "cuGraphExecDestroy", "cuGraphDestroy"} {
		if !seen[want] {
			t.Errorf("%s is not bound", want)
		}
	}
}

// cudaHeader returns the text of cuda.h, or skips saying where it was looked for.
func cudaHeader(t *testing.T) string {
	t.Helper()
	var tried []string
	for _, dir := range []string{os.Getenv("CUDA_HOME"), os.Getenv("CUDA_PATH"), "/usr/local/cuda", "/usr"} {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, "include", "cuda.h")
		if data, err := os.ReadFile(p); err == nil {
			return string(data)
		}
		tried = append(tried, p)
	}
	t.Skipf("no cuda.h (%s); install the CUDA toolkit or set CUDA_HOME to check the bindings against it", strings.Join(tried, ", "))
	return ""
}

// TestSymbolsAreTheHeadersAPI: every bound export is declared in cuda.h, under its own name or
// the unversioned name cuda.h maps to it, with as many parameters as the Go function takes.
func TestSymbolsAreTheHeadersAPI(t *testing.T) {
	header := cudaHeader(t)
	d := &driver{}
	for _, s := range d.symbols() {
		base := regexp.MustCompile(`_v[0-9]+$`).ReplaceAllString(s.name, "")
		if base != s.name && !regexp.MustCompile(`#define\s+`+base+`\s+(__CUDA_API_PT[SD][ZS]\()?`+s.name+`\b`).MatchString(header) {
			t.Errorf("cuda.h does not map %s to %s", base, s.name)
		}
		loc := regexp.MustCompile(`CUresult\s+CUDAAPI\s+(` + s.name + `|` + base + `)\s*\(([^)]*)\)`).FindStringSubmatch(header)
		if loc == nil {
			t.Errorf("%s is not declared in cuda.h", s.name)
			continue
		}
		params := 0
		if list := strings.TrimSpace(loc[2]); list != "" && list != "void" {
			params = len(strings.Split(list, ","))
		}
		if n := reflect.TypeOf(s.fn).Elem().NumIn(); n != params {
			t.Errorf("%s: cuda.h declares %d parameters (%s), the binding takes %d", s.name, params, loc[2], n)
		}
	}
}

// TestBuildStagesAndCaches runs the build with a stand-in nvcc that copies its source to its
// output: the family's .hip and headers are staged together, and a second build reads the cache.
func TestBuildStagesAndCaches(t *testing.T) {
	dir := t.TempDir()
	nvcc := filepath.Join(dir, "nvcc")
	script := "#!/bin/sh\n[ \"$1\" = --version ] && { echo fake 1.0; exit 0; }\n" +
		"while [ $# -gt 1 ]; do [ \"$1\" = -o ] && out=$2; shift; done\n" +
		"[ -f \"$(dirname \"$1\")/tfc_hip.h\" ] || { echo no header; exit 1; }\ncat \"$1\" > \"$out\"\n"
	if err := os.WriteFile(nvcc, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	srcs := fstest.MapFS{"tfc_hip.h": {Data: []byte("h")}, "a.hip": {Data: []byte("kernel a")}}
	b := nvccBuild{nvcc: nvcc, arch: "sm_90", cache: gpu.Cache{Dir: filepath.Join(dir, "cubin"), Ext: ".cubin"}}
	data, err := b.build(srcs, "a.hip")
	if err != nil || string(data) != "kernel a" {
		t.Fatalf("build: %q %v", data, err)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "cubin", "*.cubin")); len(files) != 1 {
		t.Fatalf("cache holds %v", files)
	}
	if err := os.WriteFile(nvcc, []byte("#!/bin/sh\n[ \"$1\" = --version ] && { echo fake 1.0; exit 0; }\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if data, err := b.build(srcs, "a.hip"); err != nil || string(data) != "kernel a" {
		t.Fatalf("second build did not read the cache: %q %v", data, err)
	}
	b.cache = gpu.Cache{}
	if _, err := b.build(srcs, "a.hip"); err == nil || !strings.HasPrefix(err.Error(), "cuda: nvcc could not build a.hip for sm_90") {
		t.Fatalf("failing nvcc: %v", err)
	}
}

// TestSpecializeFamilyBuildsTheGivenSource: after SpecializeFamily the backend's build reads the
// given text, cached under a key of its own beside the embedded text's; before it, the embedded
// text is built.
func TestSpecializeFamilyBuildsTheGivenSource(t *testing.T) {
	dir := t.TempDir()
	nvcc := filepath.Join(dir, "nvcc")
	script := "#!/bin/sh\n[ \"$1\" = --version ] && { echo fake 1.0; exit 0; }\n" +
		"while [ $# -gt 1 ]; do [ \"$1\" = -o ] && out=$2; shift; done\ncat \"$1\" > \"$out\"\n"
	if err := os.WriteFile(nvcc, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	be := fakeBackend(t, kernelKFS(t, fstest.MapFS{"tfc_hip.h": {Data: []byte("h")}}))
	be.comp = nvccBuild{nvcc: nvcc, arch: "sm_90", cache: gpu.Cache{Dir: filepath.Join(dir, "cubin"), Ext: ".cubin"}}
	if data, err := be.comp.build(be.Library().Sources(), "a.hip"); err != nil || string(data) != kernelK {
		t.Fatalf("embedded build: %q %v", data, err)
	}
	big := kernelK + "// specialised\n"
	if err := be.SpecializeFamily("a", kernelKSource(big)); err != nil {
		t.Fatal(err)
	}
	if data, err := be.comp.build(be.Library().Sources(), "a.hip"); err != nil || string(data) != big {
		t.Fatalf("specialised build: %q %v", data, err)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "cubin", "*.cubin")); len(files) != 2 {
		t.Fatalf("cache holds %v, want the embedded and the specialised cubin", files)
	}
	if err := be.SpecializeFamily("a", kernelKSource(big)); err != nil {
		t.Fatalf("the same source again: %v", err)
	}
	if err := be.SpecializeFamily("a", device.Source{HIP: []byte("// no kernel\n")}); err == nil || !strings.HasPrefix(err.Error(), "cuda: specialising a: ") {
		t.Fatalf("a source without kernels: %v", err)
	}
}
