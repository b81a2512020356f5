package main

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"tfc/runtime/device"

	"github.com/google/go-cmp/cmp"

	"tfc/contracts"
	"tfc/gen/registry"
)

// TestGenerateBF16 runs every family's tiny checkpoint end to end on the CPU in BF16 precision:
// it gives ids, the same ids on a second run, and the prompt F32 precision gives. Its ids are not
// compared with an oracle here (transformers' BF16 references are made on a GPU).
func TestGenerateBF16(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every fixture twice")
	}
	for _, fam := range registry.Families {
		t.Run(fam.Name, func(t *testing.T) {
			root := filepath.Join("..", "..", fam.Fixture)
			f := generateFlags{model: root, prompt: "What is in this picture?", backend: "cpu", maxTokens: 12, context: 1024, topP: 1,
				images: []string{filepath.Join(root, "oracle", "images", "a.png")}, ignoreEOS: true}
			f.precision = "bf16"
			bf, err := runGenerate(f)
			if err != nil {
				t.Fatal(err)
			}
			if len(bf.OutputIDs) != f.maxTokens {
				t.Fatalf("%d output ids, want %d", len(bf.OutputIDs), f.maxTokens)
			}
			again, err := runGenerate(f)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(bf.OutputIDs, again.OutputIDs); d != "" {
				t.Errorf("a second BF16 run differs (-first +second)\n%s", d)
			}
			f.precision = "f32"
			ref, err := runGenerate(f)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(ref.PromptIDs, bf.PromptIDs); d != "" {
				t.Errorf("prompt ids (-f32 +bf16)\n%s", d)
			}
			same := 0
			for i := range ref.OutputIDs {
				if i < len(bf.OutputIDs) && ref.OutputIDs[i] == bf.OutputIDs[i] {
					same++
				}
			}
			t.Logf("bf16 ids %v; f32 ids %v (%d of %d equal)", bf.OutputIDs, ref.OutputIDs, same, len(ref.OutputIDs))
		})
	}
}

// stepRun is one generation's ids and every step's logits.
type stepRun struct {
	ids    []int32
	logits [][]float32
}

// runSteps runs f on backend, keeping each step's logits.
func runSteps(t *testing.T, f generateFlags, backend string) stepRun {
	t.Helper()
	var r stepRun
	f.backend = backend
	f.step = func(_ int, l []float32) { r.logits = append(r.logits, append([]float32(nil), l...)) }
	out, err := runGenerate(f)
	if err != nil {
		t.Fatal(err)
	}
	r.ids = out.OutputIDs
	return r
}

// bf16Divergence compares b's BF16 ids with a's (the CPU's): equal, or first different at a
// step where a's margin between its id and b's is at most one BF16 step of a's top logit. It
// returns what it saw, and an error when the difference is not such a near-tie.
func bf16Divergence(a, b stepRun) (string, error) {
	drift := 0.0 // the largest logit difference on the shared prefix, at either run's pick
	for i := range min(len(a.ids), len(b.ids)) {
		for _, id := range []int32{a.ids[i], b.ids[i]} {
			drift = math.Max(drift, math.Abs(float64(a.logits[i][id]-b.logits[i][id])))
		}
		if a.ids[i] == b.ids[i] {
			continue
		}
		top, other := float64(a.logits[i][a.ids[i]]), float64(a.logits[i][b.ids[i]])
		margin, step := top-other, contracts.BF16ULP(top)
		seen := fmt.Sprintf("ids equal for %d steps, then %d (CPU) against %d; CPU margin %.4g, one BF16 step of its top logit %.4g is %.4g; other run's logits %.4g and %.4g; largest logit difference so far %.4g",
			i, a.ids[i], b.ids[i], margin, top, step, b.logits[i][a.ids[i]], b.logits[i][b.ids[i]], drift)
		if margin > step {
			return seen, fmt.Errorf("not a near-tie: %s", seen)
		}
		return seen, nil
	}
	if len(a.ids) != len(b.ids) {
		return "", fmt.Errorf("%d ids against %d", len(a.ids), len(b.ids))
	}
	return fmt.Sprintf("all %d ids equal; largest logit difference %.4g", len(a.ids), drift), nil
}

// checkBF16Divergence reports bf16Divergence in the test.
func checkBF16Divergence(t *testing.T, a, b stepRun) {
	t.Helper()
	seen, err := bf16Divergence(a, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(seen)
}

// TestBF16Divergence checks the near-tie rule on made-up runs: a flip at a tiny margin passes, a
// flip at a wide one fails, and equal runs pass.
func TestBF16Divergence(t *testing.T) {
	run := func(ids []int32, logits ...[]float32) stepRun { return stepRun{ids: ids, logits: logits} }
	a := run([]int32{0, 1}, []float32{8, 1}, []float32{4, 4.01})
	if _, err := bf16Divergence(a, run([]int32{0, 1}, []float32{8, 1}, []float32{4, 4.02})); err != nil {
		t.Errorf("equal ids: %v", err)
	}
	if _, err := bf16Divergence(a, run([]int32{0, 0}, []float32{8, 1}, []float32{4.02, 4})); err != nil {
		t.Errorf("a flip at margin 0.01 < one BF16 step of 4.01 (0.03125): %v", err)
	}
	wide := run([]int32{0, 1}, []float32{8, 1}, []float32{4, 4.5})
	if _, err := bf16Divergence(wide, run([]int32{0, 0}, []float32{8, 1}, []float32{4.6, 4})); err == nil {
		t.Error("a flip at margin 0.5 passed")
	}
}

// TestPrecisionFlag checks that --precision refuses a name it does not know, and that without it
// the CPU runs the exactness reference (f32) and a GPU the publisher's precision (bf16).
func TestPrecisionFlag(t *testing.T) {
	if _, err := newBackend("cpu", "fp8"); err == nil {
		t.Fatal("newBackend accepted precision fp8")
	}
	b, err := newBackend("cpu", "")
	if err != nil {
		t.Fatal(err)
	}
	if p := device.PrecisionOf(b); p != device.F32Precision {
		t.Errorf("cpu without --precision runs %v, want f32", p)
	}
	for backend, want := range map[string]string{"cpu": "f32", "cuda": "bf16", "hip": "bf16"} {
		if got := defaultPrecision(backend); got != want {
			t.Errorf("%s defaults to %s, want %s", backend, got, want)
		}
	}
}
