package model

import "tfc/runtime/positions"

// Runner is what every generated graph runner is at a family's config and the limits: the
// config values the graph reads (C), its weights (W, filled by the runner's Weights), the
// offsets of its buffers in its arenas (P), its launch sites and its memory plan. A runner
// embeds it and adds the graph's Weights and Forward.
type Runner[C, W, P any] struct {
	C    C
	W    W
	P    P
	K    *Kernels
	plan GraphPlan
}

// NewRunner is a graph's runner at config c and limits l: plan places its buffers, and its sites
// launch sites run the kernels of kernels/gen/KERNELS.hip.
func NewRunner[C, W, P any](c C, l Limits, kernels string, sites int, plan func(c *C, l Limits) (P, GraphPlan)) Runner[C, W, P] {
	r := Runner[C, W, P]{C: c, K: NewKernels(kernels, sites)}
	r.P, r.plan = plan(&r.C, l)
	return r
}

// Plan is the graph's memory plan.
func (r *Runner[C, W, P]) Plan() GraphPlan { return r.plan }

// Arenas lays out one graph's buffers in its F32 and I32 arenas, for its memory plan.
type Arenas struct {
	graph    string
	f32, i32 Arena
}

// NewArenas are the empty arenas of graph.
func NewArenas(graph string) *Arenas { return &Arenas{graph: graph} }

// F32 places buffer name of n float32 elements and returns its offset in the F32 arena.
func (a *Arenas) F32(name string, n int) int { return a.f32.Place(a.graph+"."+name, 4, n) }

// I32 places buffer name of n int32 elements and returns its offset in the I32 arena.
func (a *Arenas) I32(name string, n int) int { return a.i32.Place(a.graph+"."+name, 4, n) }

// Plan is the graph's memory plan: both arenas' elements and their buffers, F32 first.
func (a *Arenas) Plan() GraphPlan {
	return GraphPlan{
		Name:    a.graph,
		F32:     a.f32.Size,
		I32:     a.i32.Size,
		Buffers: append(append([]PlanBuffer(nil), a.f32.Buffers...), a.i32.Buffers...),
	}
}

// Images is what a vision graph's call needs of its images of (t, h, w) grids, each side a
// multiple of merge: their patch count (ImagePatches, within the Patches limit), each patch's
// 2-D position (positions.Vision2D) and the cumulative patch offsets of their frames, within
// which attention runs (positions.Spans). A bad grid is kept as the call's error (Finish
// returns it) and gives no patches.
func (l *Launcher) Images(grids [][3]int, merge int) (patches int, pos, spans []int32) {
	if l.err != nil {
		return 0, nil, nil
	}
	n, err := ImagePatches(l.Family, grids, merge, l.Lim.Patches)
	if err != nil {
		l.err = err
		return 0, nil, nil
	}
	return n, positions.Vision2D(grids, merge), positions.Spans(grids)
}

// Windows is the window layout of a vision graph's images (positions.WindowLayout) for windows
// of window×window merged units, pos being what Images gave; none after an error.
func (l *Launcher) Windows(grids [][3]int, pos []int32, merge, window int) positions.Windows {
	if l.err != nil {
		return positions.Windows{}
	}
	return positions.WindowLayout(grids, pos, merge, window)
}
