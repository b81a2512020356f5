package image

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
)

// The implementation Preprocess had when it was first checked bit for bit against transformers,
// kept as the reference its faster replacement is compared with on many sizes and configs.

var refScratch = sync.Pool{New: func() any { return new([]uint8) }}

// refTaps holds, for each output index, the first input index and int16 weights of a 1-D resampling,
// computed as torch's antialiased bicubic on uint8 does (PIL's filter, a = -0.5).
type refTaps struct {
	start     []int
	weights   [][]int16
	precision uint
}

func refComputeTaps(inSize, outSize int) refTaps {
	scale := float64(inSize) / float64(outSize)
	support := 2.0
	invscale := 1.0
	if scale >= 1 {
		support = 2 * scale
		invscale = 1 / scale
	}
	maxInterp := int(math.Ceil(support))*2 + 1
	t := refTaps{start: make([]int, outSize), weights: make([][]int16, outSize)}
	wf := make([][]float64, outSize)
	wtMax := 0.0
	for i := 0; i < outSize; i++ {
		center := scale * (float64(i) + 0.5)
		xmin := max(int(center-support+0.5), 0)
		xsize := min(int(center+support+0.5), inSize) - xmin
		xsize = min(max(xsize, 0), maxInterp)
		w := make([]float64, xsize)
		total := 0.0
		for j := 0; j < xsize; j++ {
			w[j] = cubicAA((float64(j+xmin) - center + 0.5) * invscale)
			total += w[j]
		}
		if total != 0 {
			for j := range w {
				w[j] /= total
				wtMax = math.Max(wtMax, w[j])
			}
		}
		t.start[i] = xmin
		wf[i] = w
	}
	var prec uint
	for prec = 0; prec < 22; prec++ {
		next := int32(0.5 + wtMax*float64(int32(1)<<(prec+1)))
		if next >= 1<<15 {
			break
		}
	}
	t.precision = prec
	for i, w := range wf {
		q := make([]int16, len(w))
		for j, v := range w {
			v *= float64(int32(1) << prec)
			if v < 0 {
				q[j] = int16(int32(-0.5 + v))
			} else {
				q[j] = int16(int32(0.5 + v))
			}
		}
		t.weights[i] = q
	}
	return t
}

// refResizeHorizontalInto is resizeHorizontal writing into pix, which it overwrites entirely.
func refResizeHorizontalInto(in *RGB, outW int, pix []uint8) *RGB {
	t := refComputeTaps(in.Width, outW)
	out := &RGB{Width: outW, Height: in.Height, Pix: pix[:outW*in.Height*3]}
	half := int32(1) << (t.precision - 1)
	weights := make([][]int32, outW)
	for x, ws := range t.weights {
		weights[x] = make([]int32, len(ws))
		for j, w := range ws {
			weights[x][j] = int32(w)
		}
	}
	parallelRows(in.Height, func(y0, y1 int) {
		for y := y0; y < y1; y++ {
			src := in.Pix[y*in.Width*3 : (y+1)*in.Width*3]
			dst := out.Pix[y*outW*3 : (y+1)*outW*3]
			for x, ws := range weights {
				r, g, b := half, half, half
				s := src[t.start[x]*3 : (t.start[x]+len(ws))*3]
				for j, w := range ws {
					p := s[3*j : 3*j+3]
					r += int32(p[0]) * w
					g += int32(p[1]) * w
					b += int32(p[2]) * w
				}
				d := dst[3*x : 3*x+3]
				d[0] = clampShift(r, t.precision)
				d[1] = clampShift(g, t.precision)
				d[2] = clampShift(b, t.precision)
			}
		}
	})
	return out
}

// refVerticalRow writes output row y of the vertical pass into dst; acc is scratch of one row's length.
func refVerticalRow(in *RGB, t *refTaps, y int, dst []uint8, acc []int32) {
	rowLen := in.Width * 3
	row := func(i int) []uint8 { return in.Pix[i*rowLen : (i+1)*rowLen] }
	half := int32(1) << (t.precision - 1)
	ws, start := t.weights[y], t.start[y]
	if len(ws) == 5 {
		r0, r1, r2, r3, r4 := row(start), row(start+1), row(start+2), row(start+3), row(start+4)
		w0, w1, w2, w3, w4 := int32(ws[0]), int32(ws[1]), int32(ws[2]), int32(ws[3]), int32(ws[4])
		r1, r2, r3, r4 = r1[:len(r0)], r2[:len(r0)], r3[:len(r0)], r4[:len(r0)]
		dst = dst[:len(r0)]
		for i := range r0 {
			a := half + int32(r0[i])*w0 + int32(r1[i])*w1 + int32(r2[i])*w2 + int32(r3[i])*w3 + int32(r4[i])*w4
			dst[i] = clampShift(a, t.precision)
		}
		return
	}
	acc = acc[:rowLen]
	for i := range acc {
		acc[i] = half
	}
	for j, w := range ws {
		w32 := int32(w)
		for i, v := range row(start + j) {
			acc[i] += int32(v) * w32
		}
	}
	for i, a := range acc {
		dst[i] = clampShift(a, t.precision)
	}
}

