// Package chattemplate renders a checkpoint's Jinja chat template the way transformers'
// apply_chat_template does: the messages (string content or lists of parts), the
// add_generation_prompt switch, the tokenizer's special tokens as variables (bos_token,
// eos_token, ...), extra keyword arguments such as enable_thinking or add_vision_id, and
// raise_exception. Like transformers' environment it trims the first newline after a block tag
// and the whitespace before one (trim_blocks, lstrip_blocks) and drops one trailing newline.
//
// The Jinja engine is github.com/ardanlabs/jinja. It and github.com/nikolalohinski/gonja/v2 both
// render the Qwen2-VL and Qwen3 templates exactly as transformers 5.17 does on every test
// conversation; ardanlabs/jinja was chosen because the rest of what chat templates lean on
// matches Python there and not in gonja: tojson writes Python's json.dumps separators (", ",
// ": "), dicts keep insertion order (so tools and messages print in request order), strings
// index and slice by character rather than byte, and nothing tried makes it panic (gonja panics on
// "%" string formatting and rejects a bare .lstrip()). It also has no dependencies. Known gaps
// against Python Jinja, none used by the Qwen templates: {{ none }} prints "" instead of "None",
// a float with no fraction prints as "1" instead of "1.0", "%" string formatting and exponent
// literals (1e3) are not supported.
package chattemplate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ardanlabs/jinja"

	"tfc/runtime/tokenizer"
)

// Template is a compiled chat template with the special-token variables it is rendered with.
// It is safe for concurrent use.
type Template struct {
	Source  string // the template text
	Origin  string // where it came from, for error messages
	tmpl    *jinja.Template
	special map[string]string

	opensWithTag bool // rendered behind startText
}

// Options are apply_chat_template's switches.
type Options struct {
	AddGenerationPrompt bool
	// Kwargs are extra template variables (enable_thinking, add_vision_id, tools, ...); they
	// override the special-token variables of the same name.
	Kwargs map[string]any
	// KwargsJSON, when set, is a JSON object of extra variables read in key order; it is applied
	// after Kwargs.
	KwargsJSON []byte
}

// Parse compiles template source. special holds the variables transformers passes from the
// tokenizer's special tokens map (bos_token, eos_token, pad_token, unk_token); empty values are left out.
func Parse(source, origin string, special map[string]string) (*Template, error) {
	// Jinja's default keep_trailing_newline=False drops one final newline of the source.
	src := strings.TrimSuffix(source, "\n")
	// ardanlabs/jinja takes the template's first text as the start of the template for
	// lstrip_blocks even when tags come before it (the " " of "{% else %} {% for %}" is dropped,
	// Jinja keeps it). A template that opens with a tag gets a first text of its own, which no
	// rule trims; render removes it.
	opensWithTag := strings.HasPrefix(src, "{")
	if opensWithTag {
		src = startText + src
	}
	t, err := jinja.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("chat template from %s does not compile: %v", origin, err)
	}
	sp := map[string]string{}
	for k, v := range special {
		if v != "" {
			sp[k] = v
		}
	}
	return &Template{Source: source, Origin: origin, tmpl: t, special: sp, opensWithTag: opensWithTag}, nil
}

// startText is the text Parse puts before a template that opens with a tag.
const startText = "\x00"

