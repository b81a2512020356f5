package compiler_test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"tfc/compiler"
	"tfc/compiler/audit"
	"tfc/kernels"
	"tfc/runtime/checkpoint"
	"tfc/runtime/device"
	"tfc/runtime/device/gpu"
)

const (
	qwen2VLGraph = "graphs/qwen2_vl.graph"
	config2B     = "testdata/qwen2-vl-2b/config.json"
	configTiny   = "../testdata/qwen2-vl-tiny/config.json"
)

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// hipSource renders graphs/qwen2_vl.graph's kernels for the config.json at cfgPath.
func hipSource(t *testing.T, cfgPath string, pageSize int) device.Source {
	t.Helper()
	src, err := compiler.KernelSource(qwen2VLGraph, readFile(t, "../"+qwen2VLGraph), readFile(t, cfgPath), pageSize)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// kernelTable is the kernel table of one family source, as a GPU backend reads it.
func kernelTable(t *testing.T, src device.Source) map[string]gpu.Entry {
	t.Helper()
	sched, err := device.EncodeSchedules(src.Schedules)
	if err != nil {
		t.Fatal(err)
	}
	table, err := gpu.KernelTable(fstest.MapFS{"qwen2vl.hip": {Data: src.HIP}, "qwen2vl" + device.ScheduleExt: {Data: sched}})
	if err != nil {
		t.Fatal(err)
	}
	return table
}

// committedSource is kernels/gen/qwen2vl.hip and its schedule as the binary embeds them.
func committedSource(t *testing.T) device.Source {
	t.Helper()
	text, err := fs.ReadFile(kernels.Sources, "qwen2vl.hip")
	if err != nil {
		t.Fatal(err)
	}
	data, err := fs.ReadFile(kernels.Sources, "qwen2vl"+device.ScheduleExt)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := device.DecodeSchedules(data)
	if err != nil {
		t.Fatal(err)
	}
	return device.Source{HIP: text, Schedules: ss}
}

// TestHIPSourceTinyIsTheCommittedOne: rendered for the tiny checkpoint, KernelSource gives
// exactly kernels/gen/qwen2vl.hip and its schedule, the files go generate writes.
func TestHIPSourceTinyIsTheCommittedOne(t *testing.T) {
	if got := hipSource(t, configTiny, 16); !reflect.DeepEqual(got, committedSource(t)) {
		t.Fatal("KernelSource for testdata/qwen2-vl-tiny differs from kernels/gen/qwen2vl.hip and its schedule; run go generate ./graphs")
	}
}

// TestHIPSourceQwen2VL2B: the kernels for a checkpoint of Qwen2-VL-2B's shape schedule the same
// kernels with the same parameters as the committed ones (so the glue's launches serve both), and
// carry the 2B constants and grids instead of the tiny ones.
func TestHIPSourceQwen2VL2B(t *testing.T) {
	committedSrc := committedSource(t)
	committed := committedSrc.HIP
	bigSrc := hipSource(t, config2B, 16)
	big := bigSrc.HIP
	want, got := kernelTable(t, committedSrc), kernelTable(t, bigSrc)
	if len(want) < 15 {
		t.Fatalf("only %d kernels in kernels/gen/qwen2vl.hip", len(want))
	}
	for name, e := range want {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("%s: not scheduled by the 2B source", name)
		case !slices.Equal(g.Schedule.Params, e.Schedule.Params):
			t.Errorf("%s: parameters %v, committed %v", name, g.Schedule.Params, e.Schedule.Params)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: scheduled by the 2B source only", name)
		}
	}
	if got["qwen2vl_decode_linear_silu_glu"].Schedule.Launches[0].GridY <= want["qwen2vl_decode_linear_silu_glu"].Schedule.Launches[0].GridY {
		t.Errorf("the 2B grid of qwen2vl_decode_linear_silu_glu is no wider than the tiny one: %+v", got["qwen2vl_decode_linear_silu_glu"].Schedule.Launches)
	}
	if bytes.Equal(big, committed) {
		t.Fatal("the 2B kernels are the tiny ones")
	}
	for _, c := range []struct{ tiny, big string }{
		{"N = 32, K = 1176;", "N = 1280, K = 1176;"},         // patch embedding: VD
		{"N = 96, K = 32;", "N = 3840, K = 1280;"},           // vision QKV: 3*VD by VD
		{"constexpr int D = 64;", "constexpr int D = 1536;"}, // decoder norms: D
		{"N = 151936, K = 64;", "N = 151936, K = 1536;"},     // tied lm_head: V by D
	} {
		if !bytes.Contains(committed, []byte(c.tiny)) {
			t.Errorf("kernels/gen/qwen2vl.hip has no %q; update this test's constants", c.tiny)
		}
		if !bytes.Contains(big, []byte(c.big)) {
			t.Errorf("the 2B kernels have no %q", c.big)
		}
		if bytes.Contains(big, []byte(c.tiny)) {
			t.Errorf("the 2B kernels still have the tiny %q", c.tiny)
		}
	}
	if bytes.Equal(hipSource(t, config2B, 32).HIP, big) {
		t.Error("the page size does not reach the kernels")
	}
}

