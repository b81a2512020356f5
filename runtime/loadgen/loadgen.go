// Package loadgen drives an OpenAI-compatible chat server (tfc serve or any other) with image
// requests and reports what users of OCR servers measure: pages a second, output tokens a
// second, time to first token, time per output token and inter-token latency.
package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// Options say what to send and how hard.
type Options struct {
	URL         string   // the server's base URL, e.g. http://127.0.0.1:8000
	Model       string   // "" takes the first model GET /v1/models lists
	APIKey      string   // sent as a bearer token when set
	Images      [][]byte // encoded pages (PNG, JPEG, WebP), sent in turn; one synthetic page when empty
	Prompt      string   // the text beside each page
	Requests    int
	Concurrency int
	MaxTokens   int
	IgnoreEOS   bool          // ask for ignore_eos (vLLM and tfc honour it), so every page yields MaxTokens
	Timings     bool          // ask for return_timings and return_token_ids (tfc serve): the server's stages, and a token event for every chunk with ids, text or not
	Timeout     time.Duration // per request; 0: none
	Client      *http.Client  // http.DefaultClient when nil
}

// Stats are percentiles of one measure, in milliseconds.
type Stats struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Mean float64 `json:"mean"`
	N    int     `json:"n"`
}

// Report is one run's outcome.
type Report struct {
	URL                string   `json:"url"`
	Model              string   `json:"model"`
	Requests           int      `json:"requests"`
	Concurrency        int      `json:"concurrency"`
	MaxTokens          int      `json:"max_tokens"`
	IgnoreEOS          bool     `json:"ignore_eos"`
	Succeeded          int      `json:"succeeded"`
	Failed             int      `json:"failed"`
	Errors             []string `json:"errors,omitempty"` // the first few
	WallSeconds        float64  `json:"wall_seconds"`
	PagesPerSecond     float64  `json:"pages_per_second"`
	OutputTokens       int      `json:"output_tokens"`
	OutputTokPerSecond float64  `json:"output_tok_per_second"`
	TTFT               Stats    `json:"ttft_ms"` // request sent to first content
	TPOT               Stats    `json:"tpot_ms"` // (last content - first content) / (tokens - 1), per request
	ITL                Stats    `json:"itl_ms"`  // gaps between content chunks
	E2E                Stats    `json:"e2e_ms"`  // request sent to the last chunk
	// Stages are the server's own times a request (return_timings): image_decode, image_preprocess,
	// queue, vision, prefill, decode and total, each in milliseconds.
	Stages map[string]Stats `json:"server_stages_ms,omitempty"`
	Method string           `json:"method"`
}

const method = "Each request is one chat message: the page as a data URL and the prompt, streamed " +
	"(stream_options.include_usage); Concurrency workers send Requests in all. Output tokens are the " +
	"usage's completion_tokens (content chunks when the server sends no usage). Pages/s and output tok/s " +
	"divide the succeeded requests and their tokens by the wall time from the first request to the last reply."

// result is one request's measures.
type result struct {
	err                    error
	ttft, e2e, tpot        time.Duration
	gaps                   []time.Duration
	tokens                 int
	firstAt, lastAt, start time.Time
	stages                 map[string]float64 // the server's timings, in ms
}

