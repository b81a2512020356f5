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

	"tfc/runtime/device"
	"tfc/runtime/device/cpu"
)

// copySchedule schedules kernel name as a copy of X into Y (fields: the operands it passes).
func copySchedule(name string, fields ...string) device.Schedule {
	s := device.Schedule{Kernel: name, Launches: []device.Launch{{Symbol: name, Threads: 256, RowsPerBlock: 1, GridY: 1}}}
	for _, f := range fields {
		s.Params = append(s.Params,
			device.Param{Name: "op0_" + f, Kind: device.ParamPointer, Op: 0, Field: f},
			device.Param{Name: "op0_" + f + "_ld", Kind: device.ParamStride, Op: 0, Field: f})
	}
	s.Params = append(s.Params, device.Param{Name: "M", Kind: device.ParamRows, Op: 0, Field: "Y"})
	return s
}

// source is a family source of text whose schedule lists ss.
func source(text string, ss ...device.Schedule) device.Source {
	return device.Source{HIP: []byte(text), Schedules: ss}
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

// sources are families a and b beside a header, each with one copy kernel.
func sources(t *testing.T) fstest.MapFS {
	t.Helper()
	fsys := fstest.MapFS{"tfc_hip.h": {Data: []byte("header")}}
	addFamily(t, fsys, "a", source("// a, tiny\n", copySchedule("a_k", "X", "Y")))
	addFamily(t, fsys, "b", source("// b\n", copySchedule("b_k", "X", "Y")))
	return fsys
}

// addFamily puts src into fsys as family name's .hip and schedule.
func addFamily(t *testing.T, fsys fstest.MapFS, name string, src device.Source) {
	t.Helper()
	sched, err := device.EncodeSchedules(src.Schedules)
	if err != nil {
		t.Fatal(err)
	}
	fsys[name+".hip"] = &fstest.MapFile{Data: src.HIP}
	fsys[name+device.ScheduleExt] = &fstest.MapFile{Data: sched}
}

// copyOp is a copy of 3 rows of 4 columns between two CPU buffers, and an address for each.
func copyOp(t *testing.T) (device.Op, func(device.Buffer) (uint64, error)) {
	t.Helper()
	be := cpu.New()
	x, _ := be.Alloc(device.F32, 12)
	y, _ := be.Alloc(device.F32, 12)
	addr := func(b device.Buffer) (uint64, error) {
		if b == x {
			return 0x1000, nil
		}
		return 0x2000, nil
	}
	return device.Copy{X: device.Tensor{Buf: x, Rows: 3, Cols: 4}, Y: device.Tensor{Buf: y, Rows: 3, Cols: 4}}, addr
}

// launch prepares kernel name over a copy through ld.
func launch(t *testing.T, lib *Library, name string, ld Loader) (*Call, error) {
	t.Helper()
	op, addr := copyOp(t)
	return lib.Prepare(&device.KernelRef{Name: name}, []device.Op{op}, addr, ld)
}

// TestSpecializeSwapsSourceAndKey: before a family is loaded, Specialize replaces its source:
// the kernel table, the build cache key and what the loader builds all follow the new source,
// while other families and the headers are untouched.
func TestSpecializeSwapsSourceAndKey(t *testing.T) {
	base := sources(t)
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
	big := "// a, 2B\n"
	wide := copySchedule("a_k", "X", "Y")
	wide.Launches[0].GridY = 7
	if err := lib.Specialize("a", source(big, wide)); err != nil {
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
	direct := sources(t)
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
	c, err := launch(t, lib, "a_k", &ld)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ld.loaded, []string{"a.hip: " + big}) {
		t.Fatalf("loader built %q", ld.loaded)
	}
	if want := []Grid{{Symbol: "a_k", X: 3, Y: 7, Threads: 256}}; !slices.Equal(c.Grids, want) {
		t.Fatalf("grids %+v, want the specialised schedule's %+v", c.Grids, want)
	}
	stage := t.TempDir()
	if _, err := Stage(lib.Sources(), "a.hip", stage); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(stage, "a.hip")); string(data) != big {
		t.Errorf("staged %q", data)
	}
}

