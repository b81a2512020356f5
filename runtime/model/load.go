package model

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"tfc/runtime/device"
)

// Weight is one manifest entry of a generated family and where loading puts it on the device.
// A stacked weight is its Parts' tensors, row after row, in one buffer: its Name joins theirs
// and its Shape is the stack's.
type Weight struct {
	Name  string
	Shape []int
	Parts []Weight
	Dst   *device.Tensor
	Also  []*device.Tensor // further graphs' views of the same tensor (MergeWeights)
	// Unfold > 1 loads a [rows, C*Unfold] tensor's column c*Unfold + k at k*C + c (the unfold view).
	Unfold int
	// Deinterleave > 0 loads row 2j + e of each of Deinterleave heads at e*HD/2 + j (the deinterleave view).
	Deinterleave int
}

// WeightAt is the manifest entry name of the given shape, loaded into dst.
func WeightAt(name string, shape []int, dst *device.Tensor) Weight {
	return Weight{Name: name, Shape: shape, Dst: dst}
}

// StackAt is the stacked weight of parts, their rows one after another, loaded into dst.
func StackAt(parts []Weight, dst *device.Tensor) Weight {
	w := Weight{Parts: parts, Dst: dst}
	var names []string
	for _, p := range parts {
		names = append(names, p.Name)
		if w.Shape == nil {
			w.Shape = append([]int{0}, p.Shape[1:]...)
		}
		w.Shape[0] += p.Shape[0]
	}
	w.Name = strings.Join(names, " + ")
	return w
}

// tensors are the checkpoint tensors w reads: its parts, or itself.
func (w Weight) tensors() []Weight {
	if len(w.Parts) > 0 {
		return w.Parts
	}
	return []Weight{w}
}

