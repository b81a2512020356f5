// Package bench measures a checkpoint on one backend: greedy decode rounds of B sequences run
// together through the lanes scheduler the server uses, and the vision tower on one image.
package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"tfc/runtime/device"
	"tfc/runtime/device/gpu"
	"tfc/runtime/engine"
	"tfc/runtime/image"
	"tfc/runtime/lanes"
	"tfc/runtime/model"
	"tfc/runtime/sample"
)

// DecodeMethod says how the decode figures are taken; the report carries it.
const DecodeMethod = "B sequences of random in-vocabulary prompt ids (seeded) are submitted together to the lanes " +
	"scheduler the server uses (drafts and prompt cache off, EOS ignored, greedy), after a short warm-up run. " +
	"Prompts fill one piece a round beside the decoding rows, so the decode window is the run of rounds in " +
	"which all B sequences decode and no prompt is filled: tok_s = B x rounds / wall time from the end of " +
	"the round before the window to the end of its last round (each stream's tokens after its first, over " +
	"wall time after every prefill); ms_per_round = that wall time / rounds; forward_ms is the part spent " +
	"inside the model's forward. prefill_ms is submit to the end of the last round that fills a prompt " +
	"(the prompts are filled a chunk a round, beside the rows of those already filled), and prefill_tok_s " +
	"is batch x prompt tokens over it."

// VisionMethod says how the vision figures are taken.
const VisionMethod = "The image is decoded and preprocessed (resize, normalise, patches) once per repeat, timed " +
	"apart as preprocess_ms; the vision tower (patch embedding to merged rows, read back to the host) runs " +
	"once to warm up, then repeat times; ms is the median."

// Options steer one bench run.
type Options struct {
	Dir          string
	Backend      device.Backend
	Batches      []int // sequences decoding together, one measure each; empty skips decode
	PromptTokens int
	NewTokens    int
	Seed         uint64
	Image        string // image file for the vision measure; empty skips it
	Repeat       int    // timed vision runs after one warm-up
	// Profile runs each batch's decode a second time with every kernel launch timed on the
	// device, and reports the decode rounds' kernels (the backend must be a device.Profiler).
	Profile bool
	// RoundRows is the most rows a forward round takes, prompt pieces and decode rows
	// (--max-num-batched-tokens); the server's default when 0.
	RoundRows int
	Log       io.Writer
}

// Report is what tfc bench prints.
type Report struct {
	Backend     string `json:"backend"`
	Precision   string `json:"precision"`
	Device      string `json:"device,omitempty"`
	Checkpoint  string `json:"checkpoint"`
	Family      string `json:"family"`
	WeightBytes int64  `json:"weight_bytes"`
	// WeightBytesByPrefix splits the weights by the first part of their names (the decoder's
	// and the vision tower's, for most families), for a bandwidth floor of the decode rounds.
	WeightBytesByPrefix map[string]int64 `json:"weight_bytes_by_prefix"`
	LoadSeconds         float64          `json:"load_seconds"`
	Limits              Limits           `json:"limits"`
	Decode              []Decode         `json:"decode,omitempty"`
	DecodeMethod        string           `json:"decode_method,omitempty"`
	Vision              *Vision          `json:"vision,omitempty"`
	VisionMethod        string           `json:"vision_method,omitempty"`
}

// Limits are the model limits the checkpoint was loaded with.
type Limits struct {
	Context  int `json:"context"`
	Parallel int `json:"parallel"`
	Rows     int `json:"rows"`
	Patches  int `json:"patches"`
	PageSize int `json:"page_size"`
}

