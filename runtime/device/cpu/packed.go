package cpu

import (
	"sync"

	"tfc/runtime/device"
)

// microKernel is an assembly GEMM kernel: C[mr][nr] += A·B over packed panels, one fused
// multiply-add chain per element in k order.
type microKernel struct {
	name    string
	mr, nr  int
	run     func(kc int, a []float32, lda int, b, c []float32, ldc int)
	runBF16 func(kc int, a []float32, lda int, b []uint16, c []float32, ldc int) // B panels kept as bfloat16
	// row and rowBF16 compute one row against four panels pstride elements apart.
	row       func(kc int, a, b []float32, pstride int, c []float32)
	rowBF16   func(kc int, a []float32, b []uint16, pstride int, c []float32)
	peak      func(n int)
	peakFlops int // flops of one peak-loop iteration
}

// Blocking of the packed GEMM: a task owns packMB rows × packPanels column panels of Y.
const (
	packMB     = 48
	packPanels = 4
	packKC     = 256
)

// packKey names one weight view in the packed-weight cache.
type packKey struct {
	b                           *buffer
	off, rows, cols, stride, nr int
	keepBF16                    bool
}

type packedWeights struct {
	version uint64
	f32     []float32 // panel p of nr columns at p*K*nr, laid out [K][nr], padded with zeros
	bf16    []uint16  // the same layout for BF16 weights, which stay BF16 (half the bytes to stream)
}

type packCache struct {
	mu sync.Mutex
	m  map[packKey]*packedWeights
}

// weights returns w packed in panels of nr columns (BF16 kept as BF16 when keepBF16), reusing
// the copy made by an earlier launch unless the buffer was written since.
func (be *Backend) weights(workers int, w view, nr int, keepBF16 bool) *packedWeights {
	key := packKey{w.b, w.off, w.rows, w.cols, w.stride, nr, keepBF16}
	be.packs.mu.Lock()
	p := be.packs.m[key]
	be.packs.mu.Unlock()
	if p != nil && p.version == w.b.version {
		return p
	}
	n, k := w.rows, w.cols
	np := (n + nr - 1) / nr
	p = &packedWeights{version: w.b.version}
	if w.dt == device.BF16 && keepBF16 {
		p.bf16 = make([]uint16, np*k*nr)
		parallel(workers, np, func(pi int) {
			panel := p.bf16[pi*k*nr : (pi+1)*k*nr]
			for c := 0; c < nr && pi*nr+c < n; c++ {
				o := w.off + (pi*nr+c)*w.stride
				for t, h := range w.b.u16[o : o+k] {
					panel[t*nr+c] = h
				}
			}
		})
	} else {
		p.f32 = make([]float32, np*k*nr)
		parallel(workers, np, func(pi int) {
			packPanel(w, pi*nr, min(nr, n-pi*nr), nr, p.f32[pi*k*nr:(pi+1)*k*nr])
		})
	}
	if w.b.temp {
		return p
	}
	be.packs.mu.Lock()
	if be.packs.m == nil {
		be.packs.m = map[packKey]*packedWeights{}
	}
	be.packs.m[key] = p
	be.packs.mu.Unlock()
	return p
}

// packPanel writes rows j0..j0+cols of v as one panel [K][nr], a strip of K at a time so the
// panel's lines stay in cache while every row fills its column.
func packPanel(v view, j0, cols, nr int, panel []float32) {
	const strip = 64
	k := v.cols
	tmp := make([]float32, strip)
	for t0 := 0; t0 < k; t0 += strip {
		t1 := min(k, t0+strip)
		for c := 0; c < cols; c++ {
			var src []float32
			if v.dt == device.F32 {
				o := v.off + (j0+c)*v.stride
				src = v.b.f32[o+t0 : o+t1]
			} else {
				o := v.off + (j0+c)*v.stride
				for i, h := range v.b.u16[o+t0 : o+t1] {
					if v.dt == device.BF16 {
						tmp[i] = device.BF16ToF32(h)
					} else {
						tmp[i] = device.F16ToF32(h)
					}
				}
				src = tmp[:t1-t0]
			}
			for i, x := range src {
				panel[(t0+i)*nr+c] = x
			}
		}
	}
}

// forget drops packed copies of b.
func (be *Backend) forget(b *buffer) {
	be.packs.mu.Lock()
	for k := range be.packs.m {
		if k.b == b {
			delete(be.packs.m, k)
		}
	}
	be.packs.mu.Unlock()
}

type packScratch struct {
	acc, xp, bias, res, out []float32
}

var packPool = sync.Pool{New: func() any { return new(packScratch) }}

