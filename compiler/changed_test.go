package compiler_test

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"tfc/runtime/checkpoint"
	ct "tfc/runtime/checkpoint/checkpointtest"
	"tfc/runtime/engine"
	"tfc/runtime/model"
	"tfc/runtime/positions"
)

// changedConfig is the tiny checkpoint's config.json with every value the kernels fold in
// changed (the decoder's width, heads, KV heads, FFN, vocabulary, eps, rope theta and sections;
// the tower's width, heads, MLP ratio and rope theta) but the patch geometry the image processor
// fixes, with the placeholder ids moved into the smaller vocabulary. Head sizes stay multiples of
// 16, which the fused rope kernels need.
func changedConfig(t *testing.T) []byte {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal(readFile(t, configTiny), &cfg); err != nil {
		t.Fatal(err)
	}
	text := cfg["text_config"].(map[string]any)
	text["hidden_size"] = 192
	text["intermediate_size"] = 160
	text["num_hidden_layers"] = 3
	text["num_attention_heads"] = 6
	text["num_key_value_heads"] = 1
	text["vocab_size"] = 4096
	text["rms_norm_eps"] = 1e-5
	text["rope_parameters"] = map[string]any{"mrope_section": []int{4, 6, 6}, "rope_theta": 500000.0, "rope_type": "default"}
	vision := cfg["vision_config"].(map[string]any)
	vision["embed_dim"] = 96
	vision["num_heads"] = 3
	vision["depth"] = 1
	vision["mlp_ratio"] = 2
	vision["hidden_size"] = 192
	vision["rope_parameters"] = map[string]any{"rope_theta": 5000.0, "rope_type": "axial"}
	cfg["image_token_id"] = 4000
	cfg["vision_start_token_id"] = 4001
	cfg["vision_end_token_id"] = 4002
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// changedQwen2VL writes a Qwen2-VL checkpoint of changedConfig with seeded random BF16 weights
// into a temporary folder and returns the folder.
func changedQwen2VL(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cfgJSON := changedConfig(t)
	cfg, err := checkpoint.ParseConfig("config.json", cfgJSON)
	if err != nil {
		t.Fatal(err)
	}
	_, bound, err := engine.Bind(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := bound.Resolve(func(string) bool { return true }); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(6, 2026))
	var tensors []ct.Tensor
	for _, spec := range bound.Manifest() {
		n := 1
		for _, d := range spec.Shape {
			n *= d
		}
		scale := 0.5 / math.Sqrt(float64(spec.Shape[len(spec.Shape)-1]))
		base := 0.0
		if strings.Contains(spec.Name, "norm") && strings.HasSuffix(spec.Name, ".weight") {
			base, scale = 1, 0.1
		}
		data := make([]byte, 2*n)
		for i := 0; i < n; i++ {
			v := float32(base + scale*(2*rng.Float64()-1))
			binary.LittleEndian.PutUint16(data[2*i:], uint16(math.Float32bits(v)>>16))
		}
		tensors = append(tensors, ct.Tensor{Name: spec.Name, DType: "BF16", Shape: spec.Shape, Data: data})
	}
	ct.WriteFile(t, dir, "config.json", cfgJSON)
	ct.WriteFile(t, dir, "model.safetensors", ct.Safetensors(tensors, map[string]string{"format": "pt"}))
	return dir
}

// changedPrompt is a prompt for changedQwen2VL: text ids, one image of 4x4 patches (4 rows
// after the merge) of seeded random pixels, more text.
func changedPrompt() engine.Prompt {
	ids := []int32{11, 12, 4001, 4000, 4000, 4000, 4000, 4002, 13, 14, 15}
	rng := rand.New(rand.NewPCG(7, 2026))
	pixels := make([]float32, 16*3*2*14*14)
	for i := range pixels {
		pixels[i] = float32(2*rng.Float64() - 1)
	}
	return engine.Prompt{IDs: ids, Pixels: pixels, Grids: []positions.Grid{{1, 4, 4}}}
}

// changedLimits are the limits the changed checkpoint is loaded with.
var changedLimits = model.Limits{Context: 64, Parallel: 1, Rows: 64, Patches: 64, PageSize: 16}
