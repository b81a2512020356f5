// Package lanes is the scheduler every family is served by: requests wait in a bounded queue, take
// one of Parallel lanes, and advance together in shared rounds (one model.Forward holding the
// decode rows of every running sequence plus a piece of at most one prompt). KV pages come from
// a fixed pool; full pages are kept in a prompt cache keyed by the hash of everything before them
// (image identities included); copy drafts propose tokens from the sequence's own history and
// keep only those plain decoding would give. A row's result never depends on the rest of its
// round, so a request's tokens are the same alone, beside others, drafted or resumed.
package lanes

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"
	"time"

	"tfc/runtime/model"
	"tfc/runtime/positions"
	"tfc/runtime/sample"
)

// Config sizes the scheduler.
type Config struct {
	Parallel int     // sequences running at once (lanes)
	Context  int     // tokens per sequence, prompt and output
	Rows     int     // rows per forward round; more than Parallel
	PageSize int     // KV rows per page
	Queue    int     // requests that may wait for a lane; more are refused with QueueFullError
	EOS      []int32 // ids that end a sequence
	// Drafts is the most copy-drafted tokens a sequence proposes a round; 0 turns drafts off.
	Drafts int
	// PromptCache keeps full pages for later requests with the same prefix.
	PromptCache bool
	// CachePages bounds the pages only the prompt cache holds; 0 lets it use whatever the lanes leave free.
	CachePages int
	// MaxPatches bounds the vision patches of one request (the model's vision limit); 0: no bound.
	MaxPatches int
	// VisionCache is the bytes of vision rows kept by image key (ImageKeys), so a page sent again
	// skips the tower; 0 keeps none.
	VisionCache int
}

// Pages is the page-table width a sequence of Context tokens needs.
func (c Config) Pages() int { return (c.Context + c.PageSize - 1) / c.PageSize }

func (c Config) check() error {
	switch {
	case c.Parallel < 1:
		return fmt.Errorf("lanes: parallel %d must be at least 1", c.Parallel)
	case c.Context < 2:
		return fmt.Errorf("lanes: context %d must be at least 2", c.Context)
	case c.PageSize < 1:
		return fmt.Errorf("lanes: page size %d must be at least 1", c.PageSize)
	case c.Rows <= c.Parallel:
		return fmt.Errorf("lanes: %d rows a round leave no room for a prompt beside %d decoding lanes; use more rows than lanes", c.Rows, c.Parallel)
	case c.Queue < 0 || c.Drafts < 0 || c.CachePages < 0 || c.VisionCache < 0:
		return fmt.Errorf("lanes: queue, drafts, cache pages and the vision cache must not be negative")
	}
	return nil
}

// Request is one generation.
type Request struct {
	Prompt    []int32   // token ids, one placeholder id per vision row
	Pixels    []float32 // every image's patches, row-major
	Grids     [][3]int  // (t, h, w) in patches, per image
	ImageKeys []string  // each image's identity (a hash of its decoded pixels), for the prompt cache
	MaxTokens int       // most tokens to generate
	Sample    sample.Params
	// Stop, when set, sees the output after each token and ends the sequence by returning true.
	Stop func(out []int32) bool
	// IgnoreEOS: an EOS id does not end the sequence. MinTokens: no EOS id is picked, and no stop
	// applies, before that many tokens (as vLLM's ignore_eos and min_tokens).
	IgnoreEOS bool
	MinTokens int
	// RepetitionStop ends the sequence when its output's tail repeats a period (Repeats), with
	// Finish "stop" and StopReason "repetition": the loop a page of dots or rules can fall into.
	RepetitionStop bool
	// Logits, when set, sees the logits each of the request's tokens is picked from, with the
	// token's place in the sequence (the gates compare them; the row is the model's again after
	// the call, so keep a copy); Vision sees its images' tower rows.
	Logits func(pos int, logits []float32)
	Vision func(rows []float32)
	// Release, when set, is called once when the scheduler is done with the request (it has
	// finished, whatever the reason): its Pixels may then be reused.
	Release func()
}