// Run sends the requests and reports.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Requests < 1 || o.Concurrency < 1 || o.MaxTokens < 1 {
		return nil, fmt.Errorf("loadgen: requests, concurrency and max tokens must be at least 1")
	}
	if o.Client == nil {
		o.Client = http.DefaultClient
	}
	o.URL = strings.TrimRight(o.URL, "/")
	if o.Model == "" {
		m, err := firstModel(ctx, o)
		if err != nil {
			return nil, err
		}
		o.Model = m
	}
	if len(o.Images) == 0 {
		page, err := Synthetic(1000, 1400)
		if err != nil {
			return nil, err
		}
		o.Images = [][]byte{page}
	}
	urls := make([]string, len(o.Images))
	for i, b := range o.Images {
		urls[i] = "data:" + http.DetectContentType(b) + ";base64," + base64.StdEncoding.EncodeToString(b)
	}
	results := make([]result, o.Requests)
	next := make(chan int, o.Requests)
	for i := range o.Requests {
		next <- i
	}
	close(next)
	start := time.Now()
	var wg sync.WaitGroup
	for range min(o.Concurrency, o.Requests) {
		wg.Go(func() {
			for i := range next {
				results[i] = one(ctx, o, urls[i%len(urls)])
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	r := &Report{URL: o.URL, Model: o.Model, Requests: o.Requests, Concurrency: o.Concurrency, MaxTokens: o.MaxTokens,
		IgnoreEOS: o.IgnoreEOS, WallSeconds: wall.Seconds(), Method: method}
	var ttft, tpot, itl, e2e []time.Duration
	stages := map[string][]time.Duration{}
	for _, x := range results {
		if x.err != nil {
			r.Failed++
			if len(r.Errors) < 5 {
				r.Errors = append(r.Errors, x.err.Error())
			}
			continue
		}
		r.Succeeded++
		r.OutputTokens += x.tokens
		for k, v := range x.stages {
			stages[strings.TrimSuffix(k, "_ms")] = append(stages[strings.TrimSuffix(k, "_ms")], time.Duration(v*float64(time.Millisecond)))
		}
		ttft, e2e, itl = append(ttft, x.ttft), append(e2e, x.e2e), append(itl, x.gaps...)
		if x.tokens > 1 {
			tpot = append(tpot, x.tpot)
		}
	}
	r.PagesPerSecond = float64(r.Succeeded) / wall.Seconds()
	r.OutputTokPerSecond = float64(r.OutputTokens) / wall.Seconds()
	r.TTFT, r.TPOT, r.ITL, r.E2E = stats(ttft), stats(tpot), stats(itl), stats(e2e)
	if len(stages) > 0 {
		r.Stages = map[string]Stats{}
		for k, ds := range stages {
			r.Stages[k] = stats(ds)
		}
	}
	return r, nil
}

// one sends one streamed chat and measures it.
func one(ctx context.Context, o Options, url string) (res result) {
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	content := []any{map[string]any{"type": "image_url", "image_url": map[string]any{"url": url}}}
	if o.Prompt != "" { // an empty prompt sends the page alone, as LightOnOCR's card asks
		content = append(content, map[string]any{"type": "text", "text": o.Prompt})
	}
	body := map[string]any{
		"model": o.Model, "max_tokens": o.MaxTokens, "stream": true,
		"stream_options": map[string]any{"include_usage": true},
		"messages":       []any{map[string]any{"role": "user", "content": content}},
	}
	if o.IgnoreEOS {
		body["ignore_eos"] = true
	}
	if o.Timings {
		body["return_timings"] = true
		body["return_token_ids"] = true
	}
	data, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, "POST", o.URL+"/v1/chat/completions", bytes.NewReader(data))
	if err != nil {
		return result{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if o.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+o.APIKey)
	}
	res.start = time.Now()
	resp, err := o.Client.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return result{err: fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))}
	}
	chunks, usage := 0, -1
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			break
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
				TokenIDs []int32 `json:"token_ids"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
			Timings map[string]float64 `json:"timings"`
			Error   *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			return result{err: fmt.Errorf("a chunk is not JSON: %.80s", line)}
		}
		if c.Error != nil {
			return result{err: fmt.Errorf("the stream ended with an error: %s", c.Error.Message)}
		}
		if c.Usage != nil {
			usage = c.Usage.CompletionTokens
		}
		if c.Timings != nil {
			res.stages = c.Timings
		}
		// a chunk counts once it carries text or, where asked for, token ids (tokens that print
		// nothing, such as special ones an ignore_eos run repeats, still arrive)
		if len(c.Choices) == 0 || c.Choices[0].Delta.Content == "" && len(c.Choices[0].TokenIDs) == 0 {
			continue
		}
		now := time.Now()
		if chunks == 0 {
			res.firstAt = now
		} else {
			res.gaps = append(res.gaps, now.Sub(res.lastAt))
		}
		res.lastAt = now
		chunks++
	}
	if err := sc.Err(); err != nil {
		return result{err: err}
	}
	end := time.Now()
	res.tokens = chunks
	if usage >= 0 {
		res.tokens = usage
	}
	if chunks == 0 {
		res.firstAt, res.lastAt = end, end
	}
	res.ttft, res.e2e = res.firstAt.Sub(res.start), end.Sub(res.start)
	if res.tokens > 1 {
		res.tpot = res.lastAt.Sub(res.firstAt) / time.Duration(res.tokens-1)
	}
	return res
}

// firstModel asks the server which model it serves.
func firstModel(ctx context.Context, o Options) (string, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", o.URL+"/v1/models", nil)
	if err != nil {
		return "", err
	}
	if o.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+o.APIKey)
	}
	resp, err := o.Client.Do(req)
	if err != nil {
		return "", fmt.Errorf("loadgen: asking %s for its models: %w", o.URL, err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Data) == 0 {
		return "", fmt.Errorf("loadgen: %s/v1/models lists no model (status %d); name one with --model", o.URL, resp.StatusCode)
	}
	return list.Data[0].ID, nil
}

// stats are the percentiles of ds in milliseconds (nearest rank).
func stats(ds []time.Duration) Stats {
	if len(ds) == 0 {
		return Stats{}
	}
	ms := make([]float64, len(ds))
	sum := 0.0
	for i, d := range ds {
		ms[i] = float64(d) / float64(time.Millisecond)
		sum += ms[i]
	}
	sort.Float64s(ms)
	at := func(p float64) float64 {
		i := int(p*float64(len(ms))+0.999999) - 1
		return ms[min(max(i, 0), len(ms)-1)]
	}
	return Stats{P50: at(0.50), P90: at(0.90), P99: at(0.99), Mean: sum / float64(len(ms)), N: len(ms)}
}

// Synthetic is a w×h PNG page: black lines of varying length on white, as a text page looks to
// a vision tower (its content does not matter to the measure, its size does).
func Synthetic(w, h int) ([]byte, error) {
	if w < 1 || h < 1 {
		return nil, fmt.Errorf("loadgen: a synthetic page needs a positive size, not %dx%d", w, h)
	}
	img := image.NewGray(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = 255
	}
	for y := h / 20; y+h/100+1 < h-h/20; y += max(h/40, 3) {
		end := w/10 + (y*7919)%(w*8/10+1)
		for yy := y; yy < y+max(h/100, 1); yy++ {
			for x := w / 10; x < end; x++ {
				if (x/(w/100+3))%5 != 4 { // words and spaces
					img.SetGray(x, yy, color.Gray{Y: 0})
				}
			}
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Summary is the report in a few lines.
func (r *Report) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s): %d requests, concurrency %d, max_tokens %d%s: %d ok, %d failed in %.2f s\n",
		r.URL, r.Model, r.Requests, r.Concurrency, r.MaxTokens, map[bool]string{true: ", ignore_eos"}[r.IgnoreEOS],
		r.Succeeded, r.Failed, r.WallSeconds)
	fmt.Fprintf(&b, "pages/s %.3f, output tok/s %.1f (%d tokens)\n", r.PagesPerSecond, r.OutputTokPerSecond, r.OutputTokens)
	for _, s := range []struct {
		name string
		st   Stats
	}{{"TTFT", r.TTFT}, {"TPOT", r.TPOT}, {"ITL", r.ITL}, {"E2E", r.E2E}} {
		fmt.Fprintf(&b, "%-4s ms  p50 %.1f  p90 %.1f  p99 %.1f  mean %.1f  (n %d)\n", s.name, s.st.P50, s.st.P90, s.st.P99, s.st.Mean, s.st.N)
	}
	var names []string
	for k := range r.Stages {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		s := r.Stages[k]
		fmt.Fprintf(&b, "server %-16s ms  p50 %.1f  p90 %.1f  mean %.1f\n", k, s.P50, s.P90, s.Mean)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "error: %s\n", e)
	}
	return b.String()
}
