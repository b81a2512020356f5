package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Config is a JSON file of a checkpoint (config.json, generation_config.json) read as a
// generic tree, with typed access by dotted path. A path may list fallbacks separated by
// '|': "text_config.hidden_size|hidden_size" reads the first that is set. A segment that
// is a number indexes a list. A key whose value is null counts as not set.
type Config struct {
	file string // base name, used in every error
	root map[string]any
}

// ConfigError is a refusal of one key (or of the whole file, when Key is empty) of a JSON file.
type ConfigError struct {
	File string
	Key  string
	Msg  string
}

func (e *ConfigError) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", e.File, e.Key, e.Msg)
}

// ReadConfig reads a JSON config file; errors name the file by its base name.
func ReadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseConfig(filepath.Base(path), data)
}

// ParseConfig parses the JSON text of the file named file; a syntax error names the line,
// the column and the key being read.
func ParseConfig(file string, data []byte) (*Config, error) {
	p := &treeParser{file: file, data: data, dec: json.NewDecoder(bytes.NewReader(data))}
	p.dec.UseNumber()
	v, err := p.value("")
	if err != nil {
		return nil, err
	}
	if _, err := p.dec.Token(); !errors.Is(err, io.EOF) {
		return nil, p.fail("", errors.New("data after the top-level object"))
	}
	root, ok := v.(map[string]any)
	if !ok {
		return nil, &ConfigError{File: file, Msg: "is not a JSON object"}
	}
	return &Config{file: file, root: root}, nil
}

// treeParser builds the tree token by token so that a syntax error can name the key it is in.
type treeParser struct {
	file string
	data []byte
	dec  *json.Decoder
}