// Event is what a request's stream carries: new tokens, and at the end Done with the reason.
type Event struct {
	Tokens []int32
	Done   bool
	Finish string // "stop" (EOS, Stop or a repetition), "length", "cancelled" or "error"
	// StopReason says what ended a "stop" other than EOS or Stop: "repetition" (RepetitionStop).
	StopReason string
	Err        error // why a cancelled or failed sequence ended
	Usage      Usage // set on Done
	Times      Times // set on Done
}

// Times are where a finished request's time went: waiting for a lane, its images' vision tower,
// filling its prompt (from its lane to its first token, the tower excluded) and decoding (from
// its first token to its last).
type Times struct {
	Queue, Vision, Prefill, Decode time.Duration
}

// Usage counts a finished request's tokens.
type Usage struct {
	Prompt, Cached, Output int
	Drafted, Accepted      int
}

// Stream is a submitted request's events, in order; it never blocks the scheduler.
type Stream struct {
	Events <-chan Event
}

// Stats is a snapshot of the scheduler's gauges and counters.
type Stats struct {
	Running, Waiting               int
	PagesUsed, PagesCached, Pages  int
	PromptTokens, GeneratedTokens  uint64
	PrefixQueries, PrefixHits      uint64 // prompt tokens looked up in, and found in, the prompt cache
	DraftsProposed, DraftsAccepted uint64
	Rounds                         uint64
}

// ContextLengthError refuses a request whose prompt plus max tokens pass the context.
type ContextLengthError struct{ Prompt, MaxTokens, Context int }

func (e *ContextLengthError) Error() string {
	return fmt.Sprintf("this model's context is %d tokens; the prompt has %d and %d more were asked for (%d in all); shorten the prompt or lower max_tokens",
		e.Context, e.Prompt, e.MaxTokens, e.Prompt+e.MaxTokens)
}

// QueueFullError refuses a request when every lane is busy and the queue is full.
type QueueFullError struct {
	Queue      int
	RetryAfter time.Duration
}

func (e *QueueFullError) Error() string {
	return fmt.Sprintf("all lanes are busy and %d requests are waiting; retry later", e.Queue)
}

// ErrClosed ends requests still running or waiting when the scheduler closes.
var ErrClosed = errors.New("the server is shutting down")

// Scheduler runs requests on one model.
type Scheduler struct {
	m    model.Model
	info model.Info
	cfg  Config
	eos  map[int32]bool

	mu      sync.Mutex
	waiting []*seq
	closed  bool
	stats   Stats
	wake    chan struct{}
	done    chan struct{}

	// owned by the loop goroutine
	slots    []*seq
	pool     *pagePool
	round    model.Round
	admitted uint64
	vcache   *visionCache
}

// seq is one request's state.
type seq struct {
	req       *Request
	ctx       context.Context
	events    chan Event
	stopWatch func() bool
	slot      int
	admitted  uint64 // admission order: prompts are filled first come, first served

	n         int     // prompt length
	ids       []int32 // prompt then output
	pos       []int32 // prompt positions [n*axes]
	delta     int32
	filled    int // leading rows whose KV is written
	cached    int
	pages     []int32 // page of each page index, -1 unmapped
	published int     // leading pages offered to the prompt cache
	hashes    []blockHash
	vision    []float32 // vision rows, once computed
	imageAt   []int32   // prompt index of each vision row
	imageKey  []string  // prompt-cache identity of each vision row
	usage     Usage
	finished  bool

	submitted, laned, first time.Time // Submit, admission to a lane, the first token
	visionTime              time.Duration
}

func (s *seq) out() []int32 { return s.ids[s.n:] }

// times is where the sequence's time went, at its end now; stages it never reached are zero.
func (s *seq) times(now time.Time) Times {
	var t Times
	if s.laned.IsZero() {
		t.Queue = now.Sub(s.submitted)
		return t
	}
	t.Queue, t.Vision = s.laned.Sub(s.submitted), s.visionTime
	if s.first.IsZero() {
		t.Prefill = max(now.Sub(s.laned)-s.visionTime, 0)
		return t
	}
	t.Prefill = max(s.first.Sub(s.laned)-s.visionTime, 0)
	t.Decode = now.Sub(s.first)
	return t
}

