package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// synthetic writes a byte-level BPE tokenizer.json with one merge ("a" "b") and the given
// added tokens, and loads it. Byte b has id b; "ab" is 256; added tokens follow.
func synthetic(t *testing.T, preTokenizer any, added []map[string]any) *Tokenizer {
	t.Helper()
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[string(byteToRune[b])] = b
	}
	vocab["ab"] = 256
	f := map[string]any{
		"added_tokens":   added,
		"normalizer":     map[string]any{"type": "NFC"},
		"pre_tokenizer":  preTokenizer,
		"post_processor": map[string]any{"type": "ByteLevel"},
		"decoder":        map[string]any{"type": "ByteLevel"},
		"model":          map[string]any{"type": "BPE", "vocab": vocab, "merges": []string{"a b"}},
	}
	data, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

var byteLevelOnly = map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}

func TestAddedTokenFlags(t *testing.T) {
	tok := synthetic(t, byteLevelOnly, []map[string]any{
		{"id": 300, "content": "<L>", "lstrip": true, "special": true},
		{"id": 301, "content": "<R>", "rstrip": true, "special": true},
		{"id": 302, "content": "w", "single_word": true},
		{"id": 303, "content": "<LL>", "special": true},
	})
	cases := []struct {
		text string
		want []int
	}{
		{"ab <L> ab", []int{256, 300, ' ', 256}},        // lstrip swallows the space before
		{"ab <R> ab", []int{256, ' ', 301, 256}},        // rstrip swallows the space after
		{"ab\t\n <L>", []int{256, 300}},                 // any whitespace
		{"w aw w", []int{302, ' ', 'a', 'w', ' ', 302}}, // single_word: not inside a word
		{"<LL><L>", []int{303, 300}},                    // longest match at the same start
	}
	for _, c := range cases {
		if got := tok.Encode(c.text); !slices.Equal(got, c.want) {
			t.Errorf("Encode(%q) = %v, want %v", c.text, got, c.want)
		}
	}
}

func TestGPT2RegexThroughRegexp2(t *testing.T) {
	tok := synthetic(t, map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}, nil)
	if _, ok := tok.split.(regexSplitter); !ok {
		t.Fatalf("GPT-2 style pre-tokenizer uses %T, want the regexp2 splitter", tok.split)
	}
	var pieces []string
	tok.split.split("Hello world's  123 ab", func(p string) { pieces = append(pieces, p) })
	want := []string{"Hello", " world", "'s", " ", " 123", " ab"}
	if !slices.Equal(pieces, want) {
		t.Errorf("pieces %q, want %q", pieces, want)
	}
	if got := tok.Encode(" ab"); !slices.Equal(got, []int{' ', 256}) {
		t.Errorf("Encode(\" ab\") = %v", got)
	}
}

func TestUnsupportedTokenizerIsNamed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	os.WriteFile(path, []byte(`{"model": {"type": "Unigram", "vocab": {}}, "pre_tokenizer": {"type": "Metaspace"}}`), 0o644)
	if _, err := LoadFile(path); err == nil {
		t.Fatalf("a Unigram tokenizer loaded without error")
	}
}
