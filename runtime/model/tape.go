package model

import (
	"sync"

	"tfc/runtime/device"
	"tfc/runtime/internal/lru"
)

// maxTapes bounds the round shapes a decoder graph keeps tapes of; the least recently played
// goes first.
const maxTapes = 64

// shape is what a decoder round's launches depend on: the generated forward reads the round only
// through Round, whose tensors lie where the plan (a literal of the forward) puts them with R, I
// and S rows, so two rounds of one shape make the same launches, byte for byte.
type shape struct{ R, I, S int }

// tapes are a decoder graph's recorded rounds by shape, on a backend that keeps tapes, and the
// plan its forward gives Round (the same every call).
type tapes struct {
	tp      device.Taper
	mu      sync.Mutex
	byShape *lru.Map[shape, *taped]
	plan    *RoundPlan
}

// roundPlan is the plan the graph's forward gave Round, once a round was recorded.
func (ts *tapes) roundPlan() (RoundPlan, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.plan == nil {
		return RoundPlan{}, false
	}
	return *ts.plan, true
}

// taped is one shape's tape and the tensors its forward returned the logits and picks in.
type taped struct {
	tape          device.Tape
	logits, picks device.Tensor
}

// newTapes is the tapes of a graph on b, nil where b keeps none.
func newTapes(b device.Backend) *tapes {
	tp, ok := b.(device.Taper)
	if !ok || !tp.Taping() {
		return nil
	}
	return &tapes{tp: tp, byShape: lru.New[shape, *taped](maxTapes)}
}

func (ts *tapes) get(s shape) *taped {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, _ := ts.byShape.Get(s)
	return t
}

func (ts *tapes) put(s shape, t *taped, p RoundPlan) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.plan = &p
	ts.byShape.Put(s, t, 1)
}

// replay plays the tape of a round of r's shape where one was recorded: it writes r's inputs
// where the recorded round's plan put them and returns the taped round, whose logits and picks
// tensors FinishRound reads, so the forward itself need not run. Where none was, the forward
// runs and its launches are recorded (Round starts it; FinishRound plays and keeps them).
func (l *Launcher) replay(r *Round) (*taped, bool) {
	if l.tapes == nil || l.Trace != nil || r == nil {
		return nil, false
	}
	p, ok := l.tapes.roundPlan()
	if !ok {
		return nil, false
	}
	t := l.tapes.get(roundShape(r, p))
	if t == nil {
		return nil, false
	}
	l.Round(r, p)
	l.recording = false // the tape is played, not recorded again
	if l.err == nil {
		l.err = l.tapes.tp.Play(t.tape)
	}
	return t, true
}

// record prepares a launch for the tape being recorded.
func (l *Launcher) record(k *device.KernelRef, ops []device.Op) error {
	p, err := l.tapes.tp.Prepare(k, ops...)
	if err == nil {
		l.rec = append(l.rec, p)
	}
	return err
}

// endRecording plays the launches recorded and keeps them as the tape of this round's shape,
// whose logits and picks are those tensors.
func (l *Launcher) endRecording(logits, picks device.Tensor) {
	l.recording = false
	t := &taped{tape: l.tapes.tp.Tape(l.rec), logits: logits, picks: picks}
	l.rec = nil
	if err := l.tapes.tp.Play(t.tape); err != nil {
		l.err = err
		return
	}
	l.tapes.put(l.shape, t, l.plan)
}