// New starts a scheduler for m.
func New(m model.Model, cfg Config) (*Scheduler, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	info := m.Info()
	s := &Scheduler{
		m: m, info: info, cfg: cfg, eos: map[int32]bool{},
		wake: make(chan struct{}, 1), done: make(chan struct{}),
		slots:  make([]*seq, cfg.Parallel),
		pool:   newPagePool(cfg.Parallel*cfg.Pages(), cfg.CachePages),
		vcache: newVisionCache(cfg.VisionCache / 4),
	}
	for _, id := range cfg.EOS {
		s.eos[id] = true
	}
	s.round.PageTable = make([]int32, cfg.Parallel*cfg.Pages())
	s.stats.Pages = cfg.Parallel * cfg.Pages()
	go s.loop()
	return s, nil
}

// Config returns the scheduler's configuration.
func (s *Scheduler) Config() Config { return s.cfg }

// Submit checks and queues a request; ctx cancels it, freeing its lane and pages at once.
func (s *Scheduler) Submit(ctx context.Context, r *Request) (*Stream, error) {
	n := len(r.Prompt)
	if n == 0 {
		return nil, fmt.Errorf("the prompt is empty")
	}
	if r.MaxTokens < 1 {
		return nil, fmt.Errorf("max_tokens must be at least 1, got %d", r.MaxTokens)
	}
	if n+r.MaxTokens > s.cfg.Context {
		return nil, &ContextLengthError{Prompt: n, MaxTokens: r.MaxTokens, Context: s.cfg.Context}
	}
	for i, id := range r.Prompt {
		if id < 0 || int(id) >= s.info.Vocab {
			return nil, fmt.Errorf("prompt token %d is id %d, outside the vocabulary of %d", i, id, s.info.Vocab)
		}
	}
	sq, err := s.prepare(r)
	if err != nil {
		return nil, err
	}
	sq.ctx = ctx
	sq.submitted = time.Now()
	sq.events = make(chan Event, r.MaxTokens+2)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	// the new request would wait behind queued() others without a lane
	if len(s.waiting)+1 > s.cfg.Parallel-s.stats.Running+s.cfg.Queue {
		return nil, &QueueFullError{Queue: s.queued(), RetryAfter: time.Second}
	}
	s.waiting = append(s.waiting, sq)
	s.stats.Waiting = len(s.waiting)
	sq.stopWatch = context.AfterFunc(ctx, s.poke)
	s.poke()
	return &Stream{Events: sq.events}, nil
}

// queued counts waiting requests that no free lane will take; mu held.
func (s *Scheduler) queued() int {
	return max(0, len(s.waiting)-(s.cfg.Parallel-s.stats.Running))
}

// prepare computes a request's positions and image row layout.
func (s *Scheduler) prepare(r *Request) (*seq, error) {
	sq := &seq{req: r, n: len(r.Prompt), slot: -1}
	sq.ids = make([]int32, len(r.Prompt), len(r.Prompt)+r.MaxTokens)
	copy(sq.ids, r.Prompt)
	var err error
	sq.pos, sq.delta, err = positions.Prompt(s.info.Positions, r.Prompt, r.Grids, int32(s.info.ImageToken), s.info.Merge)
	if err != nil {
		return nil, err
	}
	rows := 0
	merge := max(s.info.Merge, 1)
	var rowImage, rowIndex []int
	for img, g := range r.Grids {
		k := positions.MergedRows(g, merge)
		for j := 0; j < k; j++ {
			rowImage, rowIndex = append(rowImage, img), append(rowIndex, j)
		}
		rows += k
	}
	for i, id := range r.Prompt {
		if int(id) == s.info.ImageToken {
			sq.imageAt = append(sq.imageAt, int32(i))
		}
	}
	if len(sq.imageAt) != rows {
		return nil, fmt.Errorf("the prompt has %d image placeholder tokens, the images give %d rows", len(sq.imageAt), rows)
	}
	if len(r.Grids) > 0 {
		patches := 0
		for _, g := range r.Grids {
			patches += g[0] * g[1] * g[2]
		}
		if patches == 0 || len(r.Pixels)%patches != 0 {
			return nil, fmt.Errorf("%d pixel values do not fill the %d patches of the images' grids", len(r.Pixels), patches)
		}
		if s.cfg.MaxPatches > 0 && patches > s.cfg.MaxPatches {
			return nil, fmt.Errorf("the images have %d patches in all, over the %d one request may have; send fewer or smaller images", patches, s.cfg.MaxPatches)
		}
	}
	sq.imageKey = make([]string, rows)
	for j := range rows {
		key := ""
		if rowImage[j] < len(r.ImageKeys) {
			key = r.ImageKeys[rowImage[j]]
		}
		if key == "" {
			// an image without identity must never share pages
			key = fmt.Sprintf("%p", r)
		}
		sq.imageKey[j] = fmt.Sprintf("%s#%d", key, rowIndex[j])
	}
	return sq, nil
}

