package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"tfc/compiler/emit/hip"
	"tfc/contracts"
	"tfc/contracts/sweep"
	"tfc/runtime/checkpoint"
	"tfc/runtime/device"
	"tfc/runtime/device/cpu"
	"tfc/runtime/engine"
	"tfc/runtime/model"
	"tfc/runtime/sample"
)

// randomSet draws config values a family's require lines allow: head dims 8 to 128, ratio query
// heads a KV head, random M-RoPE sections, odd widths, tied or untied heads, 1 to 3 layers.
func randomSet(family string, ratio int, rng *rand.Rand) map[string]any {
	pick := func(xs ...int) int { return xs[rng.IntN(len(xs))] }
	kv := 1 + rng.IntN(3)
	h := kv * ratio
	hd := pick(8, 12, 16, 20, 24, 32, 40, 48, 64, 80, 96, 128)
	d := h * hd
	f := 8 + rng.IntN(150)
	l := 1 + rng.IntN(3)
	tied := rng.IntN(2) == 0
	vh := 1 + rng.IntN(4)
	vd := vh * pick(8, 12, 16, 20, 24, 32, 48, 64, 80, 128)
	if family == "dots_ocr" {
		return map[string]any{"hidden_size": d, "num_attention_heads": h, "num_key_value_heads": kv, "intermediate_size": f,
			"num_hidden_layers": l, "max_window_layers": l, "tie_word_embeddings": tied, "rope_theta": pick(10000, 1000000),
			"vision_config": map[string]any{"embed_dim": vd, "hidden_size": d, "intermediate_size": 8 + rng.IntN(150),
				"num_hidden_layers": 1 + rng.IntN(2), "num_attention_heads": vh}}
	}
	// three positive sections summing to hd/2
	a := 1 + rng.IntN(hd/2-2)
	b := 1 + rng.IntN(hd/2-a-1)
	layers := make([]any, l)
	for i := range layers {
		layers[i] = "full_attention"
	}
	return map[string]any{"tie_word_embeddings": tied,
		"text_config": map[string]any{"hidden_size": d, "num_attention_heads": h, "num_key_value_heads": kv,
			"intermediate_size": f, "num_hidden_layers": l, "tie_word_embeddings": tied, "layer_types": layers,
			"rope_parameters": map[string]any{"mrope_section": []int{a, b, hd/2 - a - b}, "rope_theta": pick(10000, 1000000)}},
		"vision_config": map[string]any{"embed_dim": vd, "num_heads": vh, "mlp_ratio": 1 + rng.IntN(4), "depth": 1 + rng.IntN(2),
			"hidden_size": d, "rope_parameters": map[string]any{"rope_theta": pick(5000, 10000)}}}
}

// TestRandomConfigs: for random configs that satisfy a family's require lines, binding and
// specialising succeed, every kernel specialised for the config passes gates 1-4 against its
// float64 reference on the CPU with every planted control red, and the CPU's whole forward on an
// image prompt (random weights) gives the ids and logits of the graph's float64 reference.
func TestRandomConfigs(t *testing.T) {
	seed := uint64(20261203)
	if testing.Short() {
		t.Skip("random configs take about a minute")
	}
	for _, fx := range []struct{ family, fixture string }{{"qwen2_vl", "qwen2-vl-tiny"}, {"dots_ocr", "dots-ocr-tiny"}} {
		rng := rand.New(rand.NewPCG(seed, uint64(len(fx.family))))
		for i := 0; i < 6; i++ {
			set := randomSet(fx.family, 1+i, rng) // GQA ratios 1 to 6
			t.Run(fmt.Sprintf("%s-%d", fx.family, i), func(t *testing.T) {
				c := sweep.Config{Name: "random", Fixture: fx.fixture, Seed: seed + uint64(i), Set: set}
				cfgJSON, err := c.ConfigJSON(testdata)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("config %s", summary(set))
				fam, cfg, err := bindConfig(t, cfgJSON)
				if err != nil {
					t.Fatalf("a config the require lines allow is refused: %v", err)
				}
				f, err := contracts.ForCheckpoint(fam.Name, "../..", cfg, 16)
				if err != nil {
					t.Fatalf("specialising: %v", err)
				}
				if _, err := contracts.Sources(f); err != nil {
					t.Fatalf("rendering: %v", err)
				}
				target, _, done, err := contractTarget("cpu", device.F32Precision, f)
				if err != nil {
					t.Fatal(err)
				}
				defer done()
				if r := contracts.Run(target, f, int64(seed)+int64(i), io.Discard); !r.OK() {
					t.Fatalf("contract: %s", r.Summary())
				}
				control := ""
				if i == 0 {
					for _, k := range f.Kernels {
						if strings.HasSuffix(k.Name, "_decode_attention") {
							control = k.Name
						}
					}
				}
				runRandom(t, c, control)
			})
		}
	}
}

