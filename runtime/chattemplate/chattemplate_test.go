package chattemplate

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

const templatesDir = "../../testdata/templates"

type conversation struct {
	Name                string          `json:"name"`
	Template            string          `json:"template"`
	Messages            json.RawMessage `json:"messages"`
	AddGenerationPrompt bool            `json:"add_generation_prompt"`
	Kwargs              json.RawMessage `json:"kwargs"`
}

type rendered struct {
	Name     string `json:"name"`
	Template string `json:"template"`
	Rendered string `json:"rendered"`
	Error    string `json:"error"`
}

func readLines(t *testing.T, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		out = append(out, append([]byte(nil), sc.Bytes()...))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// qwenSpecial is what transformers passes for the Qwen tokenizer's special tokens map.
var qwenSpecial = map[string]string{"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}

func loadTemplates(t *testing.T) map[string]*Template {
	t.Helper()
	out := map[string]*Template{}
	for _, name := range []string{"qwen2_vl", "qwen3"} {
		path := filepath.Join(templatesDir, name+".jinja")
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		tmpl, err := Parse(string(src), path, qwenSpecial)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = tmpl
	}
	return out
}

func TestRenderedMatchesTransformers(t *testing.T) {
	templates := loadTemplates(t)
	want := map[string]rendered{}
	for _, l := range readLines(t, filepath.Join(templatesDir, "rendered.jsonl")) {
		var r rendered
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatal(err)
		}
		want[r.Name] = r
	}
	count := map[string]int{}
	for _, l := range readLines(t, filepath.Join(templatesDir, "conversations.jsonl")) {
		var c conversation
		if err := json.Unmarshal(l, &c); err != nil {
			t.Fatal(err)
		}
		w, ok := want[c.Name]
		if !ok {
			t.Fatalf("%s has no oracle rendering: rerun tools/oracle/text_reference.py", c.Name)
		}
		got, err := templates[c.Template].RenderJSON(c.Messages, Options{AddGenerationPrompt: c.AddGenerationPrompt, KwargsJSON: c.Kwargs})
		switch {
		case w.Error != "" && err == nil:
			t.Errorf("%s: transformers raised %q, we rendered %q", c.Name, w.Error, got)
		case w.Error == "" && err != nil:
			t.Errorf("%s: %v", c.Name, err)
		case w.Error == "" && got != w.Rendered:
			t.Errorf("%s:\n got %q\nwant %q", c.Name, got, w.Rendered)
		}
		count[c.Template]++
	}
	for _, name := range []string{"qwen2_vl", "qwen3"} {
		if count[name] < 30 {
			t.Errorf("%d conversations for %s, want at least 30", count[name], name)
		}
	}
}

// TestOracleIsCurrent checks that rendered.jsonl was made from these conversations and templates.
func TestOracleIsCurrent(t *testing.T) {
	var meta struct {
		Inputs   map[string]string `json:"inputs"`
		Versions map[string]string `json:"versions"`
		Renderer string            `json:"renderer"`
	}
	b, err := os.ReadFile(filepath.Join(templatesDir, "rendered.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	for path, want := range meta.Inputs {
		data, err := os.ReadFile(filepath.Join("../..", path))
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("%x", sha256.Sum256(data)); got != want {
			t.Errorf("%s changed since the oracle ran (sha256 %s, oracle saw %s): rerun tools/oracle/text_reference.py", path, got, want)
		}
	}
	if len(meta.Inputs) < 3 || !strings.HasPrefix(meta.Versions["transformers"], "5.") || !strings.Contains(meta.Renderer, "AutoTokenizer") {
		t.Errorf("rendered.json does not show transformers' apply_chat_template as the renderer: %+v", meta)
	}
}

func TestLoadOrder(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "no chat template") {
		t.Fatalf("Load of an empty dir: %v", err)
	}
	write("tokenizer_config.json", `{"eos_token": {"content": "<E>"}, "bos_token": "<B>", "chat_template": "cfg {{ bos_token }}{{ eos_token }}"}`)
	check := func(want string) {
		t.Helper()
		tmpl, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tmpl.Render(nil, Options{})
		if err != nil || got != want {
			t.Fatalf("rendered %q, %v; want %q", got, err, want)
		}
	}
	check("cfg <B><E>")
	write("chat_template.json", `{"chat_template": "json {{ eos_token }}"}`)
	check("json <E>")
	write("chat_template.jinja", "jinja {{ bos_token }}\n")
	check("jinja <B>")
}

func TestJinjaEnvironmentLikeTransformers(t *testing.T) {
	cases := []struct{ src, want string }{
		// trim_blocks and lstrip_blocks, and one trailing newline dropped.
		{"{% if true %}\n  yes\n{% endif %}\nend\n", "  yes\nend"},
		{"a\n    {% for i in range(3) %}\n    {{ i }}\n    {% endfor %}\nb", "a\n    0\n    1\n    2\nb"},
		{"x\n\n", "x\n"},
		// dicts keep their order and tojson writes Python's separators.
		{`{{ {"b": 1, "a": [1.5, "é中", none, true]} | tojson }}`, `{"b": 1, "a": [1.5, "é中", null, true]}`},
		{`{{ "éa中😀"[2] }}{{ "éa中😀" | length }}`, "中4"},
	}
	for _, c := range cases {
		tmpl, err := Parse(c.src, "test", nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tmpl.Render(nil, Options{})
		if err != nil || got != c.want {
			t.Errorf("%q rendered %q, %v; want %q", c.src, got, err, c.want)
		}
	}
}

func TestKwargsAndRaise(t *testing.T) {
	tmpl, err := Parse(`{% if not messages %}{{ raise_exception("no messages") }}{% endif %}{{ eos_token }}{% for k, v in opts.items() %}{{ k }}={{ v }};{% endfor %}`, "test", map[string]string{"eos_token": "<E>"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmpl.RenderJSON([]byte(`[]`), Options{}); err == nil || !strings.Contains(err.Error(), "no messages") {
		t.Fatalf("raise_exception gave %v", err)
	}
	got, err := tmpl.RenderJSON([]byte(`[{"role": "user", "content": "x"}]`), Options{
		Kwargs: map[string]any{"eos_token": "<override>"}, KwargsJSON: []byte(`{"opts": {"z": 1, "a": 2}}`)})
	if err != nil || got != "<override>z=1;a=2;" {
		t.Fatalf("rendered %q, %v", got, err)
	}
	if _, err := tmpl.RenderJSON([]byte(`{"role": "user"}`), Options{}); err == nil {
		t.Fatalf("messages that are not a list gave no error")
	}
	if _, err := tmpl.RenderJSON([]byte(`[]`), Options{KwargsJSON: []byte(`[1]`)}); err == nil {
		t.Fatalf("kwargs that are not an object gave no error")
	}
}

func TestConcurrentRender(t *testing.T) {
	tmpl := loadTemplates(t)["qwen3"]
	msgs := []byte(`[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "<think>r</think>a"}]`)
	want, err := tmpl.RenderJSON(msgs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if got, err := tmpl.RenderJSON(msgs, Options{}); err != nil || got != want {
					t.Errorf("concurrent render differs: %q, %v", got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestStartOfLine checks lstrip_blocks where the engine's notion of a line start needed help:
// spaces between two tags on a line stay (dots.ocr's "{% else %} {% for %}"), indentation before
// the first tag of the template goes, and a trimming first tag renders as Jinja renders it.
func TestStartOfLine(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"{% set n = 1 %}{% if false %}a{% else %} {% for i in [1, 2] %}{{ i }}{% endfor %}{% endif %}", " 12"},
		{"  {% if true %}x{% endif %}", "x"},
		{"{%- if true %}\nx{% endif %}", "x"},
		{"\n{{- 'a' }}b", "ab"},
		{"\n\n{% if true %}x{% endif %}", "\n\nx"},
	} {
		tm, err := Parse(c.src, "test", nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tm.Render(nil, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("%q renders %q, Jinja gives %q", c.src, got, c.want)
		}
	}
}