// Stats returns the current gauges and counters.
func (s *Scheduler) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Close ends every waiting and running request with ErrClosed and stops the loop.
func (s *Scheduler) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.done
		return
	}
	s.closed = true
	s.mu.Unlock()
	s.poke()
	<-s.done
}

func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Scheduler) loop() {
	defer close(s.done)
	for {
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			s.shutdown()
			return
		}
		s.reap()
		s.admit()
		if !s.runRound() {
			<-s.wake
		}
	}
}

// shutdown ends everything still queued or running.
func (s *Scheduler) shutdown() {
	s.mu.Lock()
	waiting := s.waiting
	s.waiting = nil
	s.mu.Unlock()
	for _, sq := range waiting {
		s.finish(sq, "cancelled", ErrClosed)
	}
	for _, sq := range s.slots {
		if sq != nil {
			s.finish(sq, "cancelled", ErrClosed)
		}
	}
}

// reap ends cancelled requests, waiting or running.
func (s *Scheduler) reap() {
	s.mu.Lock()
	var gone []*seq
	kept := s.waiting[:0]
	for _, sq := range s.waiting {
		if sq.ctx.Err() != nil {
			gone = append(gone, sq)
		} else {
			kept = append(kept, sq)
		}
	}
	s.waiting = kept
	s.stats.Waiting = len(kept)
	s.mu.Unlock()
	for _, sq := range gone {
		s.finish(sq, "cancelled", context.Cause(sq.ctx))
	}
	for _, sq := range s.slots {
		if sq != nil && sq.ctx.Err() != nil {
			s.finish(sq, "cancelled", context.Cause(sq.ctx))
		}
	}
}

// admit moves waiting requests into free lanes, in arrival order, resuming each from the prompt cache.
func (s *Scheduler) admit() {
	for slot, cur := range s.slots {
		if cur != nil {
			continue
		}
		s.mu.Lock()
		if len(s.waiting) == 0 {
			s.mu.Unlock()
			return
		}
		sq := s.waiting[0]
		s.waiting = s.waiting[1:]
		s.stats.Waiting = len(s.waiting)
		s.stats.Running++
		s.mu.Unlock()
		sq.slot = slot
		sq.laned = time.Now()
		s.admitted++
		sq.admitted = s.admitted
		s.slots[slot] = sq
		sq.pages = make([]int32, s.cfg.Pages())
		for i := range sq.pages {
			sq.pages[i] = -1
		}
		s.resume(sq)
	}
}

// resume maps the longest cached run of the prompt's full pages, always leaving its last token to compute.
func (s *Scheduler) resume(sq *seq) {
	if !s.cfg.PromptCache {
		return
	}
	pages := s.pool.lookup(s.hashes(sq, (sq.n-1)/s.cfg.PageSize))
	copy(sq.pages, pages)
	sq.cached = len(pages) * s.cfg.PageSize
	sq.filled = sq.cached
	sq.published = len(pages)
	sq.usage.Cached = sq.cached
	s.mu.Lock()
	s.stats.PrefixQueries += uint64(sq.n)
	s.stats.PrefixHits += uint64(sq.cached)
	s.mu.Unlock()
}

// hashes extends a sequence's page hashes to cover its first blocks pages.
func (s *Scheduler) hashes(sq *seq, blocks int) []blockHash {
	if len(sq.hashes) < blocks {
		sq.hashes = extendHashes(sq.hashes, sq.ids, s.cfg.PageSize, blocks, func(i int) string {
			if i < sq.n && int(sq.ids[i]) == s.info.ImageToken {
				return sq.imageKey[sort.Search(len(sq.imageAt), func(j int) bool { return int(sq.imageAt[j]) >= i })]
			}
			return ""
		})
	}
	return sq.hashes[:blocks]
}

