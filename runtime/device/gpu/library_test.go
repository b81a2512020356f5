package gpu

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// decl is a generated kernel declaration of name with the given parameters.
func decl(name string, params ...string) string {
	var ps []string
	for _, p := range params {
		ps = append(ps, "int "+p)
	}
	return "extern \"C\" __global__ __launch_bounds__(256) void " + name + "(\n    " + strings.Join(ps, ", ") + ") {\n}\n"
}

// fakeLoader records what it was asked to load; module ids count up from 1.
type fakeLoader struct {
	loaded []string // family: source text, per LoadModule
	fail   error
}

func (f *fakeLoader) LoadModule(srcs fs.FS, family string) (uintptr, error) {
	if f.fail != nil {
		return 0, f.fail
	}
	text, err := fs.ReadFile(srcs, family)
	if err != nil {
		return 0, err
	}
	f.loaded = append(f.loaded, family+": "+string(text))
	return uintptr(len(f.loaded)), nil
}

func (f *fakeLoader) Function(mod uintptr, family, symbol string) (uintptr, error) {
	return mod*100 + uintptr(len(symbol)), nil
}

func sources() fstest.MapFS {
	return fstest.MapFS{
		"tfc_hip.h": {Data: []byte("header")},
		"a.hip":     {Data: []byte("// a, tiny\n" + decl("a_k", "op0_X", "M"))},
		"b.hip":     {Data: []byte(decl("b_k", "op0_X", "M"))},
	}
}

// TestSpecializeSwapsSourceAndKey: before a family is loaded, Specialize replaces its source:
// the symbol table, the build cache key and what the loader builds all follow the new text,
// while other families and the headers are untouched.
func TestSpecializeSwapsSourceAndKey(t *testing.T) {
	base := sources()
	lib, err := NewLibrary("cuda", base)
	if err != nil {
		t.Fatal(err)
	}
	key := func(srcs fs.FS, family string) string {
		k, err := CacheKey("nvcc 13.0", "sm_90", srcs, family)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	tinyKey := key(lib.Sources(), "a.hip")
	big := "// a, 2B\n" + decl("a_k", "op0_X", "M")
	if err := lib.Specialize("a", []byte(big)); err != nil {
		t.Fatal(err)
	}
	if data, _ := fs.ReadFile(lib.Sources(), "a.hip"); string(data) != big {
		t.Fatalf("a.hip holds %q after Specialize", data)
	}
	if data, _ := fs.ReadFile(base, "a.hip"); !strings.Contains(string(data), "tiny") {
		t.Fatal("Specialize changed the sources it was built from")
	}
	bigKey := key(lib.Sources(), "a.hip")
	if bigKey == tinyKey {
		t.Fatal("the specialised source kept the build cache key")
	}
	direct := sources()
	direct["a.hip"] = &fstest.MapFile{Data: []byte(big)}
	if bigKey != key(direct, "a.hip") {
		t.Error("the key of the specialised sources differs from the key of the same files on disk")
	}
	if key(lib.Sources(), "b.hip") != key(base, "b.hip") {
		t.Error("specialising a changed b's key")
	}
	names, err := fs.Glob(lib.Sources(), "*.h")
	if err != nil || !slices.Equal(names, []string{"tfc_hip.h"}) {
		t.Errorf("headers after Specialize: %v %v", names, err)
	}
	var ld fakeLoader
	if _, err := lib.Function("a_k", []Arg{{Name: "op0_X"}, {Name: "M"}}, &ld); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ld.loaded, []string{"a.hip: " + big}) {
		t.Fatalf("loader built %q", ld.loaded)
	}
	stage := t.TempDir()
	if _, err := Stage(lib.Sources(), "a.hip", stage); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(stage, "a.hip")); string(data) != big {
		t.Errorf("staged %q", data)
	}
}

