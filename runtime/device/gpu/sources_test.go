package gpu

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
	table, err := SymbolTable(kernels.Sources)
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
			if e.Family != "qwen2vl.hip" {
				t.Errorf("%s: family %s, want qwen2vl.hip", l.Symbol, e.Family)
			}
			if !slices.Equal(e.Params, names) {
				t.Errorf("%s: declared (%s), Params (%s)", l.Symbol, strings.Join(e.Params, ", "), strings.Join(names, ", "))
			}
		}
	}
	if n < 20 {
		t.Fatalf("only %d symbols checked", n)
	}
}

func TestSymbolTableRefusesADuplicate(t *testing.T) {
	k := "extern \"C\" __global__ __launch_bounds__(256) void k(\n    const float* op0_X, int op0_X_ld,\n    int M) {\n}\n"
	_, err := SymbolTable(fstest.MapFS{"a.hip": {Data: []byte(k)}, "b.hip": {Data: []byte(k)}})
	if err == nil || !strings.Contains(err.Error(), "a.hip") || !strings.Contains(err.Error(), "b.hip") {
		t.Fatalf("got %v", err)
	}
	table, err := SymbolTable(fstest.MapFS{"a.hip": {Data: []byte(k)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := table["k"].Params; !slices.Equal(got, []string{"op0_X", "op0_X_ld", "M"}) {
		t.Fatalf("params %v", got)
	}
}

// TestCacheKey: the key changes with a header, the family's source, the target and nvcc, and
// not with another family's source.
func TestCacheKey(t *testing.T) {
	fsys := func(h, a, b string) fstest.MapFS {
		return fstest.MapFS{"tfc_hip.h": {Data: []byte(h)}, "a.hip": {Data: []byte(a)}, "b.hip": {Data: []byte(b)}}
	}
	key := func(version, arch string, f fstest.MapFS) string {
		k, err := CacheKey(version, arch, f, "a.hip")
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

// TestThread: calls run in order on one locked thread; after stop they are refused, not lost.
func TestThread(t *testing.T) {
	th := NewThread()
	var got []int
	for i := 0; i < 3; i++ {
		if err := th.Do(func() error { got = append(got, i); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("ran %v", got)
	}
	want := errors.New("x")
	if err := th.Do(func() error { return want }); err != want {
		t.Fatalf("do returned %v", err)
	}
	th.Stop()
	th.Stop()
	if err := th.Do(func() error { return nil }); err != ErrStopped {
		t.Fatalf("after stop: %v", err)
	}
}