// publish offers a sequence's newly full pages to the prompt cache; written rows are correct KV.
func (s *Scheduler) publish(sq *seq, written int) {
	if !s.cfg.PromptCache {
		return
	}
	blocks := written / s.cfg.PageSize
	if blocks <= sq.published {
		return
	}
	hs := s.hashes(sq, blocks)
	for b := sq.published; b < blocks; b++ {
		s.pool.publish(hs[b], sq.pages[b])
	}
	sq.published = blocks
}

// page maps the page holding position p of a sequence.
func (s *Scheduler) page(sq *seq, p int) error {
	i := p / s.cfg.PageSize
	if sq.pages[i] >= 0 {
		return nil
	}
	pg, ok := s.pool.alloc()
	if !ok {
		return fmt.Errorf("lanes: no free KV page for lane %d position %d", sq.slot, p)
	}
	sq.pages[i] = pg
	return nil
}

// finish ends a sequence: its last event, its lane and its pages.
func (s *Scheduler) finish(sq *seq, reason string, err error) {
	if sq.finished {
		return
	}
	sq.finished = true
	if sq.req.Release != nil {
		sq.req.Release() // the tower runs on this goroutine: nothing reads the pixels any more
	}
	if sq.stopWatch != nil {
		sq.stopWatch()
	}
	sq.usage.Prompt = sq.n
	sq.usage.Output = len(sq.ids) - sq.n
	if sq.slot >= 0 {
		if err == nil {
			s.publish(sq, len(sq.ids)-1)
		}
		for _, pg := range sq.pages {
			if pg >= 0 {
				s.pool.release(pg)
			}
		}
		s.pool.touch(sq.hashes[:min(sq.published, len(sq.hashes))])
		s.pool.trim()
		sq.pages = nil
		s.slots[sq.slot] = nil
	}
	s.mu.Lock()
	if sq.slot >= 0 {
		s.stats.Running--
	}
	s.stats.PagesUsed, s.stats.PagesCached = s.pool.counts()
	s.mu.Unlock()
	ev := Event{Done: true, Finish: reason, Err: err, Usage: sq.usage, Times: sq.times(time.Now())}
	if reason == "repetition" {
		ev.Finish, ev.StopReason = "stop", "repetition"
	}
	sq.events <- ev
	close(sq.events)
}

// decodeRows is one running sequence's rows in a round: its last token and its drafts.
type decodeRows struct {
	sq     *seq
	first  int // index of its first row in the round
	drafts []int32
}

