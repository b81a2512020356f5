// Package tokenizer is the byte-level BPE tokenizer of the Qwen family, read from a checkpoint's
// tokenizer.json and exact against Hugging Face tokenizers.
//
// Encoding runs the pipeline of tokenizer.json: added tokens matched first in the raw text
// (leftmost-longest, with their lstrip/rstrip/single_word flags), NFC normalization of what lies
// between them, the Split pre-tokenizer (Qwen's regex matched by hand; other patterns through
// regexp2), byte-level mapping and BPE merges by rank. Decoding maps tokens back to bytes and
// replaces invalid UTF-8 as Rust's from_utf8_lossy does; StreamDecoder emits text without ever
// splitting a character across chunks.
package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/text/unicode/norm"
)

// Tokenizer encodes text to token ids and back. It is safe for concurrent use.
type Tokenizer struct {
	model    *bpe
	split    splitter
	nfc      bool
	rawAdded *addedMatcher // added tokens matched in the raw text
	nrmAdded *addedMatcher // added tokens matched after normalization

	idToToken []string // vocabulary spelling (byte-level alphabet) or added-token content
	tokenToID map[string]int
	added     map[int]*AddedToken
	addedByS  map[string]*AddedToken
	rawBytes  [][]byte // what each id decodes to; nil for ids the vocabulary does not define

	Config Config // from tokenizer_config.json, when the checkpoint has one
}

// Load reads DIR/tokenizer.json and, when present, DIR/tokenizer_config.json.
func Load(dir string) (*Tokenizer, error) {
	t, err := LoadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, err
	}
	cfg, err := ReadConfig(dir)
	if err != nil {
		return nil, err
	}
	t.Config = cfg
	if err := t.addConfigTokens(cfg.AddedTokens); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "tokenizer_config.json"), err)
	}
	return t, nil
}

