package cuda

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"tfc/compiler/emit/hip"
	"tfc/kernels"
)

// TestSymbolTable: every launch symbol of the family's kernels is declared in kernels/qwen2vl.hip
// with the parameter names Params gives.
func TestSymbolTable(t *testing.T) {
	table, err := symbolTable(kernels.Sources)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, k := range familyKernels(t) {
		params, err := hip.Params(k)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range params {
			names = append(names, p.Name)
		}
		ls, err := hip.Launches(k)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			e, ok := table[l.Symbol]
			if !ok {
				t.Errorf("%s: not in the symbol table", l.Symbol)
				continue
			}
			n++
			if e.family != "qwen2vl.hip" {
				t.Errorf("%s: family %s, want qwen2vl.hip", l.Symbol, e.family)
			}
			if !slices.Equal(e.params, names) {
				t.Errorf("%s: declared (%s), Params (%s)", l.Symbol, strings.Join(e.params, ", "), strings.Join(names, ", "))
			}
		}
	}
	if n < 20 {
		t.Fatalf("only %d symbols checked", n)
	}
}

func TestSymbolTableRefusesADuplicate(t *testing.T) {
	k := "extern \"C\" __global__ __launch_bounds__(256) void k(\n    const float* op0_X, int op0_X_ld,\n    int M) {\n}\n"
	_, err := symbolTable(fstest.MapFS{"a.hip": {Data: []byte(k)}, "b.hip": {Data: []byte(k)}})
	if err == nil || !strings.Contains(err.Error(), "a.hip") || !strings.Contains(err.Error(), "b.hip") {
		t.Fatalf("got %v", err)
	}
	table, err := symbolTable(fstest.MapFS{"a.hip": {Data: []byte(k)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := table["k"].params; !slices.Equal(got, []string{"op0_X", "op0_X_ld", "M"}) {
		t.Fatalf("params %v", got)
	}
}

func TestNVCCArgs(t *testing.T) {
	got := strings.Join(nvccArgs("sm_90", "/tmp/x/qwen2vl.hip", "/tmp/x/kernels.cubin"), " ")
	want := "-arch=sm_90 -cubin -O3 -std=c++17 -o /tmp/x/kernels.cubin -x cu /tmp/x/qwen2vl.hip"
	if got != want {
		t.Fatalf("nvcc %s\nwant %s", got, want)
	}
}

// TestCacheKey: the key changes with a header, the family's source, the target and nvcc, and
// not with another family's source.
func TestCacheKey(t *testing.T) {
	fsys := func(h, a, b string) fstest.MapFS {
		return fstest.MapFS{"tfc_hip.h": {Data: []byte(h)}, "a.hip": {Data: []byte(a)}, "b.hip": {Data: []byte(b)}}
	}
	key := func(version, arch string, f fstest.MapFS) string {
		k, err := cacheKey(version, arch, f, "a.hip")
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	base := key("13.0", "sm_90", fsys("h", "a", "b"))
	if key("13.0", "sm_90", fsys("h", "a", "other")) != base {
		t.Error("another family's source changed the key")
	}
	for name, k := range map[string]string{
		"header": key("13.0", "sm_90", fsys("h2", "a", "b")),
		"source": key("13.0", "sm_90", fsys("h", "a2", "b")),
		"arch":   key("13.0", "sm_100", fsys("h", "a", "b")),
		"nvcc":   key("13.1", "sm_90", fsys("h", "a", "b")),
	} {
		if k == base {
			t.Errorf("a changed %s kept the key", name)
		}
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

// TestDriverSymbols: every bound export has a function variable of its own.
func TestDriverSymbols(t *testing.T) {
	d := &driver{}
	seen := map[string]bool{}
	for _, s := range d.symbols() {
		if seen[s.name] || !strings.HasPrefix(s.name, "cu") {
			t.Errorf("symbol %q repeated or not a driver export", s.name)
		}
		seen[s.name] = true
	}
	for _, want := range []string{"cuLaunchKernel", "cuModuleLoadData", "cuMemAlloc_v2", "cuCtxSynchronize", "cuDevicePrimaryCtxRetain"} {
		if !seen[want] {
			t.Errorf("%s is not bound", want)
		}
	}
}

// TestThread: calls run in order on one locked thread; after stop they are refused, not lost.
func TestThread(t *testing.T) {
	th := newThread()
	var got []int
	for i := 0; i < 3; i++ {
		if err := th.do(func() error { got = append(got, i); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("ran %v", got)
	}
	want := errors.New("x")
	if err := th.do(func() error { return want }); err != want {
		t.Fatalf("do returned %v", err)
	}
	th.stop()
	th.stop()
	if err := th.do(func() error { return nil }); err != errStopped {
		t.Fatalf("after stop: %v", err)
	}
}
