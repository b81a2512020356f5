// Package positions holds the position rules a .graph file names: how each token row and each
// vision patch gets its rotary position ids.
package positions

import "fmt"

// Grid is an image's patch grid: temporal, height and width in patches.
type Grid = [3]int

// MRoPE computes Qwen2-VL's three-axis positions ([T*3], row-major t,h,w per token) for a prompt
// whose images appear as runs of imageToken, in order, one run per grid of t*h*w/merge² tokens.
// It returns the positions and the delta that decode rows add to their cache position.
func MRoPE(ids []int32, grids []Grid, imageToken int32, merge int) ([]int32, int32, error) {
	pos := make([]int32, 0, 3*len(ids))
	next := int32(0) // one past the largest position so far
	add := func(t, h, w int32) {
		pos = append(pos, t, h, w)
		for _, v := range [3]int32{t, h, w} {
			if v+1 > next {
				next = v + 1
			}
		}
	}
	img := 0
	for i := 0; i < len(ids); {
		if ids[i] != imageToken {
			start := next
			for ; i < len(ids) && ids[i] != imageToken; i++ {
				add(start, start, start)
				start++
			}
			continue
		}
		if img >= len(grids) {
			return nil, 0, fmt.Errorf("positions: prompt has more image placeholder runs than the %d images sent", len(grids))
		}
		g := grids[img]
		img++
		if g[1]%merge != 0 || g[2]%merge != 0 {
			return nil, 0, fmt.Errorf("positions: image %d grid %v is not divisible by merge %d", img, g, merge)
		}
		gt, gh, gw := g[0], g[1]/merge, g[2]/merge
		n := gt * gh * gw
		for k := 0; k < n; k++ {
			if i+k >= len(ids) || ids[i+k] != imageToken {
				return nil, 0, fmt.Errorf("positions: image %d needs %d placeholder tokens, the prompt has fewer", img, n)
			}
		}
		base := next
		for t := 0; t < gt; t++ {
			for h := 0; h < gh; h++ {
				for w := 0; w < gw; w++ {
					add(base+int32(t), base+int32(h), base+int32(w))
				}
			}
		}
		i += n
	}
	if img != len(grids) {
		return nil, 0, fmt.Errorf("positions: %d images sent, the prompt has %d placeholder runs", len(grids), img)
	}
	return pos, next - int32(len(ids)), nil
}

// Sequence gives each row its index in the sequence, image rows included (1-D RoPE).
func Sequence(ids []int32) []int32 {
	pos := make([]int32, len(ids))
	for i := range pos {
		pos[i] = int32(i)
	}
	return pos
}

// Decode gives the M-RoPE positions of a generated token at cache position p.
func Decode(p int, delta int32) [3]int32 {
	v := int32(p) + delta
	return [3]int32{v, v, v}
}

// Vision2D gives each patch's (row, column) in the merge-window order the Qwen2-VL processor
// emits patches in ([N*2], row-major), for every frame of every grid.
func Vision2D(grids []Grid, merge int) []int32 {
	var pos []int32
	for _, g := range grids {
		t, h, w := g[0], g[1], g[2]
		for f := 0; f < t; f++ {
			for bh := 0; bh < h/merge; bh++ {
				for bw := 0; bw < w/merge; bw++ {
					for mh := 0; mh < merge; mh++ {
						for mw := 0; mw < merge; mw++ {
							pos = append(pos, int32(bh*merge+mh), int32(bw*merge+mw))
						}
					}
				}
			}
		}
	}
	return pos
}

// MergedRows is the number of merged units of a (t, h, w) grid: each frame's merge×merge
// windows, an odd last row or column of patches left out (torch unfold's floor).
func MergedRows(g Grid, merge int) int { return g[0] * (g[1] / merge) * (g[2] / merge) }

// MergeOrder gives, for patches in raster order, each merged unit's merge×merge patch rows: units
// in raster order, frame by frame, image by image, a unit's patches row by row; a patch of an odd
// last row or column is in none ([sum of MergedRows × merge²]).
func MergeOrder(grids []Grid, merge int) []int32 {
	var out []int32
	base := 0
	for _, g := range grids {
		t, h, w := g[0], g[1], g[2]
		for f := 0; f < t; f++ {
			for bh := 0; bh < h/merge; bh++ {
				for bw := 0; bw < w/merge; bw++ {
					for mh := 0; mh < merge; mh++ {
						for mw := 0; mw < merge; mw++ {
							out = append(out, int32(base+(bh*merge+mh)*w+bw*merge+mw))
						}
					}
				}
			}
			base += h * w
		}
	}
	return out
}

// Spans gives the cumulative patch offsets of each frame of each grid: full attention runs
// within a frame ([frames+1]).
func Spans(grids []Grid) []int32 {
	spans := []int32{0}
	for _, g := range grids {
		for f := 0; f < g[0]; f++ {
			spans = append(spans, spans[len(spans)-1]+int32(g[1]*g[2]))
		}
	}
	return spans
}

// Windows is the window layout of a vision tower that attends within windows of merged units
// (Qwen2.5-VL): the patch rows in window order, windows listed frame by frame in raster order of
// windows, each window's merged units in raster order, a unit's merge×merge patches together.
type Windows struct {
	Order   []int32 // [N]: for each row in window order, its row in the processor's order
	Inverse []int32 // [N/merge²]: for each merged unit in the processor's order, its row in window order
	Pos     []int32 // [N*2]: Vision2D's (row, column) of each row in window order
	Spans   []int32 // cumulative patch offsets of the windows in window order (empty windows dropped)
}

// WindowLayout gives the window layout of grids for windows of window×window merged units (the
// window size over patch×merge), pos being Vision2D(grids, merge). A window at the right or bottom
// edge holds what remains.
func WindowLayout(grids []Grid, pos []int32, merge, window int) Windows {
	unit := merge * merge
	var units []int32 // window order → merged unit in the processor's (raster) order
	w := Windows{Spans: []int32{0}}
	base := 0
	for _, g := range grids {
		t, h, wd := g[0], g[1]/merge, g[2]/merge
		for f := 0; f < t; f++ {
			for wy := 0; wy < h; wy += window {
				for wx := 0; wx < wd; wx += window {
					n := 0
					for y := wy; y < min(h, wy+window); y++ {
						for x := wx; x < min(wd, wx+window); x++ {
							units = append(units, int32(base+(f*h+y)*wd+x))
							n++
						}
					}
					w.Spans = append(w.Spans, w.Spans[len(w.Spans)-1]+int32(n*unit))
				}
			}
		}
		base += t * h * wd
	}
	w.Inverse = make([]int32, len(units))
	for j, u := range units {
		w.Inverse[u] = int32(j)
		for k := 0; k < unit; k++ {
			r := int(u)*unit + k
			w.Order = append(w.Order, int32(r))
			w.Pos = append(w.Pos, pos[2*r], pos[2*r+1])
		}
	}
	return w
}

// Prompt applies the position rule a family names to a prompt: its positions and the delta
// decode rows add to their cache position.
func Prompt(rule string, ids []int32, grids []Grid, imageToken int32, merge int) ([]int32, int32, error) {
	switch rule {
	case "mrope":
		return MRoPE(ids, grids, imageToken, merge)
	case "sequence":
		return Sequence(ids), 0, nil
	}
	return nil, 0, fmt.Errorf("position rule %q is not one this runtime has (mrope, sequence)", rule)
}
