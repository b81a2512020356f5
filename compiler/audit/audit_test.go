package audit

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"tfc/compiler/emit/hip"
)

func TestParseNotes(t *testing.T) {
	notes, err := os.ReadFile(filepath.Join("testdata", "notes-gfx90a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseNotes(notes)
	if err != nil {
		t.Fatal(err)
	}
	want := []Compiled{
		{Name: "scale2", VGPRs: 4, SGPRs: 11, Wave: 64, MaxThreads: 128},
		{Name: "private_array", VGPRs: 4, SGPRs: 35, Scratch: 272, Wave: 64, MaxThreads: 1024},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ParseNotes (-want +got):\n%s", d)
	}
	if _, err := ParseNotes([]byte("Displaying notes found in: .note\n")); err == nil {
		t.Error("ParseNotes accepted notes without amdhsa.kernels")
	}
}

func TestLaunchBounds(t *testing.T) {
	src := []byte("extern \"C\" __global__ __launch_bounds__(256) void a(\n int M) {}\n" +
		"extern \"C\" __global__ __launch_bounds__( 64, 2 ) void b(int M) {}\nextern \"C\" __global__ void c() {}\n")
	if d := cmp.Diff(map[string]int{"a": 256, "b": 64}, LaunchBounds(src)); d != "" {
		t.Errorf("LaunchBounds (-want +got):\n%s", d)
	}
}

func TestCheck(t *testing.T) {
	ok := Compiled{Name: "k", VGPRs: 64, SGPRs: 20, LDS: 16384, Wave: 32, MaxThreads: 256, LaunchBounds: 256}
	for _, c := range []struct {
		target string
		edit   func(*Compiled)
		want   string // "" for no finding
	}{
		{"gfx1030", func(k *Compiled) {}, ""},
		{"gfx1030", func(k *Compiled) { k.LDS = 65537 }, "uses 65537 bytes of LDS; a workgroup on gfx1030 may use 65536"},
		{"gfx1030", func(k *Compiled) { k.Scratch = 16 }, "uses scratch: 16 bytes a lane"},
		{"gfx1030", func(k *Compiled) { k.VGPRSpills = 3 }, "3 VGPRs and 0 SGPRs spilled"},
		{"gfx1030", func(k *Compiled) { k.DynamicStack = true }, "dynamic stack"},
		{"gfx1030", func(k *Compiled) { k.LaunchBounds = 0; k.MaxThreads = 1024 }, "no __launch_bounds__"},
		{"gfx1030", func(k *Compiled) { k.LaunchBounds = 2048 }, "exceeds the 1024 threads"},
		{"gfx1030", func(k *Compiled) { k.SGPRs = 107 }, "uses 107 SGPRs"},
		{"gfx1030", func(k *Compiled) { k.VGPRs = 257 }, "uses 257 VGPRs; a wave on gfx1030 may use 256"},
		{"gfx90a", func(k *Compiled) { k.Wave = 64; k.VGPRs = 300 }, ""},
		// 1024 threads of wave64 are 4 waves a SIMD: 4 × 136 VGPRs exceed gfx90a's 512.
		{"gfx90a", func(k *Compiled) { k.Wave = 64; k.VGPRs = 130; k.MaxThreads, k.LaunchBounds = 1024, 1024 }, "needs 544 VGPRs a SIMD lane"},
	} {
		k := ok
		c.edit(&k)
		fs := Check(k, Targets[c.target])
		switch {
		case c.want == "" && len(fs) > 0:
			t.Errorf("%+v on %s: unexpected findings %q", k, c.target, fs)
		case c.want != "" && (len(fs) != 1 || !strings.Contains(fs[0], c.want)):
			t.Errorf("%+v on %s: findings %q, want one saying %q", k, c.target, fs, c.want)
		}
	}
}

// needTools skips a test when the HIP toolchain is not installed; CI installs it.
func needTools(t *testing.T) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("HIP toolchain not installed (%v); CI installs it with .ci/hip-deps.sh", err)
	}
}

func TestAuditSample(t *testing.T) {
	needTools(t)
	sample := filepath.Join("..", "..", "kernels", "gen", "sample.hip")
	rep, err := Run(context.Background(), []string{sample}, Options{Targets: []string{"gfx1030", "gfx90a"}, Include: []string{filepath.Join("..", "..", "kernels")}})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := rep.Print(&out); err != nil {
		t.Fatal(err)
	}
	if rep.Failed() {
		t.Errorf("the sample kernels break a limit:\n%s", out.String())
	}
	waves := map[string]int{"gfx1030": 32, "gfx90a": 64}
	seen := map[string]bool{}
	for _, k := range rep.Kernels {
		seen[k.Target+" "+k.Name] = true
		if k.Wave != waves[k.Target] {
			t.Errorf("%s on %s has wave size %d, want %d", k.Name, k.Target, k.Wave, waves[k.Target])
		}
	}
	for _, k := range SampleSymbols(t) {
		for target := range waves {
			if !seen[target+" "+k] {
				t.Errorf("kernel %s is missing from the %s code object", k, target)
			}
		}
	}
}

// SampleSymbols lists every symbol the sample kernels launch.
func SampleSymbols(t *testing.T) []string {
	var s []string
	for _, k := range hip.SampleKernels() {
		ls, err := hip.Launches(k)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			s = append(s, l.Symbol)
		}
	}
	return s
}

func TestAuditFindsScratchAndMissingBounds(t *testing.T) {
	needTools(t)
	rep, err := Run(context.Background(), []string{filepath.Join("testdata", "findings.hip")}, Options{Targets: []string{"gfx90a"}})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Failed() {
		t.Fatal("the audit passed a kernel with a private array and no launch bounds")
	}
	for _, k := range rep.Kernels {
		switch k.Name {
		case "scale2":
			if len(k.Findings) != 0 {
				t.Errorf("scale2: unexpected findings %q", k.Findings)
			}
		case "private_array":
			if len(k.Findings) != 2 || !strings.Contains(k.Findings[0], "no __launch_bounds__") || !strings.Contains(k.Findings[1], "uses scratch") {
				t.Errorf("private_array: findings %q, want no launch bounds and scratch", k.Findings)
			}
		}
	}
}

// Every planted control must still compile: the contract runs them on a card.
func TestMutantsCompile(t *testing.T) {
	needTools(t)
	dir := t.TempDir()
	headers, err := filepath.Glob(filepath.Join("..", "..", "kernels", "*.h"))
	if err != nil || len(headers) < 2 {
		t.Fatalf("kernel headers %v: %v", headers, err)
	}
	for _, path := range headers {
		h := filepath.Base(path)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, h), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var files []string
	for _, c := range []struct {
		kernel string
		m      hip.Mutation
	}{
		{"lm_head", hip.OffByOneBound}, {"final_norm", hip.DroppedScale}, {"vision_qkv_rope", hip.WrongStride}, {"decode_attention", hip.MissingBarrier},
	} {
		text, err := hip.Render("sample", hip.SampleKernels(), hip.Mutate(c.kernel, c.m))
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, c.m.String()+".hip")
		if err := os.WriteFile(f, text, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if _, err := Run(context.Background(), files, Options{Targets: []string{"gfx1030"}}); err != nil {
		t.Fatal(err)
	}
}
