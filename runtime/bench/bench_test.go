package bench

import (
	"math"
	"testing"
	"time"

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
