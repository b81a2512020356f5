package cpu

import (
	"fmt"

	"tfc/runtime/device"
	"tfc/runtime/sample"
)

// rowGrain is how many rows an elementwise or row-wise task takes for a given row length.
func rowGrain(cols int) int { return max(1, 16384/max(cols, 1)) }

func (be *Backend) binary(op string, at, bt, yt device.Tensor, f func(a, b float32) float32) error {
	a, err := be.view(op, "A", at, floats...)
	if err != nil {
		return err
	}
	b, err := be.view(op, "B", bt, floats...)
	if err != nil {
		return err
	}
	y, err := be.view(op, "Y", yt, floats...)
	if err != nil {
		return err
	}
	if err := shape(op, "B", b, a.rows, a.cols); err != nil {
		return err
	}
	if err := shape(op, "Y", y, a.rows, a.cols); err != nil {
		return err
	}
	if err := be.resolve(op, []operand{{"A", &a}, {"B", &b}}, []operand{{"Y", &y}}, "A>Y", "B>Y"); err != nil {
		return err
	}
	n := a.cols
	rOut := be.rounds(op, "out")
	be.chunks(a.rows, rowGrain(n), func(lo, hi int) {
		ta, tb, out := make([]float32, n), make([]float32, n), make([]float32, n)
		for r := lo; r < hi; r++ {
			ar, br := a.f32(r, ta), b.f32(r, tb)
			for j := range out {
				out[j] = rnd(rOut, f(ar[j], br[j]))
			}
			y.storeRow(r, out)
		}
	})
	return nil
}

func (be *Backend) activate(o device.Activate) error {
	const op = "activate"
	if err := validAct(op, o.Act); err != nil {
		return err
	}
	x, err := be.view(op, "X", o.X, floats...)
	if err != nil {
		return err
	}
	y, err := be.view(op, "Y", o.Y, floats...)
	if err != nil {
		return err
	}
	if err := shape(op, "Y", y, x.rows, x.cols); err != nil {
		return err
	}
	if err := be.resolve(op, []operand{{"X", &x}}, []operand{{"Y", &y}}, "X>Y"); err != nil {
		return err
	}
	n := x.cols
	rOut := be.rounds(op, "out")
	be.chunks(x.rows, rowGrain(n), func(lo, hi int) {
		tx, out := make([]float32, n), make([]float32, n)
		for r := lo; r < hi; r++ {
			for j, v := range x.f32(r, tx) {
				out[j] = actRounded(o.Act, v, rOut)
			}
			y.storeRow(r, out)
		}
	})
	return nil
}

func (be *Backend) glu(o device.GLU) error {
	const op = "glu"
	if err := validAct(op, o.Act); err != nil {
		return err
	}
	g, err := be.view(op, "Gate", o.Gate, floats...)
	if err != nil {
		return err
	}
	u, err := be.view(op, "Up", o.Up, floats...)
	if err != nil {
		return err
	}
	y, err := be.view(op, "Y", o.Y, floats...)
	if err != nil {
		return err
	}
	if err := shape(op, "Up", u, g.rows, g.cols); err != nil {
		return err
	}
	if err := shape(op, "Y", y, g.rows, g.cols); err != nil {
		return err
	}
	if err := be.resolve(op, []operand{{"Gate", &g}, {"Up", &u}}, []operand{{"Y", &y}}, "Gate>Y", "Up>Y"); err != nil {
		return err
	}
	n := g.cols
	rAct, rOut := be.rounds(op, "act"), be.rounds(op, "out")
	be.chunks(g.rows, rowGrain(n), func(lo, hi int) {
		tg, tu, out := make([]float32, n), make([]float32, n), make([]float32, n)
		for r := lo; r < hi; r++ {
			gr, ur := g.f32(r, tg), u.f32(r, tu)
			for j := range out {
				out[j] = rnd(rOut, actRounded(o.Act, gr[j], rAct)*ur[j])
			}
			y.storeRow(r, out)
		}
	})
	return nil
}

