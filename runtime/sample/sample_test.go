package sample

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestGreedyTiesAndNaN(t *testing.T) {
	nan := float32(0)
	nan = nan / nan
	if got := Greedy([]float32{1, 3, 3, 2}); got != 1 {
		t.Fatalf("tie went to %d, want 1", got)
	}
	if got := Greedy([]float32{nan, 0.5, 2}); got != 2 {
		t.Fatalf("NaN first: got %d, want 2", got)
	}
}

// TestGreedyAsArgmax: Greedy against the plain rule (a logit wins over a smaller one and over a
// NaN) on rows of ties, NaNs and infinities.
func TestGreedyAsArgmax(t *testing.T) {
	nan := float32(0)
	nan = nan / nan
	inf := float32(math.Inf(1))
	argmax := func(xs []float32) int {
		best := 0
		for i, v := range xs {
			if v > xs[best] || (xs[best] != xs[best] && v == v) {
				best = i
			}
		}
		return best
	}
	rng := rand.New(rand.NewPCG(1, 2))
	vals := []float32{nan, -inf, inf, 0, 1, -1, 2}
	for n := 0; n < 2000; n++ {
		row := make([]float32, 1+rng.IntN(9))
		for i := range row {
			row[i] = vals[rng.IntN(len(vals))]
		}
		if got, want := Greedy(row), argmax(row); got != want {
			t.Fatalf("Greedy(%v) = %d, want %d", row, got, want)
		}
	}
}

func BenchmarkGreedy(b *testing.B) {
	row := make([]float32, 151936)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range row {
		row[i] = rng.Float32()
	}
	for b.Loop() {
		Greedy(row)
	}
}

func TestPickKeyedBySeedAndPosition(t *testing.T) {
	logits := []float32{1, 1.1, 0.9, 1.05, 0.2}
	p := Params{Temperature: 1, Seed: 7}
	seen := map[int]bool{}
	for pos := 0; pos < 64; pos++ {
		a, b := Pick(logits, p, pos), Pick(logits, p, pos)
		if a != b {
			t.Fatalf("position %d drew %d then %d", pos, a, b)
		}
		seen[a] = true
	}
	if len(seen) < 3 {
		t.Fatalf("64 draws at temperature 1 gave only %d distinct tokens", len(seen))
	}
	if got := Pick(logits, Params{Temperature: 1, TopK: 1, Seed: 3}, 5); got != 1 {
		t.Fatalf("top-k 1 gave %d, want the argmax 1", got)
	}
	for pos := 0; pos < 32; pos++ {
		if got := Pick(logits, Params{Temperature: 1, TopP: 0.2, Seed: 9}, pos); got != 1 && got != 3 {
			t.Fatalf("top-p 0.2 drew %d outside the nucleus {1,3}", got)
		}
	}
}

func TestMargin(t *testing.T) {
	if m := Margin([]float32{0.5, 2, 1.25}); m != 0.75 {
		t.Fatalf("margin %v", m)
	}
}

func TestLargestMatchesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		n := 1 + r.IntN(300)
		cs := make([]cand, n)
		for i := range cs {
			cs[i] = cand{i, float64(r.IntN(20))} // many ties
		}
		k := 1 + r.IntN(n)
		want := slices.Clone(cs)
		slices.SortFunc(want, byLogit)
		got := largest(slices.Clone(cs), k)
		slices.SortFunc(got, byLogit)
		if !slices.Equal(got, want[:k]) {
			t.Fatalf("n %d k %d: largest gave %v, want %v", n, k, got, want[:k])
		}
	}
}

func BenchmarkPickVocab(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	logits := make([]float32, 151936)
	for i := range logits {
		logits[i] = float32(r.NormFloat64() * 3)
	}
	for i := 0; i < b.N; i++ {
		Pick(logits, Params{Temperature: 0.7, TopP: 0.9, Seed: 1}, i)
	}
}
