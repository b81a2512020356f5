//go:build gpu

package main

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"tfc/runtime/chattemplate"
	"tfc/runtime/device/cuda"
	"tfc/runtime/engine"
	"tfc/runtime/model"
	"tfc/runtime/sample"
)

// TestQwen2VLGateCUDA is TestQwen2VLGate on the cuda backend: prompt ids, vision rows, greedy
// ids and top-5 logits of the tiny checkpoint against transformers' float64 run.
func TestQwen2VLGateCUDA(t *testing.T) {
	if _, err := os.Stat(filepath.Join(tinyQwen2VL, "tokenizer.json")); err != nil {
		t.Fatalf("%s has no tokenizer.json: run make testdata", tinyQwen2VL)
	}
	be, err := cuda.New()
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	t.Logf("backend %s", be.Describe())
	fe, err := engine.LoadFrontend(tinyQwen2VL)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(tinyQwen2VL, be, model.Limits{Context: 256, Parallel: 1, Rows: 64, PageSize: 16, Patches: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, name := range []string{"text", "image1", "image2"} {
		t.Run(name, func(t *testing.T) {
			var oc oracleCase
			readJSON(t, filepath.Join(tinyQwen2VL, "oracle", name+".json"), &oc)
			ref := readSafetensors(t, filepath.Join(tinyQwen2VL, "oracle", name+".safetensors"))
			var files [][]byte
			for _, p := range oc.Images {
				data, err := os.ReadFile(filepath.Join(tinyQwen2VL, "oracle", p))
				if err != nil {
					t.Fatal(err)
				}
				files = append(files, data)
			}
			imgs, err := fe.Images(files)
			if err != nil {
				t.Fatal(err)
			}
			p, _, err := fe.Build(stripImagePaths(t, oc.Messages), imgs, e.Info.ImageToken, e.Info.Merge, chattemplate.Options{AddGenerationPrompt: true})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(oc.PromptIDs, p.IDs); d != "" {
				t.Fatalf("prompt ids (-transformers +tfc)\n%s", d)
			}
			var steps [][]float32
			res, err := e.Generate(p, engine.Options{MaxTokens: oc.MaxNewTokens, Sample: sample.Params{},
				Step: func(step int, logits []float32) {
					if step < len(oc.Top5) {
						steps = append(steps, append([]float32(nil), logits...))
					}
				}})
			if err != nil {
				t.Fatal(err)
			}
			if rows, ok := ref["vision_rows"]; ok {
				d := maxAbsDiff(rows, res.VisionRows)
				t.Logf("vision rows: %d values, largest difference %.3g", len(rows), d)
				if d > visionBound {
					t.Errorf("vision rows differ from transformers' by up to %g (bound %g)", d, visionBound)
				}
			}
			if d := cmp.Diff(oc.OutputIDs, res.OutputIDs); d != "" {
				t.Errorf("greedy ids (-transformers +tfc)\n%s%s", d, firstDifference(oc, res.OutputIDs))
			}
			if res.FinishReason != oc.FinishReason {
				t.Errorf("finish reason %q, transformers %q", res.FinishReason, oc.FinishReason)
			}
			worst := 0.0
			for i, st := range oc.Top5 {
				if i >= len(steps) {
					break
				}
				for k, id := range st.IDs {
					d := math.Abs(float64(steps[i][id]) - st.Logits[k])
					worst = max(worst, d)
					if d > logitBound {
						t.Errorf("step %d: logit of id %d is %.7f, transformers %.7f (bound %g)", i, id, steps[i][id], st.Logits[k], logitBound)
					}
				}
			}
			t.Logf("cuda: %d prompt ids, %d output ids (%s) vs transformers' %v; top-5 logits of %d steps within %.3g",
				len(p.IDs), len(res.OutputIDs), res.FinishReason, cmp.Equal(oc.OutputIDs, res.OutputIDs), min(len(oc.Top5), len(steps)), worst)
		})
	}
}
