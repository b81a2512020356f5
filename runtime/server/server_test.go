package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"tfc/runtime/engine"
	"tfc/runtime/lanes"
	"tfc/runtime/lanes/lanestest"
	"tfc/runtime/model"
	"tfc/runtime/sample"
)

const tinyDir = "../../testdata/qwen2-vl-tiny"

// ts is a server over real HTTP with the tiny checkpoint's front end and the lanes' fake model.
type ts struct {
	url   string
	fe    *engine.Frontend
	fake  *lanestest.Fake
	lanes *lanes.Scheduler
	srv   *Server
	info  model.Info
	eos   map[int32]bool
}

func frontend(t testing.TB) *engine.Frontend {
	t.Helper()
	if _, err := os.Stat(filepath.Join(tinyDir, "tokenizer.json")); err != nil {
		t.Fatalf("%s/tokenizer.json is missing; run make testdata", tinyDir)
	}
	fe, err := engine.LoadFrontend(tinyDir)
	if err != nil {
		t.Fatal(err)
	}
	return fe
}

func testLanes() lanes.Config {
	return lanes.Config{Parallel: 4, Context: 512, Rows: 64, PageSize: 16, Queue: 16, EOS: []int32{151645, 151643}, PromptCache: true, Drafts: 2}
}

func start(t testing.TB, mod func(*Config, *lanes.Config)) *ts {
	t.Helper()
	fe := frontend(t)
	imageToken, err := fe.Tok.SpecialID("<|image_pad|>")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Name: "tiny", MaxTokens: 12}
	lc := testLanes()
	if mod != nil {
		mod(&cfg, &lc)
	}
	info := lanestest.Info(151936, imageToken)
	fake := lanestest.New(info, lanestest.Geometry{Parallel: lc.Parallel, Pages: lc.Pages(), PageSize: lc.PageSize, Rows: lc.Rows}, 0)
	var m model.Model = fake
	if mod, ok := modelFor[t.Name()]; ok {
		m = mod(info)
	}
	l, err := lanes.New(m, lc)
	if err != nil {
		t.Fatal(err)
	}
	srv := New(cfg)
	srv.Ready(l, fe, info)
	h := httptest.NewServer(srv)
	t.Cleanup(func() {
		h.Close()
		l.Close()
	})
	eos := map[int32]bool{}
	for _, id := range lc.EOS {
		eos[id] = true
	}
	return &ts{url: h.URL, fe: fe, fake: fake, lanes: l, srv: srv, info: info, eos: eos}
}

// streamText posts a streamed chat and returns the whole event stream.
func (s *ts) streamText(t *testing.T, body string) []byte {
	t.Helper()
	req, _ := http.NewRequest("POST", s.url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return raw
}

// modelFor replaces the fake model for the named tests.
var modelFor = map[string]func(model.Info) model.Model{
	"TestRepetitionAndEOSFields": func(info model.Info) model.Model { return looping{info} },
}

// looping is a model that always picks token 13 ("."), with EOS (151645) the runner-up.
type looping struct{ info model.Info }

func (m looping) Info() model.Info                              { return m.info }
func (m looping) Close()                                        {}
func (m looping) Vision([]float32, [][3]int) ([]float32, error) { return nil, nil }
func (m looping) Forward(r *model.Round) ([]float32, error) {
	out := make([]float32, len(r.LogitRows)*m.info.Vocab)
	for i := range r.LogitRows {
		out[i*m.info.Vocab+13] = 2
		out[i*m.info.Vocab+151645] = 1
	}
	return out, nil
}

// post sends a raw body and returns the status, headers and decoded JSON body.
func (s *ts) post(t *testing.T, path, body string, header ...string) (int, http.Header, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", s.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: response is not JSON: %s", path, b)
	}
	return resp.StatusCode, resp.Header, m
}

func dataURL(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(b)
}

// want computes the fake's reference ids for a chat alone.
func (s *ts) want(t *testing.T, messages string, images []string, maxTokens int, sp sample.Params) ([]int32, []int32) {
	t.Helper()
	var files [][]byte
	for _, p := range images {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, b)
	}
	var msgs []chatMessage
	if err := json.Unmarshal([]byte(messages), &msgs); err != nil {
		t.Fatal(err)
	}
	ld := s.srv.ready.Load()
	p, _, _, e := s.srv.chatPrompt(ld, msgs, nil, true)
	if e != nil {
		t.Fatal(e.msg)
	}
	out, err := lanestest.Reference(s.info, 0, lanestest.Want{Prompt: p.IDs, Pixels: p.Pixels, Grids: grids(p), MaxTokens: maxTokens, Sample: sp, EOS: s.eos})
	if err != nil {
		t.Fatal(err)
	}
	return p.IDs, out
}

func ids(v any) []int32 {
	var out []int32
	for _, x := range v.([]any) {
		out = append(out, int32(x.(float64)))
	}
	return out
}

const poem = `[{"role":"user","content":[{"type":"text","text":"Write a short poem about the sea."}]}]`

