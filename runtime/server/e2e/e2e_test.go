// Package e2e serves every generated family's tiny checkpoint (gen/registry) on the CPU and checks
// the ids that come back over HTTP against the oracle's fixtures (transformers' for Qwen2-VL, the
// publisher's code for dots.ocr); some tests exercise one family's own behaviour.
package e2e

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"tfc/gen/registry"
	"tfc/runtime/device"
	"tfc/runtime/device/cpu"
	"tfc/runtime/engine"
	"tfc/runtime/lanes"
	"tfc/runtime/loadgen"
	"tfc/runtime/model"
	"tfc/runtime/server"
)

const (
	tinyDir = "../../../testdata/qwen2-vl-tiny"
	dotsDir = "../../../testdata/dots-ocr-tiny"
)

type oracleCase struct {
	dir      string // the checkpoint the case belongs to
	Case     string `json:"case"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"` // a string, or a list of parts
	} `json:"messages"`
	PromptIDs    []int32 `json:"prompt_ids"`
	MaxNewTokens int     `json:"max_new_tokens"`
	OutputIDs    []int32 `json:"output_ids"`
	FinishReason string  `json:"finish_reason"`
}

// body turns an oracle case into a chat request with data-URL images.
func (c *oracleCase) body(t *testing.T) string {
	t.Helper()
	var msgs []map[string]any
	for _, m := range c.Messages {
		var text string
		if json.Unmarshal(m.Content, &text) == nil {
			msgs = append(msgs, map[string]any{"role": m.Role, "content": text})
			continue
		}
		var content []struct {
			Type  string `json:"type"`
			Text  string `json:"text"`
			Image string `json:"image"`
		}
		if err := json.Unmarshal(m.Content, &content); err != nil {
			t.Fatalf("%s: message content: %v", c.Case, err)
		}
		var parts []map[string]any
		for _, p := range content {
			switch p.Type {
			case "text":
				parts = append(parts, map[string]any{"type": "text", "text": p.Text})
			case "image":
				b, err := os.ReadFile(filepath.Join(c.dir, "oracle", p.Image))
				if err != nil {
					t.Fatal(err)
				}
				parts = append(parts, map[string]any{"type": "image_url", "image_url": map[string]any{
					"url": "data:image/png;base64," + base64.StdEncoding.EncodeToString(b)}})
			}
		}
		msgs = append(msgs, map[string]any{"role": m.Role, "content": parts})
	}
	return c.request(t, map[string]any{"messages": msgs, "max_tokens": c.MaxNewTokens, "temperature": 0, "return_token_ids": true})
}

