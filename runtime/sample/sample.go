// Package sample picks the next token from a row of logits: greedy, or temperature, top-k and
// top-p with a random stream keyed by the request's seed and the token's position, so a seeded
// request draws the same token whatever else runs beside it.
package sample

import (
	"math"
	"math/rand/v2"
	"sort"
)

// Params are a request's sampling settings. Temperature 0 is greedy.
type Params struct {
	Temperature float64
	TopK        int     // 0: no limit
	TopP        float64 // 0 or 1: no limit
	Seed        uint64
}

// Greedy returns the index of the largest logit; ties go to the lowest index, as argmax does.
// NaN logits never win.
func Greedy(logits []float32) int {
	best := 0
	for i, v := range logits {
		if v > logits[best] || (logits[best] != logits[best] && v == v) {
			best = i
		}
	}
	return best
}

// Pick draws the token at position pos of a sequence.
func Pick(logits []float32, p Params, pos int) int {
	if p.Temperature <= 0 || p.TopK == 1 {
		return Greedy(logits)
	}
	type cand struct {
		id int
		l  float64
	}
	cs := make([]cand, 0, len(logits))
	for i, v := range logits {
		if !math.IsNaN(float64(v)) {
			cs = append(cs, cand{i, float64(v) / p.Temperature})
		}
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].l > cs[j].l })
	if p.TopK > 0 && p.TopK < len(cs) {
		cs = cs[:p.TopK]
	}
	probs := make([]float64, len(cs))
	var sum float64
	for i, c := range cs {
		probs[i] = math.Exp(c.l - cs[0].l)
		sum += probs[i]
	}
	for i := range probs {
		probs[i] /= sum
	}
	if p.TopP > 0 && p.TopP < 1 {
		var acc float64
		for i := range probs {
			acc += probs[i]
			if acc >= p.TopP {
				probs, cs = probs[:i+1], cs[:i+1]
				break
			}
		}
		sum = 0
		for _, q := range probs {
			sum += q
		}
	}
	r := rand.New(rand.NewPCG(p.Seed, uint64(pos)*0x9e3779b97f4a7c15+1)).Float64() * sum
	for i, q := range probs {
		r -= q
		if r < 0 {
			return cs[i].id
		}
	}
	return cs[len(cs)-1].id
}

// Margin is the gap between the largest and second largest logits.
func Margin(logits []float32) float32 {
	a, b := float32(math.Inf(-1)), float32(math.Inf(-1))
	for _, v := range logits {
		if v > a {
			a, b = v, a
		} else if v > b {
			b = v
		}
	}
	return a - b
}