// Load finds the chat template of a checkpoint directory as transformers does, first found wins:
// chat_template.jinja, chat_template.json ({"chat_template": ...}), tokenizer_config.json's
// chat_template. The special-token variables come from tokenizer_config.json.
func Load(dir string) (*Template, error) {
	cfg, err := tokenizer.ReadConfig(dir)
	if err != nil {
		return nil, err
	}
	special := map[string]string{"bos_token": cfg.BOSToken, "eos_token": cfg.EOSToken, "pad_token": cfg.PadToken, "unk_token": cfg.UnkToken}

	path := filepath.Join(dir, "chat_template.jinja")
	if b, err := os.ReadFile(path); err == nil {
		return Parse(string(b), path, special)
	}
	path = filepath.Join(dir, "chat_template.json")
	if b, err := os.ReadFile(path); err == nil {
		var f struct {
			ChatTemplate string `json:"chat_template"`
		}
		if err := json.Unmarshal(b, &f); err != nil || f.ChatTemplate == "" {
			return nil, fmt.Errorf("%s has no string chat_template field; fix the file or remove it", path)
		}
		return Parse(f.ChatTemplate, path, special)
	}
	if cfg.ChatTemplate != "" {
		return Parse(cfg.ChatTemplate, filepath.Join(dir, "tokenizer_config.json"), special)
	}
	return nil, fmt.Errorf("%s has no chat template (chat_template.jinja, chat_template.json or tokenizer_config.json chat_template); add one from the model's original repository", dir)
}

// RenderJSON renders messages given as a JSON array of message objects, keeping every object's
// key order as Python would.
func (t *Template) RenderJSON(messages []byte, o Options) (string, error) {
	v, err := decodeJSON(messages)
	if err != nil {
		return "", fmt.Errorf("messages are not valid JSON: %v", err)
	}
	if !v.IsList() {
		return "", fmt.Errorf("messages must be a JSON array of {\"role\", \"content\"} objects")
	}
	return t.render(v, o)
}

// Render renders messages built in Go (maps, slices, strings, numbers, bools, nil). Map keys are
// visited in sorted order; use RenderJSON where the order must be the caller's.
func (t *Template) Render(messages []map[string]any, o Options) (string, error) {
	items := make([]any, len(messages))
	for i, m := range messages {
		items[i] = m
	}
	return t.render(jinja.FromGoValue(items), o)
}

func (t *Template) render(messages jinja.Value, o Options) (out string, err error) {
	vars := make(map[string]jinja.Value, len(t.special)+len(o.Kwargs)+2)
	for k, v := range t.special {
		vars[k] = jinja.NewString(v)
	}
	for k, v := range o.Kwargs {
		vars[k] = jinja.FromGoValue(v)
	}
	if len(o.KwargsJSON) > 0 {
		kw, err := decodeJSON(o.KwargsJSON)
		if err != nil || !kw.IsDict() {
			return "", fmt.Errorf("template kwargs must be a JSON object, e.g. {\"enable_thinking\": false}")
		}
		d := kw.AsDict()
		for _, k := range d.Keys {
			vars[k] = d.Data[k]
		}
	}
	vars["messages"] = messages
	vars["add_generation_prompt"] = jinja.NewBool(o.AddGenerationPrompt)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("chat template from %s failed: %v", t.Origin, r)
		}
	}()
	out, err = t.tmpl.RenderValues(vars)
	if err != nil {
		return "", fmt.Errorf("chat template from %s: %v", t.Origin, err)
	}
	if t.opensWithTag {
		if !strings.HasPrefix(out, startText) {
			return "", fmt.Errorf("chat template from %s: the output lost its start", t.Origin)
		}
		out = out[len(startText):]
	}
	return out, nil
}

// decodeJSON reads one JSON value into Jinja values, objects in key order; integers stay integers.
func decodeJSON(data []byte) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return jinja.Value{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return jinja.Value{}, fmt.Errorf("data after the JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (jinja.Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return jinja.Value{}, err
	}
	switch x := tok.(type) {
	case json.Delim:
		switch x {
		case '[':
			var items []jinja.Value
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return jinja.Value{}, err
				}
				items = append(items, v)
			}
			_, err := dec.Token()
			return jinja.NewList(items), err
		case '{':
			d := jinja.NewDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return jinja.Value{}, err
				}
				v, err := decodeValue(dec)
				if err != nil {
					return jinja.Value{}, err
				}
				d.AsDict().Set(kt.(string), v)
			}
			_, err := dec.Token()
			return d, err
		}
		return jinja.Value{}, fmt.Errorf("unexpected %v", x)
	default:
		return jinja.FromGoValue(tok), nil
	}
}