// gather copies rows idx of x into y (embed and gather).
func (be *Backend) gather(op, xname, iname string, xt, it, yt device.Tensor) error {
	x, err := be.view(op, xname, xt)
	if err != nil {
		return err
	}
	idx, err := be.view(op, iname, it, device.I32)
	if err != nil {
		return err
	}
	y, err := be.view(op, "Y", yt)
	if err != nil {
		return err
	}
	if idx.rows != 1 {
		return fmt.Errorf("%s: %s is [%d,%d], want one row [1,n]", op, iname, idx.rows, idx.cols)
	}
	if err := shape(op, "Y", y, idx.cols, x.cols); err != nil {
		return err
	}
	if (x.dt == device.I32) != (y.dt == device.I32) {
		return fmt.Errorf("%s: %s is %v but Y is %v; integers and floats do not convert", op, xname, x.dt, y.dt)
	}
	ids := idx.ints(0)
	for i, id := range ids {
		if id < 0 || int(id) >= x.rows {
			return fmt.Errorf("%s: %s[%d] = %d is outside %s's %d rows", op, iname, i, id, xname, x.rows)
		}
	}
	if err := be.resolve(op, []operand{{xname, &x}, {iname, &idx}}, []operand{{"Y", &y}}); err != nil {
		return err
	}
	ids = idx.ints(0)
	be.chunks(len(ids), rowGrain(x.cols), func(lo, hi int) {
		tmp := make([]float32, x.cols)
		for i := lo; i < hi; i++ {
			copyRow(x, int(ids[i]), y, i, tmp)
		}
	})
	return nil
}

// argmax writes each row's greedy pick (sample.Greedy: the first largest, NaN never wins).
func (be *Backend) argmax(o device.Argmax) error {
	const op = "argmax"
	x, err := be.view(op, "X", o.X)
	if err != nil {
		return err
	}
	y, err := be.view(op, "Y", o.Y, device.I32)
	if err != nil {
		return err
	}
	if x.dt == device.I32 {
		return fmt.Errorf("argmax: X is I32; it picks from float logits")
	}
	if err := shape(op, "Y", y, 1, x.rows); err != nil {
		return err
	}
	if err := be.resolve(op, []operand{{"X", &x}}, []operand{{"Y", &y}}); err != nil {
		return err
	}
	ids := y.ints(0)
	be.chunks(x.rows, 1, func(lo, hi int) {
		tmp := make([]float32, x.cols)
		for r := lo; r < hi; r++ {
			ids[r] = int32(sample.Greedy(x.f32(r, tmp)))
		}
	})
	return nil
}

// copyRow copies row xr of x into row yr of y, converting floats and copying equal formats bit for bit.
func copyRow(x view, xr int, y view, yr int, tmp []float32) {
	xo, yo := x.off+xr*x.stride, y.off+yr*y.stride
	switch {
	case x.dt == device.I32:
		copy(y.b.i32[yo:yo+y.cols], x.b.i32[xo:xo+x.cols])
	case x.dt == y.dt && x.dt != device.F32:
		copy(y.b.u16[yo:yo+y.cols], x.b.u16[xo:xo+x.cols])
	default:
		y.storeRow(yr, x.f32(xr, tmp))
	}
}

func (be *Backend) scatter(o device.Scatter) error {
	const op = "scatter"
	src, err := be.view(op, "Src", o.Src)
	if err != nil {
		return err
	}
	idx, err := be.view(op, "Index", o.Index, device.I32)
	if err != nil {
		return err
	}
	y, err := be.view(op, "Y", o.Y)
	if err != nil {
		return err
	}
	if err := shape(op, "Index", idx, 1, src.rows); err != nil {
		return err
	}
	if y.cols != src.cols {
		return fmt.Errorf("scatter: Y has %d columns, Src %d", y.cols, src.cols)
	}
	if (src.dt == device.I32) != (y.dt == device.I32) {
		return fmt.Errorf("scatter: Src is %v but Y is %v; integers and floats do not convert", src.dt, y.dt)
	}
	for i, id := range idx.ints(0) {
		if id < 0 || int(id) >= y.rows {
			return fmt.Errorf("scatter: Index[%d] = %d is outside Y's %d rows", i, id, y.rows)
		}
	}
	if err := be.resolve(op, []operand{{"Src", &src}, {"Index", &idx}}, []operand{{"Y", &y}}); err != nil {
		return err
	}
	tmp := make([]float32, src.cols)
	for i, id := range idx.ints(0) { // in order: a repeated index keeps the last row
		copyRow(src, i, y, int(id), tmp)
	}
	return nil
}

func (be *Backend) copyOp(o device.Copy) error {
	const op = "copy"
	x, err := be.view(op, "X", o.X)
	if err != nil {
		return err
	}
	y, err := be.view(op, "Y", o.Y)
	if err != nil {
		return err
	}
	if err := shape(op, "Y", y, x.rows, x.cols); err != nil {
		return err
	}
	if (x.dt == device.I32) != (y.dt == device.I32) {
		return fmt.Errorf("copy: X is %v but Y is %v; integers and floats do not convert", x.dt, y.dt)
	}
	if x.same(y) {
		return nil
	}
	if err := be.resolve(op, []operand{{"X", &x}}, []operand{{"Y", &y}}); err != nil {
		return err
	}
	be.chunks(x.rows, rowGrain(x.cols), func(lo, hi int) {
		tmp := make([]float32, x.cols)
		for r := lo; r < hi; r++ {
			copyRow(x, r, y, r, tmp)
		}
	})
	return nil
}
