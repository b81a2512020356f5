package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const dotsDir = "../../testdata/dots-ocr-tiny"

// TestDotsOCRCheckpointIDs loads the dots.ocr fixture: tools/testdata.sh's tokenizer.json (the
// Qwen one without Qwen3's tokens at 151665-151668) plus the checkpoint's tokenizer_config.json,
// whose added_tokens_decoder supplies dots.ocr's own tokens, and checks the oracle's prompt ids.
func TestDotsOCRCheckpointIDs(t *testing.T) {
	if _, err := os.Stat(filepath.Join(dotsDir, "tokenizer.json")); err != nil {
		t.Fatalf("%v: run `make testdata` (tools/testdata.sh) from the repository root", err)
	}
	tok, err := Load(dotsDir)
	if err != nil {
		t.Fatal(err)
	}
	for content, want := range map[string]int{"<|endoftext|>": 151643, "<|imgpad|>": 151665, "<|img|>": 151666,
		"<|endofimg|>": 151667, "<|user|>": 151670, "<|endofuser|>": 151671, "<|assistant|>": 151672,
		"<|endofassistant|>": 151673, "[PAD]": 151680, "<|image_gen_end|>": 151687} {
		if id, err := tok.SpecialID(content); err != nil || id != want || !tok.IsSpecial(id) {
			t.Errorf("SpecialID(%q) = %d, %v (special %v); want special %d", content, id, err, tok.IsSpecial(id), want)
		}
	}
	if _, err := tok.SpecialID("<think>"); err == nil {
		t.Errorf("Qwen3's <think> is still an added token in the dots.ocr tokenizer")
	}
	cases, err := filepath.Glob(filepath.Join(dotsDir, "oracle", "*.json"))
	if err != nil || len(cases) < 4 {
		t.Fatalf("oracle cases %v, %v", cases, err)
	}
	for _, path := range cases {
		if filepath.Base(path) == "manifest.json" {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			PromptText  string `json:"prompt_text"`
			ImageTokens []int  `json:"image_token_counts"`
			PromptIDs   []int  `json:"prompt_ids"`
			OutputIDs   []int  `json:"output_ids"`
			OutputText  string `json:"output_text"`
		}
		if err := json.Unmarshal(data, &c); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		parts := strings.Split(c.PromptText, "<|imgpad|>")
		if len(parts)-1 != len(c.ImageTokens) {
			t.Fatalf("%s: %d <|imgpad|> for %d images", path, len(parts)-1, len(c.ImageTokens))
		}
		expanded := parts[0]
		for i, n := range c.ImageTokens {
			expanded += strings.Repeat("<|imgpad|>", n) + parts[i+1]
		}
		if got := tok.Encode(expanded); !slices.Equal(got, c.PromptIDs) {
			t.Errorf("%s: prompt ids\n got %v\nwant %v", filepath.Base(path), got, c.PromptIDs)
		}
		if got := tok.Decode(c.OutputIDs, false); got != c.OutputText {
			t.Errorf("%s: output decodes to %q, want %q", filepath.Base(path), got, c.OutputText)
		}
	}
}
