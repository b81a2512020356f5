package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
)

// tokenizerFile is the part of a Hugging Face tokenizer.json that byte-level BPE needs.
type tokenizerFile struct {
	AddedTokens   []addedTokenJSON `json:"added_tokens"`
	Normalizer    *normalizerJSON  `json:"normalizer"`
	PreTokenizer  *preTokenJSON    `json:"pre_tokenizer"`
	PostProcessor *typedJSON       `json:"post_processor"`
	Decoder       *typedJSON       `json:"decoder"`
	Model         modelJSON        `json:"model"`
}

type addedTokenJSON struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type typedJSON struct {
	Type string `json:"type"`
}

type normalizerJSON struct {
	Type        string           `json:"type"`
	Normalizers []normalizerJSON `json:"normalizers"`
}

type preTokenJSON struct {
	Type           string         `json:"type"`
	PreTokenizers  []preTokenJSON `json:"pretokenizers"`
	Pattern        *patternJSON   `json:"pattern"`
	Behavior       string         `json:"behavior"`
	Invert         bool           `json:"invert"`
	AddPrefixSpace bool           `json:"add_prefix_space"`
	UseRegex       *bool          `json:"use_regex"`
}

type patternJSON struct {
	Regex  *string `json:"Regex"`
	String *string `json:"String"`
}

type modelJSON struct {
	Type                    string          `json:"type"`
	Vocab                   map[string]int  `json:"vocab"`
	Merges                  json.RawMessage `json:"merges"`
	Dropout                 *float64        `json:"dropout"`
	UnkToken                *string         `json:"unk_token"`
	ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
	ByteFallback            bool            `json:"byte_fallback"`
	IgnoreMerges            bool            `json:"ignore_merges"`
}

// mergePairs reads merges written either as "a b" strings or as ["a", "b"] pairs.
func (m modelJSON) mergePairs() ([][2]string, error) {
	var pairs [][2]string
	if err := json.Unmarshal(m.Merges, &pairs); err == nil {
		return pairs, nil
	}
	var lines []string
	if err := json.Unmarshal(m.Merges, &lines); err != nil {
		return nil, fmt.Errorf("model.merges is neither a list of \"a b\" strings nor of [a, b] pairs")
	}
	pairs = make([][2]string, len(lines))
	for i, l := range lines {
		var a, b string
		n := 0
		for j := 0; j < len(l); j++ {
			if l[j] == ' ' {
				a, b = l[:j], l[j+1:]
				n++
				break
			}
		}
		if n == 0 || a == "" || b == "" {
			return nil, fmt.Errorf("model.merges[%d] = %q is not two tokens separated by one space", i, l)
		}
		pairs[i] = [2]string{a, b}
	}
	return pairs, nil
}

// Config is what tokenizer_config.json says about special tokens and the chat template.
type Config struct {
	BOSToken     string
	EOSToken     string
	PadToken     string
	UnkToken     string
	AddBOSToken  bool
	ChatTemplate string
	// ChatTemplates holds named templates when chat_template is a list of {name, template}.
	ChatTemplates map[string]string
	// AddedTokens is added_tokens_decoder in id order.
	AddedTokens []AddedToken
}

// ReadConfig reads DIR/tokenizer_config.json; a missing file gives an empty Config.
func ReadConfig(dir string) (Config, error) {
	path := filepath.Join(dir, "tokenizer_config.json")
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return Config{}, nil
	}
	if err != nil {
		return Config{}, err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return Config{}, fmt.Errorf("%s is not valid JSON: %v", path, err)
	}
	var c Config
	c.BOSToken = tokenString(raw["bos_token"])
	c.EOSToken = tokenString(raw["eos_token"])
	c.PadToken = tokenString(raw["pad_token"])
	c.UnkToken = tokenString(raw["unk_token"])
	if v, ok := raw["add_bos_token"]; ok {
		_ = json.Unmarshal(v, &c.AddBOSToken)
	}
	if v, ok := raw["added_tokens_decoder"]; ok {
		if c.AddedTokens, err = readAddedTokensDecoder(v); err != nil {
			return Config{}, fmt.Errorf("%s: %v", path, err)
		}
	}
	if v, ok := raw["chat_template"]; ok {
		var s string
		if json.Unmarshal(v, &s) == nil {
			c.ChatTemplate = s
		} else {
			var named []struct {
				Name     string `json:"name"`
				Template string `json:"template"`
			}
			if err := json.Unmarshal(v, &named); err != nil {
				return Config{}, fmt.Errorf("%s: chat_template is neither a string nor a list of {name, template}", path)
			}
			c.ChatTemplates = map[string]string{}
			for _, n := range named {
				c.ChatTemplates[n.Name] = n.Template
			}
			c.ChatTemplate = c.ChatTemplates["default"]
		}
	}
	return c, nil
}

// readAddedTokensDecoder reads {"151643": {"content": ..., "special": ...}, ...} in id order.
func readAddedTokensDecoder(v json.RawMessage) ([]AddedToken, error) {
	var m map[string]struct {
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	}
	if err := json.Unmarshal(v, &m); err != nil {
		return nil, fmt.Errorf("added_tokens_decoder is not a map of id to token: %v", err)
	}
	out := make([]AddedToken, 0, len(m))
	for k, a := range m {
		id, err := strconv.Atoi(k)
		if err != nil {
			return nil, fmt.Errorf("added_tokens_decoder key %q is not an integer id", k)
		}
		if a.Content == "" {
			return nil, fmt.Errorf("added_tokens_decoder[%q] has no content", k)
		}
		out = append(out, AddedToken{ID: id, Content: a.Content, Special: a.Special, SingleWord: a.SingleWord,
			LStrip: a.LStrip, RStrip: a.RStrip, Normalized: a.Normalized})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// tokenString reads a special token given either as a string or as {"content": ...}.
func tokenString(v json.RawMessage) string {
	if len(v) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	var o struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(v, &o) == nil {
		return o.Content
	}
	return ""
}
