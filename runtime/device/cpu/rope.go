package cpu

import (
	"fmt"
	"math"

	"tfc/runtime/device"
)

// ropeFreqs returns each pair's inverse frequency (float32, as transformers computes it) and
// position axis.
func ropeFreqs(o device.Rope) (inv []float32, axis []int, err error) {
	half := o.HeadDim / 2
	total := 0
	for _, s := range o.Sections {
		if s <= 0 {
			return nil, nil, fmt.Errorf("rope: section sizes %v must be positive", o.Sections)
		}
		total += s
	}
	if o.HeadDim <= 0 || o.HeadDim%2 != 0 || total != half {
		return nil, nil, fmt.Errorf("rope: Sections %v must sum to HeadDim/2 = %d (HeadDim %d must be even)", o.Sections, half, o.HeadDim)
	}
	if o.Mode != device.RopeSections && o.Mode != device.RopePerAxis && o.Mode != device.RopeAlternating {
		return nil, nil, fmt.Errorf("rope: unknown mode %d", o.Mode)
	}
	if o.Mode == device.RopeAlternating {
		for _, s := range o.Sections {
			if s != o.Sections[0] {
				return nil, nil, fmt.Errorf("rope: alternating mode needs equal sections, not %v", o.Sections)
			}
		}
	}
	inv, axis = make([]float32, half), make([]int, half)
	j := 0
	for a, s := range o.Sections {
		for jj := 0; jj < s; jj++ {
			e := float32(2*j) / float32(o.HeadDim)
			switch o.Mode {
			case device.RopePerAxis:
				e = float32(jj) / float32(s)
			case device.RopeAlternating:
				e = float32(2*(len(o.Sections)*jj+a)) / float32(o.HeadDim)
			}
			inv[j] = 1 / float32(math.Pow(float64(o.Theta), float64(e)))
			axis[j] = a
			j++
		}
	}
	return inv, axis, nil
}

// rope rotates X in place; angles are float32 products pos·inv, cos and sin rounded from float64.
func (be *Backend) rope(o device.Rope) error {
	const op = "rope"
	x, err := be.view(op, "X", o.X, floats...)
	if err != nil {
		return err
	}
	pos, err := be.view(op, "Pos", o.Pos, device.I32)
	if err != nil {
		return err
	}
	if o.Heads <= 0 || o.Heads*o.HeadDim > x.cols {
		return fmt.Errorf("rope: %d heads of %d do not fit X's %d columns", o.Heads, o.HeadDim, x.cols)
	}
	if err := shape(op, "Pos", pos, x.rows, len(o.Sections)); err != nil {
		return err
	}
	inv, axis, err := ropeFreqs(o)
	if err != nil {
		return err
	}
	if err := be.resolve(op, []operand{{"Pos", &pos}}, []operand{{"X", &x}}); err != nil {
		return err
	}
	half := o.HeadDim / 2
	perAxis := o.Mode == device.RopePerAxis
	rTable, rTerms, rOut := be.rounds(op, "table") && !perAxis, be.rounds(op, "terms") && !perAxis, be.rounds(op, "out")
	be.chunks(x.rows, rowGrain(x.cols), func(lo, hi int) {
		cs, sn, tmp := make([]float32, half), make([]float32, half), make([]float32, x.cols)
		for r := lo; r < hi; r++ {
			p := pos.ints(r)
			for j := range cs {
				ang := float32(p[axis[j]]) * inv[j]
				cs[j] = rnd(rTable, float32(math.Cos(float64(ang))))
				sn[j] = rnd(rTable, float32(math.Sin(float64(ang))))
			}
			row := x.f32(r, tmp)
			for h := 0; h < o.Heads; h++ {
				a := row[h*o.HeadDim : h*o.HeadDim+half]
				b := row[h*o.HeadDim+half : (h+1)*o.HeadDim]
				for j := range a {
					u, v := a[j], b[j]
					a[j] = rnd(rOut, rnd(rTerms, u*cs[j])-rnd(rTerms, v*sn[j]))
					b[j] = rnd(rOut, rnd(rTerms, v*cs[j])+rnd(rTerms, u*sn[j]))
				}
			}
			if x.dt != device.F32 {
				x.storeRow(r, row)
			}
		}
	})
	return nil
}
