package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"tfc/gen/registry"
	"tfc/runtime/chattemplate"
	"tfc/runtime/device"
	"tfc/runtime/device/cpu"
	"tfc/runtime/engine"
	"tfc/runtime/model"
	"tfc/runtime/sample"
)

const (
	tinyQwen2VL = "../../testdata/qwen2-vl-tiny"
)

// oracleCase is one of transformers' recorded generations (tools/oracle/qwen2_vl.py).
type oracleCase struct {
	Case         string          `json:"case"`
	Messages     json.RawMessage `json:"messages"`
	Images       []string        `json:"images"`
	PromptIDs    []int32         `json:"prompt_ids"`
	OutputIDs    []int32         `json:"output_ids"`
	FinishReason string          `json:"finish_reason"`
	MaxNewTokens int             `json:"max_new_tokens"`
	Top5         []oracleTop5    `json:"top5"`
	Margins      []float64       `json:"margins"`
}

type oracleTop5 struct {
	Step   int       `json:"step"`
	IDs    []int     `json:"ids"`
	Logits []float64 `json:"logits"`
}

// Gate bounds: float32 accumulation against transformers' float64 run.
const (
	logitBound  = 1e-4 // absolute, on logits of magnitude up to 32
	visionBound = 1e-4 // absolute, per vision row element
	pixelBound  = 0    // PNG pixel_values are bit-identical
)

// logitTol is the bound on a logit near ref: logitBound up to magnitude 32, then growing with it
// (float32's spacing doubles with each power of two: 3.8e-6 at 32, 7.6e-6 at 64).
func logitTol(ref float64) float64 {
	return logitBound * max(1, math.Abs(ref)/32)
}

// TestFixtureGates runs every family's tiny checkpoint on the CPU backend through the whole front
// end and compares with its oracle (transformers for Qwen2-VL, the publisher's code for
// dots.ocr): prompt ids, pixel values, vision rows, greedy ids, top-5 logits.
func TestFixtureGates(t *testing.T) {
	gateFixtures(t, func() (device.Backend, error) { return cpu.New(), nil })
}

// gateFixtures runs the model gate of every generated family's fixture on backends made by open.
func gateFixtures(t *testing.T, open func() (device.Backend, error)) {
	for _, f := range registry.Families {
		t.Run(f.Name, func(t *testing.T) {
			b, err := open()
			if err != nil {
				t.Fatal(err)
			}
			gateFamily(t, b, filepath.Join("../..", f.Fixture))
		})
	}
}

// gateFamily is the model gate on backend b for every case recorded in dir/oracle.
func gateFamily(t *testing.T, b device.Backend, dir string) {
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Fatalf("%s has no tokenizer.json: run make testdata", dir)
	}
	cases, err := filepath.Glob(filepath.Join(dir, "oracle", "*.safetensors"))
	if err != nil || len(cases) == 0 {
		t.Fatalf("%s/oracle holds no cases (%v)", dir, err)
	}
	fe, e := openEngine(t, dir, b, gateLimits)
	for _, c := range cases {
		name := strings.TrimSuffix(filepath.Base(c), ".safetensors")
		t.Run(name, func(t *testing.T) {
			var oc oracleCase
			readJSON(t, filepath.Join(dir, "oracle", name+".json"), &oc)
			ref := readSafetensors(t, c)
			p := chatPrompt(t, fe, e, filepath.Join(dir, "oracle"), oc.Images, oc.Messages)
			if d := cmp.Diff(oc.PromptIDs, p.IDs); d != "" {
				t.Fatalf("prompt ids (-transformers +tfc)\n%s", d)
			}
			if px, ok := ref["pixel_values"]; ok {
				if d := maxAbsDiff(px, p.Pixels); d > pixelBound {
					t.Errorf("pixel_values differ from transformers' by up to %g", d)
				}
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
					got := float64(steps[i][id])
					worst = max(worst, math.Abs(got-st.Logits[k]))
					if math.Abs(got-st.Logits[k]) > logitTol(st.Logits[k]) {
						t.Errorf("step %d: logit of id %d is %.7f, transformers %.7f (bound %.3g)", i, id, got, st.Logits[k], logitTol(st.Logits[k]))
					}
				}
			}
			t.Logf("%s: %d prompt ids, %d output ids (%s), equal to transformers': %v; top-5 logits of %d steps within %.3g",
				b.Name(), len(p.IDs), len(res.OutputIDs), res.FinishReason, cmp.Equal(oc.OutputIDs, res.OutputIDs), min(len(oc.Top5), len(steps)), worst)
		})
	}
}

