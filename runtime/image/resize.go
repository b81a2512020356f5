package image

import (
	"fmt"
	"math"
)

// SmartResize picks the output size as transformers' smart_resize does: both sides multiples of
// factor, the area within [minPixels, maxPixels], the aspect ratio kept as closely as possible.
func SmartResize(height, width, factor, minPixels, maxPixels int) (int, int, error) {
	if height <= 0 || width <= 0 {
		return 0, 0, fmt.Errorf("image size %dx%d has no pixels", width, height)
	}
	if float64(max(height, width))/float64(min(height, width)) > 200 {
		return 0, 0, fmt.Errorf("image is %dx%d, an aspect ratio over 200; crop or pad it", width, height)
	}
	f := float64(factor)
	hBar := int(math.RoundToEven(float64(height)/f)) * factor
	wBar := int(math.RoundToEven(float64(width)/f)) * factor
	if hBar*wBar > maxPixels {
		beta := math.Sqrt(float64(height*width) / float64(maxPixels))
		hBar = max(factor, int(math.Floor(float64(height)/beta/f))*factor)
		wBar = max(factor, int(math.Floor(float64(width)/beta/f))*factor)
	} else if hBar*wBar < minPixels {
		beta := math.Sqrt(float64(minPixels) / float64(height*width))
		hBar = int(math.Ceil(float64(height)*beta/f)) * factor
		wBar = int(math.Ceil(float64(width)*beta/f)) * factor
	}
	return hBar, wBar, nil
}

// taps holds, for each output index, the first input index and int16 weights of a 1-D resampling,
// computed as torch's antialiased bicubic on uint8 does (PIL's filter, a = -0.5).
type taps struct {
	start     []int
	weights   [][]int16
	precision uint
}

func cubicAA(x float64) float64 {
	const a = -0.5
	x = math.Abs(x)
	if x < 1 {
		return float64(float64(float64(a+2)*x)-(a+3))*x*x + 1
	}
	if x < 2 {
		return float64(float64(float64(float64(a*x)-5*a)*x)+8*a)*x - 4*a
	}
	return 0
}

func computeTaps(inSize, outSize int) taps {
	scale := float64(inSize) / float64(outSize)
	support := 2.0
	invscale := 1.0
	if scale >= 1 {
		support = 2 * scale
		invscale = 1 / scale
	}
	maxInterp := int(math.Ceil(support))*2 + 1
	t := taps{start: make([]int, outSize), weights: make([][]int16, outSize)}
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

func clampShift(acc int32, prec uint) uint8 {
	v := acc >> prec
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return uint8(v)
}

// Resize resamples img to outW x outH with torch's antialiased bicubic on uint8 (what torchvision's
// resize runs on CPU): a horizontal pass then a vertical pass, each skipped when that side keeps its size.
func Resize(img *RGB, outW, outH int) *RGB {
	cur := img
	if outW != img.Width {
		cur = resizeHorizontal(cur, outW)
	}
	if outH != img.Height {
		cur = resizeVertical(cur, outH)
	}
	if cur == img {
		cp := *img
		cp.Pix = append([]uint8(nil), img.Pix...)
		return &cp
	}
	return cur
}

func resizeHorizontal(in *RGB, outW int) *RGB {
	return resizeHorizontalInto(in, outW, make([]uint8, outW*in.Height*3))
}

// resizeHorizontalInto is resizeHorizontal writing into pix, which it overwrites entirely.
func resizeHorizontalInto(in *RGB, outW int, pix []uint8) *RGB {
	t := computeTaps(in.Width, outW)
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

func resizeVertical(in *RGB, outH int) *RGB {
	t := computeTaps(in.Height, outH)
	rowLen := in.Width * 3
	out := &RGB{Width: in.Width, Height: outH, Pix: make([]uint8, rowLen*outH)}
	parallelRows(outH, func(y0, y1 int) {
		acc := make([]int32, rowLen)
		for y := y0; y < y1; y++ {
			verticalRow(in, &t, y, out.Pix[y*rowLen:(y+1)*rowLen], acc)
		}
	})
	return out
}

// verticalRow writes output row y of the vertical pass into dst; acc is scratch of one row's length.
func verticalRow(in *RGB, t *taps, y int, dst []uint8, acc []int32) {
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
