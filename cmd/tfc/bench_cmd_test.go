package main

import (
	"bytes"
	"encoding/json"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestBenchCommand runs tfc bench on the tiny checkpoint on the CPU and checks that every figure
// of the report is there and positive.
func TestBenchCommand(t *testing.T) {
	if _, err := os.Stat(filepath.Join(tinyQwen2VL, "tokenizer.json")); err != nil {
		t.Fatalf("%s has no tokenizer.json: run make testdata", tinyQwen2VL)
	}
	image := filepath.Join(tinyQwen2VL, "oracle", "images", "b.png")
	file := filepath.Join(t.TempDir(), "bench.json")
	var stdout, stderr bytes.Buffer
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	root.SetArgs([]string{"bench", tinyQwen2VL, "--batch", "1,3", "--prompt-tokens", "40", "--new-tokens", "16",
		"--image", image, "--repeat", "2", "--out", file})
	t.Cleanup(func() { root.SetOut(nil); root.SetErr(nil); root.SetArgs(nil) })
	if err := root.Execute(); err != nil {
		t.Fatalf("tfc bench: %v\n%s", err, stderr.String())
	}
	written, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(written, stdout.Bytes()) {
		t.Errorf("--out wrote a different report from the one printed")
	}

	var rep struct {
		Backend             string           `json:"backend"`
		Device              string           `json:"device"`
		Checkpoint          string           `json:"checkpoint"`
		Family              string           `json:"family"`
		WeightBytes         int64            `json:"weight_bytes"`
		WeightBytesByPrefix map[string]int64 `json:"weight_bytes_by_prefix"`
		DecodeMethod        string           `json:"decode_method"`
		Decode              []map[string]float64
		Vision              map[string]any `json:"vision"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("the report is not JSON: %v\n%s", err, stdout.String())
	}
	if rep.Backend != "cpu" || rep.Device == "" || rep.Family != "qwen2_vl" || rep.Checkpoint == "" || rep.DecodeMethod == "" {
		t.Errorf("backend %q, device %q, family %q, checkpoint %q, method %q", rep.Backend, rep.Device, rep.Family, rep.Checkpoint, rep.DecodeMethod)
	}
	var sum int64
	for _, n := range rep.WeightBytesByPrefix {
		sum += n
	}
	if rep.WeightBytes <= 0 || sum != rep.WeightBytes || rep.WeightBytesByPrefix["model"] <= 0 || rep.WeightBytesByPrefix["visual"] <= 0 {
		t.Errorf("weight bytes %d, by prefix %v (sum %d)", rep.WeightBytes, rep.WeightBytesByPrefix, sum)
	}
	if len(rep.Decode) != 2 {
		t.Fatalf("%d decode measures, want 2 (batch 1 and 3)", len(rep.Decode))
	}
	for i, want := range []float64{1, 3} {
		d := rep.Decode[i]
		if d["batch"] != want || d["prompt_tokens"] != 40 || d["new_tokens"] != 16 {
			t.Errorf("decode %d: batch %v, prompt %v, new %v", i, d["batch"], d["prompt_tokens"], d["new_tokens"])
		}
		for _, k := range []string{"tok_s", "tok_s_per_stream", "ms_per_round", "forward_ms", "rounds", "prefill_ms", "wall_ms", "end_to_end_tok_s", "total_rounds", "distinct_outputs"} {
			if !(d[k] > 0) {
				t.Errorf("decode batch %v: %s is %v, want a positive number", want, k, d[k])
			}
		}
		if d["rounds"] >= d["total_rounds"] || d["rounds"] > 15 {
			t.Errorf("decode batch %v: %v of %v rounds measured; at most 15 (16 tokens, the first after prefill) and fewer than all", want, d["rounds"], d["total_rounds"])
		}
		if got := d["tok_s"] / d["tok_s_per_stream"]; got < want-1e-9 || got > want+1e-9 {
			t.Errorf("decode batch %v: total over per-stream rate is %v", want, got)
		}
		if got, w := d["prefill_tok_s"], want*40/(d["prefill_ms"]/1000); math.Abs(got-w) > 1e-6*w {
			t.Errorf("decode batch %v: prefill_tok_s %v, want batch x prompt tokens over prefill_ms, %v", want, got, w)
		}
	}
	for _, k := range []string{"patches", "rows", "preprocess_ms", "ms", "width", "height"} {
		if v, ok := rep.Vision[k].(float64); !ok || v <= 0 {
			t.Errorf("vision %s is %v, want a positive number", k, rep.Vision[k])
		}
	}
	if rep.Vision["patches"] != 32.0 || rep.Vision["rows"] != 8.0 {
		t.Errorf("vision on b.png: %v patches, %v rows; want 32 and 8 (grid 1x4x8, merge 2)", rep.Vision["patches"], rep.Vision["rows"])
	}
}

// TestBenchProfileNeedsAGPU: --profile on a backend that cannot time kernels says so and names
// the backends that can, before loading anything.
func TestBenchProfileNeedsAGPU(t *testing.T) {
	var stdout, stderr bytes.Buffer
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	root.SetArgs([]string{"bench", tinyQwen2VL, "--backend", "cpu", "--profile"})
	t.Cleanup(func() {
		root.SetOut(nil)
		root.SetErr(nil)
		root.SetArgs(nil)
		if c, _, err := root.Find([]string{"bench"}); err == nil {
			c.Flags().Set("profile", "false")
		}
	})
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), "--profile") || !strings.Contains(err.Error(), "--backend cuda or hip") {
		t.Fatalf("tfc bench --profile on the CPU: %v", err)
	}
	if strings.Contains(stderr.String(), "loading") {
		t.Errorf("the checkpoint was loaded before --profile was refused:\n%s", stderr.String())
	}
}

// TestBenchPreprocessCommand times two images under a checkpoint's settings and under a published
// pixel budget, and checks each report's sizes and that every stage was timed.
func TestBenchPreprocessCommand(t *testing.T) {
	images := []string{filepath.Join(tinyQwen2VL, "oracle", "images", "a.png"), filepath.Join(tinyQwen2VL, "oracle", "images", "b.png")}
	for _, how := range [][]string{{"--model", tinyQwen2VL, "--max-pixels", "12845056"}, {"--model", tinyQwen2VL, "--max-pixels", "0"}} {
		out, err := runTFC(t, append(append([]string{"bench", "preprocess", "--runs", "3"}, images...), how...)...)
		if err != nil {
			t.Fatalf("tfc bench preprocess %v: %v\n%s", how, err, out)
		}
		var reps []preprocessTimes
		if err := json.Unmarshal([]byte(out), &reps); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
		if len(reps) != len(images) {
			t.Fatalf("%d reports for %d images", len(reps), len(images))
		}
		for _, r := range reps {
			if r.Runs != 3 || r.Width <= 0 || r.Resized[0]%28 != 0 || r.Resized[1]%28 != 0 || r.GridTHW[1]*14 != r.Resized[1] ||
				r.DecodeMs <= 0 || r.Preprocess <= 0 || r.PatchMs <= 0 || r.TotalMs < r.Preprocess {
				t.Errorf("%v: report %+v", how, r)
			}
		}
	}
	if _, err := runTFC(t, "bench", "preprocess", images[0], "--model", ""); err == nil || !strings.Contains(err.Error(), "--model DIR is needed") {
		t.Errorf("no checkpoint: %v", err)
	}
	if _, err := runTFC(t, "bench", "preprocess", images[0], "--model", tinyQwen2VL, "--max-pixels", "-1"); err == nil || !strings.Contains(err.Error(), "--max-pixels -1") {
		t.Errorf("negative budget: %v", err)
	}
}

// TestBenchServeImages: --images alone passes the flag checks (the default --synthetic is no second
// source of pages), and --images beside a given --synthetic is refused.
func TestBenchServeImages(t *testing.T) {
	dir := t.TempDir()
	png, err := os.ReadFile(filepath.Join(tinyQwen2VL, "oracle", "images", "b.png"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() // closed below: nothing answers there
	ln.Close()
	serve, _, err := root.Find([]string{"bench", "serve"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		serve.Flags().VisitAll(func(f *pflag.Flag) { f.Value.Set(f.DefValue); f.Changed = false })
	})
	_, err = runTFC(t, "bench", "serve", "--url", url, "--images", dir, "--requests", "1", "--concurrency", "1")
	if err == nil || strings.Contains(err.Error(), "not both") {
		t.Errorf("--images alone: %v; want the unreachable server's error", err)
	}
	_, err = runTFC(t, "bench", "serve", "--url", url, "--images", dir, "--synthetic", "100x100")
	if err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("--images with --synthetic: %v; want a refusal", err)
	}
}
