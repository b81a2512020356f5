package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// checkpointDir writes the synthetic tokenizer.json of synthetic() with the given added tokens and
// a tokenizer_config.json with the given added_tokens_decoder into one directory.
func checkpointDir(t *testing.T, added []map[string]any, decoder map[string]any) string {
	t.Helper()
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[string(byteToRune[b])] = b
	}
	vocab["ab"] = 256
	f := map[string]any{
		"added_tokens":  added,
		"pre_tokenizer": byteLevelOnly,
		"decoder":       map[string]any{"type": "ByteLevel"},
		"model":         map[string]any{"type": "BPE", "vocab": vocab, "merges": []string{"a b"}},
	}
	dir := t.TempDir()
	for name, v := range map[string]any{"tokenizer.json": f, "tokenizer_config.json": map[string]any{"added_tokens_decoder": decoder}} {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestConfigAddsMissingTokens(t *testing.T) {
	dir := checkpointDir(t,
		[]map[string]any{{"id": 300, "content": "<s>", "special": true}},
		map[string]any{
			"300": map[string]any{"content": "<s>", "special": true},
			"302": map[string]any{"content": "<pad>", "special": true},
			"301": map[string]any{"content": "<x>", "special": false, "rstrip": true},
		})
	tok, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() != 303 {
		t.Errorf("VocabSize = %d, want 303", tok.VocabSize())
	}
	for content, want := range map[string]int{"<s>": 300, "<x>": 301, "<pad>": 302} {
		if id, err := tok.SpecialID(content); err != nil || id != want {
			t.Errorf("SpecialID(%q) = %d, %v; want %d", content, id, err, want)
		}
	}
	if !tok.IsSpecial(302) || tok.IsSpecial(301) {
		t.Errorf("special flags not taken from the config: 302 %v, 301 %v", tok.IsSpecial(302), tok.IsSpecial(301))
	}
	if got, want := tok.Encode("ab<pad><x> ab<s>"), []int{256, 302, 301, 256, 300}; !slices.Equal(got, want) {
		t.Errorf("Encode = %v, want %v (config tokens matched, rstrip honoured)", got, want)
	}
	if got := tok.Decode([]int{256, 302, 301}, false); got != "ab<pad><x>" {
		t.Errorf("Decode = %q", got)
	}
	if got := tok.Decode([]int{256, 302, 301}, true); got != "ab<x>" {
		t.Errorf("Decode skipping special = %q", got)
	}
}

func TestConfigTokenClashNamesTheFile(t *testing.T) {
	cases := map[string]struct {
		added   []map[string]any
		decoder map[string]any
	}{
		"id held by another added token": {
			[]map[string]any{{"id": 300, "content": "<think>", "special": false}},
			map[string]any{"300": map[string]any{"content": "<|imgpad|>", "special": true}},
		},
		"id inside the vocabulary": {
			nil,
			map[string]any{"97": map[string]any{"content": "<|imgpad|>", "special": true}},
		},
		"token under another id": {
			[]map[string]any{{"id": 300, "content": "<|imgpad|>", "special": true}},
			map[string]any{"301": map[string]any{"content": "<|imgpad|>", "special": true}},
		},
	}
	for name, c := range cases {
		_, err := Load(checkpointDir(t, c.added, c.decoder))
		if err == nil || !strings.Contains(err.Error(), "tokenizer_config.json") || !strings.Contains(err.Error(), "<|imgpad|>") {
			t.Errorf("%s: Load error %v, want one naming tokenizer_config.json and the token", name, err)
		}
	}
}

func TestConfigBadDecoderIsNamed(t *testing.T) {
	dir := checkpointDir(t, nil, nil)
	os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(`{"added_tokens_decoder": {"x": {"content": "<a>"}}}`), 0o644)
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "tokenizer_config.json") {
		t.Errorf("non-integer key: %v", err)
	}
}
