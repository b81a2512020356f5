// Package checkpointtest writes small Hugging Face checkpoints, whole or deliberately broken,
// for tests of code that opens them.
package checkpointtest

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"tfc/runtime/checkpoint"
)

// Tensor is one tensor to write. DType is the safetensors name ("BF16", "F16", "F32", or any
// other to write a file tfc must refuse). Nil Data is filled with a pattern of the right size.
type Tensor struct {
	Name  string
	DType string
	Shape []int
	Data  []byte
}

// ElementSize is the byte size of a safetensors dtype name.
func ElementSize(dtype string) int {
	switch dtype {
	case "BOOL", "U8", "I8", "F8_E4M3", "F8_E5M2":
		return 1
	case "BF16", "F16", "I16", "U16":
		return 2
	case "F32", "I32", "U32":
		return 4
	}
	return 8
}

// Bytes returns the tensor's data: Data, or a deterministic pattern of the right size.
func (t Tensor) Bytes() []byte {
	if t.Data != nil {
		return t.Data
	}
	n := ElementSize(t.DType)
	for _, d := range t.Shape {
		n *= d
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + len(t.Name))
	}
	return b
}

// Safetensors encodes tensors as a safetensors file, in the order given.
func Safetensors(tensors []Tensor, metadata map[string]string) []byte {
	stored := make([]checkpoint.Stored, len(tensors))
	for i, t := range tensors {
		stored[i] = checkpoint.Stored{Name: t.Name, DType: t.DType, Shape: t.Shape, Data: t.Bytes()}
	}
	return checkpoint.Encode(stored, metadata)
}

// Raw encodes a safetensors file from its header text and data (checkpoint.EncodeRaw).
func Raw(header, data []byte) []byte { return checkpoint.EncodeRaw(header, data) }

// WriteFile writes data to dir/name.
func WriteFile(t testing.TB, dir, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// WriteJSON writes v as indented JSON to dir/name.
func WriteJSON(t testing.TB, dir, name string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	WriteFile(t, dir, name, b)
}

// Config is a small config.json of a Qwen2-VL checkpoint as transformers 5 writes it.
func Config() map[string]any {
	return map[string]any{
		"architectures": []string{"Qwen2VLForConditionalGeneration"},
		"model_type":    "qwen2_vl",
		"text_config": map[string]any{
			"model_type": "qwen2_vl_text", "hidden_size": 8, "num_hidden_layers": 2,
			"rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "eos_token_id": 151645,
			"rope_scaling": map[string]any{"type": "mrope", "mrope_section": []int{1, 1, 2}},
		},
		"vision_config":       map[string]any{"embed_dim": 16, "depth": 1, "spatial_merge_size": 2},
		"tie_word_embeddings": true,
	}
}

// Single writes a checkpoint with config.json, generation_config.json and one model.safetensors.
func Single(t testing.TB, dir string, tensors []Tensor) {
	t.Helper()
	WriteJSON(t, dir, "config.json", Config())
	WriteJSON(t, dir, "generation_config.json", map[string]any{"eos_token_id": []int{151645, 151643}, "bos_token_id": 151643, "pad_token_id": 151643, "temperature": 0.01, "top_p": 0.001, "top_k": 1})
	WriteFile(t, dir, "model.safetensors", Safetensors(tensors, map[string]string{"format": "pt"}))
}

// Sharded writes a checkpoint whose tensors are split over shards (file name to tensors)
// with a model.safetensors.index.json that lists them.
func Sharded(t testing.TB, dir string, shards map[string][]Tensor) {
	t.Helper()
	WriteJSON(t, dir, "config.json", Config())
	weightMap := map[string]string{}
	total := 0
	files := make([]string, 0, len(shards))
	for file := range shards {
		files = append(files, file)
	}
	sort.Strings(files)
	for _, file := range files {
		for _, tensor := range shards[file] {
			weightMap[tensor.Name] = file
			total += len(tensor.Bytes())
		}
		WriteFile(t, dir, file, Safetensors(shards[file], map[string]string{"format": "pt"}))
	}
	WriteJSON(t, dir, "model.safetensors.index.json", map[string]any{"metadata": map[string]any{"total_size": total}, "weight_map": weightMap})
}

// Truncate cuts the last drop bytes off dir/name.
func Truncate(t testing.TB, dir, name string, drop int64) {
	t.Helper()
	path := filepath.Join(dir, name)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, st.Size()-drop); err != nil {
		t.Fatal(err)
	}
}

// RenameTensor renames a tensor of the safetensors file dir/file, keeping its data, and in
// model.safetensors.index.json when there is one: a consistent checkpoint with a renamed tensor.
func RenameTensor(t testing.TB, dir, file, from, to string) {
	t.Helper()
	RenameInFile(t, dir, file, from, to)
	path := filepath.Join(dir, "model.safetensors.index.json")
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	var index map[string]any
	if err := json.Unmarshal(b, &index); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	weightMap, ok := index["weight_map"].(map[string]any)
	if !ok || weightMap[from] == nil {
		t.Fatalf("%s does not list %s", path, from)
	}
	weightMap[to] = weightMap[from]
	delete(weightMap, from)
	WriteJSON(t, dir, "model.safetensors.index.json", index)
}

// RenameInFile renames a tensor inside the safetensors file dir/file, keeping its data, and
// leaves any index as it was.
func RenameInFile(t testing.TB, dir, file, from, to string) {
	t.Helper()
	path := filepath.Join(dir, file)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 8 {
		t.Fatalf("%s is not a safetensors file", path)
	}
	n := binary.LittleEndian.Uint64(b)
	if n > uint64(len(b)-8) {
		t.Fatalf("%s is not a safetensors file", path)
	}
	var header map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &header); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	e, ok := header[from]
	if !ok {
		t.Fatalf("%s has no tensor %s", path, from)
	}
	delete(header, from)
	header[to] = e
	text, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, Raw(text, b[8+n:]), 0o644); err != nil {
		t.Fatal(err)
	}
}

// CopyDir copies the regular files of src into dst, which must exist.
func CopyDir(t testing.TB, dst, src string) {
	t.Helper()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		WriteFile(t, dst, e.Name(), b)
	}
}