// refPreprocess resizes, rescales, normalises and patchifies img as transformers' Qwen2-VL image processor.
func refPreprocess(img *RGB, cfg Config) (*Patches, error) {
	if err := cfg.validate("image config"); err != nil {
		return nil, err
	}
	h, w := img.Height, img.Width
	if cfg.DoResize {
		var err error
		h, w, err = SmartResize(img.Height, img.Width, cfg.Factor(), cfg.MinPixels, cfg.MaxPixels)
		if err != nil {
			return nil, err
		}
	}
	p, m, tp := cfg.PatchSize, cfg.MergeSize, cfg.TemporalPatchSize
	if h%(p*m) != 0 || w%(p*m) != 0 {
		return nil, fmt.Errorf("image is %dx%d, not a multiple of patch_size*merge_size=%d; enable do_resize", w, h, p*m)
	}
	// Hashing and zeroing the output are serial; they overlap the parallel resize.
	hash := make(chan string, 1)
	go func() { hash <- img.Hash() }()
	gh, gw := h/p, w/p
	pixels := make(chan []float32, 1)
	go func() { pixels <- make([]float32, gh*gw*cfg.PatchDim()) }()

	// The horizontal pass runs over the whole image; the vertical pass runs per strip of merge*patch
	// rows, straight into the patches of that strip.
	src := img
	if w != img.Width {
		buf := refScratch.Get().(*[]uint8)
		if cap(*buf) < w*img.Height*3 {
			*buf = make([]uint8, w*img.Height*3)
		}
		defer refScratch.Put(buf)
		src = refResizeHorizontalInto(img, w, *buf)
	}
	var vertical *refTaps
	if h != img.Height {
		t := refComputeTaps(img.Height, h)
		vertical = &t
	}
	lut := valueTable(cfg)
	out := &Patches{
		GridTHW: [3]int{1, gh, gw},
		Rows:    gh * gw,
		Cols:    cfg.PatchDim(),
		Pixels:  <-pixels,
	}
	// Row order is (block row, block col, row in block, col in block); column order is (channel, frame, y, x).
	blocksW := gw / m
	stripRows := p * m
	rowLen := w * 3
	parallelRows(gh/m, func(b0, b1 int) {
		var strip []uint8
		var acc []int32
		if vertical != nil {
			strip = make([]uint8, stripRows*rowLen)
			acc = make([]int32, rowLen)
		}
		for bh := b0; bh < b1; bh++ {
			pix := strip
			if vertical == nil {
				pix = src.Pix[bh*stripRows*rowLen : (bh+1)*stripRows*rowLen]
			} else {
				for r := 0; r < stripRows; r++ {
					refVerticalRow(src, vertical, bh*stripRows+r, strip[r*rowLen:(r+1)*rowLen], acc)
				}
			}
			for bw := 0; bw < blocksW; bw++ {
				for mh := 0; mh < m; mh++ {
					for mw := 0; mw < m; mw++ {
						row := ((bh*blocksW+bw)*m+mh)*m + mw
						dst := out.Pixels[row*out.Cols : (row+1)*out.Cols]
						y0 := mh * p
						x0 := (bw*m + mw) * p
						for c := 0; c < 3; c++ {
							frame := dst[c*tp*p*p : (c*tp+1)*p*p]
							for py := 0; py < p; py++ {
								line := frame[py*p : (py+1)*p]
								s := pix[(y0+py)*rowLen+x0*3+c:]
								s = s[:3*(p-1)+1]
								if tp == 2 {
									next := dst[(c*tp+1)*p*p+py*p:][:len(line)]
									for px := range line {
										v := lut[c][s[3*px]]
										line[px], next[px] = v, v
									}
									continue
								}
								for px := range line {
									line[px] = lut[c][s[3*px]]
								}
							}
							if tp != 2 {
								for t := 1; t < tp; t++ {
									copy(dst[(c*tp+t)*p*p:(c*tp+t+1)*p*p], frame)
								}
							}
						}
					}
				}
			}
		}
	})
	out.Hash = <-hash
	return out, nil
}

// refResize is the two-pass resize as first written: the whole horizontal pass, then the vertical.
func refResize(img *RGB, outW, outH int) *RGB {
	cur := img
	if outW != img.Width {
		cur = refResizeHorizontalInto(cur, outW, make([]uint8, outW*img.Height*3))
	}
	if outH != img.Height {
		t := refComputeTaps(cur.Height, outH)
		out := &RGB{Width: outW, Height: outH, Pix: make([]uint8, outW*outH*3)}
		acc := make([]int32, outW*3)
		for y := 0; y < outH; y++ {
			refVerticalRow(cur, &t, y, out.Pix[y*outW*3:(y+1)*outW*3], acc)
		}
		cur = out
	}
	return cur
}

