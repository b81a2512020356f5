// Package sample picks the next token from a row of logits: greedy, or temperature, top-k and
// top-p with a random stream keyed by the request's seed and the token's position, so a seeded
// request draws the same token whatever else runs beside it.
package sample

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"slices"
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
	first := 0 // the first logit that is a number: the best so far
	for first < len(logits) && logits[first] != logits[first] {
		first++
	}
	if first == len(logits) {
		return 0
	}
	// the largest value over four independent chains, then its first place
	rest := logits[first:]
	t0, t1, t2, t3 := rest[0], rest[0], rest[0], rest[0]
	i := 0
	for ; i+4 <= len(rest); i += 4 {
		q := rest[i : i+4 : i+4]
		if q[0] > t0 {
			t0 = q[0]
		}
		if q[1] > t1 {
			t1 = q[1]
		}
		if q[2] > t2 {
			t2 = q[2]
		}
		if q[3] > t3 {
			t3 = q[3]
		}
	}
	for ; i < len(rest); i++ {
		if rest[i] > t0 {
			t0 = rest[i]
		}
	}
	top := t0
	for _, t := range [...]float32{t1, t2, t3} {
		if t > top {
			top = t
		}
	}
	for i, v := range rest {
		if v == top {
			return first + i
		}
	}
	return first
}

// Greedy reports whether p picks the largest logit (Greedy) rather than drawing.
func (p Params) Greedy() bool { return p.Temperature <= 0 || p.TopK == 1 }

// Pick draws the token at position pos of a sequence.
func Pick(logits []float32, p Params, pos int) int {
	if p.Greedy() {
		return Greedy(logits)
	}
	top := math.Inf(-1)
	for _, v := range logits {
		top = max(top, float64(v)/p.Temperature)
	}
	// exp(-60) is lost when added to the top token's 1, so such tokens can never be drawn
	cs := make([]cand, 0, 1024)
	for i, v := range logits {
		if l := float64(v) / p.Temperature; l >= top-60 {
			cs = append(cs, cand{i, l})
		}
	}
	if len(cs) == 0 {
		return Greedy(logits)
	}
	if p.TopK > 0 && p.TopK < len(cs) {
		cs = largest(cs, p.TopK)
	}
	probs := make([]float64, len(cs))
	var sum float64
	for i, c := range cs {
		probs[i] = math.Exp(c.l - top)
		sum += probs[i]
	}
	if p.TopP > 0 && p.TopP < 1 {
		cs, probs, sum = nucleus(cs, probs, sum, p.TopP)
	} else if p.TopK > 0 {
		slices.SortFunc(cs, byLogit) // a fixed order for the draw
		for i, c := range cs {
			probs[i] = math.Exp(c.l - top)
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

// cand is a token and its tempered logit.
type cand struct {
	id int
	l  float64
}

// nucleus keeps the fewest most likely candidates whose probability reaches p, most likely
// first; it pops a heap so only the kept ones are ordered.
func nucleus(cs []cand, probs []float64, sum, p float64) ([]cand, []float64, float64) {
	h := &candHeap{cs: cs, probs: probs}
	heap.Init(h)
	var keptC []cand
	var keptP []float64
	var acc float64
	for h.Len() > 0 {
		c, q := h.cs[0], h.probs[0]
		heap.Pop(h)
		keptC, keptP = append(keptC, c), append(keptP, q)
		if acc += q; acc/sum >= p {
			break
		}
	}
	return keptC, keptP, acc
}

// candHeap is a max-heap of candidates in byLogit order, carrying their probabilities.
type candHeap struct {
	cs    []cand
	probs []float64
}

func (h *candHeap) Len() int           { return len(h.cs) }
func (h *candHeap) Less(i, j int) bool { return byLogit(h.cs[i], h.cs[j]) < 0 }
func (h *candHeap) Swap(i, j int) {
	h.cs[i], h.cs[j] = h.cs[j], h.cs[i]
	h.probs[i], h.probs[j] = h.probs[j], h.probs[i]
}
func (h *candHeap) Push(any) { panic("candHeap: push") }
func (h *candHeap) Pop() any {
	n := len(h.cs) - 1
	h.cs, h.probs = h.cs[:n], h.probs[:n]
	return nil
}

// byLogit orders by logit, largest first, then by id.
func byLogit(a, b cand) int {
	switch {
	case a.l > b.l:
		return -1
	case a.l < b.l:
		return 1
	}
	return a.id - b.id
}

// largest keeps the k candidates first in byLogit order (in no particular order), by quickselect.
func largest(cs []cand, k int) []cand {
	lo, hi := 0, len(cs)-1
	for lo < hi {
		pivot := cs[(lo+hi)/2]
		i, j := lo, hi
		for i <= j {
			for byLogit(cs[i], pivot) < 0 {
				i++
			}
			for byLogit(cs[j], pivot) > 0 {
				j--
			}
			if i <= j {
				cs[i], cs[j] = cs[j], cs[i]
				i++
				j--
			}
		}
		switch {
		case k-1 <= j:
			hi = j
		case k-1 >= i:
			lo = i
		default:
			return cs[:k]
		}
	}
	return cs[:k]
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