// Decode is one batch size's decode measure.
type Decode struct {
	Batch         int     `json:"batch"`
	PromptTokens  int     `json:"prompt_tokens"`
	NewTokens     int     `json:"new_tokens"`
	TokS          float64 `json:"tok_s"`
	TokSPerStream float64 `json:"tok_s_per_stream"`
	MsPerRound    float64 `json:"ms_per_round"`
	ForwardMs     float64 `json:"forward_ms"`
	// HostMsPerRound is a round's wall time less the time the host waited for the device: the
	// host's own work a round (inputs, launches, reading and picking tokens, scheduling); GPU only.
	HostMsPerRound float64 `json:"host_ms_per_round,omitempty"`
	Rounds         int     `json:"rounds"` // rounds in the decode window
	PrefillMs      float64 `json:"prefill_ms"`
	PrefillTokS    float64 `json:"prefill_tok_s"` // batch × prompt tokens over prefill_ms
	WallMs         float64 `json:"wall_ms"`       // submit to the last token
	EndToEndTokS   float64 `json:"end_to_end_tok_s"`
	TotalRounds    int     `json:"total_rounds"`
	DistinctOutput int     `json:"distinct_outputs"` // how many of the B outputs differ from each other
	// ReplayedLaunches and PlainLaunches count the measured run's kernel launches that graphs
	// replayed and that were made one by one, on backends that replay graphs.
	ReplayedLaunches int64 `json:"replayed_launches,omitempty"`
	PlainLaunches    int64 `json:"plain_launches,omitempty"`
	// TapedLaunches counts those played from a recorded round's tape (prepared once).
	TapedLaunches  int64          `json:"taped_launches,omitempty"`
	Profile        *KernelProfile `json:"profile,omitempty"`
	PrefillProfile *KernelProfile `json:"prefill_profile,omitempty"` // the rounds before the decode window
}

// Vision is the vision tower measure on one image.
type Vision struct {
	Image        string         `json:"image"`
	Width        int            `json:"width"`   // as decoded
	Height       int            `json:"height"`  // as decoded
	Resized      [2]int         `json:"resized"` // width, height after the processor's resize
	Grid         [3]int         `json:"grid_thw"`
	Patches      int            `json:"patches"`
	Rows         int            `json:"rows"` // merged rows handed to the decoder
	PreprocessMs float64        `json:"preprocess_ms"`
	Ms           float64        `json:"ms"`
	RunsMs       []float64      `json:"runs_ms"`
	Profile      *KernelProfile `json:"profile,omitempty"`
}

// pageSize and roundRows are the server's defaults.
const (
	pageSize  = 16
	roundRows = 512
)

