package image

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"sync"
)

var le = binary.LittleEndian

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

// GLM4VSize picks the output size as transformers' GLM-4V image processor does (its smart_resize,
// called with num_frames = temporal_factor = temporal): an image with a side under factor is first
// scaled up, by a float scale and truncated, until both sides reach it; then as SmartResize, but the
// area bounds count temporal frames, so an image gets at most maxPixels/temporal pixels.
func GLM4VSize(height, width, factor, temporal, minPixels, maxPixels int) (int, int, error) {
	if height <= 0 || width <= 0 {
		return 0, 0, fmt.Errorf("image size %dx%d has no pixels", width, height)
	}
	if factor <= 0 || temporal <= 0 {
		return 0, 0, fmt.Errorf("factor %d and temporal patch size %d must be positive", factor, temporal)
	}
	f := float64(factor)
	if height < factor || width < factor {
		scale := max(f/float64(height), f/float64(width))
		height = int(float64(height) * scale)
		width = int(float64(width) * scale)
	}
	if float64(max(height, width))/float64(min(height, width)) > 200 {
		return 0, 0, fmt.Errorf("image is %dx%d once scaled up to the factor %d, an aspect ratio over 200; crop or pad it", width, height, factor)
	}
	hBar := int(math.RoundToEven(float64(height)/f)) * factor
	wBar := int(math.RoundToEven(float64(width)/f)) * factor
	// t_bar is round(num_frames / temporal_factor) * temporal_factor, which is temporal
	if temporal*hBar*wBar > maxPixels {
		beta := math.Sqrt(float64(temporal*height*width) / float64(maxPixels))
		hBar = max(factor, int(math.Floor(float64(height)/beta/f))*factor)
		wBar = max(factor, int(math.Floor(float64(width)/beta/f))*factor)
	} else if temporal*hBar*wBar < minPixels {
		beta := math.Sqrt(float64(minPixels) / float64(temporal*height*width))
		hBar = int(math.Ceil(float64(height)*beta/f)) * factor
		wBar = int(math.Ceil(float64(width)*beta/f)) * factor
	}
	return hBar, wBar, nil
}

// PixtralSize picks the output size as transformers' Pixtral image processor does: if a side
// exceeds longest, both sides scale by the larger of height/longest and width/longest, floored;
// then each side rounds up to a multiple of patch.
func PixtralSize(height, width, longest, patch int) (int, int, error) {
	if height <= 0 || width <= 0 {
		return 0, 0, fmt.Errorf("image size %dx%d has no pixels", width, height)
	}
	if longest <= 0 || patch <= 0 {
		return 0, 0, fmt.Errorf("longest edge %d and patch %d must be positive", longest, patch)
	}
	ratio := max(float64(height)/float64(longest), float64(width)/float64(longest))
	if ratio > 1 {
		height = int(math.Floor(float64(height) / ratio))
		width = int(math.Floor(float64(width) / ratio))
	}
	up := func(n int) int { return ((n-1)/patch + 1) * patch }
	return up(max(height, 1)), up(max(width, 1)), nil
}

