package cpu

import (
	"fmt"
	"sync"

	"tfc/runtime/device"
)

// Blocking of the Go GEMM: a task owns gemmMB rows × gemmNB columns of Y and walks K in chunks of
// gemmKC over W packed once (and cached) as float32 panels of four columns.
const (
	gemmMB = 64
	gemmNB = 64
	gemmKC = 256
)

// Every element of Y is accumulated the same way whatever the launch's shape: acc = 0, then for
// k = 0, 1, …, K−1 in float32 either acc = fma(x[k], w[k], acc) (the assembly kernel, on every
// row when the CPU has one) or acc = acc + float32(x[k]·w[k]) (the Go kernels). Tiling changes
// only which elements are computed together, so a row's bits do not depend on its neighbours.
func (be *Backend) linear(o device.Linear) error {
	const op = "linear"
	if err := validAct(op, o.Act); err != nil {
		return err
	}
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
	b, err := be.optional(op, "B", o.B, floats...)
	if err != nil {
		return err
	}
	res, err := be.optional(op, "Res", o.Res, floats...)
	if err != nil {
		return err
	}
	m, k, n := x.rows, x.cols, w.rows
	if w.cols != k {
		return fmt.Errorf("linear: W is [%d,%d] but X has %d columns; W must be [N,%d]", w.rows, w.cols, k, k)
	}
	if err := shape(op, "Y", y, m, n); err != nil {
		return err
	}
	if b.present() {
		if err := shape(op, "B", b, 1, n); err != nil {
			return err
		}
	}
	if res.present() {
		if err := shape(op, "Res", res, m, n); err != nil {
			return err
		}
	}
	ins := []operand{{"X", &x}, {"W", &w}, {"B", &b}, {"Res", &res}}
	if err := be.resolve(op, ins, []operand{{"Y", &y}}, "Res>Y"); err != nil {
		return err
	}
	be.gemm(x, w, b, res, y, epi{act: o.Act, prod: o.Round == device.RoundProduct && be.rounds(op, "product"), out: be.rounds(op, "out"), actR: be.rounds(op, "act"), res: be.rounds(op, "res")})
	return nil
}

type gemmScratch struct {
	acc, xs, bias, res, out []float32
}

var gemmPool = sync.Pool{New: func() any { return new(gemmScratch) }}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// smallGEMM is the work (multiply-adds) below which a linear runs on one goroutine.
const smallGEMM = 1 << 18

func (be *Backend) gemm(x, w, b, res, y view, a epi) {
	workers := be.workers
	if x.rows*x.cols*w.rows < smallGEMM {
		workers = 1
	}
	if be.kern != nil && x.cols > 0 && x.rows > 0 && w.rows > 0 {
		be.gemmPacked(workers, x, w, b, res, y, a)
		return
	}
	m, n := x.rows, w.rows
	rowBlocks := (m + gemmMB - 1) / gemmMB
	colBlocks := (n + gemmNB - 1) / gemmNB
	wp := be.weights(workers, w, 4, false).f32
	parallel(workers, rowBlocks*colBlocks, func(t int) {
		i0, j0 := (t/colBlocks)*gemmMB, (t%colBlocks)*gemmNB
		s := gemmPool.Get().(*gemmScratch)
		gemmTask(s, x, wp, b, res, y, a, i0, min(m, i0+gemmMB), j0, min(n, j0+gemmNB))
		gemmPool.Put(s)
	})
}