// Run loads the checkpoint on o.Backend and takes the measures o asks for.
func Run(o Options) (*Report, error) {
	if o.PromptTokens < 1 || o.NewTokens < 2 {
		return nil, fmt.Errorf("--prompt-tokens must be at least 1 and --new-tokens at least 2 (got %d and %d)", o.PromptTokens, o.NewTokens)
	}
	for _, b := range o.Batches {
		if b < 1 {
			return nil, fmt.Errorf("batch %d: every --batch must be at least 1", b)
		}
	}
	if o.RoundRows < 0 {
		return nil, fmt.Errorf("--max-num-batched-tokens must be positive, got %d", o.RoundRows)
	}
	if o.Image != "" && o.Repeat < 1 {
		return nil, fmt.Errorf("--repeat must be at least 1, got %d", o.Repeat)
	}
	logf := func(format string, a ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, "bench: "+format+"\n", a...)
		}
	}
	var prof device.Profiler
	if o.Profile {
		p, ok := o.Backend.(device.Profiler)
		if !ok {
			return nil, fmt.Errorf("--profile times kernels on a GPU; the %s backend cannot, use --backend cuda or hip", o.Backend.Name())
		}
		prof = p
	}
	counter, _ := o.Backend.(launchCounter)
	rep := &Report{Backend: o.Backend.Name(), Precision: device.PrecisionOf(o.Backend).String(), Checkpoint: filepath.Clean(o.Dir)}
	if d, ok := o.Backend.(interface{ Describe() string }); ok {
		rep.Device = d.Describe()
	}

	var fe *engine.Frontend
	var imageData []byte
	patches := 1024
	if o.Image != "" {
		var err error
		if fe, err = engine.LoadFrontend(o.Dir); err != nil {
			return nil, err
		}
		if imageData, err = os.ReadFile(o.Image); err != nil {
			return nil, fmt.Errorf("--image: %w", err)
		}
		imgs, err := fe.Images([][]byte{imageData})
		if err != nil {
			return nil, fmt.Errorf("--image %s: %w", o.Image, err)
		}
		patches = max(patches, imgs[0].Rows)
	}
	parallel := 1
	for _, b := range o.Batches {
		parallel = max(parallel, b)
	}
	ctxLen := o.PromptTokens + o.NewTokens
	ctxLen = (ctxLen + pageSize - 1) / pageSize * pageSize
	rows := roundRows
	if o.RoundRows > 0 {
		rows = o.RoundRows
	}
	limits := model.Limits{Context: ctxLen, Parallel: parallel, Rows: max(rows, parallel+1), Patches: patches, PageSize: pageSize}
	rep.Limits = Limits(limits)

	logf("loading %s on %s", o.Dir, rep.Backend)
	t0 := time.Now()
	e, err := engine.Open(o.Dir, o.Backend, limits)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	rep.LoadSeconds = time.Since(t0).Seconds()
	rep.Family = e.Family.Name
	rep.WeightBytes = e.Ckpt.TotalBytes()
	rep.WeightBytesByPrefix = map[string]int64{}
	for _, name := range e.Ckpt.Names() {
		t, err := e.Ckpt.Tensor(name)
		if err != nil {
			return nil, err
		}
		prefix, _, _ := strings.Cut(name, ".")
		rep.WeightBytesByPrefix[prefix] += int64(len(t.Data))
	}
	logf("loaded in %.1f s: %s, %d weight bytes", rep.LoadSeconds, rep.Family, rep.WeightBytes)

	if len(o.Batches) > 0 {
		tm := &timedModel{Model: e.Model}
		tm.waiter, _ = o.Backend.(waiter)
		sched, err := lanes.New(tm, lanes.Config{Parallel: parallel, Context: ctxLen, Rows: rep.Limits.Rows, PageSize: pageSize, Queue: parallel})
		if err != nil {
			return nil, err
		}
		defer sched.Close()
		vocab := promptIDs(e.Info)
		for _, b := range o.Batches {
			// warm-up: the same batch, a short prompt and a few tokens
			if _, err := runBatch(sched, tm, vocab, b, min(16, o.PromptTokens), 4, o.Seed^0x9e3779b97f4a7c15); err != nil {
				return nil, fmt.Errorf("decode warm-up at batch %d: %w", b, err)
			}
			logf("decode: batch %d, %d prompt tokens, %d new tokens", b, o.PromptTokens, o.NewTokens)
			var before gpu.LaunchCounts
			if counter != nil {
				before = counter.Launches()
			}
			run, err := runBatch(sched, tm, vocab, b, o.PromptTokens, o.NewTokens, o.Seed)
			if err != nil {
				return nil, fmt.Errorf("decode at batch %d: %w", b, err)
			}
			d, err := run.measure()
			if err != nil {
				return nil, fmt.Errorf("decode at batch %d: %w", b, err)
			}
			logf("prefill: batch %d × %d tokens in %.1f ms (%.0f tok/s)", b, d.PromptTokens, d.PrefillMs, d.PrefillTokS)
			logf("decode: batch %d: %.1f tok/s (%.1f a stream), %.2f ms a round over %d rounds", b, d.TokS, d.TokSPerStream, d.MsPerRound, d.Rounds)
			if run.timedHost {
				logf("decode: batch %d: the host's own work %.3f ms a round (the rest waits for the device)", b, d.HostMsPerRound)
			}
			if counter != nil {
				after := counter.Launches()
				d.ReplayedLaunches, d.PlainLaunches = after.Replayed-before.Replayed, after.Plain-before.Plain
				d.TapedLaunches = after.Taped - before.Taped
				logf("decode: batch %d: %d launches replayed by graphs, %d launched one by one, %d of them played from tapes", b, d.ReplayedLaunches, d.PlainLaunches, d.TapedLaunches)
			}
			if prof != nil {
				if d.Profile, d.PrefillProfile, err = profileDecode(sched, tm, prof, vocab, b, o); err != nil {
					return nil, fmt.Errorf("decode profile at batch %d: %w", b, err)
				}
				d.Profile, d.PrefillProfile = d.Profile.withPeak(rep.Device), d.PrefillProfile.withPeak(rep.Device)
				if o.Log != nil {
					d.PrefillProfile.WriteTable(o.Log, fmt.Sprintf("prefill batch %d × %d tokens", b, o.PromptTokens))
					d.Profile.WriteTable(o.Log, fmt.Sprintf("decode batch %d", b))
				}
			}
			rep.Decode = append(rep.Decode, d)
		}
		rep.DecodeMethod = DecodeMethod
	}

	if o.Image != "" {
		v, err := measureVision(e, fe, imageData, o.Repeat, prof)
		if err != nil {
			return nil, fmt.Errorf("vision on %s: %w", o.Image, err)
		}
		v.Image = o.Image
		v.Profile = v.Profile.withPeak(rep.Device)
		logf("vision: grid %v, %d patches: %.2f ms (preprocess %.2f ms)", v.Grid, v.Patches, v.Ms, v.PreprocessMs)
		if v.Profile != nil && o.Log != nil {
			v.Profile.WriteTable(o.Log, "vision")
		}
		rep.Vision = v
		rep.VisionMethod = VisionMethod
	}
	return rep, nil
}