// randomImage is w x h of noise with flat runs and hard edges, so clamping at 0 and 255 is reached.
func randomImage(rng *rand.Rand, w, h int) *RGB {
	img := &RGB{Width: w, Height: h, Pix: make([]uint8, w*h*3)}
	for i := range img.Pix {
		switch rng.IntN(4) {
		case 0:
			img.Pix[i] = 0
		case 1:
			img.Pix[i] = 255
		default:
			img.Pix[i] = uint8(rng.IntN(256))
		}
	}
	return img
}

// TestPreprocessMatchesReference: Preprocess gives the first implementation's pixel_values bit for bit
// on random sizes under both families' configs, upscaling, downscaling and not resizing, whatever
// the number of goroutines.
func TestPreprocessMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var configs []Config
	for _, f := range familyConfigs {
		configs = append(configs, familyConfig(t, f.dir))
	}
	cases := 60
	if testing.Short() {
		cases = 15
	}
	released, reused := map[*float32]bool{}, 0
	for i := range cases {
		w, h := 1+rng.IntN(700), 1+rng.IntN(700)
		if max(w, h) > 200*min(w, h) {
			continue
		}
		cfg := configs[i%len(configs)]
		switch i % 4 {
		case 1: // force a downscale
			cfg = cfg.WithPixels(56*56, max(56*56, w*h/(2+rng.IntN(20))))
		case 2: // force an upscale
			cfg = cfg.WithPixels(max(56*56, w*h*(2+rng.IntN(4))), 28*28*4096)
		case 3: // no resize on a size that patchifies
			cfg.DoResize = false
			f := cfg.Factor()
			w, h = f*(1+rng.IntN(20)), f*(1+rng.IntN(20))
		}
		img := randomImage(rng, w, h)
		want, err := refPreprocess(img, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, procs := range []int{1, 3} {
			prev := runtime.GOMAXPROCS(procs)
			got, err := Preprocess(img, cfg)
			runtime.GOMAXPROCS(prev)
			if err != nil {
				t.Fatal(err)
			}
			if got.GridTHW != want.GridTHW || got.Hash != want.Hash || !slices.Equal(bitsOf(got.Pixels), bitsOf(want.Pixels)) {
				t.Fatalf("%dx%d, temporal %d, pixels %d..%d, GOMAXPROCS %d: pixel_values differ from the reference",
					w, h, cfg.TemporalPatchSize, cfg.MinPixels, cfg.MaxPixels, procs)
			}
			// released buffers come back to later calls holding NaNs: every element must be written again
			if released[&got.Pixels[:1][0]] {
				reused++
			}
			for k := range got.Pixels {
				got.Pixels[k] = float32(math.NaN())
			}
			released[&got.Pixels[:1][0]] = true
			Release(got.Pixels)
		}
		rw, rh := 1+rng.IntN(600), 1+rng.IntN(600)
		if got, want := Resize(img, rw, rh), refResize(img, rw, rh); !slices.Equal(got.Pix, want.Pix) {
			t.Fatalf("Resize %dx%d to %dx%d differs from the reference", w, h, rw, rh)
		}
	}
	if reused == 0 {
		t.Error("no released buffer was reused: the test did not check that reuse writes every element")
	}
}

func bitsOf(xs []float32) []uint32 {
	out := make([]uint32, len(xs))
	for i, x := range xs {
		out[i] = math.Float32bits(x)
	}
	return out
}

// blockyImage is w x h of flat rectangles on a flat background (a page's shape), colours often 0 or
// 255 and some grey, with specks of single pixels and a few rows of noise.
func blockyImage(rng *rand.Rand, w, h int) *RGB {
	var last [3]uint8
	colour := func() [3]uint8 {
		switch rng.IntN(5) {
		case 4: // the last colour with one channel changed
			last[rng.IntN(3)] = uint8(rng.IntN(256))
			return last
		case 0:
			return [3]uint8{}
		case 1:
			return [3]uint8{255, 255, 255}
		case 2:
			v := uint8(rng.IntN(256))
			return [3]uint8{v, v, v}
		}
		last = [3]uint8{uint8(rng.IntN(256)), uint8(rng.IntN(256)), uint8(rng.IntN(256))}
		return last
	}
	img := &RGB{Width: w, Height: h, Pix: make([]uint8, w*h*3)}
	fill := func(x0, y0, x1, y1 int, c [3]uint8) {
		for y := y0; y < y1; y++ {
			for x := x0; x < x1; x++ {
				copy(img.Pix[3*(y*w+x):], c[:])
			}
		}
	}
	fill(0, 0, w, h, colour())
	for range rng.IntN(12) {
		x0, y0 := rng.IntN(w), rng.IntN(h)
		fill(x0, y0, min(w, x0+1+rng.IntN(w/2+1)), min(h, y0+1+rng.IntN(h/2+1)), colour())
	}
	for range rng.IntN(8) {
		fill(rng.IntN(w), rng.IntN(h), w, h, colour())
		x, y := rng.IntN(w), rng.IntN(h)
		fill(x, y, x+1, y+1, colour())
	}
	if rng.IntN(3) == 0 {
		y := rng.IntN(h)
		for i := range img.Pix[3*y*w : 3*(y+1)*w] {
			img.Pix[3*y*w+i] = uint8(rng.IntN(256))
		}
	}
	return img
}

