package cpu

import (
	"math"

	"tfc/runtime/device"
)

// rmsnorm sums squares in float64 (exact enough that the row's scale is right to the last
// float32 bit) and scales in float32: y = float32(x·r)·w with r rounded to float32.
func (be *Backend) rmsnorm(o device.RMSNorm) error {
	const op = "rmsnorm"
	x, err := be.view(op, "X", o.X, floats...)
	if err != nil {
		return err
	}
	w, err := be.view(op, "W", o.W, floats...)
	if err != nil {
		return err
	}
	y, err := be.view(op, "Y", o.Y, floats...)
	if err != nil {
		return err
	}
	res, err := be.optional(op, "Res", o.Res, floats...)
	if err != nil {
		return err
	}
	sum, err := be.optional(op, "Sum", o.Sum, floats...)
	if err != nil {
		return err
	}
	m, d := x.rows, x.cols
	if err := shape(op, "W", w, 1, d); err != nil {
		return err
	}
	if err := shape(op, "Y", y, m, d); err != nil {
		return err
	}
	if res.present() {
		if err := shape(op, "Res", res, m, d); err != nil {
			return err
		}
	}
	if sum.present() {
		if err := shape(op, "Sum", sum, m, d); err != nil {
			return err
		}
	}
	ins := []operand{{"X", &x}, {"W", &w}, {"Res", &res}}
	outs := []operand{{"Y", &y}, {"Sum", &sum}}
	if err := be.resolve(op, ins, outs, "X>Y", "Res>Y", "X>Sum", "Res>Sum"); err != nil {
		return err
	}
	wr := w.f32(0, make([]float32, d))
	eps := float64(o.Eps)
	rSum, rNorm, rOut := be.rounds(op, "sum"), be.rounds(op, "norm"), be.rounds(op, "out")
	be.chunks(m, rowGrain(d), func(lo, hi int) {
		tx, tr, s, out := make([]float32, d), make([]float32, d), make([]float32, d), make([]float32, d)
		for r := lo; r < hi; r++ {
			copy(s, x.f32(r, tx))
			if res.present() {
				for j, v := range res.f32(r, tr) {
					s[j] = rnd(rSum, s[j]+v)
				}
				if sum.present() {
					sum.storeRow(r, s)
					if sum.dt != device.F32 {
						sum.loadRow(r, s) // normalise the stream as stored
					}
				}
			}
			ss := 0.0
			for _, v := range s {
				ss += float64(v) * float64(v)
			}
			rs := float32(1 / math.Sqrt(ss/float64(d)+eps))
			for j, v := range s {
				out[j] = rnd(rOut, rnd(rNorm, v*rs)*wr[j])
			}
			y.storeRow(r, out)
		}
	})
	return nil
}

// layernorm takes mean and variance in float64 (two passes) and normalises in float32.
func (be *Backend) layernorm(o device.LayerNorm) error {
	const op = "layernorm"
	x, err := be.view(op, "X", o.X, floats...)
	if err != nil {
		return err
	}
	w, err := be.view(op, "W", o.W, floats...)
	if err != nil {
		return err
	}
	b, err := be.view(op, "B", o.B, floats...)
	if err != nil {
		return err
	}
	y, err := be.view(op, "Y", o.Y, floats...)
	if err != nil {
		return err
	}
	m, d := x.rows, x.cols
	for _, c := range []struct {
		n string
		v view
		r int
	}{{"W", w, 1}, {"B", b, 1}, {"Y", y, m}} {
		if err := shape(op, c.n, c.v, c.r, d); err != nil {
			return err
		}
	}
	if err := be.resolve(op, []operand{{"X", &x}, {"W", &w}, {"B", &b}}, []operand{{"Y", &y}}, "X>Y"); err != nil {
		return err
	}
	wr, br := w.f32(0, make([]float32, d)), b.f32(0, make([]float32, d))
	eps := float64(o.Eps)
	rOut := be.rounds(op, "out")
	be.chunks(m, rowGrain(d), func(lo, hi int) {
		tx, out := make([]float32, d), make([]float32, d)
		for r := lo; r < hi; r++ {
			xr := x.f32(r, tx)
			mean := 0.0
			for _, v := range xr {
				mean += float64(v)
			}
			mean /= float64(d)
			vr := 0.0
			for _, v := range xr {
				dv := float64(v) - mean
				vr += dv * dv
			}
			rs := float32(1 / math.Sqrt(vr/float64(d)+eps))
			mf := float32(mean)
			for j, v := range xr {
				out[j] = rnd(rOut, (v-mf)*rs*wr[j]+br[j])
			}
			y.storeRow(r, out)
		}
	})
	return nil
}