// TestSpecializeAfterLoad: once a family's module is loaded its source is fixed; the same source
// is accepted, another refused by name, and the library keeps what it had.
func TestSpecializeAfterLoad(t *testing.T) {
	lib, err := NewLibrary("hip", sources(t))
	if err != nil {
		t.Fatal(err)
	}
	var ld fakeLoader
	c1, err := launch(t, lib, "a_k", &ld)
	if err != nil {
		t.Fatal(err)
	}
	tiny := source("// a, tiny\n", copySchedule("a_k", "X", "Y"))
	if err := lib.Specialize("a", tiny); err != nil {
		t.Fatalf("the loaded source again: %v", err)
	}
	err = lib.Specialize("a", source("// other\n", copySchedule("a_k", "X", "Y")))
	if err == nil || !strings.HasPrefix(err.Error(), "hip: kernels/gen/a.hip is loaded on this backend already") {
		t.Fatalf("other text after load: %v", err)
	}
	if data, _ := fs.ReadFile(lib.Sources(), "a.hip"); string(data) != string(tiny.HIP) {
		t.Fatal("a refused Specialize changed the source")
	}
	if err := lib.Specialize("b", source("// b, 2B\n", copySchedule("b_k", "X", "Y"))); err != nil {
		t.Fatalf("another family, not loaded: %v", err)
	}
	c2, err := launch(t, lib, "a_k", &ld)
	if err != nil || c2.Funcs[0] != c1.Funcs[0] || len(ld.loaded) != 1 {
		t.Fatalf("second lookup: %v %v, %d loads", c2, err, len(ld.loaded))
	}
	if mods := lib.Unload(); len(mods) != 1 {
		t.Fatalf("unload gave %v", mods)
	}
	if err := lib.Specialize("a", source("// other\n", copySchedule("a_k", "X", "Y"))); err != nil {
		t.Fatalf("after unload: %v", err)
	}
}

// TestSpecializeRefusals: a source without kernels, or one scheduling another family's kernel, is
// refused and changes nothing; a family the sources lack is added.
func TestSpecializeRefusals(t *testing.T) {
	lib, err := NewLibrary("cuda", sources(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		src  device.Source
		want string
	}{
		{source("// nothing\n"), "cuda: specialising a: the source given for a.hip schedules no kernel"},
		{source("", copySchedule("a_k", "X", "Y"), copySchedule("b_k", "X", "Y")), "cuda: specialising a: kernel b_k is scheduled in both"},
		{source("", device.Schedule{Kernel: "a_k"}), "cuda: specialising a: a.schedule.json: schedule of kernel \"a_k\": a kernel needs a name and a launch"},
	} {
		if err := lib.Specialize("a", c.src); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("got %v, want %s", err, c.want)
		}
	}
	if _, ok := lib.Kernels()["a_k"]; !ok {
		t.Fatal("a refused source changed the kernel table")
	}
	if err := lib.Specialize("c", source("", copySchedule("c_k", "X", "Y"))); err != nil {
		t.Fatal(err)
	}
	if e := lib.Kernels()["c_k"]; e.Family != "c.hip" || len(e.Schedule.Params) != 5 {
		t.Fatalf("c_k: %+v", e)
	}
}

// TestSpecializeChecksOperandsAgain: a kernel whose operands were checked against the old
// schedule is checked again against the new one, and an unknown kernel is refused by name.
func TestSpecializeChecksOperandsAgain(t *testing.T) {
	lib, err := NewLibrary("cuda", sources(t))
	if err != nil {
		t.Fatal(err)
	}
	nope := errors.New("no build here")
	if _, err := launch(t, lib, "a_k", &fakeLoader{fail: nope}); !errors.Is(err, nope) {
		t.Fatalf("first launch: %v", err)
	}
	if err := lib.Specialize("a", source("// a\n", copySchedule("a_k", "X"))); err != nil {
		t.Fatal(err)
	}
	_, err = launch(t, lib, "a_k", &fakeLoader{})
	if err == nil || !strings.Contains(err.Error(), "kernel a_k takes operands (op0.X) but the ops give (op0.X, op0.Y)") {
		t.Fatalf("after Specialize: %v", err)
	}
	if _, err := launch(t, lib, "missing", &fakeLoader{}); err == nil || err.Error() != "cuda: no kernel missing in the kernel sources; regenerate kernels/ with tfc compile and rebuild" {
		t.Fatalf("unknown kernel: %v", err)
	}
}

// TestReplaceNames: only a family's .hip at the root can be replaced.
func TestReplaceNames(t *testing.T) {
	for _, name := range []string{"a.h", "x/a.hip", "a"} {
		if _, _, err := Replace(sources(t), name, source("", copySchedule("z", "X", "Y"))); err == nil {
			t.Errorf("replaced %q", name)
		}
	}
}

// TestKernelTableRefusals: a kernel scheduled by two families, and a schedule without its
// source, are refused by name.
func TestKernelTableRefusals(t *testing.T) {
	fsys := sources(t)
	fsys["c"+device.ScheduleExt] = fsys["a"+device.ScheduleExt]
	fsys["c.hip"] = &fstest.MapFile{}
	if _, err := KernelTable(fsys); err == nil || !strings.Contains(err.Error(), "kernel a_k is scheduled in both") {
		t.Fatalf("a kernel in two families: %v", err)
	}
	delete(fsys, "c.hip")
	if _, err := KernelTable(fsys); err == nil || !strings.Contains(err.Error(), "c.schedule.json has no c.hip beside it") {
		t.Fatalf("a schedule alone: %v", err)
	}
}