func (p *treeParser) value(path string) (any, error) {
	tok, err := p.dec.Token()
	if err != nil {
		return nil, p.fail(path, err)
	}
	switch tok {
	case json.Delim('{'):
		m := map[string]any{}
		for p.dec.More() {
			k, err := p.dec.Token()
			if err != nil {
				return nil, p.fail(path, err)
			}
			key, ok := k.(string)
			if !ok {
				return nil, p.fail(path, fmt.Errorf("object key %v is not a string", k))
			}
			v, err := p.value(join(path, key))
			if err != nil {
				return nil, err
			}
			m[key] = v
		}
		if _, err := p.dec.Token(); err != nil {
			return nil, p.fail(path, err)
		}
		return m, nil
	case json.Delim('['):
		var l []any
		for i := 0; p.dec.More(); i++ {
			v, err := p.value(join(path, strconv.Itoa(i)))
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		if _, err := p.dec.Token(); err != nil {
			return nil, p.fail(path, err)
		}
		if l == nil {
			l = []any{}
		}
		return l, nil
	}
	return tok, nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// fail reports a syntax error at the decoder's position, inside the key at path.
func (p *treeParser) fail(path string, err error) error {
	off := p.dec.InputOffset()
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off = se.Offset
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = errors.New("the file ends in the middle of the JSON")
		off = int64(len(p.data))
	}
	line, col := lineCol(p.data, off)
	where := "at the top level"
	if path != "" {
		where = "in key " + path
	}
	return &ConfigError{File: p.file, Msg: fmt.Sprintf("invalid JSON at line %d, column %d, %s: %v; fix the file or download it again", line, col, where, strings.TrimPrefix(err.Error(), "json: "))}
}

func lineCol(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line = bytes.Count(before, []byte{'\n'}) + 1
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

// File is the base name of the file the config was read from.
func (c *Config) File() string { return c.file }

// Lookup returns the value at the first set alternative of path and the key it was found at.
func (c *Config) Lookup(path string) (value any, key string, ok bool) {
	for _, alt := range strings.Split(path, "|") {
		if v, ok := c.walk(alt); ok && v != nil {
			return v, alt, true
		}
	}
	return nil, "", false
}

func (c *Config) walk(path string) (any, bool) {
	var v any = c.root
	for _, seg := range strings.Split(path, ".") {
		switch node := v.(type) {
		case map[string]any:
			next, ok := node[seg]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(node) {
				return nil, false
			}
			v = node[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// Values is read access to a config.json by dotted path, alternatives separated by '|' (the first
// present one is used): what a family's glue binds and the kernel specialiser reads. *Config is
// one.
type Values interface {
	Has(path string) bool
	Int(path string) (int, error)
	Float(path string) (float64, error)
	Bool(path string) (bool, error)
	IntList(path string) ([]int, error)
	String(path string) (string, error)
}

var _ Values = (*Config)(nil)

// Has reports whether any alternative of path is set to a non-null value.
func (c *Config) Has(path string) bool {
	_, _, ok := c.Lookup(path)
	return ok
}

func (c *Config) find(path string) (any, string, error) {
	v, key, ok := c.Lookup(path)
	if !ok {
		alts := strings.Split(path, "|")
		msg := "is not set; the family needs it"
		if len(alts) > 1 {
			msg = "is not set (nor " + strings.Join(alts[1:], ", nor ") + "); the family needs it"
		}
		return nil, "", &ConfigError{File: c.file, Key: alts[0], Msg: msg}
	}
	return v, key, nil
}

func (c *Config) wrongType(key string, v any, want string) error {
	return &ConfigError{File: c.file, Key: key, Msg: fmt.Sprintf("is %s, want %s", describe(v), want)}
}

// describe names a JSON value and its kind for an error message.
func describe(v any) string {
	switch x := v.(type) {
	case json.Number:
		return x.String() + " (a number)"
	case string:
		if len(x) > 40 {
			x = x[:40] + "…"
		}
		return strconv.Quote(x) + " (a string)"
	case bool:
		return strconv.FormatBool(x) + " (a boolean)"
	case []any:
		return fmt.Sprintf("a list of %d", len(x))
	case map[string]any:
		return "an object"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%v", v)
}

func asInt(v any) (int, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil && int64(int(i)) == i {
		return int(i), true
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int(f), true
}

func asFloat(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(n), 64)
	return f, err == nil
}

// Int reads an integer; a number written with a fraction of zero (32768.0) counts.
func (c *Config) Int(path string) (int, error) {
	v, key, err := c.find(path)
	if err != nil {
		return 0, err
	}
	i, ok := asInt(v)
	if !ok {
		return 0, c.wrongType(key, v, "an integer")
	}
	return i, nil
}

// Float reads a number.
func (c *Config) Float(path string) (float64, error) {
	v, key, err := c.find(path)
	if err != nil {
		return 0, err
	}
	f, ok := asFloat(v)
	if !ok {
		return 0, c.wrongType(key, v, "a number")
	}
	return f, nil
}

// Bool reads true or false.
func (c *Config) Bool(path string) (bool, error) {
	v, key, err := c.find(path)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, c.wrongType(key, v, "true or false")
	}
	return b, nil
}

// String reads a string.
func (c *Config) String(path string) (string, error) {
	v, key, err := c.find(path)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", c.wrongType(key, v, "a string")
	}
	return s, nil
}

// IntList reads a list of integers.
func (c *Config) IntList(path string) ([]int, error) {
	v, key, err := c.find(path)
	if err != nil {
		return nil, err
	}
	l, ok := v.([]any)
	if !ok {
		return nil, c.wrongType(key, v, "a list of integers")
	}
	out := make([]int, len(l))
	for i, x := range l {
		if out[i], ok = asInt(x); !ok {
			return nil, c.wrongType(fmt.Sprintf("%s.%d", key, i), x, "an integer")
		}
	}
	return out, nil
}

// FloatList reads a list of numbers.
func (c *Config) FloatList(path string) ([]float64, error) {
	v, key, err := c.find(path)
	if err != nil {
		return nil, err
	}
	l, ok := v.([]any)
	if !ok {
		return nil, c.wrongType(key, v, "a list of numbers")
	}
	out := make([]float64, len(l))
	for i, x := range l {
		if out[i], ok = asFloat(x); !ok {
			return nil, c.wrongType(fmt.Sprintf("%s.%d", key, i), x, "a number")
		}
	}
	return out, nil
}

// StringList reads a list of strings.
func (c *Config) StringList(path string) ([]string, error) {
	v, key, err := c.find(path)
	if err != nil {
		return nil, err
	}
	l, ok := v.([]any)
	if !ok {
		return nil, c.wrongType(key, v, "a list of strings")
	}
	out := make([]string, len(l))
	for i, x := range l {
		if out[i], ok = x.(string); !ok {
			return nil, c.wrongType(fmt.Sprintf("%s.%d", key, i), x, "a string")
		}
	}
	return out, nil
}

// IntOrList reads an integer or a list of integers (as eos_token_id is written), as a list.
func (c *Config) IntOrList(path string) ([]int, error) {
	v, key, err := c.find(path)
	if err != nil {
		return nil, err
	}
	if i, ok := asInt(v); ok {
		return []int{i}, nil
	}
	if _, ok := v.([]any); ok {
		return c.IntList(key)
	}
	return nil, c.wrongType(key, v, "an integer or a list of integers")
}

// ModelType is config.json's model_type.
func (c *Config) ModelType() string {
	s, _ := c.String("model_type")
	return s
}

// Architectures is config.json's architectures list.
func (c *Config) Architectures() []string {
	l, _ := c.StringList("architectures")
	return l
}

// Pick returns the first entry of supported that names the config's model_type or, failing
// that, one of its architectures; otherwise an error lists what is supported.
func Pick(cfg *Config, supported []string) (string, error) {
	mt := cfg.ModelType()
	for _, s := range supported {
		if mt != "" && s == mt {
			return s, nil
		}
	}
	for _, a := range cfg.Architectures() {
		for _, s := range supported {
			if s == a {
				return s, nil
			}
		}
	}
	what := fmt.Sprintf("model_type %q", mt)
	if mt == "" {
		what = "no model_type"
	}
	if archs := cfg.Architectures(); len(archs) > 0 {
		what += " and architectures " + strings.Join(archs, ", ")
	}
	list := "none"
	if len(supported) > 0 {
		list = strings.Join(supported, ", ")
	}
	return "", &ConfigError{File: cfg.file, Msg: fmt.Sprintf("%s: no family of this tfc reads it; supported: %s", what, list)}
}