// Elements is the product of a shape.
func Elements(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// CheckLimits refuses limits that are not all positive, naming the family.
func CheckLimits(family string, l Limits) error {
	for _, lim := range []struct {
		name string
		v    int
	}{{"Rows", l.Rows}, {"Patches", l.Patches}, {"Parallel", l.Parallel}, {"Context", l.Context}, {"PageSize", l.PageSize}} {
		if lim.v <= 0 {
			return fmt.Errorf("%s: limit %s is %d; give it a positive value", family, lim.name, lim.v)
		}
	}
	return nil
}

// Buffers are the buffers a loaded model allocated on one backend, freed together.
type Buffers struct {
	b    device.Backend
	list []device.Buffer
}

// NewBuffers starts an empty set on b.
func NewBuffers(b device.Backend) *Buffers { return &Buffers{b: b} }

// Alloc allocates max(n, 1) elements of dt and keeps the buffer for Free.
func (a *Buffers) Alloc(dt device.DType, n int) (device.Buffer, error) {
	buf, err := a.b.Alloc(dt, max(n, 1))
	if err == nil {
		a.list = append(a.list, buf)
	}
	return buf, err
}

// Free frees every buffer allocated so far.
func (a *Buffers) Free() {
	for _, buf := range a.list {
		a.b.Free(buf)
	}
	a.list = nil
}

// Upload reads each weight through get, checks its size against its shape (family and graph name
// the source it must match) and writes it into a buffer of its own dtype as a 2-D view whose rows
// are the first dimension. A stacked weight's parts, of one dtype, are written one after another.
// In BF16 precision F16 weights load as BF16, rounded to nearest even (the backend's write
// rounds F32 weights alike), which is what a BF16 run of the publisher's model computes with.
func Upload(a *Buffers, ws []Weight, get func(name string) ([]byte, device.DType, error), family, graph string) error {
	for _, w := range ws {
		parts := w.tensors()
		data := make([][]byte, len(parts))
		var dt device.DType
		for i, p := range parts {
			d, pdt, err := get(p.Name)
			if err != nil {
				return fmt.Errorf("tensor %s: %w", p.Name, err)
			}
			if n := Elements(p.Shape); len(d) != n*pdt.Size() {
				return fmt.Errorf("tensor %s has %d bytes; %s expects shape %v of %s (%d bytes); check the checkpoint against %s", p.Name, len(d), family, p.Shape, pdt, n*pdt.Size(), graph)
			}
			if i > 0 && pdt != dt {
				return fmt.Errorf("tensor %s is %s and %s is %s; %s loads them as one stacked weight of one dtype", parts[0].Name, dt, p.Name, pdt, family)
			}
			data[i], dt = d, pdt
		}
		if dt == device.F16 && device.PrecisionOf(a.b) == device.BF16Precision {
			for i, d := range data { // as torch's .to(bfloat16) rounds them
				data[i] = F16ToBF16(d)
			}
			dt = device.BF16
		}
		n := Elements(w.Shape)
		buf, err := a.Alloc(dt, n)
		if err != nil {
			return fmt.Errorf("tensor %s: %w", w.Name, err)
		}
		rows := 1
		if len(w.Shape) > 1 {
			rows = w.Shape[0]
		}
		t := device.Tensor{Buf: buf, Rows: rows, Cols: n / rows}
		off := 0
		for i, p := range parts {
			pn, d := Elements(p.Shape), data[i]
			prows := 1
			if len(p.Shape) > 1 {
				prows = p.Shape[0]
			}
			if p.Unfold > 1 {
				if d, err = Unfold(d, prows, pn/prows, p.Unfold, dt.Size()); err != nil {
					return fmt.Errorf("tensor %s: %w", p.Name, err)
				}
			}
			if p.Deinterleave > 0 {
				rows, cols := prows, pn/prows
				if len(p.Shape) == 1 { // a bias: one value a row
					rows, cols = pn, 1
				}
				if d, err = Deinterleave(d, rows, cols, p.Deinterleave, dt.Size()); err != nil {
					return fmt.Errorf("tensor %s: %w", p.Name, err)
				}
			}
			if err := a.b.Write(device.Tensor{Buf: buf, Off: off, Rows: 1, Cols: pn}, d, dt); err != nil {
				return fmt.Errorf("tensor %s: %w", p.Name, err)
			}
			off += pn
		}
		*w.Dst = t
		for _, d := range w.Also {
			*d = t
		}
	}
	return nil
}

// F16ToBF16 rounds little-endian F16 elements to BF16 (nearest, ties to even), in a new slice.
func F16ToBF16(data []byte) []byte {
	out := make([]byte, len(data))
	for i := 0; i+1 < len(data); i += 2 {
		h := binary.LittleEndian.Uint16(data[i:])
		binary.LittleEndian.PutUint16(out[i:], device.F32ToBF16(device.F16ToF32(h)))
	}
	return out
}

// Unfold permutes the columns of a rows×cols matrix of size-byte elements from torch unfold's
// order (column c*f + k) to merge's (column k*C + c, C = cols/f), in a new slice.
func Unfold(data []byte, rows, cols, f, size int) ([]byte, error) {
	if f <= 0 || cols%f != 0 || len(data) != rows*cols*size {
		return nil, fmt.Errorf("cannot unfold [%d, %d] by %d", rows, cols, f)
	}
	out := make([]byte, len(data))
	c := cols / f
	for r := 0; r < rows; r++ {
		row := r * cols * size
		for j := 0; j < cols; j++ {
			dst := row + ((j%f)*c+j/f)*size
			copy(out[dst:dst+size], data[row+j*size:row+(j+1)*size])
		}
	}
	return out, nil
}

// Deinterleave permutes the rows of a rows×cols matrix of size-byte elements, heads blocks of
// rows/heads each, from adjacent pairs (row 2j + e of a block) to halves (row e*half + j), in a
// new slice.
func Deinterleave(data []byte, rows, cols, heads, size int) ([]byte, error) {
	if heads <= 0 || rows%(2*heads) != 0 || len(data) != rows*cols*size {
		return nil, fmt.Errorf("cannot deinterleave [%d, %d] in %d heads", rows, cols, heads)
	}
	out := make([]byte, len(data))
	hd, row := rows/heads, cols*size
	for r := 0; r < rows; r++ {
		h, i := r/hd, r%hd
		dst := h*hd + (i%2)*(hd/2) + i/2
		copy(out[dst*row:(dst+1)*row], data[r*row:(r+1)*row])
	}
	return out, nil
}

// MergeWeights lists each tensor of ws once, in first-use order: a tensor that several graphs
// read (each listing it in its manifest) loads once into every graph's view of it. A name listed
// twice with other shapes is an error.
func MergeWeights(ws []Weight) ([]Weight, error) {
	var out []Weight
	at := map[string]int{}
	for _, w := range ws {
		i, seen := at[w.Name]
		if !seen {
			at[w.Name] = len(out)
			out = append(out, w)
			continue
		}
		if fmt.Sprint(out[i].Shape) != fmt.Sprint(w.Shape) {
			return nil, fmt.Errorf("tensor %s is read as %v and as %v", w.Name, out[i].Shape, w.Shape)
		}
		if out[i].Unfold != w.Unfold || out[i].Deinterleave != w.Deinterleave {
			return nil, fmt.Errorf("tensor %s is read through two views (unfold %d and %d, deinterleave %d and %d)", w.Name, out[i].Unfold, w.Unfold, out[i].Deinterleave, w.Deinterleave)
		}
		out[i].Also = append(out[i].Also, w.Dst)
	}
	return out, nil
}

// KVCaches allocates the F32 K and V caches of layers layers, rows × width each.
func KVCaches(a *Buffers, layers, rows, width int) ([]device.KVCache, error) {
	var out []device.KVCache
	for i := 0; i < layers; i++ {
		var layer device.KVCache
		for _, t := range []*device.Tensor{&layer.K, &layer.V} {
			buf, err := a.Alloc(device.F32, rows*width)
			if err != nil {
				return nil, fmt.Errorf("KV cache of layer %d: %w", i, err)
			}
			*t = device.Tensor{Buf: buf, Rows: rows, Cols: width}
		}
		out = append(out, layer)
	}
	return out, nil
}

// Launcher runs one call of a graph on a backend: checks, input writes, launches, the result.
// The first error is kept (a failed check, a bad input, a launch naming its kernel and graph
// lines) and every later write and launch is skipped: the generated forward goes straight
// through and Finish returns that error.
type Launcher struct {
	B        device.Backend
	Trace    func(k *device.KernelRef, name string, out device.Tensor)
	Family   string // words the errors
	F32, I32 device.Buffer
	Lim      Limits
	KV       []device.KVCache
	err      error

	tapes     *tapes // the graph's tapes, nil where the backend keeps none
	recording bool   // a decoder round's launches go to rec, for a tape of its shape
	shape     shape
	plan      RoundPlan
	rec       []device.Prepared
	into      *[]float32 // where Finish reads the result, reusing its room; nil: a fresh slice
}

// Check keeps the error format (after the family's name) when ok is false.
func (l *Launcher) Check(ok bool, format string, args ...any) {
	if !ok && l.err == nil {
		l.err = fmt.Errorf(l.Family+": "+format, args...)
	}
}

// Limit checks a size against its limit: name = n may not exceed limit (the limit's name).
func (l *Launcher) Limit(name string, n int, limitName string, limit int) {
	l.Check(n <= limit, "%s = %d exceeds the limit %s = %d; raise the limit or send fewer rows", name, n, limitName, limit)
}

// Write checks that data fills input t (shape is its declared shape, name its graph name) and writes it.
func (l *Launcher) Write(t device.Tensor, data any, dt device.DType, name, shape string) {
	if l.err == nil {
		l.err = WriteInput(l.B, t, data, dt, l.Family, name, shape)
	}
}

// FinishRound finishes a decoder round whose logits are in logits and their greedy picks in
// picks: with r.Greedy it reads the picks into r.Picks and returns no logits, else it returns
// the logits as Finish does.
func (l *Launcher) FinishRound(r *Round, logits, picks device.Tensor) ([]float32, error) {
	if l.recording && l.err == nil {
		l.endRecording(logits, picks)
	}
	if l.err != nil || !r.Greedy {
		return l.Finish(logits)
	}
	n := picks.Rows * picks.Cols
	if cap(r.Picks) < n {
		r.Picks = make([]int32, n)
	}
	r.Picks = r.Picks[:n]
	if n == 0 {
		return nil, l.B.Sync()
	}
	return nil, l.B.Read(picks, r.Picks) // the read waits for the launches before it
}

// Finish waits for the launches and reads the result out back, or returns the first error.
func (l *Launcher) Finish(out device.Tensor) ([]float32, error) {
	if l.err != nil {
		return nil, l.err
	}
	n := out.Rows * out.Cols
	var v []float32
	if l.into != nil && cap(*l.into) >= n {
		v = (*l.into)[:n]
	} else {
		v = make([]float32, n)
	}
	if l.into != nil {
		*l.into = v
	}
	if len(v) == 0 {
		return v, l.B.Sync()
	}
	if err := l.B.Read(out, v); err != nil { // the read waits for the launches before it
		return nil, err
	}
	return v, nil
}

// ImagePatches is the patch count of images of (t, h, w) grids, each side a multiple of merge,
// within limit patches.
func ImagePatches(family string, grids [][3]int, merge, limit int) (int, error) {
	if len(grids) == 0 {
		return 0, fmt.Errorf("%s: no images", family)
	}
	n := 0
	for _, g := range grids {
		if g[0] <= 0 || g[1] <= 0 || g[2] <= 0 || g[1]%merge != 0 || g[2]%merge != 0 {
			return 0, fmt.Errorf("%s: image grid %v: t, h and w must be positive and h, w multiples of the merge size %d", family, g, merge)
		}
		n += g[0] * g[1] * g[2]
	}
	if n > limit {
		return 0, fmt.Errorf("%s: the images have %d patches; the limit is %d (Patches); send smaller images or raise the limit", family, n, limit)
	}
	return n, nil
}

// Launch runs ops as kernel k and shows Trace the output out, named name ("" for none).
func (l *Launcher) Launch(k *device.KernelRef, name string, out device.Tensor, ops ...device.Op) {
	if l.err != nil {
		return
	}
	var err error
	if l.recording {
		err = l.record(k, ops)
	} else {
		err = l.B.Launch(k, ops...)
	}
	if err != nil {
		l.err = fmt.Errorf("%s (%s): %w", k.Name, k.Source, err)
		return
	}
	if l.Trace != nil && name != "" {
		l.Trace(k, name, out)
	}
}

// WriteInput checks that data ([]float32 or []int32 of element type dt) fills t, and writes it;
// an empty input writes nothing. family, name and shape word the errors.
func WriteInput(b device.Backend, t device.Tensor, data any, dt device.DType, family, name, shape string) error {
	n := 0
	switch d := data.(type) {
	case []float32:
		n = len(d)
	case []int32:
		n = len(d)
	default:
		return fmt.Errorf("%s: input %s is %T, not []float32 or []int32", family, name, data)
	}
	if n != t.Rows*t.Cols {
		return fmt.Errorf("%s: input %s has %d values; it must be %s = %d", family, name, n, shape, t.Rows*t.Cols)
	}
	if n == 0 {
		return nil
	}
	if err := b.Write(t, data, dt); err != nil {
		return fmt.Errorf("%s: writing input %s: %w", family, name, err)
	}
	return nil
}

// GraphPlan is one graph's memory plan at the limits: its F32 and I32 arena elements and its
// buffers.
type GraphPlan struct {
	Name     string
	F32, I32 int
	Buffers  []PlanBuffer
}

// Layout is what a family's Load and Plan share at one checkpoint's config and the limits: its
// names, its weight manifest, each graph's plan, its KV cache, and how its kernels are made for
// a backend.
type Layout struct {
	Family, Graph, Kernels string // e.g. qwen2_vl, graphs/qwen2_vl.graph, qwen2vl (kernels/gen/qwen2vl.hip)
	Weights                []Weight
	Graphs                 []GraphPlan
	KVLayers, KVWidth      int // no KV cache when KVLayers is 0
	// Specialize gives a backend that builds kernels at load the family's kernels for this
	// checkpoint; Unpinned lists how the checkpoint differs from the committed kernels, which
	// every other GPU backend runs; Resolve picks each weight-name prefix by what has says exists.
	Specialize func(b device.Specializer, pageSize int) error
	Unpinned   func(Limits) []string
	Resolve    func(has func(string) bool) error
}

// CachePages is the number of KV cache pages: every sequence slot can hold Context tokens.
func CachePages(l Limits) int { return l.Parallel * ((l.Context + l.PageSize - 1) / l.PageSize) }

// Plan gives the bytes weights (as BF16), activations and the KV cache need at l.
func (ly Layout) Plan(l Limits) Plan {
	var out Plan
	for _, w := range ly.Weights {
		out.Weights += 2 * int64(Elements(w.Shape))
	}
	for _, g := range ly.Graphs {
		out.Activations += 4*int64(g.F32) + 4*int64(g.I32)
		out.Buffers = append(out.Buffers, g.Buffers...)
	}
	out.KVCache = 8 * int64(ly.KVLayers) * int64(CachePages(l)*l.PageSize*ly.KVWidth)
	return out
}

// Base is what every loaded family holds: the backend, the limits, the buffers Close frees, the
// KV cache (one a layer) and each graph's F32 and I32 arenas, in the layout's order.
type Base struct {
	B      device.Backend
	Lim    Limits
	KV     []device.KVCache
	Arenas [][2]device.Buffer
	bufs   *Buffers
	tapes  []*tapes // each graph's, where the backend keeps tapes

	// Trace, when set, sees the output of every launch, by the graph's name for it.
	Trace func(k *device.KernelRef, name string, out device.Tensor)
}

// Launcher is a call of graph number graph (its arenas, the limits, the KV cache) on the base's
// backend; family words the errors.
func (m *Base) Launcher(graph int, family string) *Launcher {
	l := &Launcher{B: m.B, Trace: m.Trace, Family: family, F32: m.Arenas[graph][0], I32: m.Arenas[graph][1], Lim: m.Lim, KV: m.KV}
	if graph < len(m.tapes) {
		l.tapes = m.tapes[graph]
	}
	return l
}

// Close frees every buffer the model allocated.
func (m *Base) Close() { m.bufs.Free() }

// LoadBase is a family's Load: it checks the limits, gives a backend that builds kernels at load
// the family's kernels for this checkpoint (another GPU backend must run the committed ones
// unchanged), picks the weight-name prefixes, uploads the weights through get, and allocates the
// arenas and the KV cache. On error nothing stays allocated.
func LoadBase(b device.Backend, l Limits, ly Layout, get func(name string) ([]byte, device.DType, error)) (*Base, error) {
	if err := CheckLimits(ly.Family, l); err != nil {
		return nil, err
	}
	if sp, ok := b.(device.Specializer); ok {
		if err := ly.Specialize(sp, l.PageSize); err != nil {
			return nil, err
		}
	} else if b.Name() != "cpu" {
		if bad := ly.Unpinned(l); len(bad) > 0 {
			return nil, fmt.Errorf("the %s backend runs kernels/gen/%s.hip, specialised for other values: %s; it cannot build kernels at load, so use the cpu, cuda or hip backend, or regenerate kernels/gen/%s.hip for this checkpoint with tfc compile -specialize <checkpoint>/config.json %s and rebuild",
				b.Name(), ly.Kernels, strings.Join(bad, "; "), ly.Kernels, ly.Graph)
		}
	}
	if err := ly.Resolve(func(name string) bool { _, _, err := get(name); return err == nil }); err != nil {
		return nil, err
	}
	m := &Base{B: b, Lim: l, bufs: NewBuffers(b)}
	if err := m.alloc(ly, get); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// alloc uploads the weights and allocates the arenas and the KV cache.
func (m *Base) alloc(ly Layout, get func(name string) ([]byte, device.DType, error)) error {
	if err := Upload(m.bufs, ly.Weights, get, ly.Family, ly.Graph); err != nil {
		return err
	}
	for _, g := range ly.Graphs {
		var a [2]device.Buffer
		for i, dt := range []device.DType{device.F32, device.I32} {
			var err error
			if a[i], err = m.bufs.Alloc(dt, []int{g.F32, g.I32}[i]); err != nil {
				return fmt.Errorf("%s arena of graph %s: %w", dt, g.Name, err)
			}
		}
		m.Arenas = append(m.Arenas, a)
		m.tapes = append(m.tapes, newTapes(m.B))
	}
	var err error
	m.KV, err = KVCaches(m.bufs, ly.KVLayers, CachePages(m.Lim)*m.Lim.PageSize, ly.KVWidth)
	return err
}

// Rsqrt is 1/√x, as generated forwards scale attention.
func Rsqrt(x int) float64 { return 1 / math.Sqrt(float64(x)) }

// SumInts adds its arguments and the elements of int lists among them.
func SumInts(xs ...any) int {
	s := 0
	for _, x := range xs {
		switch x := x.(type) {
		case int:
			s += x
		case []int:
			for _, v := range x {
				s += v
			}
		}
	}
	return s
}

// Cond is cond ? a : b, as generated Go writes a graph's conditional.
func Cond[T any](cond bool, a, b T) T {
	if cond {
		return a
	}
	return b
}

// In reports whether x is an element of list, as generated Go writes a graph's `i in list`.
func In(x int, list []int) bool {
	for _, v := range list {
		if v == x {
			return true
		}
	}
	return false
}

// Prefix is a weight-name prefix of a family with its alternatives; the first under which the
// Probe tensor exists is chosen. Source is its graph line.
type Prefix struct {
	Name   string
	Alts   []string
	Probe  string
	Source string
}

// ResolvePrefixes sets chosen[p.Name] to each prefix's alternative by which tensor names the
// checkpoint has, refusing by name a checkpoint that has none of them.
func ResolvePrefixes(has func(string) bool, family string, ps []Prefix, chosen map[string]string) error {
	for _, p := range ps {
		found := false
		var tried []string
		for _, alt := range p.Alts {
			tried = append(tried, alt+p.Probe)
			if has(alt + p.Probe) {
				chosen[p.Name], found = alt, true
				break
			}
		}
		if !found {
			return fmt.Errorf("the checkpoint has no tensor %s; %s looks for prefix %s under %s (%s)", strings.Join(tried, " or "), family, p.Name, strings.Join(p.Alts, " | "), p.Source)
		}
	}
	return nil
}

// Manifest lists the names and shapes of the checkpoint tensors ws read, each once.
func Manifest(ws []Weight) []TensorSpec {
	var out []TensorSpec
	seen := map[string]bool{}
	for _, w := range ws {
		for _, p := range w.tensors() {
			if !seen[p.Name] {
				seen[p.Name] = true
				out = append(out, TensorSpec{Name: p.Name, Shape: p.Shape})
			}
		}
	}
	return out
}

// Arena lays out a graph's buffers of one dtype one after another, for its memory plan.
type Arena struct {
	Size    int // elements placed so far
	Buffers []PlanBuffer
}

// Place returns the offset, in elements, of a buffer of n elements of elemBytes each, after
// the buffers placed before it; name names it in the plan.
func (a *Arena) Place(name string, elemBytes, n int) int {
	off := a.Size
	a.Size += n
	a.Buffers = append(a.Buffers, PlanBuffer{Name: name, Bytes: int64(elemBytes) * int64(n)})
	return off
}
