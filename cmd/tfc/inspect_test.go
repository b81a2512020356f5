package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tfc/runtime/checkpoint/checkpointtest"
)

// runTFC runs the CLI in-process and returns its output and error.
func runTFC(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	stdout := os.Stdout
	r, w, _ := os.Pipe()
	os.Stdout = w
	err := root.Execute()
	w.Close()
	os.Stdout = stdout
	var piped bytes.Buffer
	piped.ReadFrom(r)
	return piped.String() + out.String(), err
}

func TestInspectTinyQwen2VL(t *testing.T) {
	out, err := runTFC(t, "inspect", tinyQwen2VL, "--context", "1024", "--parallel", "2")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"family      qwen2_vl", "visual.blocks.1.attn.qkv.weight", "kv cache", "eos ids     [151645 151643]"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}
}

// TestInspectFrom checks that the "from" column names the one path a value was read from.
func TestInspectFrom(t *testing.T) {
	out, err := runTFC(t, "inspect", tinyQwen2VL)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"KV": "text_config.num_key_value_heads", "theta": "text_config.rope_parameters.rope_theta", "HD": "="}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && want[f[0]] != "" {
			if f[2] != want[f[0]] {
				t.Errorf("%s read from %q, want %q", f[0], f[2], want[f[0]])
			}
			delete(want, f[0])
		}
	}
	if len(want) > 0 {
		t.Errorf("no config lines for %v:\n%s", want, out)
	}
}

func TestInspectRefusesTruncatedShard(t *testing.T) {
	dir := t.TempDir()
	checkpointtest.CopyDir(t, dir, tinyQwen2VL)
	checkpointtest.Truncate(t, dir, "model-00002-of-00002.safetensors", 1000)
	_, err := runTFC(t, "inspect", dir)
	if err == nil || !strings.Contains(err.Error(), "model-00002-of-00002.safetensors") {
		t.Fatalf("want a refusal naming the truncated shard, got %v", err)
	}
}

func TestInspectRefusesRenamedTensor(t *testing.T) {
	dir := t.TempDir()
	checkpointtest.CopyDir(t, dir, tinyQwen2VL)
	checkpointtest.RenameTensor(t, dir, "model-00002-of-00002.safetensors", "model.layers.1.mlp.up_proj.weight", "model.layers.1.mlp.upp_proj.weight")
	_, err := runTFC(t, "inspect", dir)
	if err == nil {
		t.Fatal("inspect accepted a checkpoint with a renamed tensor")
	}
	for _, want := range []string{"model.layers.1.mlp.up_proj.weight", "missing", "model.layers.1.mlp.upp_proj.weight", "unexpected"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal lacks %q:\n%v", want, err)
		}
	}
}

func TestInspectRefusesUnknownFamily(t *testing.T) {
	dir := t.TempDir()
	checkpointtest.CopyDir(t, dir, tinyQwen2VL)
	cfg, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg = bytes.ReplaceAll(cfg, []byte(`"model_type": "qwen2_vl"`), []byte(`"model_type": "llava"`))
	cfg = bytes.ReplaceAll(cfg, []byte(`"Qwen2VLForConditionalGeneration"`), []byte(`"LlavaForConditionalGeneration"`))
	checkpointtest.WriteFile(t, dir, "config.json", cfg)
	_, err = runTFC(t, "inspect", dir)
	if err == nil || !strings.Contains(err.Error(), "llava") || !strings.Contains(err.Error(), "qwen2_vl") {
		t.Fatalf("want a refusal naming llava and the supported families, got %v", err)
	}
}

func TestInspectRefusesUnsupportedActivation(t *testing.T) {
	dir := t.TempDir()
	checkpointtest.CopyDir(t, dir, tinyQwen2VL)
	cfg, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg = bytes.Replace(cfg, []byte(`"hidden_act": "silu"`), []byte(`"hidden_act": "gelu"`), 1)
	checkpointtest.WriteFile(t, dir, "config.json", cfg)
	_, err = runTFC(t, "inspect", dir)
	if err == nil || !strings.Contains(err.Error(), `act == "silu"`) || !strings.Contains(err.Error(), "act = gelu") {
		t.Fatalf("want a refusal naming hidden_act, got %v", err)
	}
}

type hasPaths map[string]bool

func (h hasPaths) Has(p string) bool { return h[p] }

func TestReadFrom(t *testing.T) {
	for _, c := range []struct {
		has         hasPaths
		paths, want string
	}{
		{hasPaths{"b": true}, "a|b", "b"},
		{hasPaths{"a": true, "b": true}, "a|b", "a"},
		{hasPaths{}, "a|b", "default (none of a|b)"},
		{hasPaths{}, "= D / H", "= D / H"},
	} {
		if got := readFrom(c.has, c.paths); got != c.want {
			t.Errorf("readFrom(%v, %q) = %q, want %q", c.has, c.paths, got, c.want)
		}
	}
}