func TestChatMatchesReference(t *testing.T) {
	s := start(t, nil)
	status, _, m := s.post(t, "/v1/chat/completions", `{"model":"tiny","messages":`+poem+`,"max_tokens":10,"temperature":0,"return_token_ids":true}`)
	if status != 200 {
		t.Fatalf("status %d: %v", status, m)
	}
	prompt, want := s.want(t, poem, nil, 10, sample.Params{})
	choice := m["choices"].([]any)[0].(map[string]any)
	got := ids(choice["token_ids"])
	if !slices.Equal(ids(m["prompt_token_ids"]), prompt) || !slices.Equal(got, want) {
		t.Fatalf("prompt %v, want %v\noutput %v, want %v", m["prompt_token_ids"], prompt, got, want)
	}
	if choice["token_sha256"] != TokenSHA256(want) {
		t.Errorf("token_sha256 %v, want %s", choice["token_sha256"], TokenSHA256(want))
	}
	text := choice["message"].(map[string]any)["content"]
	if wantText := s.fe.Tok.Decode(ints(want), true); text != wantText {
		t.Errorf("content %q, want %q", text, wantText)
	}
	u := m["usage"].(map[string]any)
	if int(u["prompt_tokens"].(float64)) != len(prompt) || int(u["completion_tokens"].(float64)) != len(want) {
		t.Errorf("usage %v", u)
	}
	if m["object"] != "chat.completion" || choice["finish_reason"] != "length" {
		t.Errorf("object %v finish %v", m["object"], choice["finish_reason"])
	}
	// the prompt ids are what /tokenize gives for the same messages
	_, _, tk := s.post(t, "/tokenize", `{"messages":`+poem+`}`)
	if !slices.Equal(ids(tk["tokens"]), prompt) {
		t.Errorf("/tokenize gave %v, the chat's prompt was %v", tk["tokens"], prompt)
	}
	// and the same request again resumes from the prompt cache with the same ids
	_, _, m2 := s.post(t, "/v1/chat/completions", `{"messages":`+poem+`,"max_tokens":10,"temperature":0,"return_token_ids":true}`)
	c2 := m2["choices"].([]any)[0].(map[string]any)
	if got2 := ids(c2["token_ids"]); !slices.Equal(got2, want) {
		t.Errorf("resumed: %v, want %v", got2, want)
	}
	cached := m2["usage"].(map[string]any)["prompt_tokens_details"].(map[string]any)["cached_tokens"].(float64)
	if cached < 16 {
		t.Errorf("the repeated request reused %v cached tokens", cached)
	}
}

func TestImageChat(t *testing.T) {
	s := start(t, nil)
	a, b := filepath.Join(tinyDir, "oracle/images/a.png"), filepath.Join(tinyDir, "oracle/images/b.png")
	msgs := fmt.Sprintf(`[{"role":"user","content":[{"type":"image_url","image_url":{"url":%q}},{"type":"image_url","image_url":{"url":%q}},{"type":"text","text":"Compare them."}]}]`, dataURL(t, a), dataURL(t, b))
	status, _, m := s.post(t, "/v1/chat/completions", `{"messages":`+msgs+`,"max_tokens":6,"return_token_ids":true}`)
	if status != 200 {
		t.Fatalf("status %d: %v", status, m)
	}
	prompt, want := s.want(t, msgs, []string{a, b}, 6, sample.Params{})
	if got := ids(m["choices"].([]any)[0].(map[string]any)["token_ids"]); !slices.Equal(got, want) || !slices.Equal(ids(m["prompt_token_ids"]), prompt) {
		t.Fatalf("image chat: %v, want %v", got, want)
	}
	// swapping the images changes the vision rows, never served from the first request's pages
	swapped := fmt.Sprintf(`[{"role":"user","content":[{"type":"image_url","image_url":{"url":%q}},{"type":"image_url","image_url":{"url":%q}},{"type":"text","text":"Compare them."}]}]`, dataURL(t, b), dataURL(t, a))
	_, _, m2 := s.post(t, "/v1/chat/completions", `{"messages":`+swapped+`,"max_tokens":6,"return_token_ids":true}`)
	_, want2 := s.want(t, swapped, []string{b, a}, 6, sample.Params{})
	if got := ids(m2["choices"].([]any)[0].(map[string]any)["token_ids"]); !slices.Equal(got, want2) {
		t.Fatalf("swapped images: %v, want %v", got, want2)
	}
}

// sse reads a streamed response's data objects up to [DONE].
func sse(t *testing.T, r io.Reader) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("not an SSE data line: %q", line)
		}
		if data == "[DONE]" {
			return out
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("chunk is not JSON: %s", data)
		}
		out = append(out, m)
	}
	t.Fatal("stream ended without [DONE]")
	return nil
}

func TestStreamMatchesWhole(t *testing.T) {
	s := start(t, nil)
	body := `{"messages":` + poem + `,"max_tokens":8,"temperature":0.8,"top_k":50,"seed":7,"stream":true,"stream_options":{"include_usage":true},"return_token_ids":true}`
	resp, err := http.Post(s.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content type %q", ct)
	}
	chunks := sse(t, resp.Body)
	var text strings.Builder
	var got []int32
	var finish any
	for i, c := range chunks[:len(chunks)-1] {
		if c["object"] != "chat.completion.chunk" {
			t.Fatalf("chunk %d object %v", i, c["object"])
		}
		if _, ok := c["usage"]; !ok || c["usage"] != nil {
			t.Errorf("chunk %d: usage %v, want null with include_usage", i, c["usage"])
		}
		ch := c["choices"].([]any)[0].(map[string]any)
		if i == 0 && ch["delta"].(map[string]any)["role"] != "assistant" {
			t.Errorf("first chunk has no assistant role: %v", ch)
		}
		if s, ok := ch["delta"].(map[string]any)["content"].(string); ok {
			text.WriteString(s)
		}
		if v, ok := ch["token_ids"]; ok {
			got = append(got, ids(v)...)
		}
		if ch["finish_reason"] != nil {
			finish = ch["finish_reason"]
		}
	}
	sp := sample.Params{Temperature: 0.8, TopK: 50, Seed: 7}
	prompt, want := s.want(t, poem, nil, 8, sp)
	if !slices.Equal(got, want) {
		t.Fatalf("streamed ids %v, want %v", got, want)
	}
	if !slices.Equal(ids(chunks[0]["prompt_token_ids"]), prompt) {
		t.Errorf("prompt_token_ids %v", chunks[0]["prompt_token_ids"])
	}
	if text.String() != s.fe.Tok.Decode(ints(want), true) || finish != "length" {
		t.Errorf("streamed text %q finish %v", text.String(), finish)
	}
	last := chunks[len(chunks)-1]
	if len(last["choices"].([]any)) != 0 || last["usage"].(map[string]any)["completion_tokens"].(float64) != float64(len(want)) {
		t.Errorf("usage chunk %v", last)
	}
}

