package cpu

import (
	"fmt"
	"math"

	"tfc/runtime/device"
)

// view is a validated tensor of this backend.
type view struct {
	b                       *buffer
	dt                      device.DType
	off, rows, cols, stride int
}

var floats = []device.DType{device.F32, device.BF16, device.F16}

// view checks that t is a live tensor of this backend, inside its buffer, of one of dts (any
// dtype when dts is empty).
func (be *Backend) view(op, name string, t device.Tensor, dts ...device.DType) (view, error) {
	if !t.Present() {
		return view{}, fmt.Errorf("%s: %s is missing", op, name)
	}
	b, ok := t.Buf.(*buffer)
	if !ok || b.owner != be {
		return view{}, fmt.Errorf("%s: %s is not a buffer of this cpu backend", op, name)
	}
	if b.freed {
		return view{}, fmt.Errorf("%s: %s uses a freed buffer", op, name)
	}
	if len(dts) > 0 {
		ok := false
		for _, d := range dts {
			ok = ok || d == b.dt
		}
		if !ok {
			return view{}, fmt.Errorf("%s: %s is %v, want one of %v", op, name, b.dt, dts)
		}
	}
	s := t.RowStride()
	if t.Rows < 0 || t.Cols < 0 || t.Off < 0 || s < t.Cols {
		return view{}, fmt.Errorf("%s: %s has a bad shape [%d,%d] (offset %d, stride %d)", op, name, t.Rows, t.Cols, t.Off, s)
	}
	if end := t.Off + max(t.Rows-1, 0)*s + t.Cols; end > b.n {
		return view{}, fmt.Errorf("%s: %s [%d,%d] at offset %d stride %d runs past its buffer of %d elements", op, name, t.Rows, t.Cols, t.Off, s, b.n)
	}
	return view{b: b, dt: b.dt, off: t.Off, rows: t.Rows, cols: t.Cols, stride: s}, nil
}

// optional is view for an operand that may be absent; the zero view means absent.
func (be *Backend) optional(op, name string, t device.Tensor, dts ...device.DType) (view, error) {
	if !t.Present() {
		return view{}, nil
	}
	return be.view(op, name, t, dts...)
}

func (v view) present() bool { return v.b != nil }

// span is the element range [lo, hi) that v touches.
func (v view) span() (int, int) {
	if v.rows == 0 || v.cols == 0 {
		return v.off, v.off
	}
	return v.off, v.off + (v.rows-1)*v.stride + v.cols
}

// overlaps reports whether v and w may share elements.
func (v view) overlaps(w view) bool {
	if !v.present() || !w.present() || v.b != w.b {
		return false
	}
	a0, a1 := v.span()
	b0, b1 := w.span()
	return a0 < b1 && b0 < a1
}

// same reports whether v and w are exactly the same elements.
func (v view) same(w view) bool {
	return v.b == w.b && v.off == w.off && v.rows == w.rows && v.cols == w.cols && (v.stride == w.stride || v.rows <= 1)
}

func (v view) set(i int, x float32) {
	switch v.dt {
	case device.F32:
		v.b.f32[i] = x
	case device.BF16:
		v.b.u16[i] = device.F32ToBF16(x)
	case device.F16:
		v.b.u16[i] = device.F32ToF16(x)
	}
}

// f32 returns row r as float32 values: the buffer itself when F32, else converted into tmp.
func (v view) f32(r int, tmp []float32) []float32 {
	o := v.off + r*v.stride
	if v.dt == device.F32 {
		return v.b.f32[o : o+v.cols : o+v.cols]
	}
	v.loadRow(r, tmp[:v.cols])
	return tmp[:v.cols]
}

// loadRow converts row r into dst.
func (v view) loadRow(r int, dst []float32) {
	o := v.off + r*v.stride
	switch v.dt {
	case device.F32:
		copy(dst, v.b.f32[o:o+v.cols])
	case device.BF16:
		for i, h := range v.b.u16[o : o+v.cols] {
			dst[i] = device.BF16ToF32(h)
		}
	case device.F16:
		for i, h := range v.b.u16[o : o+v.cols] {
			dst[i] = device.F16ToF32(h)
		}
	}
}

// storeRow rounds src into row r.
func (v view) storeRow(r int, src []float32) {
	o := v.off + r*v.stride
	switch v.dt {
	case device.F32:
		copy(v.b.f32[o:o+v.cols], src)
	case device.BF16:
		d := v.b.u16[o : o+v.cols]
		for i, x := range src[:v.cols] {
			d[i] = device.F32ToBF16(x)
		}
	case device.F16:
		d := v.b.u16[o : o+v.cols]
		for i, x := range src[:v.cols] {
			d[i] = device.F32ToF16(x)
		}
	}
}

// ints returns row r of an I32 view.
func (v view) ints(r int) []int32 {
	o := v.off + r*v.stride
	return v.b.i32[o : o+v.cols : o+v.cols]
}

// clone copies v into a fresh contiguous buffer of the same dtype.
func (be *Backend) clone(v view) view {
	n := v.rows * v.cols
	nb := &buffer{dt: v.dt, n: n, owner: be, temp: true}
	out := view{b: nb, dt: v.dt, rows: v.rows, cols: v.cols, stride: v.cols}
	for r := 0; r < v.rows; r++ {
		o := v.off + r*v.stride
		switch v.dt {
		case device.F32:
			nb.f32 = append(nb.f32, v.b.f32[o:o+v.cols]...)
		case device.BF16, device.F16:
			nb.u16 = append(nb.u16, v.b.u16[o:o+v.cols]...)
		case device.I32:
			nb.i32 = append(nb.i32, v.b.i32[o:o+v.cols]...)
		}
	}
	return out
}

// shape checks that v is [rows, cols].
func shape(op, name string, v view, rows, cols int) error {
	if v.rows != rows || v.cols != cols {
		return fmt.Errorf("%s: %s is [%d,%d], want [%d,%d]", op, name, v.rows, v.cols, rows, cols)
	}
	return nil
}

// act applies an activation, computed in float64 and rounded once.
func act(a device.Act, x float32) float32 {
	v := float64(x)
	switch a {
	case device.ActSiLU:
		return float32(v / (1 + math.Exp(-v)))
	case device.ActGELU:
		return float32(0.5 * v * math.Erfc(-v/math.Sqrt2))
	case device.ActGELUTanh:
		return float32(0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v))))
	case device.ActQuickGELU:
		return float32(v / (1 + math.Exp(-1.702*v)))
	}
	return x
}

func validAct(op string, a device.Act) error {
	if a > device.ActQuickGELU {
		return fmt.Errorf("%s: unknown activation %d", op, a)
	}
	return nil
}

// storeSeg rounds src into row r starting at column c0.
func (v view) storeSeg(r, c0 int, src []float32) {
	o := v.off + r*v.stride + c0
	switch v.dt {
	case device.F32:
		copy(v.b.f32[o:o+len(src)], src)
	case device.BF16:
		d := v.b.u16[o : o+len(src)]
		for i, x := range src {
			d[i] = device.F32ToBF16(x)
		}
	case device.F16:
		d := v.b.u16[o : o+len(src)]
		for i, x := range src {
			d[i] = device.F32ToF16(x)
		}
	}
}
