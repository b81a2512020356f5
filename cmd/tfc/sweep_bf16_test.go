package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"tfc/contracts"
	"tfc/contracts/sweep"
	"tfc/runtime/device"
	"tfc/runtime/engine"
	"tfc/runtime/sample"
)

// sweepRefsBF16 holds tools/oracle/sweep.py --bf16's records: the publisher's BF16 run on CUDA.
const sweepRefsBF16 = "../../testdata/sweep/refs-bf16"

// gateSweepBF16 runs the BF16 sweep gate on a backend of that name, one a config.
func gateSweepBF16(t *testing.T, backend string) {
	f, err := sweep.Load(sweepFile)
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, c := range f.Configs {
		path := filepath.Join(sweepRefsBF16, c.Name+".json")
		if _, err := os.Stat(path); os.IsNotExist(err) {
			continue // a config not yet recorded
		}
		ran++
		t.Run(c.Name, func(t *testing.T) {
			var ref sweepRef
			readJSON(t, path, &ref)
			dir, fe, e := openSweepConfig(t, f, c, ref, func() (device.Backend, error) {
				b, err := newBackend(backend, "bf16")
				if c, ok := b.(interface{ Close() error }); ok && err == nil {
					t.Cleanup(func() { c.Close() })
				}
				return b, err
			})
			for _, sc := range ref.Cases {
				t.Run(sc.Case, func(t *testing.T) {
					p := chatPrompt(t, fe, e, filepath.Join(dir, "images"), sc.Images, sc.Messages)
					if d := cmp.Diff(sc.PromptIDs, p.IDs); d != "" {
						t.Fatalf("prompt ids (-publisher +tfc)\n%s", d)
					}
					var steps [][]float32
					res, err := e.Generate(p, engine.Options{MaxTokens: ref.MaxNewTokens, Sample: sample.Params{},
						Step: func(_ int, l []float32) { steps = append(steps, append([]float32(nil), l...)) }})
					if err != nil {
						t.Fatal(err)
					}
					seen, err := bf16AgainstPublisher(sc, res.OutputIDs, steps)
					t.Log(seen)
					if err != nil {
						t.Error(err)
					}
				})
			}
		})
	}
	if ran == 0 {
		t.Fatalf("no BF16 references under %s", sweepRefsBF16)
	}
}

// bf16AgainstPublisher compares tfc's greedy ids and step logits with the publisher's BF16 run:
// equal, or first different at a step where the publisher's margin between its pick and tfc's is
// at most one BF16 step of its top logit (tfc's pick must be in its top 5). It says what it saw:
// the steps equal, the first difference (margin, step, rank) and the largest difference of a
// top-5 logit on the shared prefix.
func bf16AgainstPublisher(ref sweepCase, ids []int32, steps [][]float32) (string, error) {
	drift := 0.0
	for i, want := range ref.OutputIDs {
		if i < len(ref.Top5) && i < len(steps) {
			for k, id := range ref.Top5[i].IDs {
				drift = math.Max(drift, math.Abs(float64(steps[i][id])-ref.Top5[i].Logits[k]))
			}
		}
		if i < len(ids) && ids[i] == want {
			continue
		}
		if i >= len(ids) {
			return "", fmt.Errorf("tfc stopped after %d ids, the publisher went on to %d: %v", len(ids), len(ref.OutputIDs), ids)
		}
		top := ref.Top5[i]
		rank := -1
		for k, id := range top.IDs {
			if int32(id) == ids[i] {
				rank = k
			}
		}
		if rank < 0 {
			return "", fmt.Errorf("step %d: tfc took %d, not in the publisher's top 5 %v (logits %v); ids equal before it; largest top-5 logit difference so far %.4g",
				i, ids[i], top.IDs, top.Logits, drift)
		}
		margin, ulp := top.Logits[0]-top.Logits[rank], contracts.BF16ULP(top.Logits[0])
		seen := fmt.Sprintf("ids equal for %d of %d steps, then %d (publisher) against %d (its rank %d): publisher margin %.4g, one BF16 step of its top logit %.4g is %.4g; tfc's logits %.4g and %.4g; largest top-5 logit difference before it %.4g",
			i, len(ref.OutputIDs), want, ids[i], rank+1, margin, top.Logits[0], ulp, steps[i][want], steps[i][ids[i]], drift)
		if margin > ulp {
			return seen, fmt.Errorf("not a BF16 tie: %s", seen)
		}
		return seen, nil
	}
	if len(ids) != len(ref.OutputIDs) {
		return "", fmt.Errorf("tfc gave %d ids, the publisher %d: %v", len(ids), len(ref.OutputIDs), ids)
	}
	return fmt.Sprintf("all %d ids equal (%s); largest top-5 logit difference %.4g", len(ids), ref.FinishReason, drift), nil
}

// TestBF16AgainstPublisher checks the rule on made-up steps: equal ids pass, a flip at one BF16
// step passes, a flip at two fails, and a pick outside the top 5 fails.
func TestBF16AgainstPublisher(t *testing.T) {
	ref := sweepCase{OutputIDs: []int32{1, 2}, Top5: []oracleTop5{
		{IDs: []int{1, 0, 2, 3, 4}, Logits: []float64{8, 7, 6, 5, 4}},
		{IDs: []int{2, 3, 0, 1, 4}, Logits: []float64{4, 4 - 1.0/32, 4 - 2.0/32, 1, 0}}}}
	steps := [][]float32{{7, 8, 6, 5, 4}, {0, 1, 4, 4, 0}}
	if _, err := bf16AgainstPublisher(ref, []int32{1, 2}, steps); err != nil {
		t.Errorf("equal ids: %v", err)
	}
	if _, err := bf16AgainstPublisher(ref, []int32{1, 3}, steps); err != nil {
		t.Errorf("a flip at one BF16 step of 4 (1/32): %v", err)
	}
	if _, err := bf16AgainstPublisher(ref, []int32{1, 0}, steps); err == nil {
		t.Error("a flip at two BF16 steps passed")
	}
	if _, err := bf16AgainstPublisher(ref, []int32{1, 7}, steps); err == nil {
		t.Error("a pick outside the top 5 passed")
	}
	if _, err := bf16AgainstPublisher(ref, []int32{1}, steps); err == nil {
		t.Error("a short run passed")
	}
}

// TestSweepBF16CPU gates every config with a BF16 reference on the CPU in BF16 precision: prompt
// ids equal, and greedy ids equal to the publisher's BF16 run up to a step where that run's margin
// between its pick and tfc's is at most one BF16 step of its top logit.
func TestSweepBF16CPU(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every BF16 sweep config")
	}
	gateSweepBF16(t, "cpu")
}