func TestStopStrings(t *testing.T) {
	s := start(t, nil)
	_, want := s.want(t, poem, nil, 12, sample.Params{})
	full := s.fe.Tok.Decode(ints(want), true)
	// a stop string from the middle of the reply: the reply ends right before it
	stop := ""
	for i := range want[3:] {
		piece := s.fe.Tok.Decode(ints(want[3+i:4+i]), true)
		if len(strings.TrimSpace(piece)) >= 2 {
			stop = strings.TrimSpace(piece)
			break
		}
	}
	if stop == "" {
		t.Skipf("no printable token in %q", full)
	}
	cut := full[:strings.Index(full, stop)]
	for _, stream := range []bool{false, true} {
		body := fmt.Sprintf(`{"messages":%s,"max_tokens":12,"stop":[%q],"stream":%v}`, poem, stop, stream)
		resp, err := http.Post(s.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var text string
		var finish any
		if stream {
			for _, c := range sse(t, resp.Body) {
				ch := c["choices"].([]any)[0].(map[string]any)
				if s, ok := ch["delta"].(map[string]any)["content"].(string); ok {
					text += s
				}
				if ch["finish_reason"] != nil {
					finish = ch["finish_reason"]
				}
			}
		} else {
			var m map[string]any
			json.NewDecoder(resp.Body).Decode(&m)
			ch := m["choices"].([]any)[0].(map[string]any)
			text, finish = ch["message"].(map[string]any)["content"].(string), ch["finish_reason"]
		}
		resp.Body.Close()
		if text != cut || finish != "stop" {
			t.Errorf("stream %v, stop %q: got %q (%v), want %q (stop)", stream, stop, text, finish, cut)
		}
	}
}

func TestCompletionsTokenizeDetokenize(t *testing.T) {
	s := start(t, nil)
	status, _, m := s.post(t, "/v1/completions", `{"model":"tiny","prompt":"The sea is","max_tokens":5,"return_token_ids":true}`)
	if status != 200 {
		t.Fatalf("status %d: %v", status, m)
	}
	p := s.fe.Tok.Encode("The sea is")
	want, _ := lanestest.Reference(s.info, 0, lanestest.Want{Prompt: toInt32(p), MaxTokens: 5, EOS: s.eos})
	ch := m["choices"].([]any)[0].(map[string]any)
	if got := ids(ch["token_ids"]); !slices.Equal(got, want) || m["object"] != "text_completion" {
		t.Fatalf("completion %v, want %v (%v)", got, want, m["object"])
	}
	if ch["text"] != s.fe.Tok.Decode(ints(want), true) {
		t.Errorf("text %q", ch["text"])
	}
	// ids as the prompt give the same
	pj, _ := json.Marshal(p)
	_, _, m2 := s.post(t, "/v1/completions", `{"prompt":`+string(pj)+`,"max_tokens":5,"return_token_ids":true}`)
	if got := ids(m2["choices"].([]any)[0].(map[string]any)["token_ids"]); !slices.Equal(got, want) {
		t.Errorf("prompt as ids: %v, want %v", got, want)
	}
	_, _, tk := s.post(t, "/tokenize", `{"prompt":"The sea is"}`)
	if !slices.Equal(ids(tk["tokens"]), toInt32(p)) || int(tk["count"].(float64)) != len(p) || tk["max_model_len"].(float64) != 512 {
		t.Errorf("tokenize %v", tk)
	}
	_, _, dt := s.post(t, "/detokenize", `{"tokens":`+string(pj)+`}`)
	if dt["prompt"] != "The sea is" {
		t.Errorf("detokenize %v", dt)
	}
	resp, err := http.Get(s.url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var models map[string]any
	json.NewDecoder(resp.Body).Decode(&models)
	resp.Body.Close()
	if d := models["data"].([]any); len(d) != 1 || d[0].(map[string]any)["id"] != "tiny" {
		t.Errorf("models %v", models)
	}
}

// TestBadRequests sends each bad request raw and checks the OpenAI error object; the server keeps serving.
func TestBadRequests(t *testing.T) {
	s := start(t, func(c *Config, l *lanes.Config) { c.MaxImages = 2; c.MaxBody = 1 << 20 })
	img := dataURL(t, filepath.Join(tinyDir, "oracle/images/a.png"))
	part := func(p string) string {
		return `{"messages":[{"role":"user","content":[` + p + `,{"type":"text","text":"hi"}]}]}`
	}
	imgPart := func(url string) string { return fmt.Sprintf(`{"type":"image_url","image_url":{"url":%q}}`, url) }
	notPNG := "data:image/png;base64," + base64.StdEncoding.EncodeToString([]byte("this is not an image"))
	huge := `{"messages":[{"role":"user","content":"` + strings.Repeat("a", 2<<20) + `"}]}`
	cases := []struct {
		name, path, body string
		status           int
		param, code      string
		msg              string
	}{
		{"malformed JSON", "/v1/chat/completions", `{"messages": [`, 400, "", "", "not valid JSON"},
		{"messages not an array", "/v1/chat/completions", `{"messages": "hi"}`, 400, "messages", "", "messages must be an array"},
		{"max_tokens a string", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":"ten"}`, 400, "max_tokens", "", "must be an integer"},
		{"temperature out of range", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"temperature":3}`, 400, "temperature", "", "between 0 and 2"},
		{"unknown model", "/v1/chat/completions", `{"model":"gpt-9","messages":[{"role":"user","content":"hi"}]}`, 404, "model", "model_not_found", `"gpt-9" does not exist`},
		{"logprobs", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"logprobs":true}`, 400, "logprobs", "", "logprobs are not supported"},
		{"json mode", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"}}`, 400, "response_format", "", "only returns free text"},
		{"n > 1", "/v1/chat/completions", `{"n":2,"messages":[{"role":"user","content":"hi"}]}`, 400, "n", "", "n must be 1"},
		{"tools", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}]}`, 400, "tools", "", "does not support tool calls"},
		{"tool_choice", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"tool_choice":"auto"}`, 400, "tool_choice", "", "does not support tool calls"},
		{"functions", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"functions":[{"name":"f"}]}`, 400, "functions", "", "function calls"},
		{"logit_bias", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"logit_bias":{"15":-100}}`, 400, "logit_bias", "", "does not support logit_bias"},
		{"presence_penalty", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"presence_penalty":0.5}`, 400, "presence_penalty", "", "applies no penalties"},
		{"frequency_penalty", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"frequency_penalty":-1}`, 400, "frequency_penalty", "", "applies no penalties"},
		{"echo", "/v1/completions", `{"prompt":"hi","echo":true}`, 400, "echo", "", "echo is not supported"},
		{"best_of", "/v1/completions", `{"prompt":"hi","best_of":3}`, 400, "best_of", "", "must be 1"},
		{"suffix", "/v1/completions", `{"prompt":"hi","suffix":"end"}`, 400, "suffix", "", "suffix is not supported"},
		{"no messages", "/v1/chat/completions", `{"messages":[]}`, 400, "messages", "", "messages is empty"},
		{"audio part", "/v1/chat/completions", part(`{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}`), 400, "messages", "", "content parts must be text or image_url; audio and video inputs are unsupported"},
		{"video part", "/v1/chat/completions", part(`{"type":"video_url","video_url":{"url":"data:video/mp4;base64,AAAA"}}`), 400, "messages", "", "content parts must be text or image_url; audio and video inputs are unsupported"},
		{"http image", "/v1/chat/completions", part(imgPart("https://example.com/cat.png")), 400, "messages", "", "does not fetch images"},
		{"bad image", "/v1/chat/completions", part(imgPart(notPNG)), 400, "messages", "", "image 1 is not PNG, JPEG or WebP"},
		{"second image bad", "/v1/chat/completions", part(imgPart(img) + "," + imgPart(notPNG)), 400, "messages", "", "image 2"},
		{"bad base64", "/v1/chat/completions", part(imgPart("data:image/png;base64,@@@@")), 400, "messages", "", "image 1: the data URL's base64"},
		{"too many images", "/v1/chat/completions", part(imgPart(img) + "," + imgPart(img) + "," + imgPart(img)), 400, "messages", "", "more than 2 images"},
		{"context exceeded", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":100000}`, 400, "max_tokens", "context_length_exceeded", "context is 512 tokens"},
		{"prompt fills the context", "/v1/completions", `{"prompt":"` + strings.Repeat("sea ", 600) + `"}`, 400, "prompt", "context_length_exceeded", "leaves no room"},
		{"oversized body", "/v1/chat/completions", huge, 413, "", "body_too_large", "over the 1048576-byte limit"},
		{"stream_options alone", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":true}}`, 400, "stream_options", "", "only allowed with stream"},
		{"stop of numbers", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"stop":[1,2]}`, 400, "stop", "", "stop must be a string"},
		{"completion without prompt", "/v1/completions", `{"max_tokens":3}`, 400, "prompt", "", "prompt is required"},
		{"completion id out of range", "/v1/completions", `{"prompt":[1,999999]}`, 400, "prompt", "", "outside the vocabulary"},
		{"detokenize bad id", "/detokenize", `{"tokens":[-1]}`, 400, "tokens", "", "outside the vocabulary"},
		{"tokenize nothing", "/tokenize", `{}`, 400, "prompt", "", "send prompt"},
		{"unknown path", "/v1/embeddings", `{}`, 404, "", "not_found", "there is no POST /v1/embeddings"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, _, m := s.post(t, c.path, c.body)
			e, ok := m["error"].(map[string]any)
			if status != c.status || !ok {
				t.Fatalf("status %d, body %v; want %d and an error object", status, m, c.status)
			}
			for _, k := range []string{"message", "type", "param", "code"} {
				if _, ok := e[k]; !ok {
					t.Errorf("error object has no %q: %v", k, e)
				}
			}
			if e["type"] != "invalid_request_error" || !strings.Contains(e["message"].(string), c.msg) {
				t.Errorf("error %v; want type invalid_request_error and a message containing %q", e, c.msg)
			}
			if c.param != "" && e["param"] != c.param {
				t.Errorf("param %v, want %q", e["param"], c.param)
			}
			if c.code != "" && e["code"] != c.code {
				t.Errorf("code %v, want %q", e["code"], c.code)
			}
		})
	}
	// still serving
	if status, _, m := s.post(t, "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`); status != 200 {
		t.Fatalf("after the bad requests: %d %v", status, m)
	}
}

