package bench

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"tfc/runtime/device"
	"tfc/runtime/model"
)

// TestMeasureWindow builds the rounds of 2 sequences of prompt 4 (one fill a round) and checks
// that only the rounds where both decode are timed.
func TestMeasureWindow(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(msec float64) time.Time { return t0.Add(time.Duration(msec * 1e6)) }
	rounds := []round{
		{start: at(0), end: at(10), rows: 4, decodeRows: 0},    // fills prompt 1
		{start: at(10), end: at(21), rows: 5, decodeRows: 1},   // decodes 1, fills prompt 2
		{start: at(21), end: at(23), rows: 2, decodeRows: 2},   // both decode
		{start: at(23.5), end: at(25), rows: 2, decodeRows: 2}, // both decode
		{start: at(25), end: at(27), rows: 2, decodeRows: 2},   // both decode; sequence 1 ends
		{start: at(27), end: at(28), rows: 1, decodeRows: 1},   // sequence 2 alone
	}
	run := &batchRun{batch: 2, prompt: 4, newTokens: 5, submit: t0, done: at(28), rounds: rounds, outs: [][]int32{{1, 2}, {1, 2}}}
	d, err := run.measure()
	if err != nil {
		t.Fatal(err)
	}
	near := func(name string, got, want float64) {
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if d.Rounds != 3 || d.TotalRounds != 6 || d.DistinctOutput != 1 {
		t.Errorf("rounds %d of %d, distinct %d; want 3 of 6, 1", d.Rounds, d.TotalRounds, d.DistinctOutput)
	}
	near("ms_per_round", d.MsPerRound, 2)  // (27 - 21) / 3
	near("forward_ms", d.ForwardMs, 5.5/3) // 2 + 1.5 + 2
	near("tok_s", d.TokS, 2*3/0.006)       // 6 tokens in 6 ms
	near("tok_s_per_stream", d.TokSPerStream, 3/0.006)
	near("prefill_ms", d.PrefillMs, 21)
	near("end_to_end_tok_s", d.EndToEndTokS, 10/0.028)
	near("host_ms_per_round untimed", d.HostMsPerRound, 0)

	// on a GPU backend each round records its wait for the device; the rest of the window is host
	timed := slices.Clone(rounds)
	for i, w := range []float64{1.5, 1, 1.5} {
		timed[2+i].waited = time.Duration(w * 1e6)
	}
	hr := &batchRun{batch: 2, prompt: 4, newTokens: 5, submit: t0, done: at(28), rounds: timed, outs: run.outs, timedHost: true}
	if d, err = hr.measure(); err != nil {
		t.Fatal(err)
	}
	near("host_ms_per_round", d.HostMsPerRound, 2.0/3) // (6 ms of window - 4 ms waited) / 3

	run.rounds = rounds[:2]
	if _, err := run.measure(); err == nil {
		t.Errorf("rounds without a full decode round measured without error")
	}
}

func TestPromptIDs(t *testing.T) {
	if got := promptIDs(infoOf(151936, 151655, 151652)); got != 151652 {
		t.Errorf("promptIDs = %d, want 151652 (below vision start)", got)
	}
	if got := promptIDs(infoOf(1000, 0, 0)); got != 1000 {
		t.Errorf("promptIDs without vision ids = %d, want the vocabulary, 1000", got)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{{[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}, {[]float64{7}, 7}} {
		if got := median(c.xs); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
}

func infoOf(vocab, image, start int) model.Info {
	return model.Info{Vocab: vocab, ImageToken: image, VisionStart: start}
}

// TestKernelProfile: the profile of a window is what the backend's profile gained over it, per
// round, largest device time first, with shares that sum to one.
func TestKernelProfile(t *testing.T) {
	us := func(n float64) time.Duration { return time.Duration(n * 1e3) }
	before := []device.KernelTime{{Name: "prefill_only", Launches: 3, Total: us(30)}, {Name: "linear", Launches: 10, Total: us(50), Flops: 1e10, Bytes: 1e8}}
	after := []device.KernelTime{{Name: "prefill_only", Launches: 3, Total: us(30)}, {Name: "linear", Launches: 30, Total: us(170), Flops: 2.2e10, Bytes: 3.4e8},
		{Name: "attention_kvstore", Launches: 4, Total: us(8)}, {Name: "attention", Launches: 4, Total: us(32)}}
	p := kernelProfile(before, after, 4).withPeak("cuda/NVIDIA H100 80GB HBM3/sm_90a")
	want := []KernelShare{
		{Name: "linear", LaunchesPerRound: 5, UsPerLaunch: 6, Share: 0.75, TFLOPS: 100, GBps: 2000, OfPeak: 100.0 / 989},
		{Name: "attention", LaunchesPerRound: 1, UsPerLaunch: 8, Share: 0.2},
		{Name: "attention_kvstore", LaunchesPerRound: 1, UsPerLaunch: 2, Share: 0.05},
	}
	if len(p.Kernels) != len(want) {
		t.Fatalf("kernels %+v, want %+v", p.Kernels, want)
	}
	for i, w := range want {
		g := p.Kernels[i]
		if g.Name != w.Name || math.Abs(g.LaunchesPerRound-w.LaunchesPerRound) > 1e-9 || math.Abs(g.UsPerLaunch-w.UsPerLaunch) > 1e-9 || math.Abs(g.Share-w.Share) > 1e-9 ||
			math.Abs(g.TFLOPS-w.TFLOPS) > 1e-6 || math.Abs(g.GBps-w.GBps) > 1e-6 || math.Abs(g.OfPeak-w.OfPeak) > 1e-9 {
			t.Errorf("kernel %d: %+v, want %+v", i, g, w)
		}
	}
	if math.Abs(p.KernelMsPerRound-0.04) > 1e-9 || p.Rounds != 4 {
		t.Errorf("%v ms of kernels a round over %d rounds, want 0.04 over 4", p.KernelMsPerRound, p.Rounds)
	}
	var out strings.Builder
	p.WriteTable(&out, "decode batch 2")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 5 || !strings.Contains(lines[0], "decode batch 2") || !strings.Contains(lines[1], "of H100 SXM") ||
		!strings.Contains(lines[2], "linear") || !strings.Contains(lines[2], " 75.0%") || !strings.HasSuffix(lines[2], "10.1%") || !strings.HasSuffix(lines[3], "20.0%") {
		t.Errorf("table:\n%s", out.String())
	}
}

// TestPeakOf: a device's listed rates by its name, the most specific first; none for others.
func TestPeakOf(t *testing.T) {
	for desc, want := range map[string]string{"cuda/NVIDIA H100 80GB HBM3/sm_90a": "H100 SXM", "cuda/NVIDIA H100 PCIe/sm_90a": "H100 PCIe",
		"cuda/NVIDIA H200/sm_90a": "H200", "hip/AMD Instinct MI300X/gfx942": "MI300X", "cpu/go": ""} {
		p, ok := peakOf(desc)
		if p.Card != want || ok != (want != "") {
			t.Errorf("peakOf(%q) = %+v, %v; want %q", desc, p, ok, want)
		}
	}
}
