package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"tfc/compiler"
	"tfc/runtime/device"
	"tfc/runtime/device/cpu"
	"tfc/runtime/lanes"
	"tfc/runtime/model"
	"tfc/runtime/sample"
)

// TestIdsDoNotDependOnTheRound: on every family's fixture, in F32 and in BF16 precision on the
// CPU, each request's ids are the same run alone, beside others (greedy and seeded requests
// together, whose rounds read logits, and greedy ones together, whose rounds of several rows take
// the model's picks), with copy drafts, and resumed from the prompt cache after a request with
// the same start.
func TestIdsDoNotDependOnTheRound(t *testing.T) {
	for _, fam := range model.Families() {
		for _, prec := range []device.Precision{device.F32Precision, device.BF16Precision} {
			t.Run(fmt.Sprintf("%s/%v", fam.Name, prec), func(t *testing.T) {
				e, err := Open("../../"+compiler.Fixture(fam.Name), cpu.New(cpu.Precision(prec)), model.Limits{Parallel: 4, Context: 192, Rows: 40, Patches: 1024, PageSize: 16})
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				rng := rand.New(rand.NewPCG(5, uint64(prec)))
				var reqs []lanes.Request
				for i := range 4 {
					r := lanes.Request{MaxTokens: 10, IgnoreEOS: true}
					for range 30 + 11*i {
						r.Prompt = append(r.Prompt, rng.Int32N(1000))
					}
					if i%2 == 1 {
						r.Sample = sample.Params{Temperature: 0.8, TopK: 50, Seed: uint64(i)}
					}
					reqs = append(reqs, r)
				}
				run := func(cfg lanes.Config, rs []lanes.Request) [][]int32 {
					cfg.Context, cfg.Rows, cfg.PageSize = 192, 40, 16
					s, err := lanes.New(e.Model, cfg)
					if err != nil {
						t.Fatal(err)
					}
					defer s.Close()
					var sts []*lanes.Stream
					for i := range rs {
						st, err := s.Submit(context.Background(), &rs[i])
						if err != nil {
							t.Fatal(err)
						}
						sts = append(sts, st)
					}
					outs := make([][]int32, len(sts))
					for i, st := range sts {
						for ev := range st.Events {
							if ev.Err != nil {
								t.Fatal(ev.Err)
							}
							outs[i] = append(outs[i], ev.Tokens...)
						}
					}
					return outs
				}
				var solo [][]int32
				for _, r := range reqs {
					solo = append(solo, run(lanes.Config{Parallel: 4}, []lanes.Request{r})[0])
				}
				for name, cfg := range map[string]lanes.Config{"beside others": {Parallel: 4}, "drafted": {Parallel: 4, Drafts: 3}} {
					if got := run(cfg, reqs); !slices.EqualFunc(got, solo, slices.Equal) {
						t.Errorf("%s: %v, alone %v", name, got, solo)
					}
				}
				// the greedy requests together: rounds of several rows whose picks the model takes
				if got := run(lanes.Config{Parallel: 4}, []lanes.Request{reqs[0], reqs[2]}); !slices.Equal(got[0], solo[0]) || !slices.Equal(got[1], solo[2]) {
					t.Errorf("greedy together: %v, alone %v and %v", got, solo[0], solo[2])
				}
				// resumed: the last request after one with its first 32 tokens, on one scheduler
				s, err := lanes.New(e.Model, lanes.Config{Parallel: 4, Context: 192, Rows: 40, PageSize: 16, PromptCache: true})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				last := reqs[len(reqs)-1]
				for _, r := range []lanes.Request{{Prompt: last.Prompt[:32], MaxTokens: 3, IgnoreEOS: true}, last} {
					st, err := s.Submit(context.Background(), &r)
					if err != nil {
						t.Fatal(err)
					}
					var out []int32
					var done lanes.Event
					for ev := range st.Events {
						out, done = append(out, ev.Tokens...), ev
					}
					if len(r.Prompt) == 32 {
						continue
					}
					if done.Usage.Cached == 0 {
						t.Errorf("resumed: no cached token reused (%+v)", done.Usage)
					}
					if !slices.Equal(out, solo[len(solo)-1]) {
						t.Errorf("resumed: %v, alone %v", out, solo[len(solo)-1])
					}
				}
			})
		}
	}
}