func TestAPIKey(t *testing.T) {
	s := start(t, func(c *Config, l *lanes.Config) { c.APIKey = "sesame" })
	body := `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`
	for _, h := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", "sesame"}} {
		status, _, m := s.post(t, "/v1/chat/completions", body, h...)
		if e, ok := m["error"].(map[string]any); status != 401 || !ok || e["code"] != "invalid_api_key" {
			t.Errorf("header %v: %d %v", h, status, m)
		}
	}
	for _, h := range []string{"Bearer sesame", "bearer sesame", "BEARER  sesame "} { // the scheme is case-insensitive
		if status, _, m := s.post(t, "/v1/chat/completions", body, "Authorization", h); status != 200 {
			t.Errorf("right key as %q: %d %v", h, status, m)
		}
	}
	resp, _ := http.Get(s.url + "/health")
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("/health needs no key: %d", resp.StatusCode)
	}
}

func TestQueueFull(t *testing.T) {
	s := start(t, func(c *Config, l *lanes.Config) { l.Parallel, l.Queue = 1, 0 })
	release := s.fake.Hold()
	first := make(chan int, 1)
	go func() {
		status, _, _ := s.post(t, "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`)
		first <- status
	}()
	for s.lanes.Stats().Running == 0 {
		time.Sleep(time.Millisecond)
	}
	status, h, m := s.post(t, "/v1/chat/completions", `{"messages":[{"role":"user","content":"hello"}],"max_tokens":2}`)
	release()
	if e, ok := m["error"].(map[string]any); status != 429 || !ok || e["code"] != "queue_full" || h.Get("Retry-After") == "" {
		t.Errorf("second request with one busy lane and no queue: %d %v Retry-After %q", status, m, h.Get("Retry-After"))
	}
	if st := <-first; st != 200 {
		t.Errorf("first request: %d", st)
	}
}

func TestHealthWhileLoading(t *testing.T) {
	srv := New(Config{Name: "tiny"})
	h := httptest.NewServer(srv)
	defer h.Close()
	resp, _ := http.Get(h.URL + "/health")
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Errorf("/health while loading: %d", resp.StatusCode)
	}
	resp, _ = http.Post(h.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"messages":[]}`))
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	resp.Body.Close()
	if resp.StatusCode != 503 || m["error"] == nil {
		t.Errorf("chat while loading: %d %v", resp.StatusCode, m)
	}
}

func TestConcurrentMatchesSolo(t *testing.T) {
	s := start(t, nil)
	type run struct {
		msgs string
		sp   sample.Params
		body string
	}
	var runs []run
	for i := range 8 {
		msgs := fmt.Sprintf(`[{"role":"user","content":"Tell me about number %d and the number %d."}]`, i, i*i)
		r := run{msgs: msgs, body: `{"messages":` + msgs + `,"max_tokens":8,"return_token_ids":true`}
		if i%4 == 1 {
			r.sp = sample.Params{Temperature: 0.7, TopP: 0.9, Seed: uint64(i)}
			r.body += fmt.Sprintf(`,"temperature":0.7,"top_p":0.9,"seed":%d`, i)
		}
		r.body += "}"
		runs = append(runs, r)
	}
	got := make([][]int32, len(runs))
	var wg sync.WaitGroup
	for i, r := range runs {
		wg.Go(func() {
			_, _, m := s.post(t, "/v1/chat/completions", r.body)
			got[i] = ids(m["choices"].([]any)[0].(map[string]any)["token_ids"])
		})
	}
	wg.Wait()
	for i, r := range runs {
		if _, want := s.want(t, r.msgs, nil, 8, r.sp); !slices.Equal(got[i], want) {
			t.Errorf("request %d beside others: %v, want %v", i, got[i], want)
		}
	}
	if st := s.fake.Stats(); st.Mixed == 0 {
		t.Errorf("no round held more than one request: %+v", st)
	}
}

func TestDisconnectFreesLane(t *testing.T) {
	s := start(t, func(c *Config, l *lanes.Config) { l.PromptCache = false })
	ctx, cancel := context.WithCancel(context.Background())
	body := `{"messages":` + poem + `,"max_tokens":400,"stream":true}`
	req, _ := http.NewRequestWithContext(ctx, "POST", s.url+"/v1/chat/completions", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := s.lanes.Stats()
		if st.Running == 0 && st.PagesUsed == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the client left: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for want := `tfc:request_success_total{finished_reason="cancelled",model_name="tiny"} 1`; !strings.Contains(s.metricsText(t), want); {
		if time.Now().After(deadline) {
			t.Fatalf("metrics do not count the cancelled request:\n%s", grep(s.metricsText(t), "tfc:request"))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *ts) metricsText(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(s.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestMetrics(t *testing.T) {
	s := start(t, nil)
	for range 2 {
		s.post(t, "/v1/chat/completions", `{"messages":`+poem+`,"max_tokens":4}`)
	}
	m := s.metricsText(t)
	for _, name := range []string{
		"tfc:time_to_first_token_seconds_count", "tfc:inter_token_latency_seconds_count", "tfc:e2e_request_latency_seconds_count",
		"tfc:num_requests_running", "tfc:num_requests_waiting", "tfc:prompt_tokens_total", "tfc:generation_tokens_total",
		"tfc:prefix_cache_queries_total", "tfc:prefix_cache_hits_total", "tfc:spec_decode_num_draft_tokens_total",
		"tfc:spec_decode_num_accepted_tokens_total", "tfc:kv_cache_usage_perc",
	} {
		if !strings.Contains(m, name+"{") {
			t.Errorf("/metrics has no %s", name)
		}
	}
	if !strings.Contains(m, `tfc:e2e_request_latency_seconds_count{model_name="tiny"} 2`) ||
		!strings.Contains(m, `tfc:generation_tokens_total{model_name="tiny"} 8`) {
		t.Errorf("counts are off:\n%s", grep(m, "tfc:"))
	}
}

func grep(text, word string) string {
	var b bytes.Buffer
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, word) && !strings.HasPrefix(l, "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func TestOpenAIClient(t *testing.T) {
	s := start(t, func(c *Config, l *lanes.Config) { c.APIKey = "sesame" })
	client := openai.NewClient(option.WithBaseURL(s.url+"/v1/"), option.WithAPIKey("sesame"), option.WithMaxRetries(0))
	ctx := context.Background()
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Write a short poem about the sea.")}
	_, want := s.want(t, `[{"role":"user","content":"Write a short poem about the sea."}]`, nil, 8, sample.Params{})
	wantText := s.fe.Tok.Decode(ints(want), true)

	resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "tiny", Messages: msgs, MaxTokens: openai.Int(8), Temperature: openai.Float(0), Seed: openai.Int(3),
	}, option.WithJSONSet("return_token_ids", true))
	if err != nil {
		t.Fatal(err)
	}
	var got []int32
	if err := json.Unmarshal([]byte(resp.Choices[0].JSON.ExtraFields["token_ids"].Raw()), &got); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) || resp.Choices[0].Message.Content != wantText || resp.Usage.CompletionTokens != int64(len(want)) {
		t.Errorf("client chat: %v %q, want %v %q", got, resp.Choices[0].Message.Content, want, wantText)
	}

	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: "tiny", Messages: msgs, MaxCompletionTokens: openai.Int(8), Temperature: openai.Float(0),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content != wantText || acc.Usage.CompletionTokens != int64(len(want)) || acc.Choices[0].FinishReason != "length" {
		t.Errorf("client stream: %q (%s, usage %d), want %q", acc.Choices[0].Message.Content, acc.Choices[0].FinishReason, acc.Usage.CompletionTokens, wantText)
	}

	comp, err := client.Completions.New(ctx, openai.CompletionNewParams{
		Model: "tiny", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("The sea is")}, MaxTokens: openai.Int(4),
	})
	if err != nil {
		t.Fatal(err)
	}
	cwant, _ := lanestest.Reference(s.info, 0, lanestest.Want{Prompt: toInt32(s.fe.Tok.Encode("The sea is")), MaxTokens: 4, EOS: s.eos})
	if comp.Choices[0].Text != s.fe.Tok.Decode(ints(cwant), true) {
		t.Errorf("client completion %q", comp.Choices[0].Text)
	}

	// errors come back as the client's typed API error
	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-9", Messages: msgs})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" || apiErr.Param != "model" {
		t.Errorf("unknown model through the client: %v", err)
	}
	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "tiny", Messages: msgs, N: openai.Int(2)})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "n" {
		t.Errorf("n=2 through the client: %v", err)
	}
	bad := openai.NewClient(option.WithBaseURL(s.url+"/v1/"), option.WithAPIKey("wrong"), option.WithMaxRetries(0))
	_, err = bad.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "tiny", Messages: msgs})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 {
		t.Errorf("wrong key through the client: %v", err)
	}
	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "tiny", Messages: []openai.ChatCompletionMessageParamUnion{
		openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "https://example.com/a.png"}),
			openai.TextContentPart("what is this?"),
		})}})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "does not fetch images") {
		t.Errorf("http image through the client: %v", err)
	}
}

// TestLoad runs 64 requests, 8 at a time, a quarter of them cancelled mid-stream; afterwards
// lanes, pages and the running gauges are back to zero and the finished ones match the reference.
func TestLoad(t *testing.T) {
	s := start(t, func(c *Config, l *lanes.Config) { l.Queue = 64 })
	const total, at = 64, 8
	sem := make(chan struct{}, at)
	var wg sync.WaitGroup
	for i := range total {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			msgs := fmt.Sprintf(`[{"role":"user","content":"Request %d of the load run."}]`, i%16)
			body := `{"messages":` + msgs + `,"max_tokens":6,"stream":true,"return_token_ids":true}`
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", s.url+"/v1/chat/completions", strings.NewReader(body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			if i%4 == 3 {
				bufio.NewReader(resp.Body).ReadString('\n')
				cancel()
				return
			}
			var got []int32
			for _, c := range sse(t, resp.Body) {
				if ch := c["choices"].([]any); len(ch) > 0 {
					if v, ok := ch[0].(map[string]any)["token_ids"]; ok {
						got = append(got, ids(v)...)
					}
				}
			}
			if _, want := s.want(t, msgs, nil, 6, sample.Params{}); !slices.Equal(got, want) {
				t.Errorf("request %d: %v, want %v", i, got, want)
			}
		})
	}
	wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := s.lanes.Stats()
		if st.Running == 0 && st.Waiting == 0 && st.PagesUsed == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the load run: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	m := s.metricsText(t)
	for _, line := range []string{`tfc:num_requests_running{model_name="tiny"} 0`, `tfc:num_requests_waiting{model_name="tiny"} 0`, `tfc:kv_cache_usage_perc{model_name="tiny"} 0`} {
		if !strings.Contains(m, line) {
			t.Errorf("metrics lack %q:\n%s", line, grep(m, "tfc:"))
		}
	}
}

// FuzzChat sends arbitrary bodies: every answer is a 200 completion or an OpenAI error object.
func FuzzChat(f *testing.F) {
	for _, seed := range []string{
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":"data:image/png;base64,AAAA"}]}],"max_tokens":1}`,
		`{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`,
		`{"messages":[{"role":"user","content":{"a":1}}],"stop":{"x":1},"n":null,"seed":-5}`,
		`{"messages":[{"content":"x"}],"top_k":-2,"top_p":0}`, `null`, `[]`, `"x"`, `{"messages":null}`,
	} {
		f.Add(seed)
	}
	s := start(f, func(c *Config, l *lanes.Config) { c.MaxTokens = 2 })
	f.Fuzz(func(t *testing.T, body string) { answers(t, s, "/v1/chat/completions", body, "choices") })
}

