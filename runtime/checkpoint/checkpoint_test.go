package checkpoint_test

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"tfc/runtime/checkpoint"
	ct "tfc/runtime/checkpoint/checkpointtest"
)

func bf16(vals ...float32) []byte {
	b := make([]byte, 2*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(math.Float32bits(v)>>16))
	}
	return b
}

func tinyTensors() []ct.Tensor {
	return []ct.Tensor{
		{Name: "model.embed_tokens.weight", DType: "BF16", Shape: []int{4, 2}, Data: bf16(1, 2, 3, 4, 5, 6, 7, -8)},
		{Name: "model.layers.0.input_layernorm.weight", DType: "F32", Shape: []int{2}},
		{Name: "model.layers.0.mlp.up_proj.weight", DType: "F16", Shape: []int{3, 2}},
		{Name: "model.norm.weight", DType: "BF16", Shape: []int{2}},
	}
}

func manifest() []checkpoint.TensorSpec {
	return []checkpoint.TensorSpec{
		{Name: "model.embed_tokens.weight", Shape: []int{4, 2}, DTypes: []checkpoint.DType{checkpoint.BF16}},
		{Name: "model.layers.0.input_layernorm.weight", Shape: []int{2}},
		{Name: "model.layers.0.mlp.up_proj.weight", Shape: []int{3, 2}, DTypes: []checkpoint.DType{checkpoint.F16, checkpoint.BF16}},
		{Name: "model.norm.weight", Shape: []int{2}},
	}
}

func shardedDir(t *testing.T) string {
	dir := t.TempDir()
	ts := tinyTensors()
	ct.Sharded(t, dir, map[string][]ct.Tensor{
		"model-00001-of-00002.safetensors": ts[:2],
		"model-00002-of-00002.safetensors": ts[2:],
	})
	return dir
}

func open(t *testing.T, dir string) *checkpoint.Checkpoint {
	t.Helper()
	c, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestOpenSingle(t *testing.T) {
	dir := t.TempDir()
	ct.Single(t, dir, tinyTensors())
	c := open(t, dir)
	if ps := c.Check(manifest()); len(ps) != 0 {
		t.Fatalf("Check: %v", checkpoint.Problems(ps))
	}
	if c.Index != "" || !reflect.DeepEqual(c.WeightFiles(), []string{"model.safetensors"}) {
		t.Errorf("Index %q, WeightFiles %v", c.Index, c.WeightFiles())
	}
	if got, want := c.TotalBytes(), int64(16+8+12+4); got != want {
		t.Errorf("TotalBytes = %d, want %d", got, want)
	}
	if c.ModelType() != "qwen2_vl" || !reflect.DeepEqual(c.Architectures(), []string{"Qwen2VLForConditionalGeneration"}) {
		t.Errorf("ModelType %q, Architectures %v", c.ModelType(), c.Architectures())
	}
	if got := c.Metadata()["model.safetensors"]["format"]; got != "pt" {
		t.Errorf("metadata format = %q", got)
	}
	tensor, err := c.Tensor("model.embed_tokens.weight")
	if err != nil {
		t.Fatal(err)
	}
	if tensor.File != "model.safetensors" || tensor.DType != checkpoint.BF16 || !reflect.DeepEqual(tensor.Shape, []int{4, 2}) {
		t.Errorf("tensor = %+v", tensor)
	}
	dst := make([]float32, 8)
	if err := checkpoint.ToFloat32(dst, tensor); err != nil {
		t.Fatal(err)
	}
	if want := []float32{1, 2, 3, 4, 5, 6, 7, -8}; !reflect.DeepEqual(dst, want) {
		t.Errorf("ToFloat32 = %v, want %v", dst, want)
	}
	if err := checkpoint.ToFloat32(dst[:7], tensor); err == nil {
		t.Error("ToFloat32 into a short slice succeeded")
	}
	if _, err := c.Tensor("lm_head.weight"); err == nil || !strings.Contains(err.Error(), "lm_head.weight") {
		t.Errorf("Tensor(lm_head.weight) error = %v", err)
	}
	g := c.Generation
	if g.Source != "generation_config.json" || !reflect.DeepEqual(g.EOS, []int{151645, 151643}) || *g.BOS != 151643 || *g.Pad != 151643 ||
		*g.Temperature != 0.01 || *g.TopP != 0.001 || *g.TopK != 1 || g.RepetitionPenalty != nil || g.DoSample != nil {
		t.Errorf("Generation = %+v", g)
	}
}

func TestOpenSharded(t *testing.T) {
	c := open(t, shardedDir(t))
	if ps := c.Check(manifest()); len(ps) != 0 {
		t.Fatalf("Check: %v", checkpoint.Problems(ps))
	}
	if c.Index != "model.safetensors.index.json" || len(c.WeightFiles()) != 2 {
		t.Errorf("Index %q, WeightFiles %v", c.Index, c.WeightFiles())
	}
	up, err := c.Tensor("model.layers.0.mlp.up_proj.weight")
	if err != nil {
		t.Fatal(err)
	}
	if up.File != "model-00002-of-00002.safetensors" || up.DType != checkpoint.F16 || len(up.Data) != 12 {
		t.Errorf("tensor = %+v", up)
	}
	want := ct.Tensor{Name: up.Name, DType: "F16", Shape: []int{3, 2}}.Bytes()
	if string(up.Data) != string(want) {
		t.Errorf("data = %v, want %v", up.Data, want)
	}
	// Without generation_config.json the EOS id comes from config.json's text_config.
	if g := c.Generation; g.Source != "config.json" || !reflect.DeepEqual(g.EOS, []int{151645}) || g.Temperature != nil {
		t.Errorf("Generation = %+v", g)
	}
}

// wantOpenError opens dir and checks that the refusal mentions every fragment.
func wantOpenError(t *testing.T, dir string, fragments ...string) {
	t.Helper()
	c, err := checkpoint.Open(dir)
	if err == nil {
		c.Close()
		t.Fatalf("Open succeeded, want an error naming %q", fragments)
	}
	t.Log(err)
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q does not mention %q", err, f)
		}
	}
}

