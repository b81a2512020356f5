package lanes

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tfc/runtime/lanes/lanestest"
	"tfc/runtime/model"
	"tfc/runtime/sample"
)

const (
	fakeVocab = 64
	fakeImage = 60 // placeholder id
	fakeEOS   = 0
)

var fakeInfo = lanestest.Info(fakeVocab, fakeImage)

func newFake(cfg Config, window int) *lanestest.Fake {
	return lanestest.New(fakeInfo, lanestest.Geometry{Parallel: cfg.Parallel, Pages: cfg.Pages(), PageSize: cfg.PageSize, Rows: cfg.Rows}, window)
}

// reference generates a request alone and all at once from the fake's definition.
func reference(t *testing.T, window int, r *Request, eos bool) []int32 {
	t.Helper()
	w := lanestest.Want{Prompt: r.Prompt, Pixels: r.Pixels, Grids: r.Grids, MaxTokens: r.MaxTokens, Sample: r.Sample, Stop: r.Stop}
	if eos {
		w.EOS = map[int32]bool{fakeEOS: true}
	}
	out, err := lanestest.Reference(fakeInfo, window, w)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// collect reads a stream to its end.
func collect(t *testing.T, st *Stream) ([]int32, Event) {
	t.Helper()
	var out []int32
	for ev := range st.Events {
		out = append(out, ev.Tokens...)
		if ev.Done {
			return out, ev
		}
	}
	t.Fatal("stream closed without Done")
	return nil, Event{}
}

func textPrompt(seed, n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(1 + (seed*7+i*13)%50)
	}
	return p
}

// imagePrompt has text, one 1×4×4 image (4 vision rows) and text; pixel values come from px.
func imagePrompt(seed int, px float32) *Request {
	ids := append(textPrompt(seed, 5), fakeImage, fakeImage, fakeImage, fakeImage)
	ids = append(ids, textPrompt(seed+1, 6)...)
	pixels := make([]float32, 16)
	for i := range pixels {
		pixels[i] = px + float32(i)
	}
	return &Request{Prompt: ids, Pixels: pixels, Grids: [][3]int{{1, 4, 4}},
		ImageKeys: []string{fmt.Sprint("img", px)}}
}

func testConfig() Config {
	return Config{Parallel: 4, Context: 96, Rows: 8, PageSize: 4, Queue: 64}
}