// runRound builds and runs one round; false when there was nothing to run.
func (s *Scheduler) runRound() bool {
	r := &s.round
	r.Tokens, r.Positions, r.Seq, r.Pos = r.Tokens[:0], r.Positions[:0], r.Seq[:0], r.Pos[:0]
	r.ImageRows, r.ImageAt, r.LogitRows = r.ImageRows[:0], r.ImageAt[:0], r.LogitRows[:0]
	axes := s.info.PositionAxes
	budget := s.cfg.Rows

	var dec []decodeRows
	var fill *seq
	for _, sq := range s.slots {
		if sq == nil {
			continue
		}
		if sq.filled < sq.n {
			if fill == nil || sq.admitted < fill.admitted {
				fill = sq
			}
			continue
		}
		dec = append(dec, decodeRows{sq: sq})
		budget--
	}
	// a piece of one prompt
	var fillLo, fillHi int
	if fill != nil && budget > 0 {
		if err := s.see(fill); err != nil {
			s.finish(fill, "error", err)
			return true
		}
		fillLo = fill.filled
		fillHi = min(fill.n, fillLo+budget)
		budget -= fillHi - fillLo
	} else {
		fill = nil
	}
	// drafts share what is left, lane by lane
	if s.cfg.Drafts > 0 {
		for i := range dec {
			sq := dec[i].sq
			k := min(s.cfg.Drafts, budget, sq.req.MaxTokens-len(sq.out())-1, s.cfg.Context-len(sq.ids))
			if k <= 0 {
				continue
			}
			dec[i].drafts = propose(sq.ids, k)
			budget -= len(dec[i].drafts)
		}
	}
	if len(dec) == 0 && fill == nil {
		return false
	}

	for i := range dec {
		d := &dec[i]
		sq := d.sq
		d.first = len(r.Tokens)
		at := len(sq.ids) - 1
		toks := append([]int32{sq.ids[at]}, d.drafts...)
		for j, tok := range toks {
			p := at + j
			if err := s.page(sq, p); err != nil {
				s.finish(sq, "error", err)
				return true
			}
			pp := positions.Decode(p, sq.delta)
			r.Tokens = append(r.Tokens, tok)
			r.Positions = append(r.Positions, pp[:axes]...)
			r.Seq = append(r.Seq, int32(sq.slot))
			r.Pos = append(r.Pos, int32(p))
			r.LogitRows = append(r.LogitRows, int32(len(r.Tokens)-1))
		}
	}
	if fill != nil {
		base := len(r.Tokens)
		for p := fillLo; p < fillHi; p++ {
			if err := s.page(fill, p); err != nil {
				s.finish(fill, "error", err)
				return true
			}
			r.Tokens = append(r.Tokens, fill.ids[p])
			r.Positions = append(r.Positions, fill.pos[p*axes:(p+1)*axes]...)
			r.Seq = append(r.Seq, int32(fill.slot))
			r.Pos = append(r.Pos, int32(p))
		}
		for j, at := range fill.imageAt {
			if int(at) >= fillLo && int(at) < fillHi {
				r.ImageAt = append(r.ImageAt, int32(base)+at-int32(fillLo))
				r.ImageRows = append(r.ImageRows, fill.vision[j*s.info.Hidden:(j+1)*s.info.Hidden]...)
			}
		}
		if fillHi == fill.n {
			r.LogitRows = append(r.LogitRows, int32(len(r.Tokens)-1))
		}
	}
	for _, sq := range s.slots {
		if sq == nil {
			continue
		}
		copy(r.PageTable[sq.slot*s.cfg.Pages():], sq.pages)
	}

	jobs := s.jobs(dec, fill, len(r.LogitRows))
	r.Greedy, r.Picks = greedy(jobs), r.Picks[:0]
	logits, err := s.m.Forward(r)
	s.mu.Lock()
	s.stats.Rounds++
	s.mu.Unlock()
	picked := r.Greedy && len(logits) == 0 && len(r.Picks) == len(r.LogitRows) // the model picked on its side
	if err == nil && !picked && len(logits) != len(r.LogitRows)*s.info.Vocab {
		err = fmt.Errorf("lanes: the model returned %d logits for %d rows of %d", len(logits), len(r.LogitRows), s.info.Vocab)
	}
	if err != nil {
		for _, d := range dec {
			s.finish(d.sq, "error", err)
		}
		if fill != nil {
			s.finish(fill, "error", err)
		}
		return true
	}
	picks := r.Picks // the model's, read before the next round overwrites them
	if !picked {
		picks = s.pick(logits, jobs)
	}
	var proposed, accepted, generated uint64
	for _, d := range dec {
		sq := d.sq
		var got []int32
		reason := ""
		for j := 0; j <= len(d.drafts); j++ {
			tok := picks[d.first+j]
			sq.ids = append(sq.ids, tok)
			got = append(got, tok)
			if reason = s.stopReason(sq); reason != "" {
				break
			}
			if j == len(d.drafts) || d.drafts[j] != tok {
				break
			}
			accepted++
			sq.usage.Accepted++
		}
		proposed += uint64(len(d.drafts))
		sq.usage.Drafted += len(d.drafts)
		generated += uint64(len(got))
		sq.events <- Event{Tokens: got}
		if reason != "" {
			s.finish(sq, reason, nil)
			continue
		}
		s.publish(sq, len(sq.ids)-1)
	}
	if fill != nil {
		fill.filled = fillHi
		s.publish(fill, fillHi)
		if fillHi == fill.n {
			fill.vision = nil
			tok := picks[len(picks)-1]
			fill.ids = append(fill.ids, tok)
			fill.first = time.Now()
			generated++
			fill.events <- Event{Tokens: []int32{tok}}
			if reason := s.stopReason(fill); reason != "" {
				s.finish(fill, reason, nil)
			}
		}
	}
	s.mu.Lock()
	if fill != nil {
		s.stats.PromptTokens += uint64(fillHi - fillLo)
	}
	s.stats.GeneratedTokens += generated
	s.stats.DraftsProposed += proposed
	s.stats.DraftsAccepted += accepted
	s.stats.PagesUsed, s.stats.PagesCached = s.pool.counts()
	s.mu.Unlock()
	return true
}