// runRandom writes a checkpoint of c with seeded weights and generates six tokens for an image
// prompt on the CPU backend and on the float64 reference of the graph (contracts.ReferenceBackend
// over the CPU's memory): the ids must be equal up to a tie and every step's logits close. When
// control names a kernel, the CPU with that kernel's scale dropped must fail the same comparison.
func runRandom(t *testing.T, c sweep.Config, control string) {
	dir := t.TempDir()
	f := &sweep.File{Images: []sweep.Picture{{Name: "p.png", W: 71, H: 45, Model: "rgb", Seed: 9}},
		Cases: map[string]sweep.Case{"one": {Images: []string{"p.png"}}}}
	c.Cases = []string{"one"}
	if _, err := f.Write(c, testdata, dir); err != nil {
		t.Fatal(err)
	}
	refIDs, refSteps := generateOn(t, dir, contracts.ReferenceBackend{Backend: cpu.New()})
	cpuIDs, cpuSteps := generateOn(t, dir, cpu.New())
	worst, err := againstReference(cpuIDs, cpuSteps, refIDs, refSteps)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d ids equal to the float64 reference's; logits within %.3g of the largest", len(refIDs), worst)
	if control == "" {
		return
	}
	bad, err := contracts.HostPlant(cpu.New(), contracts.Control{Kernel: control, Mutation: hip.DroppedScale.String()})
	if err != nil {
		t.Fatal(err)
	}
	ids, steps := generateOn(t, dir, bad)
	if _, err := againstReference(ids, steps, refIDs, refSteps); err == nil {
		t.Errorf("control: the CPU with %s's scale dropped matches the float64 reference", control)
	} else {
		t.Logf("control red: %v", err)
	}
}

// againstReference compares greedy ids and each step's logits with the reference's: ids equal up
// to a step where the reference's top-2 margin is a tie at the bound, logits within randomBound
// of the step's largest; it returns the largest relative difference.
func againstReference(ids []int32, steps [][]float32, refIDs []int32, refSteps [][]float32) (float64, error) {
	worst := 0.0
	for i := range refIDs {
		if i >= len(steps) {
			return worst, fmt.Errorf("%d steps, the reference %d", len(steps), len(refSteps))
		}
		top, second := top2(refSteps[i])
		scale := math.Max(1, math.Abs(float64(refSteps[i][top])))
		for j := range refSteps[i] {
			worst = math.Max(worst, math.Abs(float64(steps[i][j]-refSteps[i][j]))/scale)
		}
		if worst > randomBound {
			return worst, fmt.Errorf("step %d: logits differ from the float64 reference by %.3g of the largest (bound %g)", i, worst, randomBound)
		}
		if i >= len(ids) || ids[i] != refIDs[i] {
			if m := float64(refSteps[i][top] - refSteps[i][second]); m < 2*randomBound*scale {
				return worst, nil // a tie: the runs may part here
			}
			return worst, fmt.Errorf("greedy ids %v, float64 reference %v", ids, refIDs)
		}
	}
	return worst, nil
}

// randomBound bounds the CPU's logits against the float64 reference, relative to the largest.
const randomBound = 1e-5