func start(t *testing.T, m model.Model, cfg Config) *Scheduler {
	t.Helper()
	s, err := New(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// requests mixes text and image prompts, short and longer than a round, greedy and seeded.
func requests() []*Request {
	var rs []*Request
	for i := range 12 {
		var r *Request
		if i%4 == 3 {
			r = imagePrompt(i, float32(i))
		} else {
			r = &Request{Prompt: textPrompt(i, 3+i*5)}
		}
		r.MaxTokens = 10 + i%5
		if i%3 == 1 {
			r.Sample = sample.Params{Temperature: 0.9, TopK: 20, TopP: 0.95, Seed: uint64(100 + i)}
		}
		rs = append(rs, r)
	}
	return rs
}

func TestSoloMatchesReference(t *testing.T) {
	cfg := testConfig()
	s := start(t, newFake(cfg, 0), cfg)
	for i, r := range requests() {
		st, err := s.Submit(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		got, ev := collect(t, st)
		want := reference(t, 0, r, false)
		if !slices.Equal(got, want) {
			t.Errorf("request %d alone: got %v, want %v", i, got, want)
		}
		if ev.Finish != "length" || ev.Err != nil || ev.Usage.Output != len(got) || ev.Usage.Prompt != len(r.Prompt) {
			t.Errorf("request %d: finish %q (%v) usage %+v", i, ev.Finish, ev.Err, ev.Usage)
		}
	}
}

// runAll submits every request at once and returns each one's tokens.
func runAll(t *testing.T, s *Scheduler, rs []*Request) ([][]int32, []Event) {
	t.Helper()
	outs, evs := make([][]int32, len(rs)), make([]Event, len(rs))
	var wg sync.WaitGroup
	for i, r := range rs {
		st, err := s.Submit(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { outs[i], evs[i] = collect(t, st) })
	}
	wg.Wait()
	return outs, evs
}

func TestConcurrentMatchesSolo(t *testing.T) {
	for _, window := range []int{0, 1} {
		for _, drafts := range []int{0, 3} {
			t.Run(fmt.Sprintf("window%d/drafts%d", window, drafts), func(t *testing.T) {
				cfg := testConfig()
				cfg.Drafts = drafts
				f := newFake(cfg, window)
				s := start(t, f, cfg)
				rs := requests()
				outs, _ := runAll(t, s, rs)
				for i, r := range rs {
					if want := reference(t, window, r, false); !slices.Equal(outs[i], want) {
						t.Errorf("request %d beside others: got %v, want %v", i, outs[i], want)
					}
				}
				if fs := f.Stats(); fs.Mixed == 0 || fs.Beside == 0 || fs.MaxRows > cfg.Rows {
					t.Errorf("rounds: %+v; want some mixing sequences, some holding a prompt beside decoding, none over %d rows", fs, cfg.Rows)
				}
				st := s.Stats()
				if drafts > 0 && window == 1 && st.DraftsAccepted == 0 {
					t.Errorf("copy drafts on a repeating model: %d proposed, none accepted", st.DraftsProposed)
				}
				if st.Running != 0 || st.Waiting != 0 || st.PagesUsed != 0 {
					t.Errorf("after the run: %+v", st)
				}
			})
		}
	}
}

func TestPromptCache(t *testing.T) {
	cfg := testConfig()
	cfg.PromptCache = true
	s := start(t, newFake(cfg, 0), cfg)
	base := textPrompt(1, 30)
	first := &Request{Prompt: base, MaxTokens: 8}
	a, _ := runAll(t, s, []*Request{first})
	// the next prompt repeats the first prompt and its reply, then asks more
	longer := append(append(slices.Clone(base), a[0]...), 5, 6, 7)
	second := &Request{Prompt: longer, MaxTokens: 8}
	outs, evs := runAll(t, s, []*Request{second})
	if want := reference(t, 0, second, false); !slices.Equal(outs[0], want) {
		t.Errorf("resumed: got %v, want %v", outs[0], want)
	}
	if c := evs[0].Usage.Cached; c < 32 || c%cfg.PageSize != 0 {
		t.Errorf("resumed request reused %d cached tokens, want the 36 written before it in whole pages", c)
	}
	st := s.Stats()
	if st.PrefixHits == 0 || st.PrefixQueries != uint64(len(base)+len(longer)) {
		t.Errorf("prefix stats %+v", st)
	}

	// the same ids with a different image must not share the image's pages
	im1, im2 := imagePrompt(3, 1), imagePrompt(3, 2)
	im1.MaxTokens, im2.MaxTokens = 4, 4
	runAll(t, s, []*Request{im1})
	outs, evs = runAll(t, s, []*Request{im2})
	if want := reference(t, 0, im2, false); !slices.Equal(outs[0], want) {
		t.Errorf("second image: got %v, want %v", outs[0], want)
	}
	if c := evs[0].Usage.Cached; c > 4 {
		t.Errorf("a different image reused %d cached tokens; only the 4 before the image may be shared", c)
	}
	im3 := imagePrompt(3, 2)
	im3.MaxTokens = 4
	if _, evs = runAll(t, s, []*Request{im3}); evs[0].Usage.Cached < 12 {
		t.Errorf("the same image again reused %d cached tokens, want 12", evs[0].Usage.Cached)
	}
}

func TestCacheEvictionUnderPressure(t *testing.T) {
	cfg := testConfig()
	cfg.PromptCache = true
	cfg.Parallel = 2
	cfg.Context = 40
	s := start(t, newFake(cfg, 0), cfg)
	// every request fills most of a lane; the cache must give pages back for later ones
	var rs []*Request
	for i := range 10 {
		rs = append(rs, &Request{Prompt: textPrompt(i, 30), MaxTokens: 10})
	}
	outs, _ := runAll(t, s, rs)
	for i, r := range rs {
		if want := reference(t, 0, r, false); !slices.Equal(outs[i], want) {
			t.Errorf("request %d: got %v, want %v", i, outs[i], want)
		}
	}
}

func TestEOSAndStop(t *testing.T) {
	cfg := testConfig()
	cfg.EOS = []int32{fakeEOS}
	s := start(t, newFake(cfg, 0), cfg)
	// find a prompt whose reference output holds EOS
	for i := range 200 {
		r := &Request{Prompt: textPrompt(i, 4), MaxTokens: 40}
		want := reference(t, 0, r, true)
		if want[len(want)-1] != fakeEOS {
			continue
		}
		got, ev := collect(t, must(s.Submit(context.Background(), r)))
		if !slices.Equal(got, want) || ev.Finish != "stop" {
			t.Fatalf("EOS: got %v (%s), want %v (stop)", got, ev.Finish, want)
		}
		break
	}
	r := &Request{Prompt: textPrompt(5, 9), MaxTokens: 30}
	full := reference(t, 0, r, false)
	r.Stop = func(out []int32) bool { return len(out) >= 3 && out[len(out)-1] == full[2] }
	got, ev := collect(t, must(s.Submit(context.Background(), r)))
	want := reference(t, 0, r, false)
	if !slices.Equal(got, want) || ev.Finish != "stop" || len(got) > 3 {
		t.Errorf("stop hook: got %v (%s), want %v", got, ev.Finish, want)
	}
}

func must(st *Stream, err error) *Stream {
	if err != nil {
		panic(err)
	}
	return st
}

func TestAdmission(t *testing.T) {
	cfg := testConfig()
	cfg.Parallel, cfg.Queue, cfg.MaxPatches = 1, 1, 8
	f := newFake(cfg, 0)
	release := f.Hold()
	s := start(t, f, cfg)

	_, err := s.Submit(context.Background(), &Request{Prompt: textPrompt(1, 90), MaxTokens: 7})
	var cl *ContextLengthError
	if !errors.As(err, &cl) || cl.Prompt != 90 || cl.Context != 96 {
		t.Fatalf("prompt 90 + 7 in a context of 96: %v", err)
	}
	if _, err := s.Submit(context.Background(), &Request{Prompt: []int32{1, fakeVocab}, MaxTokens: 1}); err == nil {
		t.Fatal("a token outside the vocabulary was accepted")
	}
	big := imagePrompt(1, 1)
	big.MaxTokens = 1
	if _, err := s.Submit(context.Background(), big); err == nil || !strings.Contains(err.Error(), "16 patches in all, over the 8") {
		t.Fatalf("an image over MaxPatches: %v", err)
	}
	wrong := imagePrompt(1, 1)
	wrong.MaxTokens, wrong.Grids = 1, [][3]int{{1, 2, 2}}
	if _, err := s.Submit(context.Background(), wrong); err == nil {
		t.Fatal("a grid that does not match the placeholders was accepted")
	}
	a := must(s.Submit(context.Background(), &Request{Prompt: textPrompt(1, 5), MaxTokens: 3}))
	b := must(s.Submit(context.Background(), &Request{Prompt: textPrompt(2, 5), MaxTokens: 3}))
	// a holds the lane (or is about to), b waits; a third finds the queue full
	_, err = s.Submit(context.Background(), &Request{Prompt: textPrompt(3, 5), MaxTokens: 3})
	var qf *QueueFullError
	if !errors.As(err, &qf) || qf.RetryAfter <= 0 {
		t.Fatalf("third request with one lane and a queue of one: %v", err)
	}
	release()
	collect(t, a)
	collect(t, b)
}

func TestCancel(t *testing.T) {
	cfg := testConfig()
	cfg.Parallel = 2
	f := newFake(cfg, 0)
	s := start(t, f, cfg)
	for _, phase := range []string{"prefill", "decode", "waiting"} {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		long := &Request{Prompt: textPrompt(7, 60), MaxTokens: 30}
		release := func() {}
		var blockers []*Stream
		switch phase {
		case "prefill":
			release = f.Hold()
		case "decode":
			// cancelled from inside the loop after two tokens
			long.Stop = func(out []int32) bool {
				if len(out) == 2 {
					cancel()
				}
				return false
			}
		case "waiting":
			// both lanes busy with held work, the request waits
			release = f.Hold()
			for i := range 2 {
				blockers = append(blockers, must(s.Submit(context.Background(), &Request{Prompt: textPrompt(i, 5), MaxTokens: 2})))
			}
		}
		st := must(s.Submit(ctx, long))
		if phase != "decode" {
			cancel()
		}
		release()
		got, ev := collect(t, st)
		if ev.Finish != "cancelled" || !errors.Is(ev.Err, context.Canceled) {
			t.Errorf("%s: finish %q err %v", phase, ev.Finish, ev.Err)
		}
		if want := map[string]int{"prefill": 0, "decode": 2, "waiting": 0}[phase]; len(got) != want {
			t.Errorf("%s: cancelled after %d tokens, want %d", phase, len(got), want)
		}
		for _, b := range blockers {
			collect(t, b)
		}
		// the lane and pages are free, and the next request is unaffected
		r := &Request{Prompt: textPrompt(9, 20), MaxTokens: 6}
		got, _ = collect(t, must(s.Submit(context.Background(), r)))
		if want := reference(t, 0, r, false); !slices.Equal(got, want) {
			t.Errorf("after cancel in %s: got %v, want %v", phase, got, want)
		}
		if st := s.Stats(); st.Running != 0 || st.Waiting != 0 || st.PagesUsed != 0 {
			t.Errorf("after cancel in %s: %+v", phase, st)
		}
	}
}

func TestClose(t *testing.T) {
	cfg := testConfig()
	f := newFake(cfg, 0)
	release := f.Hold()
	s, err := New(f, cfg)
	if err != nil {
		t.Fatal(err)
	}
	st := must(s.Submit(context.Background(), &Request{Prompt: textPrompt(1, 5), MaxTokens: 50}))
	closed := make(chan struct{})
	go func() {
		s.Close()
		close(closed)
	}()
	for {
		s.mu.Lock()
		c := s.closed
		s.mu.Unlock()
		if c {
			break
		}
		time.Sleep(time.Millisecond)
	}
	release()
	<-closed
	_, ev := collect(t, st)
	if ev.Finish != "cancelled" || !errors.Is(ev.Err, ErrClosed) {
		t.Errorf("closing: finish %q err %v", ev.Finish, ev.Err)
	}
	if _, err := s.Submit(context.Background(), &Request{Prompt: textPrompt(1, 5), MaxTokens: 5}); !errors.Is(err, ErrClosed) {
		t.Errorf("submit after close: %v", err)
	}
}

func TestPropose(t *testing.T) {
	ids := []int32{1, 2, 3, 4, 5, 9, 2, 3}
	if got := propose(ids, 2); !slices.Equal(got, []int32{4, 5}) {
		t.Errorf("propose: %v", got)
	}
	if got := propose([]int32{1, 2, 3}, 2); got != nil {
		t.Errorf("propose without a repeat: %v", got)
	}
}

func TestCacheBudget(t *testing.T) {
	cfg := testConfig()
	cfg.PromptCache, cfg.CachePages = true, 3
	s := start(t, newFake(cfg, 0), cfg)
	for i := range 6 {
		runAll(t, s, []*Request{{Prompt: textPrompt(i, 30), MaxTokens: 5}})
	}
	if st := s.Stats(); st.PagesCached != 3 || st.PagesUsed != 0 {
		t.Errorf("with a budget of 3 cached pages: %+v", st)
	}
	// the latest prompt's first pages are the ones kept
	r := &Request{Prompt: textPrompt(5, 30), MaxTokens: 5}
	outs, evs := runAll(t, s, []*Request{r})
	if evs[0].Usage.Cached != 12 {
		t.Errorf("the latest prompt again found %d cached tokens, want its first 3 pages (12)", evs[0].Usage.Cached)
	}
	if want := reference(t, 0, r, false); !slices.Equal(outs[0], want) {
		t.Errorf("resumed: %v, want %v", outs[0], want)
	}
}

func TestModelErrors(t *testing.T) {
	cfg := testConfig()
	f := newFake(cfg, 0)
	s := start(t, f, cfg)
	boom := errors.New("boom")
	f.Fail(boom, nil)
	img := imagePrompt(1, 1)
	img.MaxTokens = 3
	_, ev := collect(t, must(s.Submit(context.Background(), img)))
	if ev.Finish != "error" || !errors.Is(ev.Err, boom) {
		t.Errorf("vision failure: finish %q err %v", ev.Finish, ev.Err)
	}
	f.Fail(nil, func(r *model.Round) error {
		if len(r.Tokens) > 1 {
			return boom
		}
		return nil
	})
	_, ev = collect(t, must(s.Submit(context.Background(), &Request{Prompt: textPrompt(1, 6), MaxTokens: 3})))
	if ev.Finish != "error" || !errors.Is(ev.Err, boom) {
		t.Errorf("forward failure: finish %q err %v", ev.Finish, ev.Err)
	}
	f.Fail(nil, nil)
	r := &Request{Prompt: textPrompt(2, 6), MaxTokens: 4}
	got, _ := collect(t, must(s.Submit(context.Background(), r)))
	if want := reference(t, 0, r, false); !slices.Equal(got, want) {
		t.Errorf("after failures: %v, want %v", got, want)
	}
	if st := s.Stats(); st.Running != 0 || st.PagesUsed != 0 {
		t.Errorf("after failures: %+v", st)
	}
}

// TestReleaseWhenDone: a request's Release is called once, before its Done event, whether it ends
// by length, by a stop or cancelled; the scheduler never reads its pixels afterwards (Release
// poisons them here, and every request still gives the reference's tokens).
func TestReleaseWhenDone(t *testing.T) {
	cfg := testConfig()
	s := start(t, newFake(cfg, 0), cfg)
	rs := requests()
	rs[5].Stop = func(out []int32) bool { return len(out) == 3 }
	released := make([]atomic.Int32, len(rs)+1)
	wants := make([][]int32, len(rs))
	for i, r := range rs {
		wants[i] = reference(t, 0, r, false)
		r.Release = func() {
			released[i].Add(1)
			for k := range r.Pixels {
				r.Pixels[k] = float32(math.NaN())
			}
		}
	}
	streams := make([]*Stream, len(rs))
	for i, r := range rs {
		streams[i] = must(s.Submit(context.Background(), r))
	}
	ctx, cancel := context.WithCancel(context.Background())
	gone := imagePrompt(40, 4)
	gone.MaxTokens = 50
	gone.Release = func() { released[len(rs)].Add(1) }
	st := must(s.Submit(ctx, gone))
	cancel()
	if _, ev := collect(t, st); ev.Finish != "cancelled" || released[len(rs)].Load() != 1 {
		t.Errorf("cancelled request: finish %q, released %d times", ev.Finish, released[len(rs)].Load())
	}
	for i, st := range streams {
		got, _ := collect(t, st)
		if n := released[i].Load(); n != 1 {
			t.Errorf("request %d released %d times at its end", i, n)
		}
		if !slices.Equal(got, wants[i]) {
			t.Errorf("request %d: got %v, want %v", i, got, wants[i])
		}
	}
}