// TestSpecializeAfterLoad: once a family's module is loaded its source is fixed; the same text is
// accepted, other text refused by name, and the library keeps what it had.
func TestSpecializeAfterLoad(t *testing.T) {
	lib, err := NewLibrary("hip", sources())
	if err != nil {
		t.Fatal(err)
	}
	var ld fakeLoader
	f1, err := lib.Function("a_k", []Arg{{Name: "op0_X"}, {Name: "M"}}, &ld)
	if err != nil {
		t.Fatal(err)
	}
	tiny, _ := fs.ReadFile(lib.Sources(), "a.hip")
	if err := lib.Specialize("a", tiny); err != nil {
		t.Fatalf("the loaded text again: %v", err)
	}
	err = lib.Specialize("a", []byte(decl("a_k", "op0_X", "M")+"// other\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "hip: kernels/a.hip is loaded on this backend already") {
		t.Fatalf("other text after load: %v", err)
	}
	if data, _ := fs.ReadFile(lib.Sources(), "a.hip"); string(data) != string(tiny) {
		t.Fatal("a refused Specialize changed the source")
	}
	if err := lib.Specialize("b", []byte(decl("b_k", "op0_X", "M")+"// b, 2B\n")); err != nil {
		t.Fatalf("another family, not loaded: %v", err)
	}
	f2, err := lib.Function("a_k", []Arg{{Name: "op0_X"}, {Name: "M"}}, &ld)
	if err != nil || f2 != f1 || len(ld.loaded) != 1 {
		t.Fatalf("second lookup: %v %v, %d loads", f2, err, len(ld.loaded))
	}
	if mods := lib.Unload(); len(mods) != 1 {
		t.Fatalf("unload gave %v", mods)
	}
	if err := lib.Specialize("a", []byte(decl("a_k", "op0_X", "M")+"// other\n")); err != nil {
		t.Fatalf("after unload: %v", err)
	}
}

// TestSpecializeRefusals: a source without kernels, or one redefining another family's kernel, is
// refused and changes nothing; a family the sources lack is added.
func TestSpecializeRefusals(t *testing.T) {
	lib, err := NewLibrary("cuda", sources())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ text, want string }{
		{"// nothing\n", "cuda: specialising a: the source given for a.hip declares no extern \"C\" __global__ kernel"},
		{decl("a_k", "op0_X", "M") + decl("b_k", "M"), "cuda: specialising a: kernel b_k is defined in both"},
	} {
		if err := lib.Specialize("a", []byte(c.text)); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("got %v, want %s", err, c.want)
		}
	}
	if _, ok := lib.Symbols()["a_k"]; !ok {
		t.Fatal("a refused source changed the symbol table")
	}
	if err := lib.Specialize("c", []byte(decl("c_k", "M"))); err != nil {
		t.Fatal(err)
	}
	if e := lib.Symbols()["c_k"]; e.Family != "c.hip" || !slices.Equal(e.Params, []string{"M"}) {
		t.Fatalf("c_k: %+v", e)
	}
}

// TestSpecializeChecksParamsAgain: a kernel whose parameters were checked against the old source
// is checked again against the new one.
func TestSpecializeChecksParamsAgain(t *testing.T) {
	lib, err := NewLibrary("cuda", sources())
	if err != nil {
		t.Fatal(err)
	}
	args := []Arg{{Name: "op0_X"}, {Name: "M"}}
	nope := errors.New("no build here")
	if _, err := lib.Function("a_k", args, &fakeLoader{fail: nope}); !errors.Is(err, nope) {
		t.Fatalf("first launch: %v", err)
	}
	if err := lib.Specialize("a", []byte(decl("a_k", "op0_X", "op0_X_ld", "M"))); err != nil {
		t.Fatal(err)
	}
	_, err = lib.Function("a_k", args, &fakeLoader{})
	if err == nil || !strings.Contains(err.Error(), "a_k declares parameters (op0_X, op0_X_ld, M) but the ops give (op0_X, M)") {
		t.Fatalf("after Specialize: %v", err)
	}
	if _, err := lib.Function("missing", args, &fakeLoader{}); err == nil || err.Error() != "cuda: no kernel missing in the kernel sources; regenerate kernels/ with tfc compile and rebuild" {
		t.Fatalf("unknown kernel: %v", err)
	}
}

// TestReplaceNames: only a family's .hip at the root can be replaced.
func TestReplaceNames(t *testing.T) {
	for _, name := range []string{"a.h", "x/a.hip", "a"} {
		if _, _, err := Replace(sources(), name, []byte(decl("z", "M"))); err == nil {
			t.Errorf("replaced %q", name)
		}
	}
}