// job is the pick of one logit row of a round.
type job struct {
	r        *Request
	pos, gen int // the token's place in the sequence; tokens generated before it
}

// jobs lists a pick for each of a round's rows logit rows: decode row j of a sequence draws at
// the position after its j-th new token, a finished prompt's row at the prompt's length.
func (s *Scheduler) jobs(dec []decodeRows, fill *seq, rows int) []job {
	jobs := make([]job, 0, rows)
	for _, d := range dec {
		for j := 0; j <= len(d.drafts); j++ {
			jobs = append(jobs, job{d.sq.req, len(d.sq.ids) + j, len(d.sq.ids) + j - d.sq.n})
		}
	}
	if fill != nil && len(jobs) < rows {
		jobs = append(jobs, job{fill.req, fill.n, 0})
	}
	return jobs
}

// greedy reports whether every job takes its row's largest logit as it stands: no sampling, no
// one reading the logits, no end-of-sequence ids held back by min_tokens. Such a round's picks
// can be taken where the logits are.
func greedy(jobs []job) bool {
	for _, j := range jobs {
		if !j.r.Sample.Greedy() || j.r.Logits != nil || j.gen < j.r.MinTokens {
			return false
		}
	}
	return len(jobs) > 0
}

// pick samples every logit row of a round in parallel, row i for jobs[i].
func (s *Scheduler) pick(logits []float32, jobs []job) []int32 {
	for i, j := range jobs {
		row := logits[i*s.info.Vocab : (i+1)*s.info.Vocab]
		if see := j.r.Logits; see != nil {
			see(j.pos, row)
		}
		if j.gen < j.r.MinTokens { // min_tokens: no EOS yet
			for _, id := range s.cfg.EOS {
				if int(id) < len(row) {
					row[id] = float32(math.Inf(-1))
				}
			}
		}
	}
	picks := make([]int32, len(jobs))
	if len(jobs) == 1 { // a lone row is picked here, not handed to another goroutine
		picks[0] = int32(sample.Pick(logits[:s.info.Vocab], jobs[0].r.Sample, jobs[0].pos))
		return picks
	}
	var wg sync.WaitGroup
	next := make(chan int, len(jobs))
	for i := range jobs {
		next <- i
	}
	close(next)
	for range min(len(jobs), runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			for i := range next {
				picks[i] = int32(sample.Pick(logits[i*s.info.Vocab:(i+1)*s.info.Vocab], jobs[i].r.Sample, jobs[i].pos))
			}
		})
	}
	wg.Wait()
	return picks
}

// waitsForVision reports whether sq's prompt still needs vision rows it has not filled past.
func waitsForVision(sq *seq) bool {
	return sq.vision == nil && len(sq.imageAt) > 0 && int(sq.imageAt[len(sq.imageAt)-1]) >= sq.filled
}

// see gives fill's prompt its vision rows when they are due, running the tower on its uncached
// images together with those of the other lanes' prompts still waiting for theirs (first
// admitted first, within the patch limit of one tower run). Each image is a span of its own in
// the tower, so a prompt's rows have the bits of a run of its own; when the shared run fails,
// fill's images run alone.
func (s *Scheduler) see(fill *seq) error {
	if !waitsForVision(fill) {
		return nil
	}
	batch := []*seq{fill}
	patches := s.missingPatches(fill)
	var others []*seq
	for _, sq := range s.slots {
		if sq != nil && sq != fill && waitsForVision(sq) {
			others = append(others, sq)
		}
	}
	sort.Slice(others, func(i, j int) bool { return others[i].admitted < others[j].admitted })
	for _, sq := range others {
		if p := s.missingPatches(sq); s.cfg.MaxPatches == 0 || patches+p <= s.cfg.MaxPatches {
			batch, patches = append(batch, sq), patches+p
		}
	}
	err := s.seeAll(batch)
	if err != nil && len(batch) > 1 && fill.vision == nil {
		err = s.seeAll(batch[:1])
	}
	return err
}

