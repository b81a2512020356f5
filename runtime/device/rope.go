package device

import (
	"fmt"
	"math"
)

// RopeFreqs returns each rotary pair's inverse frequency the way transformers computes it,
// 1 / theta^e in float32 with e = 2j/headDim (RopeSections), j'/sections[s] (RopePerAxis, j'
// counted from the start of section s) or 2(A·j'+s)/headDim (RopeAlternating, A equal
// sections), and each pair's position axis. The CPU, the kernels' tables and the contracts'
// reference all take their frequencies from here.
func RopeFreqs(headDim int, theta float32, sections []int, mode RopeMode) (inv []float32, axis []int, err error) {
	half := headDim / 2
	total := 0
	for _, s := range sections {
		if s <= 0 {
			return nil, nil, fmt.Errorf("rope: section sizes %v must be positive", sections)
		}
		total += s
	}
	if headDim <= 0 || headDim%2 != 0 || total != half {
		return nil, nil, fmt.Errorf("rope: Sections %v must sum to HeadDim/2 = %d (HeadDim %d must be even)", sections, half, headDim)
	}
	switch mode {
	case RopeSections, RopePerAxis:
	case RopeAlternating:
		for _, s := range sections {
			if s != sections[0] {
				return nil, nil, fmt.Errorf("rope: alternating mode needs equal sections, not %v", sections)
			}
		}
	default:
		return nil, nil, fmt.Errorf("rope: unknown mode %d", mode)
	}
	inv, axis = make([]float32, half), make([]int, half)
	j := 0
	for a, s := range sections {
		for jj := 0; jj < s; jj++ {
			e := float32(2*j) / float32(headDim)
			switch mode {
			case RopePerAxis:
				e = float32(jj) / float32(s)
			case RopeAlternating:
				e = float32(2*(len(sections)*jj+a)) / float32(headDim)
			}
			inv[j] = 1 / float32(math.Pow(float64(theta), float64(e)))
			axis[j] = a
			j++
		}
	}
	return inv, axis, nil
}
