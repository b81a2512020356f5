package cpu

import (
	"fmt"
	"math"

	"tfc/runtime/device"
)

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
	inv, axis, err := device.RopeFreqs(o.HeadDim, o.Theta, o.Sections, o.Mode)
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