// generateOn runs the image prompt on backend b and returns the greedy ids and each step's logits.
func generateOn(t *testing.T, dir string, b device.Backend) ([]int32, [][]float32) {
	fe, e := openEngine(t, dir, b, model.Limits{Context: 256, Parallel: 1, Rows: 32, PageSize: 16, Patches: 512})
	msgs := []byte(`[{"role":"user","content":[{"type":"image","image":"p.png"},{"type":"text","text":"Read this."}]}]`)
	p := chatPrompt(t, fe, e, filepath.Join(dir, "images"), []string{"p.png"}, msgs)
	var steps [][]float32
	res, err := e.Generate(p, engine.Options{MaxTokens: 6, Sample: sample.Params{},
		Step: func(_ int, logits []float32) { steps = append(steps, append([]float32(nil), logits...)) }})
	if err != nil {
		t.Fatal(err)
	}
	return res.OutputIDs, steps
}

// top2 returns the indices of the largest and second largest values.
func top2(v []float32) (int, int) {
	a, b := 0, 1
	if v[b] > v[a] {
		a, b = b, a
	}
	for i := 2; i < len(v); i++ {
		switch {
		case v[i] > v[a]:
			a, b = i, a
		case v[i] > v[b]:
			b = i
		}
	}
	return a, b
}

// bindConfig picks the family of a config.json and binds it; err is the refusal.
func bindConfig(t *testing.T, cfgJSON []byte) (*model.Family, *checkpoint.Config, error) {
	t.Helper()
	cfg, err := checkpoint.ParseConfig("config.json", cfgJSON)
	if err != nil {
		t.Fatal(err)
	}
	fam, _, err := engine.Bind(cfg)
	return fam, cfg, err
}

// summary prints a config's values on one line.
func summary(set map[string]any) string {
	b, _ := json.Marshal(set)
	return strings.ReplaceAll(string(b), `"`, "")
}

// TestRopeScalingRefused: a rotary scaling the graphs do not compute is refused by name, with the
// require's file:line; plain M-RoPE is accepted under both of its names.
func TestRopeScalingRefused(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		set     map[string]any
		refused string // "" when accepted
	}{
		{"qwen2-vl-tiny", map[string]any{"text_config": map[string]any{"rope_parameters": map[string]any{"rope_type": "yarn"}}},
			`requires rtype == "default" (graphs/qwen2_vl.graph:`},
		{"qwen2-vl-tiny", map[string]any{"text_config": map[string]any{"rope_parameters": nil, "rope_scaling": map[string]any{"type": "mrope", "mrope_section": []int{2, 3, 3}}}}, ""},
		{"qwen2-vl-tiny", map[string]any{"text_config": map[string]any{"rope_parameters": nil, "rope_scaling": map[string]any{"type": "dynamic", "mrope_section": []int{2, 3, 3}}}},
			`requires rstype == "mrope" (graphs/qwen2_vl.graph:`},
		{"dots-ocr-tiny", map[string]any{"rope_scaling": map[string]any{"type": "linear", "factor": 2.0}}, `requires rtype == "default" (graphs/dots_ocr.graph:`},
		{"dots-ocr-tiny", map[string]any{"rope_scaling": map[string]any{"rope_type": "default"}}, ""},
	} {
		c := sweep.Config{Fixture: tc.fixture, Set: tc.set}
		cfgJSON, err := c.ConfigJSON(testdata)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = bindConfig(t, cfgJSON)
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("%s %v: refused: %v", tc.fixture, tc.set, err)
		case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
			t.Errorf("%s %v: got %v, want a refusal containing %q", tc.fixture, tc.set, err, tc.refused)
		}
	}
}

// TestReferenceBackendGate: the graph's float64 reference, run whole, gives the publishers' ids
// and logits on the tiny fixtures (the reference TestRandomConfigs holds the CPU to).
func TestReferenceBackendGate(t *testing.T) {
	gateFixtures(t, func() (device.Backend, error) { return contracts.ReferenceBackend{Backend: cpu.New()}, nil })
}