// TestUniformRegionsMatchReference: on images of flat regions, where the resize takes its shortcuts
// for taps that read one colour, Resize and Preprocess give the reference's pixels bit for bit.
func TestUniformRegionsMatchReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var configs []Config
	for _, f := range familyConfigs {
		configs = append(configs, familyConfig(t, f.dir))
	}
	cases := 200
	if testing.Short() {
		cases = 50
	}
	for i := range cases {
		w, h := 1+rng.IntN(400), 1+rng.IntN(400)
		if max(w, h) > 100*min(w, h) {
			continue
		}
		img := blockyImage(rng, w, h)
		rw, rh := 1+rng.IntN(500), 1+rng.IntN(500)
		if i%3 == 0 {
			rh = h
		}
		if got, want := Resize(img, rw, rh), refResize(img, rw, rh); !slices.Equal(got.Pix, want.Pix) {
			t.Fatalf("Resize %dx%d to %dx%d differs from the reference", w, h, rw, rh)
		}
		cfg := configs[i%len(configs)]
		if i%2 == 0 {
			cfg = cfg.WithPixels(56*56, max(56*56, w*h*(1+rng.IntN(3))/(1+rng.IntN(4))))
		}
		want, err := refPreprocess(img, cfg)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Preprocess(img, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got.GridTHW != want.GridTHW || !slices.Equal(bitsOf(got.Pixels), bitsOf(want.Pixels)) {
			t.Fatalf("%dx%d, pixels %d..%d: pixel_values differ from the reference", w, h, cfg.MinPixels, cfg.MaxPixels)
		}
		Release(got.Pixels)
	}
}

// TestUniformSumScaled: taps whose weights do not sum to one closely enough for a flat run to keep its
// colour (computeTaps gives none) take the scaled shortcut, which agrees with the full sums.
func TestUniformSumScaled(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 200 {
		in, out := 1+rng.IntN(300), 1+rng.IntN(300)
		tp := computeTaps(in, out)
		for range 1 + rng.IntN(out) {
			tp.weights[rng.IntN(len(tp.weights))] += int32(rng.IntN(4001) - 2000)
		}
		tp.buildSums()
		if len(tp.scaled) == 0 {
			continue
		}
		full := func(src []uint8, stride, x int) [3]uint8 {
			var d [3]uint8
			for c := range 3 {
				acc := tp.half
				for j, w := range tp.weights[x*tp.n : (x+1)*tp.n] {
					acc += int32(src[(tp.start[x]+j)*stride+c]) * w
				}
				d[c] = clampShift(acc, tp.precision)
			}
			return d
		}
		img := blockyImage(rng, in, 2)
		row := img.Pix[:3*in]
		dst := make([]uint8, 3*out)
		horizontalRow(dst, row, tp)
		for x := range out {
			if want := full(row, 3, x); [3]uint8(dst[3*x:]) != want {
				t.Fatalf("%d to %d, output %d: horizontal %v, full sums %v", in, out, x, dst[3*x:3*x+3], want)
			}
		}
		// The vertical pass: a column of in rows, one pixel wide, of one colour or two.
		col := make([]uint8, 3*in)
		c0, c1 := [3]uint8{uint8(rng.IntN(256)), 255, 0}, [3]uint8{uint8(rng.IntN(256)), 0, 255}
		split := in
		if rng.IntN(2) == 0 {
			split = rng.IntN(in)
		}
		for y := range in {
			if y < split {
				copy(col[3*y:], c0[:])
			} else {
				copy(col[3*y:], c1[:])
			}
		}
		for y := range out {
			verticalRow(dst[:3], col[3*tp.start[y]:3*(tp.start[y]+tp.n)], 3, tp, y)
			if want := full(col, 3, y); [3]uint8(dst) != want {
				t.Fatalf("%d to %d, output row %d: vertical %v, full sums %v", in, out, y, dst[:3], want)
			}
		}
	}
}
