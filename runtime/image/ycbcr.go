package image

import (
	stdimage "image"
)

// JPEG and lossy WebP store YCbCr with subsampled chroma. PIL gets RGB from libjpeg-turbo and libwebp,
// which interpolate chroma ("fancy upsampling") and convert with their own fixed-point tables; these
// functions do the same arithmetic on the planes Go's decoders return.

// jpegColor holds libjpeg's ycc_rgb_convert tables (jdcolor.c, SCALEBITS 16).
var jpegColor = func() (t struct{ crR, cbB, crG, cbG [256]int32 }) {
	const scaleBits = 16
	const half = 1 << (scaleBits - 1)
	fix := func(x float64) int32 { return int32(x*(1<<scaleBits) + 0.5) }
	for i := 0; i < 256; i++ {
		x := int32(i - 128)
		t.crR[i] = (fix(1.40200)*x + half) >> scaleBits
		t.cbB[i] = (fix(1.77200)*x + half) >> scaleBits
		t.crG[i] = -fix(0.71414) * x
		t.cbG[i] = -fix(0.34414)*x + half
	}
	return t
}()

func clamp255(v int32) uint8 {
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return uint8(v)
}

func jpegToRGB(y, cb, cr uint8, dst []uint8) {
	yy := int32(y)
	dst[0] = clamp255(yy + jpegColor.crR[cr])
	dst[1] = clamp255(yy + (jpegColor.cbG[cb]+jpegColor.crG[cr])>>16)
	dst[2] = clamp255(yy + jpegColor.cbB[cb])
}

// jpegRows converts a decoded JPEG to RGB rows as libjpeg-turbo does with do_fancy_upsampling
// (h2v2_fancy_upsample for 4:2:0); other subsamplings are replicated, as libjpeg's int_upsample.
func jpegRows(m *stdimage.YCbCr) func(y int, dst []uint8) {
	w, h := m.Rect.Dx(), m.Rect.Dy()
	yBase := m.YOffset(m.Rect.Min.X, m.Rect.Min.Y)
	cBase := m.COffset(m.Rect.Min.X, m.Rect.Min.Y)
	cw, ch := (w+1)/2, (h+1)/2
	if m.SubsampleRatio != stdimage.YCbCrSubsampleRatio420 || cw <= 2 {
		return func(y int, dst []uint8) {
			for x := 0; x < w; x++ {
				ci := m.COffset(m.Rect.Min.X+x, m.Rect.Min.Y+y)
				jpegToRGB(m.Y[yBase+y*m.YStride+x], m.Cb[ci], m.Cr[ci], dst[3*x:])
			}
		}
	}
	return func(y int, dst []uint8) {
		near := y / 2
		far := near - 1
		if y%2 == 1 {
			far = near + 1
		}
		far = min(max(far, 0), ch-1)
		var cb, cr [2][]uint8
		cb[0], cb[1] = m.Cb[cBase+near*m.CStride:], m.Cb[cBase+far*m.CStride:]
		cr[0], cr[1] = m.Cr[cBase+near*m.CStride:], m.Cr[cBase+far*m.CStride:]
		yRow := m.Y[yBase+y*m.YStride:]
		put := func(x int, b, r int32) {
			if x < w {
				jpegToRGB(yRow[x], uint8(b), uint8(r), dst[3*x:])
			}
		}
		colsum := func(p [2][]uint8, cx int) int32 { return int32(p[0][cx])*3 + int32(p[1][cx]) }
		lastB, lastR := int32(0), int32(0)
		thisB, thisR := colsum(cb, 0), colsum(cr, 0)
		for cx := 0; cx < cw; cx++ {
			var nextB, nextR int32
			if cx+1 < cw {
				nextB, nextR = colsum(cb, cx+1), colsum(cr, cx+1)
			}
			if cx == 0 {
				put(0, (thisB*4+8)>>4, (thisR*4+8)>>4)
			} else {
				put(2*cx, (thisB*3+lastB+8)>>4, (thisR*3+lastR+8)>>4)
			}
			if cx == cw-1 {
				put(2*cx+1, (thisB*4+7)>>4, (thisR*4+7)>>4)
			} else {
				put(2*cx+1, (thisB*3+nextB+7)>>4, (thisR*3+nextR+7)>>4)
			}
			lastB, lastR, thisB, thisR = thisB, thisR, nextB, nextR
		}
	}
}