// answers posts body to path and checks the answer: a 200 with the field ok, or an OpenAI error
// object with a message and a 4xx status.
func answers(t *testing.T, s *ts, path, body, ok string) {
	t.Helper()
	w := httptest.NewRecorder()
	s.srv.ServeHTTP(w, httptest.NewRequest("POST", path, strings.NewReader(body)))
	var m map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
		t.Fatalf("status %d, body not JSON: %q", w.Code, w.Body.String())
	}
	if w.Code == 200 {
		if _, found := m[ok]; !found {
			t.Fatalf("200 without %s: %v", ok, m)
		}
		return
	}
	if e, found := m["error"].(map[string]any); !found || e["message"] == "" || w.Code >= 500 {
		t.Fatalf("status %d, body %v", w.Code, m)
	}
}

// TestFetchImageURLs serves an image over HTTP and checks that --allow-image-urls fetches it and
// gives the same reply as the same image sent inline, and that a missing one is a 400.
func TestFetchImageURLs(t *testing.T) {
	png, err := os.ReadFile("../../testdata/qwen2-vl-tiny/oracle/images/a.png")
	if err != nil {
		t.Fatal(err)
	}
	images := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/a.png" {
			http.NotFound(w, r)
			return
		}
		w.Write(png)
	}))
	defer images.Close()
	s := start(t, func(c *Config, _ *lanes.Config) { c.FetchImages = true })
	body := func(url string) string {
		return fmt.Sprintf(`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":%q}},{"type":"text","text":"What is in this picture?"}]}],"max_tokens":4,"return_token_ids":true}`, url)
	}
	st, _, fetched := s.post(t, "/v1/chat/completions", body(images.URL+"/a.png"))
	if st != 200 {
		t.Fatalf("fetched image: status %d: %v", st, fetched)
	}
	st, _, inline := s.post(t, "/v1/chat/completions", body("data:image/png;base64,"+base64.StdEncoding.EncodeToString(png)))
	if st != 200 {
		t.Fatalf("inline image: status %d: %v", st, inline)
	}
	if fmt.Sprint(fetched["prompt_token_ids"]) != fmt.Sprint(inline["prompt_token_ids"]) {
		t.Errorf("fetched and inline prompts differ:\n%v\n%v", fetched["prompt_token_ids"], inline["prompt_token_ids"])
	}
	st, _, missing := s.post(t, "/v1/chat/completions", body(images.URL+"/b.png"))
	if st != 400 || !strings.Contains(fmt.Sprint(missing), "image 1 could not be fetched") {
		t.Errorf("missing image: status %d: %v", st, missing)
	}
}

