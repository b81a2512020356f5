// Package lanestest holds a small deterministic model.Model for testing the scheduler and the
// server without weights. It keeps a paged "KV cache" of row contents (a hash of the row's token
// or vision row and, unless Window is set, its positions) and gives each logit row logits that are
// a pure function of its sequence's cache rows read through the page table, so any batching,
// paging, position or image-scatter mistake changes the tokens. Reference computes what a
// sequence alone must produce.
package lanestest

import (
	"fmt"
	"math"
	"sync"

	"tfc/runtime/model"
	"tfc/runtime/positions"
	"tfc/runtime/sample"
)

// Geometry is the scheduler shape the fake checks rounds against.
type Geometry struct {
	Parallel, Pages, PageSize, Rows int
}

// Fake is the test model.
type Fake struct {
	info   model.Info
	geo    Geometry
	window int

	mu         sync.Mutex
	gate       chan struct{}
	failVision error
	failRound  func(r *model.Round) error
	kv         []uint64
	written    []bool
	stats      RoundStats
}

// RoundStats counts what the rounds held.
type RoundStats struct {
	Rounds  int
	Mixed   int // rounds with rows of more than one sequence
	Beside  int // rounds with prompt rows beside other sequences' rows
	MaxRows int
}

// Info gives a fake family: M-RoPE positions, merge 2, vision rows of Hidden 4.
func Info(vocab, imageToken int) model.Info {
	return model.Info{Vocab: vocab, Hidden: 4, ImageToken: imageToken, Merge: 2, Positions: "mrope", PositionAxes: 3}
}

// New returns a fake of the given family info. Window 0 makes logits read every row of the
// sequence; Window w reads only the last w rows' tokens, so output repeats and copy drafts hit.
func New(info model.Info, g Geometry, window int) *Fake {
	n := g.Parallel * g.Pages * g.PageSize
	return &Fake{info: info, geo: g, window: window, kv: make([]uint64, n), written: make([]bool, n)}
}

// Hold makes rounds wait until the returned function is called.
func (f *Fake) Hold() (release func()) {
	g := make(chan struct{})
	f.mu.Lock()
	f.gate = g
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		f.gate = nil
		f.mu.Unlock()
		close(g)
	}
}

// Fail makes Vision return vision (when not nil) and Forward return round(r) (when it is not nil).
func (f *Fake) Fail(vision error, round func(r *model.Round) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failVision, f.failRound = vision, round
}

// Stats returns what the rounds so far held.
func (f *Fake) Stats() RoundStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

func (f *Fake) Info() model.Info { return f.info }

func (f *Fake) Close() {}

// Vision gives one row per merge² consecutive patches: their pixel sum, scaled per column.
func (f *Fake) Vision(pixels []float32, grids [][3]int) ([]float32, error) {
	f.mu.Lock()
	fail := f.failVision
	f.mu.Unlock()
	if fail != nil {
		return nil, fail
	}
	patches := 0
	for _, g := range grids {
		patches += g[0] * g[1] * g[2]
	}
	if patches == 0 || len(pixels)%patches != 0 {
		return nil, fmt.Errorf("fake: %d pixels for %d patches", len(pixels), patches)
	}
	c := len(pixels) / patches
	mm := f.info.Merge * f.info.Merge
	var out []float32
	for r := 0; r < patches/mm; r++ {
		var sum float32
		for _, v := range pixels[r*mm*c : (r+1)*mm*c] {
			sum += v
		}
		for k := range f.info.Hidden {
			out = append(out, sum*float32(k+1))
		}
	}
	return out, nil
}

func mix(h, v uint64) uint64 {
	h ^= v + 0x9e3779b97f4a7c15 + h<<6 + h>>2
	h *= 0xff51afd7ed558ccd
	return h ^ h>>33
}

// content is what a row leaves in the cache.
func content(window int, tok int32, image []float32, pos []int32) uint64 {
	h := uint64(tok)
	if image != nil {
		h = mix(0xabc, uint64(math.Float32bits(image[0])))
	}
	if window == 0 {
		for _, p := range pos {
			h = mix(h, uint64(p))
		}
	}
	return h
}

// logits of a row whose sequence's cache holds rows.
func logits(window, vocab int, rows []uint64) []float32 {
	lo := 0
	if window > 0 {
		lo = max(0, len(rows)-window)
	}
	acc := uint64(1)
	for _, c := range rows[lo:] {
		acc = mix(acc, c)
	}
	out := make([]float32, vocab)
	for v := range out {
		out[v] = float32(mix(acc, uint64(v))%1009) / 7
	}
	return out
}

