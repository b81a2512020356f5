package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tfc/runtime/checkpoint"
	"tfc/runtime/device"
	"tfc/runtime/device/cpu"
	"tfc/runtime/lanes/lanestest"
	"tfc/runtime/model"
)

// fakeBound serves the tiny checkpoint with the lanes' fake model: its manifest is the
// checkpoint's own tensors, its plan a fixed number of bytes per lane.
type fakeBound struct{ manifest []model.TensorSpec }

const fakeLaneBytes = 100 << 20

func (b *fakeBound) Values() []model.Value           { return nil }
func (b *fakeBound) Resolve(func(string) bool) error { return nil }
func (b *fakeBound) Manifest() []model.TensorSpec    { return b.manifest }
func (b *fakeBound) Plan(l model.Limits) model.Plan {
	return model.Plan{Weights: 10 << 20, KVCache: int64(l.Parallel) * fakeLaneBytes}
}
func (b *fakeBound) Load(_ device.Backend, l model.Limits, _ func(string) ([]byte, device.DType, error)) (model.Model, error) {
	pages := (l.Context + l.PageSize - 1) / l.PageSize
	return lanestest.New(lanestest.Info(151936, 151655), lanestest.Geometry{Parallel: l.Parallel, Pages: pages, PageSize: l.PageSize, Rows: l.Rows}, 0), nil
}

func init() {
	model.Register(&model.Family{Name: "fake_qwen2_vl", ModelTypes: []string{"qwen2_vl"}, Graph: "fake.graph",
		Bind: func(model.Config) (model.Bound, error) {
			ck, err := checkpoint.Open(tinyDir)
			if err != nil {
				return nil, err
			}
			defer ck.Close()
			b := &fakeBound{}
			for _, name := range ck.Names() {
				t, err := ck.Tensor(name)
				if err != nil {
					return nil, err
				}
				b.manifest = append(b.manifest, model.TensorSpec{Name: name, Shape: t.Shape})
			}
			return b, nil
		}})
}

// runServer starts Run on the tiny checkpoint and returns its URL, its stop function and its result.
func runServer(t *testing.T, grace time.Duration) (string, context.CancelFunc, chan error) {
	t.Helper()
	frontend(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Dir: tinyDir, Host: "127.0.0.1", Port: 0, Parallel: 2, Context: 1024, MaxTokens: 4,
			Budget: 1 << 30, Grace: grace, Backend: func() (device.Backend, error) { return cpu.New(), nil },
			OnListening: func(a string) { addr <- a }, Log: slog.New(slog.DiscardHandler)})
	}()
	select {
	case a := <-addr:
		return "http://" + a, cancel, done
	case err := <-done:
		t.Fatal(err)
	}
	return "", nil, nil
}

func TestRun(t *testing.T) {
	url, cancel, done := runServer(t, 0)
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
			if resp.StatusCode != 503 {
				t.Fatalf("/health while loading: %d", resp.StatusCode)
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("/health never answered 200")
		}
		time.Sleep(5 * time.Millisecond)
	}
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"qwen2-vl-tiny","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("chat: %d", resp.StatusCode)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancel: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not stop")
	}
}

func TestRunRefusesOverBudget(t *testing.T) {
	frontend(t)
	err := Run(context.Background(), Options{Dir: tinyDir, Host: "127.0.0.1", Port: 0, Parallel: 8, Context: 256,
		Budget: 10<<20 + 3*fakeLaneBytes, Log: slog.New(slog.DiscardHandler), Backend: func() (device.Backend, error) { return cpu.New(), nil }})
	want := fmt.Sprintf("--parallel 8 × --context 256 needs %s", mib(10<<20+8*fakeLaneBytes))
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--parallel 3 fits") {
		t.Fatalf("over budget: %v; want %q and the largest parallel that fits", err, want)
	}
}

// TestShutdownInFlight: on stop, a streaming request finishes within the grace period, or is
// cancelled with a shutting_down error chunk after it; Run returns either way.
func TestShutdownInFlight(t *testing.T) {
	for _, grace := range []time.Duration{time.Minute, 20 * time.Millisecond} {
		url, cancel, done := runServer(t, grace)
		for {
			resp, err := http.Get(url + "/health")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					break
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		resp, err := http.Post(url+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":300,"stream":true}`))
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		br.ReadString('\n')
		cancel()
		rest, _ := io.ReadAll(br)
		resp.Body.Close()
		text := string(rest)
		switch {
		case grace == time.Minute && !strings.Contains(text, `"finish_reason":"length"`):
			t.Errorf("with a long grace the request should finish; got %s", tail(text))
		case grace < time.Second && !strings.Contains(text, "shutting_down"):
			t.Errorf("with a short grace the request should be cancelled; got %s", tail(text))
		}
		if !strings.HasSuffix(text, "data: [DONE]\n\n") {
			t.Errorf("stream did not end with [DONE]: %s", tail(text))
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not stop")
		}
	}
}

func tail(s string) string { return s[max(0, len(s)-300):] }

// TestRunRefusesContext: a context shorter than a KV page, or longer than the checkpoint's
// max_position_embeddings, is refused before anything loads.
func TestRunRefusesContext(t *testing.T) {
	for _, c := range []struct {
		context int
		want    string
	}{
		{10, "at least one KV page of 16 tokens"},
		{40000, "above the checkpoint's max_position_embeddings (32768)"},
	} {
		err := Run(context.Background(), Options{Dir: tinyDir, Host: "127.0.0.1", Port: 0, Parallel: 1, Context: c.context,
			Log: slog.New(slog.DiscardHandler), Backend: func() (device.Backend, error) { return cpu.New(), nil }})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--context %d: %v, want %q", c.context, err, c.want)
		}
	}
}

// TestRunRefusesRoundRows: a negative --max-num-batched-tokens is refused before anything loads.
func TestRunRefusesRoundRows(t *testing.T) {
	err := Run(context.Background(), Options{Dir: tinyDir, Host: "127.0.0.1", Port: 0, Parallel: 1, RoundRows: -5,
		Log: slog.New(slog.DiscardHandler), Backend: func() (device.Backend, error) { return cpu.New(), nil }})
	if err == nil || !strings.Contains(err.Error(), "--max-num-batched-tokens is -5") {
		t.Errorf("got %v", err)
	}
}

// TestDefaultContext: without --context a request holds 8,192 tokens, or the checkpoint's
// max_position_embeddings when that is smaller.
func TestDefaultContext(t *testing.T) {
	short := t.TempDir() // the tiny checkpoint with max_position_embeddings 4096
	entries, err := os.ReadDir(tinyDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		src, _ := filepath.Abs(filepath.Join(tinyDir, e.Name()))
		if e.Name() != "config.json" {
			if err := os.Symlink(src, filepath.Join(short, e.Name())); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		b = []byte(strings.Replace(string(b), `"max_position_embeddings": 32768`, `"max_position_embeddings": 4096`, 1))
		if err := os.WriteFile(filepath.Join(short, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		dir  string
		want int
	}{{tinyDir, DefaultContext}, {short, 4096}} {
		su, err := prepare(&Options{Dir: c.dir, Parallel: 1, Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if su.limits.Context != c.want {
			t.Errorf("%s: context %d, want %d", c.dir, su.limits.Context, c.want)
		}
	}
}