// missingPatches counts the patches of sq's images the vision cache lacks.
func (s *Scheduler) missingPatches(sq *seq) int {
	n := 0
	for j, g := range sq.req.Grids {
		if _, ok := s.vcache.get(imageKey(sq.req, j)); !ok {
			n += g[0] * g[1] * g[2]
		}
	}
	return n
}

// imageKey is image j's vision-cache key in r, "" when it has none.
func imageKey(r *Request, j int) string {
	if j < len(r.ImageKeys) {
		return r.ImageKeys[j]
	}
	return ""
}

// seeAll gives every prompt of batch its vision rows: cached images from the vision cache, the
// rest from one tower run over all of them (an image two prompts share by key runs once).
func (s *Scheduler) seeAll(batch []*seq) error {
	merge := max(s.info.Merge, 1)
	type image struct {
		sq *seq
		j  int
	}
	per := make([][][]float32, len(batch)) // each prompt's rows, image by image
	var run []image                        // the images the tower runs on, in order
	var pixels []float32
	var grids [][3]int
	first := map[string]int{} // key → its image in run
	for b, sq := range batch {
		r := sq.req
		patches := 0
		for _, g := range r.Grids {
			patches += g[0] * g[1] * g[2]
		}
		if patches == 0 || len(r.Pixels)%patches != 0 {
			return fmt.Errorf("lanes: %d pixel values do not split into %d patches", len(r.Pixels), patches)
		}
		cols := len(r.Pixels) / patches
		per[b] = make([][]float32, len(r.Grids))
		at := 0
		for j, g := range r.Grids {
			n := g[0] * g[1] * g[2] * cols
			key := imageKey(r, j)
			if rows, ok := s.vcache.get(key); ok {
				per[b][j] = rows
			} else if _, dup := first[key]; !dup || key == "" {
				if key != "" {
					first[key] = len(run)
				}
				run = append(run, image{sq, j})
				pixels, grids = append(pixels, r.Pixels[at:at+n]...), append(grids, g)
			}
			at += n
		}
	}
	var took time.Duration
	if len(run) > 0 {
		t0 := time.Now()
		all, err := s.m.Vision(pixels, grids)
		took = time.Since(t0)
		if err != nil {
			return err
		}
		at := 0
		for _, im := range run {
			g := im.sq.req.Grids[im.j]
			n := positions.MergedRows(g, merge) * s.info.Hidden
			if at+n > len(all) {
				return fmt.Errorf("lanes: the vision tower gave %d rows for %d images", len(all)/max(s.info.Hidden, 1), len(grids))
			}
			s.vcache.put(imageKey(im.sq.req, im.j), all[at:at+n:at+n])
			for b, sq := range batch {
				if sq == im.sq {
					per[b][im.j] = all[at : at+n : at+n]
				}
			}
			at += n
		}
	}
	for b, sq := range batch {
		var rows []float32
		for j, p := range per[b] {
			if p == nil { // an image sharing its key with one the tower ran on
				key := imageKey(sq.req, j)
				im := run[first[key]]
				p = per[indexOf(batch, im.sq)][im.j]
			}
			rows = append(rows, p...)
		}
		if len(rows) != len(sq.imageAt)*s.info.Hidden {
			return fmt.Errorf("lanes: the vision tower gave %d rows for %d image placeholder tokens", len(rows)/max(s.info.Hidden, 1), len(sq.imageAt))
		}
		sq.vision = rows
		sq.visionTime += took
		if sq.req.Vision != nil {
			sq.req.Vision(rows)
		}
	}
	return nil
}

func indexOf(batch []*seq, sq *seq) int {
	for i, x := range batch {
		if x == sq {
			return i
		}
	}
	return -1
}

// stopReason says whether the sequence's latest token ends it.
func (s *Scheduler) stopReason(sq *seq) string {
	out := sq.out()
	if len(out) >= sq.req.MinTokens {
		if s.eos[out[len(out)-1]] && !sq.req.IgnoreEOS {
			return "stop"
		}
		if sq.req.Stop != nil && sq.req.Stop(out) {
			return "stop"
		}
		if sq.req.RepetitionStop && Repeats(out) {
			return "repetition"
		}
	}
	if len(out) >= sq.req.MaxTokens || len(sq.ids) >= s.cfg.Context {
		return "length"
	}
	return ""
}