// gateLimits are the limits the model gates open a checkpoint with.
var gateLimits = model.Limits{Context: 512, Parallel: 1, Rows: 64, PageSize: 16, Patches: 2048}

// openEngine loads the checkpoint in dir on b at limits l, closed when the test ends.
func openEngine(t *testing.T, dir string, b device.Backend, l model.Limits) (*engine.Frontend, *engine.Engine) {
	t.Helper()
	fe, err := engine.LoadFrontend(dir)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(dir, b, l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return fe, e
}

// chatPrompt builds the prompt of an oracle chat whose pictures are files under imageDir.
func chatPrompt(t *testing.T, fe *engine.Frontend, e *engine.Engine, imageDir string, images []string, messages json.RawMessage) engine.Prompt {
	t.Helper()
	var files [][]byte
	for _, p := range images {
		data, err := os.ReadFile(filepath.Join(imageDir, p))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, data)
	}
	imgs, err := fe.Images(files)
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := fe.Build(stripImagePaths(t, messages), imgs, e.Info.ImageToken, e.Info.Merge, chattemplate.Options{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func firstDifference(oc oracleCase, got []int32) string {
	for i := range oc.OutputIDs {
		if i >= len(got) || got[i] != oc.OutputIDs[i] {
			m := math.NaN()
			if i < len(oc.Margins) {
				m = oc.Margins[i]
			}
			return fmt.Sprintf("first difference at step %d; transformers' top-2 margin there is %.6g", i, m)
		}
	}
	return ""
}

// stripImagePaths turns the oracle's {"type":"image","image":path} parts into {"type":"image"}.
func stripImagePaths(t *testing.T, raw json.RawMessage) []byte {
	var msgs []map[string]any
	if err := json.Unmarshal(raw, &msgs); err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if parts, ok := m["content"].([]any); ok {
			for _, p := range parts {
				if pm, ok := p.(map[string]any); ok && pm["type"] == "image" {
					delete(pm, "image")
				}
			}
		}
	}
	out, err := json.Marshal(msgs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func readJSON(t *testing.T, path string, v any) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// readSafetensors reads the F32 tensors of a small safetensors file as flat slices.
func readSafetensors(t *testing.T, path string) map[string][]float32 {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(data)
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(data[8:8+n], &hdr); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string][]float32{}
	for name, raw := range hdr {
		var e struct {
			DType   string   `json:"dtype"`
			Offsets [2]int64 `json:"data_offsets"`
		}
		if name == "__metadata__" || json.Unmarshal(raw, &e) != nil || e.DType != "F32" {
			continue
		}
		b := data[8+int64(n)+e.Offsets[0] : 8+int64(n)+e.Offsets[1]]
		v := make([]float32, len(b)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		out[name] = v
	}
	return out
}

func maxAbsDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var m float64
	for i := range a {
		d := math.Abs(float64(a[i]) - float64(b[i]))
		if d != d {
			return math.Inf(1)
		}
		m = max(m, d)
	}
	return m
}

// TestGenerateJSON runs `tfc generate --json` on the one-image case and checks its output object.
func TestGenerateJSON(t *testing.T) {
	var oc oracleCase
	readJSON(t, filepath.Join(tinyQwen2VL, "oracle", "image1.json"), &oc)
	out, err := runTFC(t, "generate", "--model", tinyQwen2VL, "--image", filepath.Join(tinyQwen2VL, "oracle", "images", "a.png"),
		"--prompt", "What is in this picture?", "--max-tokens", "24", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got generateOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("--json printed %q: %v", out, err)
	}
	if d := cmp.Diff(oc.PromptIDs, got.PromptIDs); d != "" {
		t.Errorf("prompt ids (-transformers +tfc)\n%s", d)
	}
	if d := cmp.Diff(oc.OutputIDs, got.OutputIDs); d != "" {
		t.Errorf("output ids (-transformers +tfc)\n%s", d)
	}
	if got.FinishReason != "stop" || got.TokenSHA256 != TokenSHA256(oc.OutputIDs) || got.Text == "" {
		t.Errorf("finish %q, sha %s (want %s), text %q", got.FinishReason, got.TokenSHA256, TokenSHA256(oc.OutputIDs), got.Text)
	}
}