// TestRepetitionAndEOSFields: a looping output stops with finish_reason "stop" and stop_reason
// "repetition" (on by default, off with repetition_stop: false, streamed alike); min_tokens and
// ignore_eos are accepted and checked.
func TestRepetitionAndEOSFields(t *testing.T) {
	s := start(t, func(c *Config, lc *lanes.Config) { c.RepetitionStop = true; c.MaxTokens = 300 })
	body := func(extra string) string {
		return `{"model":"tiny","messages":[{"role":"user","content":"Read the page."}],"max_tokens":300,"return_token_ids":true` + extra + `}`
	}
	code, _, m := s.post(t, "/v1/chat/completions", body(""))
	if code != 200 {
		t.Fatalf("status %d: %v", code, m)
	}
	ch := m["choices"].([]any)[0].(map[string]any)
	if ch["finish_reason"] != "stop" || ch["stop_reason"] != "repetition" || len(ch["token_ids"].([]any)) != 128 {
		t.Errorf("looping chat: finish %v, stop_reason %v, %d tokens; want stop, repetition, 128", ch["finish_reason"], ch["stop_reason"], len(ch["token_ids"].([]any)))
	}
	code, _, m = s.post(t, "/v1/chat/completions", body(`,"repetition_stop":false,"max_tokens":200`))
	ch = m["choices"].([]any)[0].(map[string]any)
	if code != 200 || ch["finish_reason"] != "length" || ch["stop_reason"] != nil || len(ch["token_ids"].([]any)) != 200 {
		t.Errorf("repetition_stop false: %d %v %v", code, ch["finish_reason"], ch["stop_reason"])
	}
	raw := s.streamText(t, body(`,"stream":true`))
	if !strings.Contains(string(raw), `"finish_reason":"stop"`) || !strings.Contains(string(raw), `"stop_reason":"repetition"`) {
		t.Errorf("streamed looping chat lacks stop_reason repetition:\n%s", raw)
	}
	code, _, m = s.post(t, "/v1/chat/completions", body(`,"min_tokens":5,"ignore_eos":true,"max_tokens":20,"repetition_stop":false`))
	if code != 200 {
		t.Errorf("min_tokens and ignore_eos: status %d %v", code, m)
	}
	for _, bad := range []string{`,"min_tokens":-1`, `,"min_tokens":400`} {
		if code, _, m := s.post(t, "/v1/chat/completions", body(bad)); code != 400 || m["error"].(map[string]any)["param"] != "min_tokens" {
			t.Errorf("%s: status %d %v, want 400 naming min_tokens", bad, code, m)
		}
	}
}

