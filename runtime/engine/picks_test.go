package engine

import (
	"math/rand/v2"
	"slices"
	"testing"

	"tfc/compiler"
	"tfc/runtime/device/cpu"
	"tfc/runtime/model"
	"tfc/runtime/sample"
)

// pickCounter counts the rounds with logit rows, and those whose picks the model took on its
// side (no logits came back).
type pickCounter struct {
	model.Model
	picked, rounds int
}

func (m *pickCounter) Forward(r *model.Round) ([]float32, error) {
	logits, err := m.Model.Forward(r)
	if len(r.LogitRows) > 0 {
		m.rounds++
	}
	if r.Greedy && len(logits) == 0 && err == nil {
		m.picked++
	}
	return logits, err
}

// TestGreedyPicksAsLogits: every family's fixture generates the same ids when the model picks
// greedily on its side (the graph's argmax, read back instead of the logits) as when each
// round's logits come back and are picked here; greedy rounds take the model's picks, and a
// round with one row seen (Step) takes the logits.
func TestGreedyPicksAsLogits(t *testing.T) {
	for _, fam := range model.Families() {
		t.Run(fam.Name, func(t *testing.T) {
			e, err := Open("../../"+compiler.Fixture(fam.Name), cpu.New(), model.Limits{Parallel: 1, Context: 256, Rows: 32, Patches: 1024, PageSize: 16})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			m := &pickCounter{Model: e.Model}
			e.Model = m
			rng := rand.New(rand.NewPCG(3, 4))
			for range 3 {
				p := Prompt{}
				for range 40 {
					p.IDs = append(p.IDs, rng.Int32N(1000))
				}
				picked, err := e.Generate(p, Options{MaxTokens: 12})
				if err != nil {
					t.Fatal(err)
				}
				if m.picked == 0 || m.picked != m.rounds {
					t.Fatalf("%d of %d greedy rounds took the model's picks", m.picked, m.rounds)
				}
				m.picked, m.rounds = 0, 0
				var own []int32
				seen, err := e.Generate(p, Options{MaxTokens: 12, Step: func(_ int, logits []float32) {
					own = append(own, int32(sample.Greedy(logits)))
				}})
				if err != nil {
					t.Fatal(err)
				}
				if m.picked != 0 {
					t.Fatalf("%d rounds whose logits were seen took the model's picks", m.picked)
				}
				m.rounds = 0
				if !slices.Equal(picked.OutputIDs, seen.OutputIDs) || !slices.Equal(seen.OutputIDs, own) {
					t.Fatalf("ids %v picked by the model, %v from the logits, %v picked here", picked.OutputIDs, seen.OutputIDs, own)
				}
			}
		})
	}
}