// promptIDs bounds the random prompt ids: ordinary tokens, below the vision and added ids.
func promptIDs(info model.Info) int32 {
	n := info.Vocab
	for _, id := range []int{info.ImageToken, info.VisionStart} {
		if id > 0 {
			n = min(n, id)
		}
	}
	return int32(n)
}

// round is one timed forward.
type round struct {
	start, end time.Time
	waited     time.Duration // of it, the host blocked until the device finished (GPU backends)
	rows       int
	decodeRows int                 // rows at positions past the prompt
	profile    []device.KernelTime // the backend's profile after the round, when profiling
}

// timedModel records every forward the scheduler makes while recording is on.
type timedModel struct {
	model.Model
	prof      device.Profiler // when set, each round ends with the profile so far
	mu        sync.Mutex
	recording bool
	prompt    int // rows at positions below this fill a prompt
	rounds    []round
	waiter    waiter // when set, each round records the time the host waited on the device
}

func (m *timedModel) Forward(r *model.Round) ([]float32, error) {
	var before time.Duration
	if m.waiter != nil {
		before = m.waiter.Waited()
	}
	start := time.Now()
	logits, err := m.Model.Forward(r)
	end := time.Now()
	var waited time.Duration
	if m.waiter != nil {
		waited = m.waiter.Waited() - before
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.recording {
		rd := round{start: start, end: end, waited: waited, rows: len(r.Tokens)}
		if m.prof != nil {
			rd.profile = m.prof.Profiled()
		}
		for _, p := range r.Pos {
			if int(p) >= m.prompt {
				rd.decodeRows++
			}
		}
		m.rounds = append(m.rounds, rd)
	}
	return logits, err
}

// profileWith makes each recorded round end with p's profile; nil stops it.
func (m *timedModel) profileWith(p device.Profiler) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.prof = p
}

func (m *timedModel) record(prompt int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recording, m.prompt, m.rounds = true, prompt, nil
}

func (m *timedModel) stop() []round {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recording = false
	return m.rounds
}

// batchRun is one batch's requests, outputs and rounds.
type batchRun struct {
	batch, prompt, newTokens int
	submit, done             time.Time
	rounds                   []round
	outs                     [][]int32
	timedHost                bool // the rounds record the host's waits (a GPU backend)
}

// runBatch submits b greedy requests of prompt random ids below vocab and waits for all of them.
func runBatch(s *lanes.Scheduler, tm *timedModel, vocab int32, b, prompt, newTokens int, seed uint64) (*batchRun, error) {
	reqs := make([]*lanes.Request, b)
	for i := range reqs {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		ids := make([]int32, prompt)
		for j := range ids {
			ids[j] = rng.Int32N(vocab)
		}
		reqs[i] = &lanes.Request{Prompt: ids, MaxTokens: newTokens, Sample: sample.Params{}}
	}
	run := &batchRun{batch: b, prompt: prompt, newTokens: newTokens, outs: make([][]int32, b), timedHost: tm.waiter != nil}
	tm.record(prompt)
	run.submit = time.Now()
	streams := make([]*lanes.Stream, b)
	for i, r := range reqs {
		st, err := s.Submit(context.Background(), r)
		if err != nil {
			tm.stop()
			return nil, err
		}
		streams[i] = st
	}
	var firstErr error
	for i, st := range streams {
		for ev := range st.Events {
			run.outs[i] = append(run.outs[i], ev.Tokens...)
			if ev.Done && ev.Err != nil && firstErr == nil {
				firstErr = ev.Err
			}
		}
	}
	run.done = time.Now()
	run.rounds = tm.stop()
	if firstErr != nil {
		return nil, firstErr
	}
	for i, out := range run.outs {
		if len(out) != newTokens {
			return nil, fmt.Errorf("sequence %d gave %d tokens, not %d", i, len(out), newTokens)
		}
	}
	return run, nil
}