// request marshals a body after applying overrides to it.
func (c *oracleCase) request(t *testing.T, body map[string]any, over ...any) string {
	for i := 0; i+1 < len(over); i += 2 {
		body[over[i].(string)] = over[i+1]
	}
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// seeded is the case's request with sampling on.
func (c *oracleCase) seeded(t *testing.T) string {
	var body map[string]any
	json.Unmarshal([]byte(c.body(t)), &body)
	return c.request(t, body, "temperature", 0.8, "top_p", 0.9, "top_k", 40, "seed", 42, "max_tokens", 8)
}

func cases(t *testing.T) []*oracleCase {
	return casesIn(t, tinyDir, "text", "image1", "image2")
}

func casesIn(t *testing.T, dir string, names ...string) []*oracleCase {
	var out []*oracleCase
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(dir, "oracle", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		c := &oracleCase{dir: dir}
		if err := json.Unmarshal(b, c); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

func serve(t *testing.T, drafts int, cache bool) string {
	url, _ := serveLanes(t, drafts, cache)
	return url
}

func serveLanes(t *testing.T, drafts int, cache bool) (string, *lanes.Scheduler) {
	return serveDir(t, tinyDir, drafts, cache)
}

func serveDir(t *testing.T, dir string, drafts int, cache bool) (string, *lanes.Scheduler) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Fatalf("%s/tokenizer.json is missing; run make testdata", dir)
	}
	fe, err := engine.LoadFrontend(dir)
	if err != nil {
		t.Fatal(err)
	}
	// with drafts and the prompt cache, rounds are small so prompts are filled in several pieces
	rows := 128
	if drafts > 0 {
		rows = 24
	}
	limits := model.Limits{Context: 1024, Parallel: 4, Rows: rows, Patches: 4096, PageSize: 16}
	e, err := engine.Open(dir, cpu.New(), limits)
	if err != nil {
		t.Fatal(err)
	}
	var eos []int32
	for id := range e.EOS {
		eos = append(eos, int32(id))
	}
	l, err := lanes.New(e.Model, lanes.Config{Parallel: limits.Parallel, Context: limits.Context, Rows: limits.Rows,
		PageSize: limits.PageSize, Queue: 64, EOS: eos, Drafts: drafts, PromptCache: cache, MaxPatches: limits.Patches})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(server.Config{Name: filepath.Base(dir)})
	srv.Ready(l, fe, e.Info)
	h := httptest.NewServer(srv)
	t.Cleanup(func() {
		h.Close()
		l.Close()
		e.Close()
	})
	return h.URL, l
}

func chat(t *testing.T, url, body string) (prompt, out []int32, finish string) {
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return
	}
	defer resp.Body.Close()
	var m struct {
		PromptTokenIDs []int32 `json:"prompt_token_ids"`
		Choices        []struct {
			TokenIDs     []int32 `json:"token_ids"`
			FinishReason string  `json:"finish_reason"`
		} `json:"choices"`
		Error any `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != 200 {
		t.Errorf("status %d, %v, error %v", resp.StatusCode, err, m.Error)
		return
	}
	return m.PromptTokenIDs, m.Choices[0].TokenIDs, m.Choices[0].FinishReason
}

// TestGreedyMatchesTransformers: each oracle case alone, then four copies of every case at once,
// then again resumed from the prompt cache with copy drafts.
func TestGreedyMatchesTransformers(t *testing.T) {
	for _, mode := range []struct {
		drafts int
		cache  bool
	}{{0, false}, {4, true}} {
		t.Run(fmt.Sprintf("drafts%d_cache%v", mode.drafts, mode.cache), func(t *testing.T) {
			greedyCases(t, serve(t, mode.drafts, mode.cache), cases(t), 4, "transformers'")
		})
	}
}

// greedyCases posts each case alone, then copies of every case at once, and checks the prompt
// ids and greedy ids against the oracle's (whose names it in messages).
func greedyCases(t *testing.T, url string, cs []*oracleCase, copies int, whose string) {
	t.Helper()
	for _, c := range cs {
		prompt, out, finish := chat(t, url, c.body(t))
		if !slices.Equal(prompt, c.PromptIDs) {
			t.Fatalf("%s: prompt ids %v, %s %v", c.Case, prompt, whose, c.PromptIDs)
		}
		if !slices.Equal(out, c.OutputIDs) || finish != c.FinishReason {
			t.Errorf("%s alone: %v (%s), %s %v (%s)", c.Case, out, finish, whose, c.OutputIDs, c.FinishReason)
		}
	}
	var wg sync.WaitGroup
	for range copies {
		for _, c := range cs {
			body := c.body(t)
			wg.Go(func() {
				if _, out, _ := chat(t, url, body); !slices.Equal(out, c.OutputIDs) {
					t.Errorf("%s beside others: %v, %s %v", c.Case, out, whose, c.OutputIDs)
				}
			})
		}
	}
	wg.Wait()
}

// TestEveryFamilyOverHTTP serves each generated family's fixture (gen/registry) with drafts and
// the prompt cache on, and posts every case its oracle recorded alone and beside copies.
func TestEveryFamilyOverHTTP(t *testing.T) {
	for _, f := range registry.Families {
		t.Run(f.Name, func(t *testing.T) {
			dir := filepath.Join("../../..", f.Fixture)
			paths, err := filepath.Glob(filepath.Join(dir, "oracle", "*.json"))
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range paths {
				if n := strings.TrimSuffix(filepath.Base(p), ".json"); n != "manifest" {
					names = append(names, n)
				}
			}
			if len(names) == 0 {
				t.Fatalf("%s/oracle records no cases", dir)
			}
			url, _ := serveDir(t, dir, 4, true)
			greedyCases(t, url, casesIn(t, dir, names...), 2, "the oracle's")
		})
	}
}

// TestDotsOCROverHTTP: every dots.ocr case (a string-content text prompt, pictures, the layout
// prompt on a page) alone and all at once, with drafts and the prompt cache on, against the
// publisher's code; the reply's content is the decoded text, with no reasoning part.
func TestDotsOCROverHTTP(t *testing.T) {
	url, _ := serveDir(t, dotsDir, 4, true)
	cs := casesIn(t, dotsDir, "text", "image1", "image2", "layout")
	greedyCases(t, url, cs, 1, "the publisher's")
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(cs[3].body(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct {
		Choices []struct {
			Message map[string]any `json:"message"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || len(m.Choices) != 1 {
		t.Fatalf("reply: %v", err)
	}
	var want struct {
		OutputText string `json:"output_text"`
	}
	b, _ := os.ReadFile(filepath.Join(dotsDir, "oracle", "layout.json"))
	json.Unmarshal(b, &want)
	if got := m.Choices[0].Message["content"]; got != want.OutputText {
		t.Errorf("layout reply content %q, the publisher's text %q", got, want.OutputText)
	}
	if _, ok := m.Choices[0].Message["reasoning_content"]; ok {
		t.Errorf("the reply carries a reasoning part: %v", m.Choices[0].Message)
	}
}

// TestSeededSameEverywhere: seeded sampling gives the same ids alone, four at once, drafted and resumed.
func TestSeededSameEverywhere(t *testing.T) {
	plain := serve(t, 0, false)
	busy := serve(t, 4, true)
	for _, c := range cases(t) {
		body := c.seeded(t)
		_, alone, _ := chat(t, plain, body)
		if len(alone) == 0 {
			t.Fatalf("%s: no output", c.Case)
		}
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if _, out, _ := chat(t, busy, body); !slices.Equal(out, alone) {
					t.Errorf("%s seeded beside others with drafts: %v, alone %v", c.Case, out, alone)
				}
			})
		}
		wg.Wait()
		if _, out, _ := chat(t, busy, body); !slices.Equal(out, alone) {
			t.Errorf("%s seeded resumed: %v, alone %v", c.Case, out, alone)
		}
	}
}

