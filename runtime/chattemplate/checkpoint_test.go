package chattemplate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"tfc/runtime/tokenizer"
)

// TestTinyCheckpointPrompts renders and tokenizes the prompts of the tiny Qwen2-VL checkpoint's
// oracle cases end to end, from the checkpoint directory as the server would.
func TestTinyCheckpointPrompts(t *testing.T) {
	dir := "../../testdata/qwen2-vl-tiny"
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Fatalf("%v: run `make testdata` (tools/testdata.sh) from the repository root", err)
	}
	tmpl, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	imagePad, err := tok.SpecialID("<|image_pad|>")
	if err != nil {
		t.Fatal(err)
	}
	cases, _ := filepath.Glob(filepath.Join(dir, "oracle", "*.json"))
	n := 0
	for _, path := range cases {
		var c struct {
			Messages   json.RawMessage `json:"messages"`
			PromptText string          `json:"prompt_text"`
			PromptIDs  []int           `json:"prompt_ids"`
			OutputIDs  []int           `json:"output_ids"`
			OutputText string          `json:"output_text"`
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &c); err != nil || c.Messages == nil {
			continue // not a generation case (the manifest)
		}
		n++
		prompt, err := tmpl.RenderJSON(c.Messages, Options{AddGenerationPrompt: true})
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if prompt != c.PromptText {
			t.Errorf("%s: prompt\n got %q\nwant %q", path, prompt, c.PromptText)
		}
		// The processor repeats <|image_pad|> once per merged patch; the text holds it once.
		want := slices.CompactFunc(slices.Clone(c.PromptIDs), func(a, b int) bool { return a == imagePad && b == imagePad })
		if got := tok.Encode(prompt); !slices.Equal(got, want) {
			t.Errorf("%s: prompt ids\n got %v\nwant %v", path, got, want)
		}
		if got := tok.Decode(c.OutputIDs, false); got != c.OutputText {
			t.Errorf("%s: output text %q, want %q", path, got, c.OutputText)
		}
	}
	if n == 0 {
		t.Fatalf("no oracle cases with messages under %s/oracle", dir)
	}
}