// LoadFile reads one tokenizer.json.
func LoadFile(path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("%s does not exist: the checkpoint directory needs its tokenizer.json", path)
		}
		return nil, err
	}
	var f tokenizerFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%s is not valid JSON: %v", path, err)
	}
	t, err := build(&f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

func build(f *tokenizerFile) (*Tokenizer, error) {
	m := f.Model
	if m.Type != "BPE" && m.Type != "" {
		return nil, fmt.Errorf("model type %q is not supported (only byte-level BPE)", m.Type)
	}
	if m.Dropout != nil && *m.Dropout > 0 {
		return nil, fmt.Errorf("BPE dropout %v is not supported", *m.Dropout)
	}
	if (m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "") || (m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "") {
		return nil, fmt.Errorf("BPE with continuing_subword_prefix or end_of_word_suffix is not supported")
	}
	if m.ByteFallback || m.IgnoreMerges {
		return nil, fmt.Errorf("BPE with byte_fallback or ignore_merges is not supported")
	}
	if f.Decoder != nil && f.Decoder.Type != "ByteLevel" {
		return nil, fmt.Errorf("decoder %q is not supported (only ByteLevel)", f.Decoder.Type)
	}
	if f.PostProcessor != nil && f.PostProcessor.Type != "ByteLevel" {
		return nil, fmt.Errorf("post_processor %q is not supported (only ByteLevel, which adds no tokens)", f.PostProcessor.Type)
	}
	t := &Tokenizer{tokenToID: map[string]int{}, added: map[int]*AddedToken{}, addedByS: map[string]*AddedToken{}}
	var err error
	if t.nfc, err = readNormalizer(f.Normalizer); err != nil {
		return nil, err
	}
	if t.split, err = newSplitter(f.PreTokenizer); err != nil {
		return nil, err
	}
	pairs, err := m.mergePairs()
	if err != nil {
		return nil, err
	}
	if t.model, err = newBPE(m.Vocab, pairs); err != nil {
		return nil, err
	}

	size := 0
	for _, id := range m.Vocab {
		size = max(size, id+1)
	}
	for _, a := range f.AddedTokens {
		size = max(size, a.ID+1)
	}
	t.idToToken = make([]string, size)
	t.rawBytes = make([][]byte, size)
	for s, id := range m.Vocab {
		if id < 0 {
			return nil, fmt.Errorf("vocabulary token %q has negative id %d", s, id)
		}
		t.idToToken[id] = s
		t.tokenToID[s] = id
		if raw, ok := byteLevelBytes(s); ok {
			t.rawBytes[id] = raw
		} else {
			t.rawBytes[id] = []byte(s)
		}
	}
	for _, a := range f.AddedTokens {
		if a.ID < 0 {
			return nil, fmt.Errorf("added token %q has negative id %d", a.Content, a.ID)
		}
		t.addAdded(AddedToken{ID: a.ID, Content: a.Content, Special: a.Special, SingleWord: a.SingleWord,
			LStrip: a.LStrip, RStrip: a.RStrip, Normalized: a.Normalized})
	}
	t.setMatchers()
	return t, nil
}

// addAdded registers one added token; setMatchers must run before the next Encode.
func (t *Tokenizer) addAdded(a AddedToken) {
	for a.ID >= len(t.idToToken) {
		t.idToToken = append(t.idToToken, "")
		t.rawBytes = append(t.rawBytes, nil)
	}
	tok := &a
	t.added[a.ID] = tok
	t.addedByS[a.Content] = tok
	t.idToToken[a.ID] = a.Content
	t.tokenToID[a.Content] = a.ID
	// The ByteLevel decoder maps a token through the byte alphabet when it can, else uses its UTF-8.
	if b, ok := byteLevelBytes(a.Content); ok {
		t.rawBytes[a.ID] = b
	} else {
		t.rawBytes[a.ID] = []byte(a.Content)
	}
}

// setMatchers builds the raw-text and normalized-text matchers from the added tokens.
func (t *Tokenizer) setMatchers() {
	var raw, nrm []*AddedToken
	for id := range t.idToToken {
		tok := t.added[id]
		if tok == nil {
			continue
		}
		if tok.Normalized {
			c := *tok
			if t.nfc {
				c.Content = norm.NFC.String(c.Content)
			}
			nrm = append(nrm, &c)
		} else {
			raw = append(raw, tok)
		}
	}
	t.rawAdded = newAddedMatcher(raw)
	t.nrmAdded = newAddedMatcher(nrm)
}

// addConfigTokens adds the tokens of tokenizer_config.json's added_tokens_decoder that
// tokenizer.json lacks, with the config's ids and flags, as transformers does when it loads a
// checkpoint. An id that tokenizer.json gives to another token, or a token that tokenizer.json
// has under another id, is an error: the two files then come from different tokenizers.
func (t *Tokenizer) addConfigTokens(tokens []AddedToken) error {
	added := false
	for _, a := range tokens {
		if a.ID < 0 {
			return fmt.Errorf("added_tokens_decoder has negative id %d for %q", a.ID, a.Content)
		}
		if have, ok := t.IDToToken(a.ID); ok {
			if have != a.Content {
				return fmt.Errorf("added_tokens_decoder gives id %d to %q, but tokenizer.json has %q there; "+
					"use the tokenizer.json that belongs to this tokenizer_config.json", a.ID, a.Content, have)
			}
			continue
		}
		if id, ok := t.tokenToID[a.Content]; ok {
			return fmt.Errorf("added_tokens_decoder gives %q id %d, but tokenizer.json has it as id %d; "+
				"use the tokenizer.json that belongs to this tokenizer_config.json", a.Content, a.ID, id)
		}
		t.addAdded(a)
		added = true
	}
	if added {
		t.setMatchers()
	}
	return nil
}

// readNormalizer accepts no normalizer or NFC (alone or in a Sequence); it reports whether NFC applies.
func readNormalizer(n *normalizerJSON) (bool, error) {
	if n == nil {
		return false, nil
	}
	switch n.Type {
	case "NFC":
		return true, nil
	case "Sequence":
		nfc := false
		for _, s := range n.Normalizers {
			one, err := readNormalizer(&s)
			if err != nil {
				return false, err
			}
			nfc = nfc || one
		}
		return nfc, nil
	}
	return false, fmt.Errorf("normalizer %q is not supported (only NFC)", n.Type)
}

// Encode returns the token ids of text. Added tokens (such as "<|im_start|>") in the text become
// their ids; no tokens are added around it.
func (t *Tokenizer) Encode(text string) []int {
	ids := make([]int, 0, len(text)/3+4)
	return t.AppendEncode(ids, text)
}

// AppendEncode appends the ids of text to ids.
func (t *Tokenizer) AppendEncode(ids []int, text string) []int {
	var buf [16]segment
	for _, seg := range t.rawAdded.split(text, buf[:0]) {
		if seg.tok != nil {
			ids = append(ids, seg.tok.ID)
			continue
		}
		s := seg.text
		if t.nfc && !norm.NFC.IsNormalString(s) {
			s = norm.NFC.String(s)
		}
		if t.nrmAdded.empty() {
			ids = t.encodePlain(ids, s)
			continue
		}
		var buf2 [8]segment
		for _, seg2 := range t.nrmAdded.split(s, buf2[:0]) {
			if seg2.tok != nil {
				ids = append(ids, seg2.tok.ID)
			} else {
				ids = t.encodePlain(ids, seg2.text)
			}
		}
	}
	return ids
}

// encodePlain pre-tokenizes normalized text and merges each piece.
func (t *Tokenizer) encodePlain(ids []int, s string) []int {
	t.split.split(s, func(piece string) {
		ids = t.model.encodeWord(ids, piece)
	})
	return ids
}

// VocabSize is one more than the largest id, added tokens included.
func (t *Tokenizer) VocabSize() int { return len(t.idToToken) }

// MaxTokenBytes is the most bytes of text one token stands for: a text of n bytes encodes to at
// least n/MaxTokenBytes tokens, which bounds a prompt before it is encoded.
func (t *Tokenizer) MaxTokenBytes() int {
	n := 1
	for _, b := range t.rawBytes {
		n = max(n, len(b))
	}
	for _, a := range t.added {
		n = max(n, len(a.Content))
	}
	return n
}

// IDToToken returns the token's spelling in the vocabulary (byte-level alphabet), or the content
// of an added token; ok is false for an id the tokenizer does not define.
func (t *Tokenizer) IDToToken(id int) (string, bool) {
	if id < 0 || id >= len(t.idToToken) || t.rawBytes[id] == nil {
		return "", false
	}
	return t.idToToken[id], true
}

// TokenToID looks a token up by its vocabulary spelling or added-token content.
func (t *Tokenizer) TokenToID(tok string) (int, bool) {
	id, ok := t.tokenToID[tok]
	return id, ok
}

// SpecialID returns the id of an added token by its content, e.g. "<|image_pad|>".
func (t *Tokenizer) SpecialID(content string) (int, error) {
	if a, ok := t.addedByS[content]; ok {
		return a.ID, nil
	}
	return 0, fmt.Errorf("the tokenizer has no added token %q; check the checkpoint's tokenizer.json added_tokens", content)
}

// Added returns the added token with this id, or nil.
func (t *Tokenizer) Added(id int) *AddedToken { return t.added[id] }

// IsSpecial reports whether id is an added token marked special.
func (t *Tokenizer) IsSpecial(id int) bool {
	a := t.added[id]
	return a != nil && a.Special
}

// AddedTokens lists the added tokens in id order.
func (t *Tokenizer) AddedTokens() []AddedToken {
	out := make([]AddedToken, 0, len(t.added))
	for id := range t.idToToken {
		if a := t.added[id]; a != nil {
			out = append(out, *a)
		}
	}
	return out
}

// ByteLevel spells raw bytes in the byte-level alphabet the vocabulary uses.
func ByteLevel(raw string) string { return byteLevelString([]byte(raw)) }
