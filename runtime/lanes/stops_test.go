package lanes

import (
	"context"
	"slices"
	"testing"

	"tfc/runtime/model"
)

// scripted is a model whose next token after cache position p is next(p), with EOS the
// runner-up everywhere and the winner where eosAt(p) holds.
type scripted struct {
	next  func(p int) int32
	eosAt func(p int) bool
}

func (m scripted) Info() model.Info                              { return fakeInfo }
func (m scripted) Close()                                        {}
func (m scripted) Vision([]float32, [][3]int) ([]float32, error) { return nil, nil }
func (m scripted) Forward(r *model.Round) ([]float32, error) {
	out := make([]float32, len(r.LogitRows)*fakeVocab)
	for i, row := range r.LogitRows {
		p := int(r.Pos[row])
		l := out[i*fakeVocab : (i+1)*fakeVocab]
		l[m.next(p)] = 2
		l[fakeEOS] = 1
		if m.eosAt(p) {
			l[fakeEOS] = 3
		}
	}
	return out, nil
}

func run(t *testing.T, m model.Model, r *Request) ([]int32, Event) {
	t.Helper()
	s := start(t, m, Config{Parallel: 2, Context: 512, Rows: 16, PageSize: 4, Queue: 4, EOS: []int32{fakeEOS}})
	st, err := s.Submit(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return collect(t, st)
}

// TestEOSFields: EOS ends a sequence at once; min_tokens keeps EOS from being picked before
// that many tokens (the runner-up is picked); ignore_eos picks EOS and goes on to max_tokens.
func TestEOSFields(t *testing.T) {
	prompt := textPrompt(1, 6)
	n := len(prompt)
	m := scripted{next: func(p int) int32 { return int32(10 + p%7) }, eosAt: func(p int) bool { return p >= n }}
	out, ev := run(t, m, &Request{Prompt: prompt, MaxTokens: 20})
	if want := []int32{int32(10 + (n-1)%7), fakeEOS}; !slices.Equal(out, want) || ev.Finish != "stop" || ev.StopReason != "" {
		t.Errorf("plain: %v %q, want %v stop", out, ev.Finish, want)
	}
	out, ev = run(t, m, &Request{Prompt: prompt, MaxTokens: 20, MinTokens: 5})
	if len(out) != 6 || slices.Contains(out[:5], fakeEOS) || out[5] != fakeEOS || ev.Finish != "stop" {
		t.Errorf("min_tokens 5: %v %q, want five tokens without EOS, then EOS", out, ev.Finish)
	}
	out, ev = run(t, m, &Request{Prompt: prompt, MaxTokens: 20, IgnoreEOS: true})
	if len(out) != 20 || out[1] != fakeEOS || out[19] != fakeEOS || ev.Finish != "length" {
		t.Errorf("ignore_eos: %v %q, want 20 tokens, EOS among them, length", out, ev.Finish)
	}
}

// TestRepetitionStop: a looping output stops with finish "stop" and stop reason "repetition" once
// its tail repeats, and runs to max_tokens without the stop.
func TestRepetitionStop(t *testing.T) {
	prompt := textPrompt(2, 5)
	never := func(int) bool { return false }
	dots := scripted{next: func(int) int32 { return 7 }, eosAt: never}
	out, ev := run(t, dots, &Request{Prompt: prompt, MaxTokens: 300, RepetitionStop: true})
	if len(out) != repMinSpan || ev.Finish != "stop" || ev.StopReason != "repetition" {
		t.Errorf("dots: %d tokens, %q %q; want %d, stop, repetition", len(out), ev.Finish, ev.StopReason, repMinSpan)
	}
	out, ev = run(t, dots, &Request{Prompt: prompt, MaxTokens: 300})
	if len(out) != 300 || ev.Finish != "length" || ev.StopReason != "" {
		t.Errorf("dots without the stop: %d tokens, %q %q", len(out), ev.Finish, ev.StopReason)
	}
	// a 5-token line after 20 tokens of text: stops when the line has come max(8, 26) times
	line := scripted{next: func(p int) int32 {
		if p < len(prompt)+20 {
			return int32(20 + p%11)
		}
		return int32(30 + p%5)
	}, eosAt: never}
	out, ev = run(t, line, &Request{Prompt: prompt, MaxTokens: 400, RepetitionStop: true})
	if ev.StopReason != "repetition" || len(out) > 20+26*5+5 {
		t.Errorf("line: %d tokens, %q", len(out), ev.StopReason)
	}
}

func iota(n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(i + 1)
	}
	return out
}

// TestRepeats: the repetition test's bounds.
func TestRepeats(t *testing.T) {
	rep := func(period []int32, times int, before ...int32) []int32 {
		out := append([]int32(nil), before...)
		for range times {
			out = append(out, period...)
		}
		return out
	}
	for _, c := range []struct {
		name string
		out  []int32
		want bool
	}{
		{"128 dots", rep([]int32{5}, 128), true},
		{"127 dots", rep([]int32{5}, 127), false},
		{"64 pairs", rep([]int32{5, 6}, 64, 1, 2, 3), true},
		{"63 pairs", rep([]int32{5, 6}, 63), false},
		{"12 empty cells", rep([]int32{8, 9, 10, 11}, 12, 1, 2), false},
		{"8 lines of 16", rep([]int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, 8), true},
		{"7 lines of 16", rep([]int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, 7), false},
		{"8 lines of 64", rep(iota(64), 8), true},
		{"8 lines of 65", rep(iota(65), 8), false}, // past the longest period
		{"empty", nil, false},
	} {
		if got := Repeats(c.out); got != c.want {
			t.Errorf("%s: Repeats = %v, want %v", c.name, got, c.want)
		}
	}
}
