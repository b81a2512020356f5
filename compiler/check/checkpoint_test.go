package check

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"tfc/compiler/ir"
)

// tinyCheckpoint is the tiny Qwen2-VL checkpoint transformers 5.17 saved (see its README).
const tinyCheckpoint = "../../testdata/qwen2-vl-tiny"

// TestQwen2VLWeightsMatchCheckpoint binds graphs/qwen2_vl.graph's config to the tiny checkpoint's
// config.json and checks that the weight templates expand to exactly the checkpoint's tensors,
// with the declared shapes.
func TestQwen2VLWeightsMatchCheckpoint(t *testing.T) {
	cfgData, err := os.ReadFile(filepath.Join(tinyCheckpoint, "config.json"))
	if err != nil {
		t.Fatalf("%v: the tiny checkpoint under testdata/qwen2-vl-tiny is part of the repository", err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(cfgData, &cfg); err != nil {
		t.Fatal(err)
	}
	m := checkFile(t, "../../graphs/qwen2_vl.graph", "graphs/qwen2_vl.graph")
	env, bools := bind(t, m, cfg)
	have := checkpointShapes(t)

	want := map[string][]int64{}
	for _, p := range m.Prefixes {
		alt := pickPrefix(m, p, have)
		if alt == "" {
			t.Fatalf("no alternative of prefix %s (%v) has its tensors in the checkpoint", p.Name, p.Alternatives)
		}
		for _, w := range m.Weights {
			if w.Prefix == p {
				expand(t, w, alt, env, bools, want)
			}
		}
	}
	for _, w := range m.Weights {
		if w.Prefix == nil {
			expand(t, w, "", env, bools, want)
		}
	}
	if d := cmp.Diff(sortedKeys(have), sortedKeys(want)); d != "" {
		t.Errorf("tensor names (-checkpoint +graph):\n%s", d)
	}
	for name, shape := range want {
		if got, ok := have[name]; ok && !cmp.Equal(got, shape) {
			t.Errorf("%s: checkpoint shape %v, graph shape %v", name, got, shape)
		}
	}
}

// bind reads the module's config values from cfg the way the generated glue does: the first
// present path, else the default; derived ints evaluated.
func bind(t *testing.T, m *ir.Module, cfg map[string]any) (ir.MapEnv, map[string]bool) {
	env := ir.MapEnv{Ints: map[string]int64{}, Lists: map[string][]int64{}}
	bools := map[string]bool{}
	for _, c := range m.Config {
		if c.Derived != nil {
			if c.Type == ir.Int {
				v, err := c.Derived.Dim.Eval(env)
				if err != nil {
					t.Fatalf("%s: %v", c.Name, err)
				}
				env.Ints[c.Name] = v
			}
			continue
		}
		var raw any
		found := false
		for _, p := range c.Paths {
			if raw, found = lookup(cfg, p); found {
				break
			}
		}
		if !found {
			if c.Default == nil {
				t.Fatalf("config value %s: none of %v in config.json", c.Name, c.Paths)
			}
			env.Ints[c.Name], bools[c.Name], env.Lists[c.Name] = c.Default.Int, c.Default.Bool, c.Default.Ints
			continue
		}
		switch c.Type {
		case ir.Int:
			env.Ints[c.Name] = int64(raw.(float64))
		case ir.Bool:
			bools[c.Name] = raw.(bool)
		case ir.IntList:
			for _, x := range raw.([]any) {
				env.Lists[c.Name] = append(env.Lists[c.Name], int64(x.(float64)))
			}
		}
	}
	for _, r := range m.Requires {
		if r.Cond != nil || r.Name != "" {
			continue
		}
		l, err1 := r.Left.Eval(env)
		rt, err2 := r.Right.Eval(env)
		if err1 != nil || err2 != nil || !holds(r.Op, l-rt) {
			t.Errorf("require %s fails on the checkpoint (%d, %d, %v, %v)", r.Src, l, rt, err1, err2)
		}
	}
	return env, bools
}

func lookup(cfg map[string]any, path string) (any, bool) {
	var cur any = cfg
	for _, part := range strings.Split(path, ".") {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = obj[part]; !ok || cur == nil {
			return nil, false
		}
	}
	return cur, true
}

// checkpointShapes reads every tensor's shape from the safetensors headers.
func checkpointShapes(t *testing.T) map[string][]int64 {
	files, _ := filepath.Glob(filepath.Join(tinyCheckpoint, "*.safetensors"))
	if len(files) == 0 {
		t.Fatal("no safetensors files in testdata/qwen2-vl-tiny")
	}
	out := map[string][]int64{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n := binary.LittleEndian.Uint64(data[:8])
		var header map[string]json.RawMessage
		if err := json.Unmarshal(data[8:8+n], &header); err != nil {
			t.Fatal(err)
		}
		for name, raw := range header {
			if name == "__metadata__" {
				continue
			}
			var info struct{ Shape []int64 }
			if err := json.Unmarshal(raw, &info); err != nil {
				t.Fatal(err)
			}
			out[name] = info.Shape
		}
	}
	return out
}

// pickPrefix is the first alternative under which the checkpoint has some tensor of p.
func pickPrefix(m *ir.Module, p *ir.Prefix, have map[string][]int64) string {
	for _, alt := range p.Alternatives {
		for _, w := range m.Weights {
			if w.Prefix == p {
				if _, ok := have[w.TensorName(alt, 0)]; ok {
					return alt
				}
			}
		}
	}
	return ""
}

func expand(t *testing.T, w *ir.Weight, alt string, env ir.MapEnv, bools map[string]bool, out map[string][]int64) {
	if w.Cond != nil && bools[w.Cond.Name] == w.Cond.Not {
		return
	}
	var shape []int64
	for _, d := range w.Shape {
		v, err := d.Eval(env)
		if err != nil {
			t.Fatalf("%s: %v", w.Name, err)
		}
		shape = append(shape, v)
	}
	layers := int64(1)
	if w.Layered() {
		var err error
		if layers, err = w.Count.Eval(env); err != nil {
			t.Fatal(err)
		}
	}
	for l := 0; l < int(layers); l++ {
		out[w.TensorName(alt, l)] = shape
	}
}

func sortedKeys(m map[string][]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// publishedConfig is the layout of Qwen2-VL-2B-Instruct's config.json as published before
// transformers 5: text values at the top level, rotary values under rope_scaling, in_chans.
const publishedConfig = `{
  "architectures": ["Qwen2VLForConditionalGeneration"],
  "model_type": "qwen2_vl",
  "hidden_size": 1536, "intermediate_size": 8960, "num_attention_heads": 12,
  "num_hidden_layers": 28, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0, "vocab_size": 151936, "tie_word_embeddings": true,
  "image_token_id": 151655, "vision_start_token_id": 151652,
  "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
  "vision_config": {"depth": 32, "embed_dim": 1280, "mlp_ratio": 4, "num_heads": 16, "in_chans": 3,
    "hidden_size": 1536, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2}
}`

// TestQwen2VLBindsPublishedConfig binds the published layout and checks the values and requires.
func TestQwen2VLBindsPublishedConfig(t *testing.T) {
	var cfg map[string]any
	if err := json.Unmarshal([]byte(publishedConfig), &cfg); err != nil {
		t.Fatal(err)
	}
	m := checkFile(t, "../../graphs/qwen2_vl.graph", "graphs/qwen2_vl.graph")
	env, bools := bind(t, m, cfg)
	want := map[string]int64{"D": 1536, "L": 28, "H": 12, "KV": 2, "F": 8960, "V": 151936, "HD": 128,
		"VD": 1280, "VL": 32, "VH": 16, "VHD": 80, "VF": 5120, "C": 3, "P": 14, "TP": 2, "M": 2, "MD": 5120, "VO": 1536}
	for name, v := range want {
		if env.Ints[name] != v {
			t.Errorf("%s = %d, want %d", name, env.Ints[name], v)
		}
	}
	if !cmp.Equal(env.Lists["sect"], []int64{16, 24, 24}) || !bools["tied"] {
		t.Errorf("sect %v tied %v", env.Lists["sect"], bools["tied"])
	}
}