func (f *Fake) Forward(r *model.Round) ([]float32, error) {
	f.mu.Lock()
	g := f.gate
	f.mu.Unlock()
	if g != nil {
		<-g
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failRound != nil {
		if err := f.failRound(r); err != nil {
			return nil, err
		}
	}
	n, axes, hidden := len(r.Tokens), f.info.PositionAxes, f.info.Hidden
	if n == 0 || n > f.geo.Rows || len(r.Seq) != n || len(r.Pos) != n || len(r.Positions) != axes*n {
		return nil, fmt.Errorf("fake: bad round shape: %d tokens, %d seq, %d pos, %d positions", n, len(r.Seq), len(r.Pos), len(r.Positions))
	}
	if len(r.ImageRows) != len(r.ImageAt)*hidden {
		return nil, fmt.Errorf("fake: %d image values for %d rows", len(r.ImageRows), len(r.ImageAt))
	}
	if len(r.PageTable) != f.geo.Parallel*f.geo.Pages {
		return nil, fmt.Errorf("fake: page table of %d entries, want %d", len(r.PageTable), f.geo.Parallel*f.geo.Pages)
	}
	f.stats.Rounds++
	f.stats.MaxRows = max(f.stats.MaxRows, n)
	cacheRow := func(s, p int) (int, error) {
		if s < 0 || s >= f.geo.Parallel || p < 0 || p/f.geo.PageSize >= f.geo.Pages {
			return 0, fmt.Errorf("fake: slot %d position %d outside the page table", s, p)
		}
		pg := r.PageTable[s*f.geo.Pages+p/f.geo.PageSize]
		if pg < 0 || int(pg) >= f.geo.Parallel*f.geo.Pages {
			return 0, fmt.Errorf("fake: slot %d position %d has page %d", s, p, pg)
		}
		return int(pg)*f.geo.PageSize + p%f.geo.PageSize, nil
	}
	image := map[int][]float32{}
	for j, at := range r.ImageAt {
		if int(r.Tokens[at]) != f.info.ImageToken {
			return nil, fmt.Errorf("fake: image row placed at row %d holding token %d", at, r.Tokens[at])
		}
		image[int(at)] = r.ImageRows[j*hidden : (j+1)*hidden]
	}
	seqs := map[int32]bool{}
	for i := range n {
		if r.Tokens[i] < 0 || int(r.Tokens[i]) >= f.info.Vocab {
			return nil, fmt.Errorf("fake: row %d token %d outside the vocabulary", i, r.Tokens[i])
		}
		at, err := cacheRow(int(r.Seq[i]), int(r.Pos[i]))
		if err != nil {
			return nil, err
		}
		f.kv[at] = content(f.window, r.Tokens[i], image[i], r.Positions[axes*i:axes*i+axes])
		f.written[at] = true
		seqs[r.Seq[i]] = true
	}
	if len(seqs) > 1 {
		f.stats.Mixed++
		if len(r.LogitRows) < n {
			f.stats.Beside++
		}
	}
	var out []float32
	for _, lr := range r.LogitRows {
		s, p := int(r.Seq[lr]), int(r.Pos[lr])
		rows := make([]uint64, p+1)
		for j := 0; j <= p; j++ {
			at, err := cacheRow(s, j)
			if err != nil {
				return nil, err
			}
			if !f.written[at] {
				return nil, fmt.Errorf("fake: slot %d reads unwritten position %d", s, j)
			}
			rows[j] = f.kv[at]
		}
		out = append(out, logits(f.window, f.info.Vocab, rows)...)
	}
	return out, nil
}

// Want describes one sequence for Reference.
type Want struct {
	Prompt    []int32
	Pixels    []float32
	Grids     [][3]int
	MaxTokens int
	Sample    sample.Params
	EOS       map[int32]bool
	Stop      func(out []int32) bool
}

// Reference generates a sequence alone and all at once from the fake's definition.
func Reference(info model.Info, window int, w Want) ([]int32, error) {
	f := &Fake{info: info}
	grids := make([]positions.Grid, len(w.Grids))
	for i, g := range w.Grids {
		grids[i] = g
	}
	pos, delta, err := positions.MRoPE(w.Prompt, grids, int32(info.ImageToken), info.Merge)
	if err != nil {
		return nil, err
	}
	var vision []float32
	if len(w.Grids) > 0 {
		if vision, err = f.Vision(w.Pixels, w.Grids); err != nil {
			return nil, err
		}
	}
	var rows []uint64
	img, hidden := 0, info.Hidden
	for i, tok := range w.Prompt {
		var im []float32
		if int(tok) == info.ImageToken {
			im = vision[img*hidden : (img+1)*hidden]
			img++
		}
		rows = append(rows, content(window, tok, im, pos[3*i:3*i+3]))
	}
	var out []int32
	for step := 0; step < w.MaxTokens; step++ {
		at := len(w.Prompt) + step
		tok := int32(sample.Pick(logits(window, info.Vocab, rows), w.Sample, at))
		out = append(out, tok)
		if w.EOS[tok] || (w.Stop != nil && w.Stop(out)) {
			break
		}
		p := positions.Decode(at, delta)
		rows = append(rows, content(window, tok, nil, p[:]))
	}
	return out, nil
}