func TestOpenRefusals(t *testing.T) {
	const shard2 = "model-00002-of-00002.safetensors"
	cases := []struct {
		name      string
		make      func(t *testing.T) string
		fragments []string
	}{
		{"truncated shard", func(t *testing.T) string {
			dir := shardedDir(t)
			ct.Truncate(t, dir, shard2, 3)
			return dir
		}, []string{shard2, "tensor model.norm.weight", "truncated"}},
		{"truncated into the header", func(t *testing.T) string {
			dir := t.TempDir()
			ct.Single(t, dir, tinyTensors())
			ct.Truncate(t, dir, "model.safetensors", 60)
			return dir
		}, []string{"model.safetensors", "header length", "past the end of the file"}},
		{"file shorter than the length prefix", func(t *testing.T) string {
			dir := t.TempDir()
			ct.Single(t, dir, tinyTensors())
			ct.WriteFile(t, dir, "model.safetensors", []byte{1, 2, 3})
			return dir
		}, []string{"model.safetensors", "3 bytes", "truncated"}},
		{"header length past EOF", func(t *testing.T) string {
			dir := t.TempDir()
			ct.Single(t, dir, tinyTensors())
			b := binary.LittleEndian.AppendUint64(nil, 1<<40)
			ct.WriteFile(t, dir, "model.safetensors", append(b, `{}`...))
			return dir
		}, []string{"model.safetensors", "header length 1099511627776 runs past the end"}},
		{"overlapping offsets", func(t *testing.T) string {
			dir := t.TempDir()
			ct.Single(t, dir, nil)
			ct.WriteFile(t, dir, "model.safetensors", ct.Raw([]byte(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`), make([]byte, 8)))
			return dir
		}, []string{"model.safetensors", "tensor b", "overlap", "tensor a"}},
		{"hole between tensors", func(t *testing.T) string {
			dir := t.TempDir()
			ct.Single(t, dir, nil)
			ct.WriteFile(t, dir, "model.safetensors", ct.Raw([]byte(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`), make([]byte, 12)))
			return dir
		}, []string{"model.safetensors", "tensor b", "4 unclaimed bytes"}},
		{"bytes after the last tensor", func(t *testing.T) string {
			dir := t.TempDir()
			ct.Single(t, dir, nil)
			ct.WriteFile(t, dir, "model.safetensors", ct.Raw([]byte(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`), make([]byte, 9)))
			return dir
		}, []string{"model.safetensors", "5 bytes follow the last tensor"}},
		{"size does not match shape", func(t *testing.T) string {
			dir := t.TempDir()
			ct.Single(t, dir, nil)
			ct.WriteFile(t, dir, "model.safetensors", ct.Raw([]byte(`{"a":{"dtype":"BF16","shape":[3],"data_offsets":[0,4]}}`), make([]byte, 4)))
			return dir
		}, []string{"model.safetensors", "tensor a", "needs 6 bytes", "hold 4"}},
		{"bad dtype", func(t *testing.T) string {
			dir := t.TempDir()
			ct.Single(t, dir, []ct.Tensor{{Name: "model.rotary.inv_freq", DType: "I64", Shape: []int{4}}})
			return dir
		}, []string{"model.safetensors", "tensor model.rotary.inv_freq", "dtype I64", "BF16, F16 or F32"}},
		{"header not JSON", func(t *testing.T) string {
			dir := t.TempDir()
			ct.Single(t, dir, nil)
			ct.WriteFile(t, dir, "model.safetensors", ct.Raw([]byte(`{"a":{"dtype":"F32",`), nil))
			return dir
		}, []string{"model.safetensors", "not valid JSON"}},
		{"index names a missing shard", func(t *testing.T) string {
			dir := shardedDir(t)
			if err := os.Remove(filepath.Join(dir, shard2)); err != nil {
				t.Fatal(err)
			}
			return dir
		}, []string{shard2, "model.safetensors.index.json places 2 tensors", "the directory does not have it", "download it"}},
		{"index places a tensor in the wrong shard", func(t *testing.T) string {
			dir := shardedDir(t)
			ct.WriteJSON(t, dir, "model.safetensors.index.json", map[string]any{"weight_map": map[string]string{
				"model.embed_tokens.weight":             "model-00001-of-00002.safetensors",
				"model.layers.0.input_layernorm.weight": shard2,
				"model.layers.0.mlp.up_proj.weight":     shard2,
				"model.norm.weight":                     shard2,
			}})
			return dir
		}, []string{"model-00001-of-00002.safetensors: tensor model.layers.0.input_layernorm.weight", "places it in " + shard2}},
		{"index lists a tensor no shard holds", func(t *testing.T) string {
			dir := shardedDir(t)
			ct.RenameInFile(t, dir, shard2, "model.norm.weight", "model.final_norm.weight")
			return dir
		}, []string{shard2 + ": tensor model.final_norm.weight: not listed", shard2 + ": tensor model.norm.weight", "does not hold it"}},
		{"tensor in two shards", func(t *testing.T) string {
			dir := t.TempDir()
			ts := tinyTensors()
			ct.Sharded(t, dir, map[string][]ct.Tensor{"a.safetensors": ts[:2], "b.safetensors": ts[1:]})
			return dir
		}, []string{"b.safetensors: tensor model.layers.0.input_layernorm.weight: also in a.safetensors"}},
		{"index with a path outside the directory", func(t *testing.T) string {
			dir := shardedDir(t)
			ct.WriteJSON(t, dir, "model.safetensors.index.json", map[string]any{"weight_map": map[string]string{"x": "../x.safetensors"}})
			return dir
		}, []string{"model.safetensors.index.json: weight_map.x", "../x.safetensors"}},
		{"no config", func(t *testing.T) string {
			dir := t.TempDir()
			ct.Single(t, dir, tinyTensors())
			os.Remove(filepath.Join(dir, "config.json"))
			return dir
		}, []string{"has no config.json"}},
		{"malformed config", func(t *testing.T) string {
			dir := t.TempDir()
			ct.Single(t, dir, tinyTensors())
			ct.WriteFile(t, dir, "config.json", []byte("{\n  \"model_type\": \"qwen2_vl\",\n  \"text_config\": {\"hidden_size\": 8,, \"x\": 1}\n}\n"))
			return dir
		}, []string{"config.json", "line 3", "text_config", "invalid JSON"}},
		{"malformed generation config", func(t *testing.T) string {
			dir := t.TempDir()
			ct.Single(t, dir, tinyTensors())
			ct.WriteJSON(t, dir, "generation_config.json", map[string]any{"eos_token_id": "<|im_end|>"})
			return dir
		}, []string{"generation_config.json", "eos_token_id", "an integer or a list of integers"}},
		{"no weights", func(t *testing.T) string {
			dir := t.TempDir()
			ct.WriteJSON(t, dir, "config.json", ct.Config())
			return dir
		}, []string{"has no weights", "model.safetensors"}},
		{"pytorch weights only", func(t *testing.T) string {
			dir := t.TempDir()
			ct.WriteJSON(t, dir, "config.json", ct.Config())
			ct.WriteFile(t, dir, "pytorch_model.bin", []byte("x"))
			return dir
		}, []string{"pytorch_model.bin", "safetensors weights only"}},
		{"not a directory", func(t *testing.T) string {
			dir := t.TempDir()
			ct.WriteFile(t, dir, "f", nil)
			return filepath.Join(dir, "f")
		}, []string{"not a directory"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { wantOpenError(t, tc.make(t), tc.fragments...) })
	}
}

func TestOpenReportsEveryBrokenShard(t *testing.T) {
	dir := shardedDir(t)
	ct.Truncate(t, dir, "model-00001-of-00002.safetensors", 1)
	ct.Truncate(t, dir, "model-00002-of-00002.safetensors", 1)
	wantOpenError(t, dir, "model-00001-of-00002.safetensors: tensor model.layers.0.input_layernorm.weight", "model-00002-of-00002.safetensors: tensor model.norm.weight")
	_, err := checkpoint.Open(dir)
	var oe *checkpoint.OpenError
	var fe *checkpoint.FileError
	if !errors.As(err, &oe) || len(oe.Errs) != 2 || oe.Dir != dir || !errors.As(err, &fe) || fe.File != "model-00001-of-00002.safetensors" {
		t.Errorf("error %#v is not an OpenError of two FileErrors", err)
	}
}

func TestCheckProblems(t *testing.T) {
	dir := shardedDir(t)
	const shard1, shard2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
	ct.RenameTensor(t, dir, shard2, "model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.upproj.weight")
	c := open(t, dir)
	m := manifest()
	m[0].Shape = []int{5, 2}                                                         // shape mismatch
	m[1].DTypes = []checkpoint.DType{checkpoint.BF16}                                // F32 in the file
	m = append(m, checkpoint.TensorSpec{Name: "lm_head.weight", Shape: []int{4, 2}}) // missing, no look-alike
	got := c.Check(m)
	want := []string{
		shard1 + ": tensor model.embed_tokens.weight: shape [4, 2], want [5, 2]; config.json and the weights disagree",
		shard1 + ": tensor model.layers.0.input_layernorm.weight: dtype F32, want BF16",
		shard2 + ": tensor model.layers.0.mlp.up_proj.weight: missing; the family needs it with shape [3, 2] (F16 or BF16); " +
			shard2 + " has the unexpected tensor model.layers.0.mlp.upproj.weight of that shape: was it renamed?",
		"model.safetensors.index.json: tensor lm_head.weight: missing; the family needs it with shape [4, 2] (BF16, F16 or F32)",
		shard2 + ": tensor model.layers.0.mlp.upproj.weight: unexpected (shape [3, 2], F16); the family does not use it, so the checkpoint is not the family's or its names differ",
	}
	var lines []string
	for _, p := range got {
		lines = append(lines, p.String())
	}
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("Check:\n got %s\nwant %s", strings.Join(lines, "\n     "), strings.Join(want, "\n     "))
	}
	kinds := []checkpoint.ProblemKind{checkpoint.ShapeMismatch, checkpoint.DTypeRefused, checkpoint.Missing, checkpoint.Missing, checkpoint.Unexpected}
	for i, p := range got {
		if i < len(kinds) && p.Kind != kinds[i] {
			t.Errorf("problem %d kind %v, want %v", i, p.Kind, kinds[i])
		}
	}
}

func TestCheckRenamedSingleFile(t *testing.T) {
	dir := t.TempDir()
	ct.Single(t, dir, tinyTensors())
	ct.RenameTensor(t, dir, "model.safetensors", "model.norm.weight", "model.final_norm.weight")
	c := open(t, dir)
	ps := c.Check(manifest())
	if len(ps) != 2 {
		t.Fatalf("Check = %v, want missing + unexpected", checkpoint.Problems(ps))
	}
	if p := ps[0]; p.Kind != checkpoint.Missing || p.Tensor != "model.norm.weight" || p.File != "model.safetensors" || !strings.Contains(p.Hint, "model.final_norm.weight") {
		t.Errorf("problem 0 = %+v", p)
	}
	if p := ps[1]; p.Kind != checkpoint.Unexpected || p.Tensor != "model.final_norm.weight" || p.File != "model.safetensors" {
		t.Errorf("problem 1 = %+v", p)
	}
	if msg := checkpoint.Problems(ps).Error(); !strings.HasPrefix(msg, "2 tensor problems:") {
		t.Errorf("Problems.Error = %q", msg)
	}
}

func TestTensorAfterCloseIsRefused(t *testing.T) {
	dir := t.TempDir()
	ct.Single(t, dir, tinyTensors())
	c, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Tensor("model.norm.weight"); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Tensor after Close: %v", err)
	}
}

func TestSourceFiles(t *testing.T) {
	dir := t.TempDir()
	ct.Single(t, dir, tinyTensors())
	ct.WriteFile(t, dir, "tokenizer.json", []byte("abc"))
	os.Mkdir(filepath.Join(dir, ".cache"), 0o755)
	ct.WriteFile(t, dir, ".cache/lock", []byte("x"))
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	ct.WriteFile(t, dir, "sub/chat_template.jinja", nil)
	files, err := open(t, dir).Files()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
	}
	if want := []string{"config.json", "generation_config.json", "sub/chat_template.jinja", "tokenizer.json"}; !reflect.DeepEqual(names, want) {
		t.Errorf("names = %v, want %v", names, want)
	}
	for _, f := range files {
		switch f.Name {
		case "tokenizer.json":
			if f.SHA256 != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" || f.Size != 3 {
				t.Errorf("tokenizer.json: %+v", f)
			}
		case "sub/chat_template.jinja":
			if f.SHA256 != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
				t.Errorf("empty file: %+v", f)
			}
		}
	}
}

func TestHeaderWrittenByReferenceLayout(t *testing.T) {
	// A header whose JSON keys are not in offset order is valid: order comes from data_offsets.
	dir := t.TempDir()
	ct.Single(t, dir, nil)
	header, _ := json.Marshal(map[string]any{
		"z": map[string]any{"dtype": "F32", "shape": []int{1}, "data_offsets": []int{0, 4}},
		"a": map[string]any{"dtype": "F32", "shape": []int{}, "data_offsets": []int{4, 8}},
		"e": map[string]any{"dtype": "BF16", "shape": []int{0, 3}, "data_offsets": []int{8, 8}},
	})
	ct.WriteFile(t, dir, "model.safetensors", ct.Raw(header, []byte{0, 0, 128, 63, 0, 0, 0, 64}))
	c := open(t, dir)
	if got := c.Names(); !reflect.DeepEqual(got, []string{"z", "a", "e"}) {
		t.Errorf("Names = %v", got)
	}
	a, _ := c.Tensor("a")
	dst := make([]float32, 1)
	if err := checkpoint.ToFloat32(dst, a); err != nil || dst[0] != 2 {
		t.Errorf("scalar a = %v, %v", dst, err)
	}
}