// TestStageTimes: a chat with an image and return_timings gets where its time went, stage by
// stage, whole and streamed, and /metrics counts every stage.
func TestStageTimes(t *testing.T) {
	s := start(t, nil)
	img := dataURL(t, filepath.Join(tinyDir, "oracle/images/a.png"))
	body := func(extra string) string {
		return `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"` + img + `"}},{"type":"text","text":"Read it."}]}],"max_tokens":4,"return_timings":true` + extra + `}`
	}
	code, _, m := s.post(t, "/v1/chat/completions", body(""))
	if code != 200 {
		t.Fatalf("status %d: %v", code, m)
	}
	tm, ok := m["timings"].(map[string]any)
	if !ok {
		t.Fatalf("no timings in %v", m)
	}
	for _, k := range []string{"image_decode_ms", "image_preprocess_ms", "queue_ms", "vision_ms", "prefill_ms", "decode_ms", "total_ms"} {
		if v, ok := tm[k].(float64); !ok || v < 0 {
			t.Errorf("timings[%s] = %v", k, tm[k])
		}
	}
	if tm["vision_ms"].(float64) <= 0 || tm["image_decode_ms"].(float64) <= 0 || tm["total_ms"].(float64) < tm["vision_ms"].(float64) {
		t.Errorf("timings %v: the image's stages took no time", tm)
	}
	raw := s.streamText(t, body(`,"stream":true`))
	if !strings.Contains(string(raw), `"timings":{`) {
		t.Errorf("the stream carries no timings:\n%s", raw)
	}
	if _, _, m := s.post(t, "/v1/chat/completions", `{"messages":`+poem+`,"max_tokens":4}`); m["timings"] != nil {
		t.Errorf("timings without return_timings: %v", m["timings"])
	}
	text := s.metricsText(t)
	for _, name := range []string{"image_decode_seconds", "image_preprocess_seconds", "vision_tower_seconds", "request_queue_time_seconds",
		"request_prefill_time_seconds", "request_decode_time_seconds"} {
		if !strings.Contains(text, "tfc:"+name+"_count{") || strings.Contains(text, "tfc:"+name+`_count{model_name="tiny"} 0`) {
			t.Errorf("/metrics does not count %s:\n%s", name, grep(text, name))
		}
	}
}