// measure times the decode window: the rounds in which all the batch's sequences decode and no
// prompt is filled.
func (run *batchRun) measure() (Decode, error) {
	b, rounds := run.batch, run.rounds
	lo, hi, err := decodeWindow(rounds, b)
	if err != nil {
		return Decode{}, err
	}
	n := hi - lo + 1
	wall := rounds[hi].end.Sub(rounds[lo-1].end)
	var fwd, waited time.Duration
	for _, r := range rounds[lo : hi+1] {
		fwd += r.end.Sub(r.start)
		waited += r.waited
	}
	prefillEnd := rounds[0].end
	for _, r := range rounds {
		if r.decodeRows < r.rows {
			prefillEnd = r.end
		}
	}
	total := run.done.Sub(run.submit)
	return Decode{
		Batch:          b,
		PromptTokens:   run.prompt,
		NewTokens:      run.newTokens,
		TokS:           float64(b*n) / wall.Seconds(),
		TokSPerStream:  float64(n) / wall.Seconds(),
		MsPerRound:     ms(wall) / float64(n),
		ForwardMs:      ms(fwd) / float64(n),
		HostMsPerRound: hostMs(run.timedHost, wall-waited, n),
		Rounds:         n,
		PrefillMs:      ms(prefillEnd.Sub(run.submit)),
		PrefillTokS:    float64(b*run.prompt) / prefillEnd.Sub(run.submit).Seconds(),
		WallMs:         ms(total),
		EndToEndTokS:   float64(b*run.newTokens) / total.Seconds(),
		TotalRounds:    len(rounds),
		DistinctOutput: distinct(run.outs),
	}, nil
}

// hostMs is host time over n rounds in milliseconds a round, 0 (left out) where it was not timed.
func hostMs(timed bool, host time.Duration, n int) float64 {
	if !timed {
		return 0
	}
	return ms(host) / float64(n)
}

// decodeWindow finds the rounds [lo, hi] in which all b sequences decode and no prompt is
// filled; lo is at least 1, so round lo-1 ends where the window starts.
func decodeWindow(rounds []round, b int) (lo, hi int, err error) {
	full := func(r round) bool { return r.rows == b && r.decodeRows == b }
	lo = slices.IndexFunc(rounds, full)
	if lo < 1 {
		return 0, 0, fmt.Errorf("no round decoded all %d sequences after their prompts (%d rounds); raise --new-tokens", b, len(rounds))
	}
	hi = lo
	for hi+1 < len(rounds) && full(rounds[hi+1]) {
		hi++
	}
	return lo, hi, nil
}

// measureVision times preprocessing and the vision tower on one image.
func measureVision(e *engine.Engine, fe *engine.Frontend, data []byte, repeat int, prof device.Profiler) (*Vision, error) {
	var pre []float64
	var px []float32
	var grid [3]int
	for range repeat {
		t := time.Now()
		imgs, err := fe.Images([][]byte{data})
		if err != nil {
			return nil, err
		}
		pre = append(pre, ms(time.Since(t)))
		px, grid = imgs[0].Pixels, imgs[0].GridTHW
	}
	v := &Vision{Grid: grid, Patches: grid[0] * grid[1] * grid[2], PreprocessMs: median(pre)}
	v.Resized = [2]int{grid[2] * fe.Image.PatchSize, grid[1] * fe.Image.PatchSize}
	img, err := image.Decode(1, data, fe.Limits)
	if err != nil {
		return nil, err
	}
	v.Width, v.Height = img.Width, img.Height
	grids := [][3]int{grid}
	rows, err := e.Model.Vision(px, grids)
	if err != nil {
		return nil, err
	}
	v.Rows = len(rows) / max(e.Info.Hidden, 1)
	for range repeat {
		t := time.Now()
		if _, err := e.Model.Vision(px, grids); err != nil {
			return nil, err
		}
		v.RunsMs = append(v.RunsMs, ms(time.Since(t)))
	}
	v.Ms = median(v.RunsMs)
	if prof != nil {
		var err error
		if v.Profile, err = profileVision(prof, func() error { _, err := e.Model.Vision(px, grids); return err }); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// distinct counts the different outputs among outs.
func distinct(outs [][]int32) int {
	seen := map[string]bool{}
	for _, o := range outs {
		seen[fmt.Sprint(o)] = true
	}
	return len(seen)
}