// taps holds a 1-D resampling as torch's antialiased bicubic on uint8 computes it (PIL's filter,
// a = -0.5): for each output index, n int32 weights in fixed point of precision bits applied from
// input index start. Outputs with fewer taps are zero-padded to n, which leaves every sum unchanged.
type taps struct {
	start     []int
	sums      []int32 // uniformSum of each output's weights
	scaled    []int32 // the outputs whose uniformSum is not 0
	n         int
	weights   []int32 // n a output
	precision uint
	half      int32 // the rounding term, 1 << (precision-1)
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

func computeTaps(inSize, outSize int) *taps {
	scale := float64(inSize) / float64(outSize)
	support := 2.0
	invscale := 1.0
	if scale >= 1 {
		support = 2 * scale
		invscale = 1 / scale
	}
	maxInterp := int(math.Ceil(support))*2 + 1
	xmins := make([]int, outSize)
	sizes := make([]int, outSize)
	wf := make([]float64, outSize*maxInterp)
	wtMax := 0.0
	n := 0
	for i := 0; i < outSize; i++ {
		center := scale * (float64(i) + 0.5)
		xmin := max(int(center-support+0.5), 0)
		xsize := min(int(center+support+0.5), inSize) - xmin
		xsize = min(max(xsize, 0), maxInterp)
		w := wf[i*maxInterp : i*maxInterp+xsize]
		total := 0.0
		for j := range w {
			w[j] = cubicAA((float64(j+xmin) - center + 0.5) * invscale)
			total += w[j]
		}
		if total != 0 {
			for j := range w {
				w[j] /= total
				wtMax = math.Max(wtMax, w[j])
			}
		}
		xmins[i], sizes[i] = xmin, xsize
		n = max(n, xsize)
	}
	var prec uint
	for prec = 0; prec < 22; prec++ {
		next := int32(0.5 + wtMax*float64(int32(1)<<(prec+1)))
		if next >= 1<<15 {
			break
		}
	}
	t := &taps{start: make([]int, outSize), n: n, weights: make([]int32, outSize*n), precision: prec, half: int32(1) << (prec - 1)}
	for i := range outSize {
		// n is at most inSize, so the padded window fits inside the input.
		start := min(xmins[i], inSize-n)
		t.start[i] = start
		q := t.weights[i*n+xmins[i]-start : i*n+xmins[i]-start+sizes[i]]
		for j, v := range wf[i*maxInterp : i*maxInterp+sizes[i]] {
			v *= float64(int32(1) << prec)
			if v < 0 {
				q[j] = int32(int16(int32(-0.5 + v)))
			} else {
				q[j] = int32(int16(int32(0.5 + v)))
			}
		}
	}
	t.buildSums()
	return t
}

// buildSums fills sums and scaled from weights.
func (t *taps) buildSums() {
	n := t.n
	t.sums, t.scaled = make([]int32, len(t.start)), nil
	for i := range t.sums {
		t.sums[i] = uniformSum(t.weights[i*n:(i+1)*n], t.half, t.precision)
		if t.sums[i] != 0 {
			t.scaled = append(t.scaled, int32(i))
		}
	}
}

// uniformSum is what an output with weights ws multiplies a colour its taps all read by: their sum,
// or 0 where the output is that colour itself for every value 0..255. With the sum 2^prec+d, a value
// v gives v + (half + v*d)>>prec, which is v when half + v*d is in [0, 2^prec) at v = 0 and 255.
func uniformSum(ws []int32, half int32, prec uint) int32 {
	var sum int32
	for _, w := range ws {
		sum += w
	}
	if e := half + 255*(sum-int32(1)<<prec); e >= 0 && e < int32(1)<<prec {
		return 0
	}
	return sum
}

// clampShift is acc >> prec saturated to 0..255.
func clampShift(acc int32, prec uint) uint8 { return clamp8(acc >> (prec & 31)) }

// scaledColour writes into d the colour c0, c1, c2 times the weights' sum w (uniformSum).
func scaledColour(d []uint8, c0, c1, c2 uint8, w, half int32, prec uint) {
	d[0], d[1], d[2] = clampShift(half+int32(c0)*w, prec), clampShift(half+int32(c1)*w, prec), clampShift(half+int32(c2)*w, prec)
}

// Resize resamples img to outW x outH with torch's antialiased bicubic on uint8 (what torchvision's
// resize runs on CPU): a horizontal pass then a vertical pass, each skipped when that side keeps its size.
func Resize(img *RGB, outW, outH int) *RGB {
	out := &RGB{Width: outW, Height: outH, Pix: make([]uint8, outW*outH*3)}
	var hor, ver *taps
	if outW != img.Width {
		hor = computeTaps(img.Width, outW)
	}
	if outH != img.Height {
		ver = computeTaps(img.Height, outH)
	}
	r := newResampler(img, hor, ver)
	parallelRows(outH, func(y0, y1 int) {
		var w resampleWork
		defer w.release()
		for y := y0; y < y1; y++ {
			copy(out.Pix[y*outW*3:(y+1)*outW*3], r.row(&w, y))
		}
	})
	return out
}

// resampler produces output rows of a resize one at a time, each a pure function of the input, so
// any split of the rows across goroutines gives the same pixels.
type resampler struct {
	in       *RGB
	hor, ver *taps // nil when that side keeps its size
	outW     int
}

func newResampler(in *RGB, hor, ver *taps) *resampler {
	r := &resampler{in: in, hor: hor, ver: ver, outW: in.Width}
	if hor != nil {
		r.outW = len(hor.start)
	}
	return r
}

// resampleWork is one goroutine's scratch: a window of horizontally resized input rows and one output row.
type resampleWork struct {
	window     *[]uint8 // rows winLo..winHi-1 of the horizontal pass
	winLo      int
	winHi      int
	line       *[]uint8
	rowsNeeded int
}

var rowBuffers = sync.Pool{New: func() any { return new([]uint8) }}

func getBuffer(n int) *[]uint8 {
	b := rowBuffers.Get().(*[]uint8)
	if cap(*b) < n {
		*b = make([]uint8, n)
	}
	*b = (*b)[:n]
	return b
}

func (w *resampleWork) release() {
	if w.window != nil {
		rowBuffers.Put(w.window)
	}
	if w.line != nil {
		rowBuffers.Put(w.line)
	}
	*w = resampleWork{}
}

// row returns output row y; it stays valid until the next call with the same work.
func (r *resampler) row(w *resampleWork, y int) []uint8 {
	inLen, outLen := r.in.Width*3, r.outW*3
	if r.ver == nil {
		src := r.in.Pix[y*inLen : (y+1)*inLen]
		if r.hor == nil {
			return src
		}
		if w.line == nil {
			w.line = getBuffer(outLen)
		}
		horizontalRow(*w.line, src, r.hor)
		return *w.line
	}
	if w.line == nil {
		w.line = getBuffer(outLen)
	}
	lo := r.ver.start[y]
	n := r.ver.n
	if r.hor == nil {
		verticalRow(*w.line, r.in.Pix[lo*inLen:(lo+n)*inLen], inLen, r.ver, y)
		return *w.line
	}
	r.fillWindow(w, lo, lo+n)
	off := (lo - w.winLo) * outLen
	verticalRow(*w.line, (*w.window)[off:off+n*outLen], outLen, r.ver, y)
	return *w.line
}

// fillWindow makes the window hold horizontally resized rows lo..hi-1, keeping the rows it already has.
func (r *resampler) fillWindow(w *resampleWork, lo, hi int) {
	inLen, outLen := r.in.Width*3, r.outW*3
	if w.window == nil || hi-lo > w.rowsNeeded {
		// Output rows need windows that start later and end later, so one of 2n rows slides along.
		w.rowsNeeded = max(2*r.ver.n, hi-lo)
		if w.window != nil {
			rowBuffers.Put(w.window)
		}
		w.window = getBuffer(w.rowsNeeded * outLen)
		w.winLo, w.winHi = lo, lo
	}
	if lo < w.winLo || lo >= w.winHi {
		w.winLo, w.winHi = lo, lo
	}
	if hi-w.winLo > w.rowsNeeded {
		win := *w.window
		copy(win, win[(lo-w.winLo)*outLen:(w.winHi-w.winLo)*outLen])
		w.winLo = lo
	}
	win := *w.window
	for i := w.winHi; i < hi; i++ {
		off := (i - w.winLo) * outLen
		horizontalRow(win[off:off+outLen], r.in.Pix[i*inLen:(i+1)*inLen], r.hor)
	}
	w.winHi = max(w.winHi, hi)
}

// horizontalRow resamples one RGB row src into dst along x.
//
// Where an output's taps all read one colour (most of a page), its sums are that colour times the
// sum of its weights, the same integers, taken with one multiplication a channel, or none where the
// output is the colour itself (uniformSum): a row of one colour is filled at once, and elsewhere the
// kernel stops at such an output and fillRun writes every output whose taps stay in that run.
func horizontalRow(dst, src []uint8, t *taps) {
	nx := len(dst) / 3
	if len(src) >= 3 && uniform(src) {
		t.fillUniform(dst[:3*nx], (*[3]uint8)(src))
		return
	}
	for x := 0; x < nx; {
		switch t.n {
		case 4:
			x = horizontal4(dst[:3*nx], src, t, x)
		case 5:
			x = horizontal5(dst[:3*nx], src, t, x)
		default:
			x = horizontalN(dst[:3*nx], src, t, x)
		}
		if x == nx {
			break
		}
		next := t.fillRun(dst[:3*nx], src, x)
		if next == x { // the kernel's test and fillRun read the same bytes, so never; summed in full if so
			sumOutput(dst[3*x:3*x+3:3*x+3], src[3*t.start[x]:][:3*t.n], t.weights[t.n*x:t.n*x+t.n], t.half, t.precision)
			next = x + 1
		}
		x = next
	}
}

// horizontal4 is horizontalRow for four taps an output, from output x up to the first whose taps read
// one colour, which it returns (or the number of outputs): the three channels of a pixel in one step.
// Only every fourth output is tested for one colour (a run is found at most three outputs late, and
// those are summed in full), so a busy row (a scan's grain, a photograph) pays little for the test.
func horizontal4(dst, src []uint8, t *taps, x int) int {
	half, prec := t.half, t.precision
	for ; x < len(dst)/3; x++ {
		ws := t.weights[4*x : 4*x+4 : 4*x+4]
		s := src[3*t.start[x]:][:12:12]
		if x&3 == 0 && le.Uint64(s[0:8]) == le.Uint64(s[3:11]) && s[8] == s[11] {
			return x
		}
		d := dst[3*x : 3*x+3 : 3*x+3]
		w0, w1, w2, w3 := ws[0], ws[1], ws[2], ws[3]
		d[0] = clampShift(half+int32(s[0])*w0+int32(s[3])*w1+int32(s[6])*w2+int32(s[9])*w3, prec)
		d[1] = clampShift(half+int32(s[1])*w0+int32(s[4])*w1+int32(s[7])*w2+int32(s[10])*w3, prec)
		d[2] = clampShift(half+int32(s[2])*w0+int32(s[5])*w1+int32(s[8])*w2+int32(s[11])*w3, prec)
	}
	return x
}

// horizontal5 is horizontal4 for five taps an output.
func horizontal5(dst, src []uint8, t *taps, x int) int {
	half, prec := t.half, t.precision
	for ; x < len(dst)/3; x++ {
		ws := t.weights[5*x : 5*x+5 : 5*x+5]
		s := src[3*t.start[x]:][:15:15]
		if x&3 == 0 && le.Uint64(s[0:8]) == le.Uint64(s[3:11]) && le.Uint32(s[8:12]) == le.Uint32(s[11:15]) {
			return x
		}
		d := dst[3*x : 3*x+3 : 3*x+3]
		w0, w1, w2, w3, w4 := ws[0], ws[1], ws[2], ws[3], ws[4]
		d[0] = clampShift(half+int32(s[0])*w0+int32(s[3])*w1+int32(s[6])*w2+int32(s[9])*w3+int32(s[12])*w4, prec)
		d[1] = clampShift(half+int32(s[1])*w0+int32(s[4])*w1+int32(s[7])*w2+int32(s[10])*w3+int32(s[13])*w4, prec)
		d[2] = clampShift(half+int32(s[2])*w0+int32(s[5])*w1+int32(s[8])*w2+int32(s[11])*w3+int32(s[14])*w4, prec)
	}
	return x
}

// horizontalN is horizontal4 for any number of taps.
func horizontalN(dst, src []uint8, t *taps, x int) int {
	half, prec, n := t.half, t.precision, t.n
	for ; x < len(dst)/3; x++ {
		ws := t.weights[n*x : n*x+n]
		s := src[3*t.start[x]:][:3*n]
		if x&3 == 0 && uniform(s) {
			return x
		}
		sumOutput(dst[3*x:3*x+3:3*x+3], s, ws, half, prec)
	}
	return x
}

// sumOutput writes the output pixel d of taps s (RGB) weighed by ws.
func sumOutput(d, s []uint8, ws []int32, half int32, prec uint) {
	r, g, b := half, half, half
	for j, w := range ws {
		p := s[3*j : 3*j+3 : 3*j+3]
		r += int32(p[0]) * w
		g += int32(p[1]) * w
		b += int32(p[2]) * w
	}
	d[0], d[1], d[2] = clampShift(r, prec), clampShift(g, prec), clampShift(b, prec)
}

// fillUniform writes the horizontal pass of a row of one colour c into dst.
func (t *taps) fillUniform(dst []uint8, c *[3]uint8) {
	if len(dst) == 0 {
		return
	}
	copy(dst, c[:])
	for n := 3; n < len(dst); n *= 2 {
		copy(dst[n:], dst[:n])
	}
	for _, x := range t.scaled {
		scaledColour(dst[3*x:3*x+3:3*x+3], c[0], c[1], c[2], t.sums[x], t.half, t.precision)
	}
}

// sameRows reports whether the rows of rowLen bytes in rows are all equal.
func sameRows(rows []uint8, rowLen int) bool {
	for j := rowLen; j+rowLen <= len(rows); j += rowLen {
		if !bytes.Equal(rows[j:j+rowLen], rows[:rowLen]) {
			return false
		}
	}
	return true
}

// fillRun writes the outputs from x on whose taps all read the run of one colour that output x's
// taps read, and returns the output after them.
func (t *taps) fillRun(dst, src []uint8, x int) int {
	n := t.n
	o := 3 * t.start[x]
	c0, c1, c2 := src[o], src[o+1], src[o+2]
	last := runLast(src, o)/3 - (n - 1) // the last first tap whose taps stay in the run
	nx := min(len(dst)/3, len(t.start), len(t.sums))
	for ; x < nx && t.start[x] <= last; x++ {
		d := dst[3*x : 3*x+3 : 3*x+3]
		if w := t.sums[x]; w != 0 {
			scaledColour(d, c0, c1, c2, w, t.half, t.precision)
			continue
		}
		d[0], d[1], d[2] = c0, c1, c2
	}
	return x
}

// runLast returns the byte offset of the last pixel of the run of one colour that starts at byte
// offset o of the RGB row src.
func runLast(src []uint8, o int) int {
	k := o
	for ; k+11 <= len(src); k += 8 {
		if v := le.Uint64(src[k:]) ^ le.Uint64(src[k+3:]); v != 0 {
			k += bits.TrailingZeros64(v) / 8
			return k - k%3
		}
	}
	for ; k+3 < len(src); k++ {
		if src[k] != src[k+3] {
			return k - k%3
		}
	}
	return k - k%3
}

// uniform reports whether the RGB pixels of s are all one colour.
func uniform(s []uint8) bool {
	i := 0
	for ; i+11 <= len(s); i += 8 {
		if le.Uint64(s[i:]) != le.Uint64(s[i+3:]) {
			return false
		}
	}
	for ; i+3 < len(s); i++ {
		if s[i] != s[i+3] {
			return false
		}
	}
	return true
}

// clamp8 saturates v to 0..255.
func clamp8(v int32) uint8 {
	if uint32(v) <= 255 {
		return uint8(v)
	}
	if v < 0 {
		return 0
	}
	return 255
}

// verticalRow writes output row y of a vertical pass into dst from rows, the n input rows its taps
// read (stride rowLen each).
func verticalRow(dst, rows []uint8, rowLen int, t *taps, y int) {
	half, prec, n := t.half, t.precision, t.n
	ws := t.weights[n*y : n*y+n]
	dst = dst[:rowLen]
	row := func(j int) []uint8 { return rows[j*rowLen : (j+1)*rowLen : (j+1)*rowLen][:len(dst)] }
	if sum := t.sums[y]; sameRows(rows[:n*rowLen], rowLen) {
		// Every tap reads the same row: each sum is its value times the weights' sum (uniformSum).
		if sum == 0 {
			copy(dst, rows)
			return
		}
		for i, v := range row(0) {
			dst[i] = clampShift(half+int32(v)*sum, prec)
		}
		return
	}
	switch n {
	case 4:
		r0, r1, r2, r3 := row(0), row(1), row(2), row(3)
		w0, w1, w2, w3 := ws[0], ws[1], ws[2], ws[3]
		for i := range dst {
			dst[i] = clampShift(half+int32(r0[i])*w0+int32(r1[i])*w1+int32(r2[i])*w2+int32(r3[i])*w3, prec)
		}
		return
	case 5:
		r0, r1, r2, r3, r4 := row(0), row(1), row(2), row(3), row(4)
		w0, w1, w2, w3, w4 := ws[0], ws[1], ws[2], ws[3], ws[4]
		for i := range dst {
			dst[i] = clampShift(half+int32(r0[i])*w0+int32(r1[i])*w1+int32(r2[i])*w2+int32(r3[i])*w3+int32(r4[i])*w4, prec)
		}
		return
	}
	// Wider kernels sum three taps at a time into an accumulator row.
	var acc [512]int32
	for x0 := 0; x0 < len(dst); x0 += len(acc) {
		seg := acc[:min(len(acc), len(dst)-x0)]
		for i := range seg {
			seg[i] = half
		}
		j := 0
		for ; j+3 <= n; j += 3 {
			a, b, c := row(j)[x0:][:len(seg)], row(j + 1)[x0:][:len(seg)], row(j + 2)[x0:][:len(seg)]
			wa, wb, wc := ws[j], ws[j+1], ws[j+2]
			for i := range seg {
				seg[i] += int32(a[i])*wa + int32(b[i])*wb + int32(c[i])*wc
			}
		}
		for ; j < n; j++ {
			a, wa := row(j)[x0:][:len(seg)], ws[j]
			for i := range seg {
				seg[i] += int32(a[i]) * wa
			}
		}
		d := dst[x0:][:len(seg)]
		for i, v := range seg {
			d[i] = clampShift(v, prec)
		}
	}
}
