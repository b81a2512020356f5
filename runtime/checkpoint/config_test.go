package checkpoint_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"tfc/runtime/checkpoint"
)

// hubConfig keeps text parameters at the top level, as Qwen2-VL checkpoints on the Hub do.
const hubConfig = `{
  "architectures": ["Qwen2VLForConditionalGeneration"],
  "model_type": "qwen2_vl",
  "hidden_size": 1536,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "max_position_embeddings": 32768.0,
  "tie_word_embeddings": true,
  "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
  "vision_config": {"embed_dim": 1280, "mean": [0.48, 0.45, 0.40], "name": "vit"},
  "sliding_window": null,
  "eos_token_id": 151645,
  "big": 12345678901234567890,
  "frac": 2.5
}`

func parse(t *testing.T, text string) *checkpoint.Config {
	t.Helper()
	c, err := checkpoint.ParseConfig("config.json", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestConfigTypedAccess(t *testing.T) {
	c := parse(t, hubConfig)
	if v, err := c.Int("text_config.hidden_size|hidden_size"); err != nil || v != 1536 {
		t.Errorf("Int with fallback = %d, %v", v, err)
	}
	if v, err := c.Int("max_position_embeddings"); err != nil || v != 32768 {
		t.Errorf("Int of 32768.0 = %d, %v", v, err)
	}
	if v, err := c.Float("rms_norm_eps"); err != nil || v != 1e-6 {
		t.Errorf("Float = %v, %v", v, err)
	}
	if v, err := c.Float("hidden_size"); err != nil || v != 1536 {
		t.Errorf("Float of an integer = %v, %v", v, err)
	}
	if v, err := c.Bool("tie_word_embeddings"); err != nil || !v {
		t.Errorf("Bool = %v, %v", v, err)
	}
	if v, err := c.String("vision_config.name"); err != nil || v != "vit" {
		t.Errorf("String = %q, %v", v, err)
	}
	if v, err := c.IntList("rope_scaling.mrope_section"); err != nil || !reflect.DeepEqual(v, []int{16, 24, 24}) {
		t.Errorf("IntList = %v, %v", v, err)
	}
	if v, err := c.Int("rope_scaling.mrope_section.1"); err != nil || v != 24 {
		t.Errorf("list index = %v, %v", v, err)
	}
	if v, err := c.FloatList("vision_config.mean"); err != nil || !reflect.DeepEqual(v, []float64{0.48, 0.45, 0.40}) {
		t.Errorf("FloatList = %v, %v", v, err)
	}
	if v, err := c.IntOrList("eos_token_id"); err != nil || !reflect.DeepEqual(v, []int{151645}) {
		t.Errorf("IntOrList = %v, %v", v, err)
	}
	if !c.Has("vision_config.embed_dim") || c.Has("sliding_window") || c.Has("text_config.hidden_size") || c.Has("hidden_size.x") {
		t.Error("Has is wrong about embed_dim, a null, a missing object or a path through a number")
	}
	if _, key, ok := c.Lookup("text_config.hidden_size|hidden_size"); !ok || key != "hidden_size" {
		t.Errorf("Lookup resolved to %q", key)
	}
	if c.ModelType() != "qwen2_vl" || !reflect.DeepEqual(c.Architectures(), []string{"Qwen2VLForConditionalGeneration"}) {
		t.Errorf("ModelType %q, Architectures %v", c.ModelType(), c.Architectures())
	}
}

func TestConfigErrorsNameFileAndKey(t *testing.T) {
	c := parse(t, hubConfig)
	cases := []struct {
		get  func() error
		want string
	}{
		{func() error { _, err := c.Int("text_config.num_hidden_layers|num_hidden_layers"); return err },
			"config.json: text_config.num_hidden_layers: is not set (nor num_hidden_layers)"},
		{func() error { _, err := c.Int("frac"); return err }, "config.json: frac: is 2.5 (a number), want an integer"},
		{func() error { _, err := c.Int("big"); return err }, "config.json: big: is 12345678901234567890 (a number), want an integer"},
		{func() error { _, err := c.Int("vision_config.name"); return err }, `config.json: vision_config.name: is "vit" (a string), want an integer`},
		{func() error { _, err := c.Bool("hidden_size"); return err }, "config.json: hidden_size: is 1536 (a number), want true or false"},
		{func() error { _, err := c.String("rope_scaling"); return err }, "config.json: rope_scaling: is an object, want a string"},
		{func() error { _, err := c.IntList("vision_config.mean"); return err }, "config.json: vision_config.mean.0: is 0.48 (a number), want an integer"},
		{func() error { _, err := c.FloatList("hidden_size"); return err }, "config.json: hidden_size: is 1536 (a number), want a list of numbers"},
		{func() error { _, err := c.Float("sliding_window"); return err }, "config.json: sliding_window: is not set"},
	}
	for _, tc := range cases {
		err := tc.get()
		var ce *checkpoint.ConfigError
		if err == nil || !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("error %v, want prefix %q", err, tc.want)
		}
	}
}

func TestConfigSyntaxErrors(t *testing.T) {
	cases := []struct{ text, want string }{
		{`{"a": {"b": [1, 2,]}}`, "config.json: invalid JSON at line 1, column 19, in key a.b"},
		{"{\n\"a\": 1\n\"b\": 2}", "config.json: invalid JSON at line 3"},
		{`{"a": {"b": 1}`, "the file ends in the middle of the JSON"},
		{`[1, 2]`, "config.json: is not a JSON object"},
		{`{"a": 1} {}`, "data after the top-level object"},
		{``, "config.json: invalid JSON at line 1, column 1, at the top level"},
	}
	for _, tc := range cases {
		_, err := checkpoint.ParseConfig("config.json", []byte(tc.text))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseConfig(%q) error %v, want %q", tc.text, err, tc.want)
		}
	}
}

func TestPick(t *testing.T) {
	c := parse(t, hubConfig)
	if got, err := checkpoint.Pick(c, []string{"glm_ocr", "qwen2_vl"}); err != nil || got != "qwen2_vl" {
		t.Errorf("Pick by model_type = %q, %v", got, err)
	}
	if got, err := checkpoint.Pick(c, []string{"Qwen2VLForConditionalGeneration"}); err != nil || got != "Qwen2VLForConditionalGeneration" {
		t.Errorf("Pick by architecture = %q, %v", got, err)
	}
	_, err := checkpoint.Pick(c, []string{"glm_ocr", "qwen2_5_vl"})
	want := `config.json: model_type "qwen2_vl" and architectures Qwen2VLForConditionalGeneration: no family of this tfc reads it; supported: glm_ocr, qwen2_5_vl`
	if err == nil || err.Error() != want {
		t.Errorf("Pick error %v, want %q", err, want)
	}
	_, err = checkpoint.Pick(parse(t, `{}`), nil)
	if err == nil || !strings.Contains(err.Error(), "no model_type") || !strings.Contains(err.Error(), "supported: none") {
		t.Errorf("Pick on an empty config: %v", err)
	}
}