// webpToRGB is libwebp's VP8YuvToRgb (BT.601 limited range, 14-bit fixed point).
func webpToRGB(y, u, v int32, dst []uint8) {
	mulHi := func(a, c int32) int32 { return (a * c) >> 8 }
	clip := func(x int32) uint8 {
		if x&^((256<<6)-1) == 0 {
			return uint8(x >> 6)
		}
		if x < 0 {
			return 0
		}
		return 255
	}
	yy := mulHi(y, 19077)
	dst[0] = clip(yy + mulHi(v, 26149) - 14234)
	dst[1] = clip(yy - mulHi(u, 6419) - mulHi(v, 13320) + 8708)
	dst[2] = clip(yy + mulHi(u, 33050) - 17685)
}

// webpRows converts a decoded lossy WebP to RGB rows as libwebp's EmitFancyRGB and UpsampleRgbLinePair do.
func webpRows(m *stdimage.YCbCr) func(y int, dst []uint8) {
	w, h := m.Rect.Dx(), m.Rect.Dy()
	if m.SubsampleRatio != stdimage.YCbCrSubsampleRatio420 {
		return func(y int, dst []uint8) {
			for x := 0; x < w; x++ {
				yi := m.YOffset(m.Rect.Min.X+x, m.Rect.Min.Y+y)
				ci := m.COffset(m.Rect.Min.X+x, m.Rect.Min.Y+y)
				webpToRGB(int32(m.Y[yi]), int32(m.Cb[ci]), int32(m.Cr[ci]), dst[3*x:])
			}
		}
	}
	yBase := m.YOffset(m.Rect.Min.X, m.Rect.Min.Y)
	cBase := m.COffset(m.Rect.Min.X, m.Rect.Min.Y)
	uRow := func(r int) []uint8 { return m.Cb[cBase+r*m.CStride:] }
	vRow := func(r int) []uint8 { return m.Cr[cBase+r*m.CStride:] }
	return func(y int, dst []uint8) {
		// Row 0 and the last row of an even height use one chroma row; others pair chroma rows (y+1)/2-1 and (y+1)/2.
		var topU, topV, curU, curV []uint8
		bottom := false
		switch {
		case y == 0:
			topU, topV, curU, curV = uRow(0), vRow(0), uRow(0), vRow(0)
		case y == h-1 && h%2 == 0:
			r := h/2 - 1
			topU, topV, curU, curV = uRow(r), vRow(r), uRow(r), vRow(r)
		default:
			k := (y + 1) / 2
			topU, topV, curU, curV = uRow(k-1), vRow(k-1), uRow(k), vRow(k)
			bottom = y%2 == 0
		}
		yRow := m.Y[yBase+y*m.YStride:]
		if bottom { // the bottom row of a pair sees the current chroma row as near
			topU, curU = curU, topU
			topV, curV = curV, topV
		}
		emit := func(x int, u, v int32) { webpToRGB(int32(yRow[x]), u, v, dst[3*x:]) }
		tlU, tlV := int32(topU[0]), int32(topV[0])
		lU, lV := int32(curU[0]), int32(curV[0])
		emit(0, (3*tlU+lU+2)>>2, (3*tlV+lV+2)>>2)
		last := (w - 1) >> 1
		for x := 1; x <= last; x++ {
			tU, tV := int32(topU[x]), int32(topV[x])
			cU, cV := int32(curU[x]), int32(curV[x])
			avgU := tlU + tU + lU + cU + 8
			avgV := tlV + tV + lV + cV + 8
			d12U, d12V := (avgU+2*(tU+lU))>>3, (avgV+2*(tV+lV))>>3
			d03U, d03V := (avgU+2*(tlU+cU))>>3, (avgV+2*(tlV+cV))>>3
			emit(2*x-1, (d12U+tlU)>>1, (d12V+tlV)>>1)
			emit(2*x, (d03U+tU)>>1, (d03V+tV)>>1)
			tlU, tlV, lU, lV = tU, tV, cU, cV
		}
		if w%2 == 0 {
			emit(w-1, (3*tlU+lU+2)>>2, (3*tlV+lV+2)>>2)
		}
	}
}
