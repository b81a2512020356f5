package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// TestStats: nearest-rank percentiles and the mean, in milliseconds.
func TestStats(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	s := stats(ds)
	if s.P50 != 50 || s.P90 != 90 || s.P99 != 99 || s.Mean != 50.5 || s.N != 100 {
		t.Errorf("stats of 1..100 ms = %+v", s)
	}
	if s := stats([]time.Duration{7 * time.Millisecond}); s.P50 != 7 || s.P99 != 7 || s.N != 1 {
		t.Errorf("stats of one = %+v", s)
	}
	if s := stats(nil); s != (Stats{}) {
		t.Errorf("stats of none = %+v", s)
	}
}

// TestSynthetic: a page decodes as a PNG of the asked size; a bad size is refused.
func TestSynthetic(t *testing.T) {
	b, err := Synthetic(200, 300)
	if err != nil || len(b) < 8 || string(b[1:4]) != "PNG" {
		t.Fatalf("Synthetic: %d bytes, %v", len(b), err)
	}
	if _, err := Synthetic(0, 10); err == nil {
		t.Error("a 0-wide page was accepted")
	}
}

// TestTokenIDChunks: with Timings the requests ask for token ids, and a chunk carrying ids but no
// text (a special token an ignore_eos run repeats) counts as a token event; without, only text does.
func TestTokenIDChunks(t *testing.T) {
	var asked []bool
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		ids := body["return_token_ids"] == true
		mu.Lock()
		asked = append(asked, ids)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n")
		for i, text := range []string{"", "", "", "a", "b"} {
			c := map[string]any{"delta": map[string]any{"content": text}}
			if ids {
				c["token_ids"] = []int{i}
			}
			b, _ := json.Marshal(map[string]any{"choices": []any{c}})
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"completion_tokens\":5}}\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	for _, timings := range []bool{false, true} {
		rep, err := Run(context.Background(), Options{URL: srv.URL, Model: "m", Images: [][]byte{{0}}, Requests: 1,
			Concurrency: 1, MaxTokens: 5, Timings: timings})
		if err != nil || rep.Succeeded != 1 {
			t.Fatalf("timings %v: %+v, %v", timings, rep, err)
		}
		want := map[bool]int{false: 1, true: 4}[timings] // gaps between the chunks that count
		if rep.ITL.N != want || rep.OutputTokens != 5 {
			t.Errorf("timings %v: %d gaps, %d tokens; want %d, 5", timings, rep.ITL.N, rep.OutputTokens, want)
		}
	}
	if len(asked) != 2 || asked[0] || !asked[1] {
		t.Errorf("return_token_ids asked: %v; want [false true]", asked)
	}
}