// gemmPacked runs Y = act(X·Wᵀ + B) + Res with the assembly kernel. Rows are padded with zeros
// to whole row panels and columns to whole column panels, so every element of Y, whatever the
// launch's row count, is computed by the same kernel with the same chain of operations.
func (be *Backend) gemmPacked(workers int, x, w, b, res, y view, a epi) {
	kern := be.kern
	mr, nr := kern.mr, kern.nr
	m, k, n := x.rows, x.cols, w.rows
	wp := be.weights(workers, w, nr, true)
	nbPanels := packPanels
	np := (n + nr - 1) / nr
	rowBlocks := (m + packMB - 1) / packMB
	colBlocks := (np + nbPanels - 1) / nbPanels
	// The kernel reads full six-row panels of X where they lie; the last, partial panel is
	// copied into zero-padded rows, and X in BF16/F16 is widened once.
	xs := packPool.Get().(*packScratch)
	defer packPool.Put(xs)
	xa, xoff, lda := []float32(nil), x.off, x.stride
	if x.dt == device.F32 {
		xa = x.b.f32
	} else {
		xs.xp = grow(xs.xp, m*k)
		for r := 0; r < m; r++ {
			x.loadRow(r, xs.xp[r*k:(r+1)*k])
		}
		xa, xoff, lda = xs.xp, 0, k
	}
	full := m / mr
	tail := grow(xs.out, mr*k)
	xs.out = tail
	clear(tail)
	for r := full * mr; r < m; r++ {
		copy(tail[(r-full*mr)*k:], xa[xoff+r*lda:xoff+r*lda+k])
	}
	rowTail := m%mr == 1 || m%mr == 2
	panelA := func(q, k0 int) ([]float32, int) {
		if q < full {
			return xa[xoff+q*mr*lda+k0:], lda
		}
		return tail[k0:], k
	}
	parallel(workers, rowBlocks*colBlocks, func(t int) {
		i0, p0 := (t/colBlocks)*packMB, (t%colBlocks)*nbPanels
		i1, p1 := min(m, i0+packMB), min(np, p0+nbPanels)
		s := packPool.Get().(*packScratch)
		defer packPool.Put(s)
		q0, q1 := i0/mr, (i1+mr-1)/mr
		ldc := (p1 - p0) * nr
		s.acc = grow(s.acc, (q1-q0)*mr*ldc)
		clear(s.acc)
		// a tail panel of one or two real rows runs them one at a time against all four panels
		single := rowTail && p1-p0 == 4 && full >= q0 && full < q1
		for k0 := 0; k0 < k; k0 += packKC {
			kc := min(packKC, k-k0)
			for p := p0; p < p1; p++ {
				lo, hi := p*k*nr+k0*nr, p*k*nr+(k0+kc)*nr
				for r := 0; p == p0 && single && r < m%mr; r++ {
					a := tail[r*k+k0:]
					c := s.acc[((full-q0)*mr+r)*ldc:]
					if wp.bf16 != nil {
						kern.rowBF16(kc, a, wp.bf16[lo:], k*nr, c)
					} else {
						kern.row(kc, a, wp.f32[lo:], k*nr, c)
					}
				}
				for q := q0; q < q1; q++ {
					if q == full && single {
						continue
					}
					a, la := panelA(q, k0)
					c := s.acc[(q-q0)*mr*ldc+(p-p0)*nr:]
					if wp.bf16 != nil {
						kern.runBF16(kc, a, la, wp.bf16[lo:hi], c, ldc)
					} else {
						kern.run(kc, a, la, wp.f32[lo:hi], c, ldc)
					}
				}
			}
		}
		j0, j1 := p0*nr, min(n, p1*nr)
		epilogue(s.acc, ldc, &s.bias, &s.res, &s.out, b, res, y, a, i0, i1, j0, j1)
	})
}

// epi is a linear's epilogue: its activation, and which of its rounding points are on.
type epi struct {
	act                  device.Act
	prod, out, actR, res bool
}

// epilogue adds the bias, applies the activation, adds the residual, and stores Y[i0:i1, j0:j1]
// from acc (row stride ldc, column 0 = j0), rounding to BF16 at the points a says.
func epilogue(acc []float32, ldc int, sb, sr, so *[]float32, b, res, y view, a epi, i0, i1, j0, j1 int) {
	nc := j1 - j0
	var bias []float32
	if b.present() {
		*sb = grow(*sb, b.cols)
		bias = b.f32(0, *sb)[j0:j1]
	}
	*so = grow(*so, nc)
	*sr = grow(*sr, max(res.cols, 1))
	for i := 0; i < i1-i0; i++ {
		out := (*so)[:nc]
		copy(out, acc[i*ldc:i*ldc+nc])
		if bias != nil {
			roundAll(a.prod, out)
			for j := range out {
				out[j] += bias[j]
			}
		}
		roundAll(a.out, out)
		if a.act != device.ActNone {
			for j, v := range out {
				out[j] = actRounded(a.act, v, a.actR)
			}
		}
		if res.present() {
			rr := res.f32(i0+i, *sr)[j0:j1]
			for j := range out {
				out[j] += rr[j]
			}
			roundAll(a.res, out)
		}
		y.storeSeg(i0+i, j0, out)
	}
}