// TestHIPSourceFromReadsTheSameValues: rendering from the values a runtime config reader gives
// (as the glue does at load) equals rendering from the config.json bytes, the weight dtype
// included.
func TestHIPSourceFromReadsTheSameValues(t *testing.T) {
	graph := readFile(t, "../"+qwen2VLGraph)
	f32 := strings.Replace(string(readFile(t, config2B)), `"torch_dtype": "bfloat16"`, `"torch_dtype": "float32"`, 1)
	if !strings.Contains(f32, "float32") {
		t.Fatal("the 2B config names no torch_dtype")
	}
	var last []byte
	for _, c := range []struct {
		name string
		json []byte
	}{
		{"tiny", readFile(t, configTiny)},
		{"2B", readFile(t, config2B)},
		{"2B float32", []byte(f32)},
	} {
		cfg, err := checkpoint.ParseConfig("config.json", c.json)
		if err != nil {
			t.Fatal(err)
		}
		want, err := compiler.KernelSource(qwen2VLGraph, graph, c.json, 16)
		if err != nil {
			t.Fatal(err)
		}
		src, err := compiler.KernelSourceFrom(qwen2VLGraph, graph, cfg, 16)
		if err != nil {
			t.Fatal(err)
		}
		got := src.HIP
		if !reflect.DeepEqual(src, want) {
			t.Errorf("%s: KernelSourceFrom differs from KernelSource", c.name)
		}
		if bytes.Equal(got, last) {
			t.Errorf("%s: renders as the case before it", c.name)
		}
		last = got
	}
}

// TestHIPSourceRefusals: a config the graph's requirements refuse, and a graph with errors, are
// reported, not rendered.
func TestHIPSourceRefusals(t *testing.T) {
	graph := readFile(t, "../"+qwen2VLGraph)
	bad := strings.Replace(string(readFile(t, config2B)), `"num_key_value_heads": 2`, `"num_key_value_heads": 5`, 1)
	if _, err := compiler.KernelSource(qwen2VLGraph, graph, []byte(bad), 16); err == nil || !strings.Contains(err.Error(), "H%KV == 0") {
		t.Errorf("12 heads over 5 KV heads: %v", err)
	}
	if _, err := compiler.KernelSource(qwen2VLGraph, []byte("family broken"), readFile(t, config2B), 16); err == nil {
		t.Error("a graph that does not parse rendered")
	}
}

// TestHIPSource2BBuildsForGFX90a builds the 2B kernels for gfx90a with the command the audit
// runs, and reports the audit's findings on them.
func TestHIPSource2BBuildsForGFX90a(t *testing.T) {
	if testing.Short() {
		t.Skip("runs clang")
	}
	if err := audit.Available(); err != nil {
		t.Skipf("the audit's tools are not installed (%v); install clang-19, lld-19, llvm-19, libamdhip64-dev and rocm-device-libs to run this test", err)
	}
	dir := t.TempDir()
	headers, err := fs.Glob(kernels.Sources, "*.h")
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range headers {
		data, err := fs.ReadFile(kernels.Sources, h)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, h), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "qwen2vl.hip")
	big := hipSource(t, config2B, 16)
	if err := os.WriteFile(file, big.HIP, 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Run(context.Background(), []string{file}, audit.Options{Targets: []string{"gfx90a"}})
	if err != nil {
		t.Fatal(err)
	}
	launches := 0
	for _, s := range big.Schedules {
		for _, l := range s.Launches {
			launches += len(l.Symbols())
		}
	}
	if len(rep.Kernels) != launches {
		t.Errorf("the gfx90a code object has %d kernels, the schedule launches %d functions", len(rep.Kernels), launches)
	}
	for _, k := range rep.Kernels {
		for _, f := range k.Findings {
			t.Logf("audit finding, %s: %s", k.Name, f)
		}
	}
	t.Logf("gfx90a: %d kernels built", len(rep.Kernels))
}
