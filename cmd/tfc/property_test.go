package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tfc/contracts"
	"tfc/contracts/sweep"
	"tfc/runtime/chattemplate"
	"tfc/runtime/checkpoint"
	"tfc/runtime/device/cpu"
	"tfc/runtime/engine"
	"tfc/runtime/model"
	"tfc/runtime/sample"
)

// randomSet draws config values a family's require lines allow: head dims 8 to 128, 1 to 6
// query heads a KV head, random M-RoPE sections, odd widths, tied or untied heads, 1 to 3 layers.
func randomSet(family string, rng *rand.Rand) map[string]any {
	pick := func(xs ...int) int { return xs[rng.IntN(len(xs))] }
	kv := 1 + rng.IntN(3)
	h := kv * (1 + rng.IntN(6))
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
// float64 reference on the CPU with every planted control red, and the whole forward runs an
// image prompt at those shapes (random weights) without error.
func TestRandomConfigs(t *testing.T) {
	seed := uint64(20261203)
	if testing.Short() {
		t.Skip("random configs take about a minute")
	}
	for _, fx := range []struct{ family, fixture string }{{"qwen2_vl", "qwen2-vl-tiny"}, {"dots_ocr", "dots-ocr-tiny"}} {
		rng := rand.New(rand.NewPCG(seed, uint64(len(fx.family))))
		for i := 0; i < 5; i++ {
			set := randomSet(fx.family, rng)
			t.Run(fmt.Sprintf("%s-%d", fx.family, i), func(t *testing.T) {
				c := sweep.Config{Name: "random", Fixture: fx.fixture, Seed: seed + uint64(i), Set: set}
				cfgJSON, err := c.ConfigJSON(testdata)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("config %s", summary(set))
				cfg, err := checkpoint.ParseConfig("config.json", cfgJSON)
				if err != nil {
					t.Fatal(err)
				}
				fam, err := model.Pick(cfg.ModelType(), cfg.Architectures())
				if err != nil {
					t.Fatal(err)
				}
				if _, err := fam.Bind(cfg); err != nil {
					t.Fatalf("a config the require lines allow is refused: %v", err)
				}
				f, err := contracts.ForCheckpoint(fam.Name, "../..", cfg, 16)
				if err != nil {
					t.Fatalf("specialising: %v", err)
				}
				if _, err := contracts.Sources(f); err != nil {
					t.Fatalf("rendering: %v", err)
				}
				target, _, done, err := contractTarget("cpu", f)
				if err != nil {
					t.Fatal(err)
				}
				defer done()
				if r := contracts.Run(target, f, int64(seed)+int64(i), io.Discard); !r.OK() {
					t.Fatalf("contract: %s", r.Summary())
				}
				runRandom(t, c, cfgJSON)
			})
		}
	}
}

// runRandom writes a checkpoint of c with seeded weights and generates four tokens for an image
// prompt on the CPU: the forward runs at the config's shapes.
func runRandom(t *testing.T, c sweep.Config, cfgJSON []byte) {
	dir := t.TempDir()
	f := &sweep.File{Images: []sweep.Picture{{Name: "p.png", W: 71, H: 45, Model: "rgb", Seed: 9}},
		Cases: map[string]sweep.Case{"one": {Images: []string{"p.png"}}}}
	c.Cases = []string{"one"}
	if _, err := f.Write(c, testdata, dir); err != nil {
		t.Fatal(err)
	}
	fe, err := engine.LoadFrontend(dir)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(dir, cpu.New(), model.Limits{Context: 256, Parallel: 1, Rows: 32, PageSize: 16, Patches: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	data, err := os.ReadFile(filepath.Join(dir, "images", "p.png"))
	if err != nil {
		t.Fatal(err)
	}
	imgs, err := fe.Images([][]byte{data})
	if err != nil {
		t.Fatal(err)
	}
	msgs := []byte(`[{"role":"user","content":[{"type":"image"},{"type":"text","text":"Read this."}]}]`)
	p, _, err := fe.Build(msgs, imgs, e.Info.ImageToken, e.Info.Merge, chattemplate.Options{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Generate(p, engine.Options{MaxTokens: 4, Sample: sample.Params{}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.OutputIDs) == 0 {
		t.Fatal("no output")
	}
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
		cfg, err := checkpoint.ParseConfig("config.json", cfgJSON)
		if err != nil {
			t.Fatal(err)
		}
		fam, err := model.Pick(cfg.ModelType(), cfg.Architectures())
		if err != nil {
			t.Fatal(err)
		}
		_, err = fam.Bind(cfg)
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("%s %v: refused: %v", tc.fixture, tc.set, err)
		case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
			t.Errorf("%s %v: got %v, want a refusal containing %q", tc.fixture, tc.set, err, tc.refused)
		}
	}
}