// TestLoadRun sends 64 greedy requests over the oracle cases, 8 at a time, every eighth one
// cancelled after its first chunk; the rest must match transformers, and afterwards the lanes,
// pages and gauges are back to zero. It logs requests/s, latency percentiles and draft acceptance.
func TestLoadRun(t *testing.T) {
	url, l := serveLanes(t, 4, true)
	cs := cases(t)
	const total, at = 64, 8
	sem := make(chan struct{}, at)
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	for i := range total {
		sem <- struct{}{}
		c := cs[i%len(cs)]
		body := c.body(t)
		wg.Go(func() {
			defer func() { <-sem }()
			t0 := time.Now()
			if i%8 == 7 {
				var m map[string]any
				json.Unmarshal([]byte(body), &m)
				m["stream"] = true
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/chat/completions", strings.NewReader(c.request(t, m)))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				bufio.NewReader(resp.Body).ReadString('\n')
				cancel()
				resp.Body.Close()
				return
			}
			if _, out, _ := chat(t, url, body); !slices.Equal(out, c.OutputIDs) {
				t.Errorf("%s under load: %v, transformers' %v", c.Case, out, c.OutputIDs)
			}
			mu.Lock()
			lat = append(lat, time.Since(t0))
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := l.Stats()
		if st.Running == 0 && st.Waiting == 0 && st.PagesUsed == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the load run: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	st := l.Stats()
	t.Logf("%d requests (%d completed), %d at a time, GOMAXPROCS %d: %.1f requests/s, p50 %v, p99 %v",
		total, len(lat), at, runtime.GOMAXPROCS(0), float64(total)/elapsed.Seconds(), pct(0.5).Round(time.Millisecond), pct(0.99).Round(time.Millisecond))
	t.Logf("drafts: %d proposed, %d accepted; prompt cache: %d of %d prompt tokens hit; %d generated tokens in %d rounds",
		st.DraftsProposed, st.DraftsAccepted, st.PrefixHits, st.PrefixQueries, st.GeneratedTokens, st.Rounds)
}

// TestRun serves through server.Run as tfc serve does: plan check against the machine's memory,
// load, health, one oracle case, stop.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- server.Run(ctx, server.Options{Dir: tinyDir, Host: "127.0.0.1", Port: 0, Parallel: 2, Context: 512,
			MaxTokens: 24, Backend: func() (device.Backend, error) { return cpu.New(), nil },
			OnListening: func(a string) { addr <- a }, Log: slog.New(slog.DiscardHandler)})
	}()
	var url string
	select {
	case a := <-addr:
		url = "http://" + a
	case err := <-done:
		t.Fatal(err)
	}
	for {
		resp, err := http.Get(url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case err := <-done:
			t.Fatalf("Run ended while loading: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	c := cases(t)[0]
	if _, out, _ := chat(t, url, c.body(t)); !slices.Equal(out, c.OutputIDs) {
		t.Errorf("%s through Run: %v, transformers' %v", c.Case, out, c.OutputIDs)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestCancelThenNext: a streaming client that leaves in prefill or in decode frees its lane and
// pages, and the next request's ids are transformers'.
func TestCancelThenNext(t *testing.T) {
	url, l := serveLanes(t, 0, false)
	cs := cases(t)
	for _, phase := range []string{"prefill", "decode"} {
		var m map[string]any
		json.Unmarshal([]byte(cs[2].body(t)), &m)
		m["stream"], m["max_tokens"] = true, 900
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/chat/completions", strings.NewReader(cs[2].request(t, m)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		lines := 1 // the role chunk comes before the prompt is filled
		if phase == "decode" {
			lines = 3 // role chunk, blank line, first content chunk
		}
		for range lines {
			if _, err := br.ReadString('\n'); err != nil {
				t.Fatal(err)
			}
		}
		cancel()
		resp.Body.Close()
		deadline := time.Now().Add(10 * time.Second)
		for st := l.Stats(); st.Running != 0 || st.PagesUsed != 0; st = l.Stats() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the cancelled request still holds a lane: %+v", phase, st)
			}
			time.Sleep(5 * time.Millisecond)
		}
		c := cs[1]
		if _, out, _ := chat(t, url, c.body(t)); !slices.Equal(out, c.OutputIDs) {
			t.Errorf("after cancel in %s: %v, transformers' %v", phase, out, c.OutputIDs)
		}
	}
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if want := `tfc:request_success_total{finished_reason="cancelled",model_name="qwen2-vl-tiny"} 2`; !strings.Contains(string(b), want) {
		t.Errorf("metrics lack %q", want)
	}
}

// TestLoadGenerator: tfc bench serve's load generator against the tiny checkpoint served on the
// CPU: every request succeeds, ignore_eos makes each yield max_tokens, and the report has every
// measure. A smoke run of the report's shape, not a timed test.
func TestLoadGenerator(t *testing.T) {
	url := serve(t, 2, true)
	page, err := loadgen.Synthetic(112, 140)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := loadgen.Run(context.Background(), loadgen.Options{URL: url, Images: [][]byte{page}, Prompt: "Read the page.",
		Requests: 6, Concurrency: 3, MaxTokens: 8, IgnoreEOS: true, Timings: true, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Succeeded != 6 || rep.Failed != 0 || rep.OutputTokens != 48 || rep.Model == "" {
		t.Fatalf("report: %+v", rep)
	}
	if rep.TTFT.N != 6 || rep.TPOT.N != 6 || rep.E2E.N != 6 || rep.ITL.N == 0 || rep.PagesPerSecond <= 0 || rep.TTFT.P50 <= 0 {
		t.Errorf("measures missing: %s", rep.Summary())
	}
	for _, k := range []string{"image_decode", "image_preprocess", "queue", "vision", "prefill", "decode", "total"} {
		if rep.Stages[k].N != 6 {
			t.Errorf("server stage %s: %+v", k, rep.Stages[k])
		}
	}
	bad, err := loadgen.Run(context.Background(), loadgen.Options{URL: url, Model: "no-such-model", Images: [][]byte{page},
		Requests: 2, Concurrency: 2, MaxTokens: 4})
	if err != nil || bad.Failed != 2 || len(bad.Errors) != 2 || !strings.Contains(bad.Errors[0], "404") {
		t.Errorf("requests for an unknown model: %+v, %v", bad, err)
	}
}
