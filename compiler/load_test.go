package compiler_test

import (
	"bytes"
	"errors"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"tfc/compiler"
	"tfc/kernels"
	"tfc/runtime/device"
	"tfc/runtime/device/cpu"
	"tfc/runtime/engine"
)

// otherGPU is a backend that is neither the CPU nor able to build kernels at load: it runs the
// CPU's ops under another name.
type otherGPU struct{ *cpu.Backend }

func (otherGPU) Name() string { return "other" }

// specializing is otherGPU that records the kernel sources the glue gives it.
type specializing struct {
	otherGPU
	got  map[string]device.Source
	fail error
}

func (s *specializing) SpecializeFamily(family string, src device.Source) error {
	if s.fail != nil {
		return s.fail
	}
	s.got[family] = src
	return nil
}

var _ device.Specializer = (*specializing)(nil)

func newSpecializing() *specializing {
	return &specializing{otherGPU: otherGPU{cpu.New()}, got: map[string]device.Source{}}
}

// TestLoadSpecializesKernels: loading a checkpoint whose values differ from kernels/gen/qwen2vl.hip's
// on a backend that builds kernels at load gives it the family's kernels rendered for that
// checkpoint and page size; the tiny checkpoint gets exactly the committed kernels.
func TestLoadSpecializesKernels(t *testing.T) {
	dir := changedQwen2VL(t)
	graph := readFile(t, "../"+qwen2VLGraph)
	for _, pageSize := range []int{16, 32} {
		be := newSpecializing()
		l := changedLimits
		l.PageSize = pageSize
		e, err := engine.Open(dir, be, l)
		if err != nil {
			t.Fatal(err)
		}
		e.Close()
		want, err := compiler.KernelSource(qwen2VLGraph, graph, changedConfig(t), pageSize)
		if err != nil {
			t.Fatal(err)
		}
		if len(be.got) != 1 || !reflect.DeepEqual(be.got["qwen2vl"], want) {
			t.Errorf("page size %d: the backend was given %d sources, not the kernels rendered for the changed config", pageSize, len(be.got))
		}
	}
	committed, err := fs.ReadFile(kernels.Sources, "qwen2vl.hip")
	if err != nil {
		t.Fatal(err)
	}
	be := newSpecializing()
	e, err := engine.Open(tinyDir, be, changedLimits)
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	sched, err := fs.ReadFile(kernels.Sources, "qwen2vl"+device.ScheduleExt)
	if err != nil {
		t.Fatal(err)
	}
	given, err := device.EncodeSchedules(be.got["qwen2vl"].Schedules)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(be.got["qwen2vl"].HIP, committed) || !bytes.Equal(given, sched) {
		t.Error("the tiny checkpoint was not given kernels/gen/qwen2vl.hip and its schedule as committed")
	}
}

// TestLoadRefusesWhereKernelsCannotBeBuilt: a backend that cannot build kernels refuses the
// changed checkpoint by value and names the fix; a failing SpecializeFamily fails the load.
func TestLoadRefusesWhereKernelsCannotBeBuilt(t *testing.T) {
	dir := changedQwen2VL(t)
	_, err := engine.Open(dir, otherGPU{cpu.New()}, changedLimits)
	for _, want := range []string{
		"the other backend runs kernels/gen/qwen2vl.hip, specialised for other values: D = 192 (",
		"; H = 6 (", "; KV = 1 (", "; eps = 1e-05 (", "; sect = [4 6 6] (", "; vtheta = 5000 (",
		"use the cpu, cuda or hip backend, or regenerate kernels/gen/qwen2vl.hip for this checkpoint with tfc compile -specialize <checkpoint>/config.json graphs/qwen2_vl.graph",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v\nwant it to contain %q", err, want)
		}
	}
	if e, err := engine.Open(filepath.Clean(tinyDir), otherGPU{cpu.New()}, changedLimits); err != nil {
		t.Errorf("the tiny checkpoint on a backend that cannot specialise: %v", err)
	} else {
		e.Close()
	}
	nope := errors.New("cannot build")
	be := newSpecializing()
	be.fail = nope
	if _, err := engine.Open(dir, be, changedLimits); !errors.Is(err, nope) {
		t.Errorf("failing SpecializeFamily: %v", err)
	}
}

// TestChangedQwen2VLRunsOnCPU: the changed checkpoint generates on the CPU backend, which reads
// every value at run time (the reference the GPU test compares with).
func TestChangedQwen2VLRunsOnCPU(t *testing.T) {
	dir := changedQwen2VL(t)
	e, err := engine.Open(dir, cpu.New(), changedLimits)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if got := e.Info; got.Hidden != 192 || got.Vocab != 4096 || got.Layers != 3 || got.KVWidth != 32 {
		t.Fatalf("info %+v", got)
	}
	res, err := e.Generate(changedPrompt(), engine.Options{MaxTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.OutputIDs) != 4 || len(res.VisionRows) != 4*192 {
		t.Fatalf("%d ids, %d vision values", len(res.OutputIDs), len(res.VisionRows))
	}
	t.Logf("ids %v", res.OutputIDs)
}