// gemmTask computes Y[i0:i1, j0:j1] from W packed in four-column panels [K][4] (j0 is a
// multiple of four).
func gemmTask(s *gemmScratch, x view, wp []float32, b, res, y view, a epi, i0, i1, j0, j1 int) {
	k := x.cols
	mr, nc := i1-i0, j1-j0
	ng := (nc + 3) / 4
	ld := ng * 4
	s.acc = grow(s.acc, mr*ld)
	clear(s.acc)
	xrows := make([][]float32, mr)
	if x.dt == device.F32 {
		for i := range xrows {
			xrows[i] = x.f32(i0+i, nil)
		}
	} else {
		s.xs = grow(s.xs, mr*k)
		for i := range xrows {
			xrows[i] = s.xs[i*k : (i+1)*k]
			x.loadRow(i0+i, xrows[i])
		}
	}
	for k0 := 0; k0 < k; k0 += gemmKC {
		kc := min(gemmKC, k-k0)
		panel := func(g int) []float32 {
			o := (j0/4+g)*k*4 + k0*4
			return wp[o : o+4*kc]
		}
		i := 0
		for ; i+4 <= mr; i += 4 {
			x0, x1, x2, x3 := xrows[i][k0:k0+kc], xrows[i+1][k0:k0+kc], xrows[i+2][k0:k0+kc], xrows[i+3][k0:k0+kc]
			for g := 0; g < ng; g++ {
				kern4x4(x0, x1, x2, x3, panel(g), s.acc[i*ld+4*g:], ld)
			}
		}
		for ; i < mr; i++ {
			x0 := xrows[i][k0 : k0+kc]
			for g := 0; g < ng; g++ {
				kern1x4(x0, panel(g), s.acc[i*ld+4*g:])
			}
		}
	}
	epilogue(s.acc, ld, &s.bias, &s.res, &s.out, b, res, y, a, i0, i1, j0, j1)
}

// kern4x4 adds four rows of x times a packed group of four columns into c (row stride ld).
func kern4x4(x0, x1, x2, x3, wp []float32, c []float32, ld int) {
	kc := len(x0)
	x1, x2, x3 = x1[:kc], x2[:kc], x3[:kc]
	wp = wp[:4*kc]
	c0, c1, c2, c3 := c[0:4:4], c[ld:ld+4:ld+4], c[2*ld:2*ld+4:2*ld+4], c[3*ld:3*ld+4:3*ld+4]
	c00, c01, c02, c03 := c0[0], c0[1], c0[2], c0[3]
	c10, c11, c12, c13 := c1[0], c1[1], c1[2], c1[3]
	c20, c21, c22, c23 := c2[0], c2[1], c2[2], c2[3]
	c30, c31, c32, c33 := c3[0], c3[1], c3[2], c3[3]
	for t := 0; t < kc; t++ {
		wt := wp[4*t : 4*t+4 : 4*t+4]
		w0, w1, w2, w3 := wt[0], wt[1], wt[2], wt[3]
		a := x0[t]
		c00 += float32(a * w0)
		c01 += float32(a * w1)
		c02 += float32(a * w2)
		c03 += float32(a * w3)
		a = x1[t]
		c10 += float32(a * w0)
		c11 += float32(a * w1)
		c12 += float32(a * w2)
		c13 += float32(a * w3)
		a = x2[t]
		c20 += float32(a * w0)
		c21 += float32(a * w1)
		c22 += float32(a * w2)
		c23 += float32(a * w3)
		a = x3[t]
		c30 += float32(a * w0)
		c31 += float32(a * w1)
		c32 += float32(a * w2)
		c33 += float32(a * w3)
	}
	c0[0], c0[1], c0[2], c0[3] = c00, c01, c02, c03
	c1[0], c1[1], c1[2], c1[3] = c10, c11, c12, c13
	c2[0], c2[1], c2[2], c2[3] = c20, c21, c22, c23
	c3[0], c3[1], c3[2], c3[3] = c30, c31, c32, c33
}

// kern1x4 is kern4x4 for one row, with the same per-element arithmetic.
func kern1x4(x0, wp []float32, c []float32) {
	kc := len(x0)
	wp = wp[:4*kc]
	c = c[:4:4]
	c00, c01, c02, c03 := c[0], c[1], c[2], c[3]
	for t := 0; t < kc; t++ {
		wt := wp[4*t : 4*t+4 : 4*t+4]
		a := x0[t]
		c00 += float32(a * wt[0])
		c01 += float32(a * wt[1])
		c02 += float32(a * wt[2])
		c03 += float32(a * wt[3])
	}
	c[0], c[1], c[2], c[3] = c00, c01, c02, c03
}