// TestModelRetrieve: GET /v1/models/{id} gives the served model, as OpenAI clients'
// models.retrieve asks, and a 404 naming the served one for any other id.
func TestModelRetrieve(t *testing.T) {
	s := start(t, nil)
	get := func(path string) (int, map[string]any) {
		resp, err := http.Get(s.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	if code, m := get("/v1/models/tiny"); code != 200 || m["id"] != "tiny" || m["object"] != "model" || m["max_model_len"] == nil {
		t.Errorf("/v1/models/tiny: %d %v", code, m)
	}
	code, m := get("/v1/models/org/other")
	if e, ok := m["error"].(map[string]any); code != 404 || !ok || e["code"] != "model_not_found" || !strings.Contains(e["message"].(string), `"tiny"`) {
		t.Errorf("/v1/models/org/other: %d %v", code, m)
	}
}

// TestNeutralUnsupportedFields: the fields refused when asked for pass at their neutral values,
// as OpenAI clients send them.
func TestNeutralUnsupportedFields(t *testing.T) {
	s := start(t, nil)
	body := `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"presence_penalty":0,"frequency_penalty":0,` +
		`"tools":null,"tool_choice":"none","logit_bias":{},"functions":[]}`
	if code, _, m := s.post(t, "/v1/chat/completions", body); code != 200 {
		t.Errorf("neutral values: %d %v", code, m)
	}
	if code, _, m := s.post(t, "/v1/completions", `{"prompt":"hi","max_tokens":2,"echo":false,"best_of":1,"suffix":""}`); code != 200 {
		t.Errorf("neutral completion values: %d %v", code, m)
	}
}

// TestLongTextRefusedUnencoded: a prompt text longer than the context times the longest token is
// refused with context_length_exceeded before it is encoded, in a chat and in a completion.
func TestLongTextRefusedUnencoded(t *testing.T) {
	s := start(t, nil)
	limit := 512 * s.fe.Tok.MaxTokenBytes()
	word := strings.Repeat("a", limit+1)
	for _, c := range []struct{ path, body, param string }{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"` + word + `"}]}`, "messages"},
		{"/v1/completions", `{"prompt":"` + word + `"}`, "prompt"},
	} {
		code, _, m := s.post(t, c.path, c.body)
		e, _ := m["error"].(map[string]any)
		if code != 400 || e == nil || e["code"] != "context_length_exceeded" || e["param"] != c.param || !strings.Contains(e["message"].(string), "bytes") {
			t.Errorf("%s: %d %v", c.path, code, m)
		}
	}
}

// lockedBuffer is a log sink safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestDisconnectLogged499: a non-streaming request whose client leaves is logged with status
// 499 (client closed), not as a server error.
func TestDisconnectLogged499(t *testing.T) {
	var logs lockedBuffer
	s := start(t, func(c *Config, l *lanes.Config) { c.Log = slog.New(slog.NewTextHandler(&logs, nil)) })
	release := s.fake.Hold()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", s.url+"/v1/chat/completions", strings.NewReader(`{"messages":`+poem+`,"max_tokens":8}`))
	done := make(chan struct{})
	go func() {
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
		close(done)
	}()
	time.Sleep(100 * time.Millisecond)
	cancel()
	<-done
	// the server learns of the closed connection from a background read; on a loaded machine
	// that can come after a released round has finished the reply, so give it time first
	time.Sleep(300 * time.Millisecond)
	release()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), "status=499") {
		if time.Now().After(deadline) {
			t.Fatalf("no status=499 in the log:\n%s", logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if strings.Contains(logs.String(), "status=500") {
		t.Errorf("a disconnect was logged as a server error:\n%s", logs.String())
	}
}

// TestImagesPreprocessInParallel: while one request is held between its image's decode and its
// preprocessing, another request with an image is answered, so no lock spans preprocessing.
func TestImagesPreprocessInParallel(t *testing.T) {
	s := start(t, nil)
	held, release := make(chan struct{}), make(chan struct{})
	var first sync.Once
	s.fe.OnDecoded = func(int) {
		hold := false
		first.Do(func() { hold = true })
		if hold {
			close(held)
			<-release
		}
	}
	page := dataURL(t, filepath.Join(tinyDir, "oracle/images/a.png"))
	body := fmt.Sprintf(`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":%q}},{"type":"text","text":"Read it."}]}],"max_tokens":4}`, page)
	firstStatus := make(chan int, 1)
	go func() {
		resp, err := http.Post(s.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			firstStatus <- 0
			return
		}
		resp.Body.Close()
		firstStatus <- resp.StatusCode
	}()
	<-held
	// A deadline turns a serialised server into a failure instead of a hang.
	client := &http.Client{Timeout: time.Minute}
	resp, err := client.Post(s.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		close(release)
		t.Fatalf("a request waited on another's image preprocessing: %v", err)
	}
	resp.Body.Close()
	close(release)
	if resp.StatusCode != 200 {
		t.Fatalf("second request: status %d", resp.StatusCode)
	}
	if st := <-firstStatus; st != 200 {
		t.Fatalf("held request: status %d", st)
	}
}
