package image

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"

	"github.com/klauspost/compress/flate"
)

// decodePNGFast decodes the common PNGs straight to RGB: 8-bit grey, grey with alpha, RGB, RGBA
// and palette, not interlaced, without tRNS, every chunk and the zlib stream well formed. Each row
// is inflated, added to the Adler-32 sum, unfiltered in place and converted to RGB before the next
// (inflating on a goroutine of its own measured slower). It returns nil for any other file, and
// for anything it does not accept, so that image/png decides (and words the error): every image it
// returns is one that image/png decodes to the same pixels.
func decodePNGFast(data []byte) *RGB {
	f, ok := parsePNG(data)
	if !ok {
		return nil
	}
	w, h, bpp := f.width, f.height, f.bpp
	rowLen := w * bpp
	out := &RGB{Width: w, Height: h, Pix: make([]uint8, w*h*3)}
	// RGB rows are inflated, checked and unfiltered in place in the output; other kinds in raw.
	raw := out.Pix
	if f.colorType != ctRGB {
		buf := getBuffer(h * rowLen)
		defer rowBuffers.Put(buf)
		raw = *buf
	}
	filters := make([]byte, h)

	z := f.zlib
	if len(z) < 2+4 || !zlibHeaderOK(z[0], z[1]) {
		return nil
	}
	src := bytes.NewReader(z[2 : len(z)-4])
	fr := flate.NewReader(src)
	defer fr.Close()

	zeros := getBuffer(rowLen)
	defer rowBuffers.Put(zeros)
	clear(*zeros)
	sum := uint32(1)
	var lut *[256][3]uint8
	if f.colorType == ctPalette {
		lut = &f.palette
	}
	for y := range h {
		cur := raw[y*rowLen : (y+1)*rowLen]
		if _, err := io.ReadFull(fr, filters[y:y+1]); err != nil {
			return nil
		}
		if _, err := io.ReadFull(fr, cur); err != nil {
			return nil
		}
		prev := *zeros
		if y > 0 {
			prev = raw[(y-1)*rowLen : y*rowLen]
		}
		sum = adler32Update(sum, filters[y:y+1])
		sum = adler32Update(sum, cur)
		if !unfilter(filters[y], cur, prev, bpp) {
			return nil
		}
		if f.colorType != ctRGB {
			toRGBRow(out.Pix[y*w*3:(y+1)*w*3], cur, f.colorType, lut)
		}
	}
	// The stream must end here, and use every byte before the checksum.
	var one [1]byte
	n, err := fr.Read(one[:])
	if n != 0 || err != io.EOF || src.Len() != 0 || binary.BigEndian.Uint32(z[len(z)-4:]) != sum {
		return nil
	}
	return out
}

// PNG colour types.
const (
	ctGrey      = 0
	ctRGB       = 2
	ctPalette   = 3
	ctGreyAlpha = 4
	ctRGBA      = 6
)

// toRGBRow converts one unfiltered 8-bit row to RGB as image/png and toRGB do.
func toRGBRow(dst, src []byte, colorType byte, lut *[256][3]uint8) {
	w := len(dst) / 3
	switch colorType {
	case ctRGBA:
		copy4to3(dst, src, w)
	case ctGrey:
		for x, v := range src[:w] {
			d := dst[3*x : 3*x+3 : 3*x+3]
			d[0], d[1], d[2] = v, v, v
		}
	case ctGreyAlpha:
		for x := range w {
			v := src[2*x]
			d := dst[3*x : 3*x+3 : 3*x+3]
			d[0], d[1], d[2] = v, v, v
		}
	case ctPalette:
		for x, i := range src[:w] {
			p := &lut[i]
			d := dst[3*x : 3*x+3 : 3*x+3]
			d[0], d[1], d[2] = p[0], p[1], p[2]
		}
	}
}

// zlibHeaderOK accepts what compress/zlib's reader does: deflate, a window of at most 32 KiB, a
// valid check and no preset dictionary.
func zlibHeaderOK(cmf, flg byte) bool {
	return cmf&0x0f == 8 && cmf>>4 <= 7 && (uint(cmf)<<8|uint(flg))%31 == 0 && flg&0x20 == 0
}

// pngFile is what parsePNG keeps of a PNG the fast path decodes.
type pngFile struct {
	width, height int
	colorType     byte
	bpp           int          // bytes a pixel
	palette       [256][3]byte // entries past the PLTE's are black, as image/png pads them
	zlib          []byte       // the IDAT data, one zlib stream
}

// parsePNG walks the chunks as image/png does and reports false for any file the fast path
// leaves to image/png: a chunk order or checksum it would reject, or a feature the fast path
// lacks (tRNS, interlacing, depths other than 8, chunks before IHDR, IDAT chunks apart).
func parsePNG(data []byte) (pngFile, bool) {
	var f pngFile
	if !bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")) {
		return f, false
	}
	p := data[8:]
	const (
		seenIHDR = iota + 1
		seenPLTE
		inIDAT
		afterIDAT
	)
	stage := 0
	var idats [][]byte
	for {
		if len(p) < 12 {
			return f, false
		}
		length := binary.BigEndian.Uint32(p)
		if length > 0x7fffffff || uint64(len(p)) < 12+uint64(length) {
			return f, false
		}
		name, body := string(p[4:8]), p[8:8+length]
		if crc32.ChecksumIEEE(p[4:8+length]) != binary.BigEndian.Uint32(p[8+length:]) {
			return f, false
		}
		p = p[12+length:]
		if stage == inIDAT && name != "IDAT" {
			stage = afterIDAT
		}
		switch name {
		case "IHDR":
			if stage != 0 || length != 13 {
				return f, false
			}
			w := int32(binary.BigEndian.Uint32(body))
			h := int32(binary.BigEndian.Uint32(body[4:]))
			depth, ct := body[8], body[9]
			if w <= 0 || h <= 0 || depth != 8 || body[10] != 0 || body[11] != 0 || body[12] != 0 {
				return f, false
			}
			switch ct {
			case ctGrey, ctPalette:
				f.bpp = 1
			case ctGreyAlpha:
				f.bpp = 2
			case ctRGB:
				f.bpp = 3
			case ctRGBA:
				f.bpp = 4
			default:
				return f, false
			}
			f.width, f.height, f.colorType = int(w), int(h), ct
			stage = seenIHDR
		case "PLTE":
			np := int(length / 3)
			if stage != seenIHDR || f.colorType != ctPalette || length%3 != 0 || np == 0 || np > 256 {
				return f, false
			}
			for i := range np {
				f.palette[i] = [3]byte{body[3*i], body[3*i+1], body[3*i+2]}
			}
			stage = seenPLTE
		case "IDAT":
			switch {
			case stage == seenIHDR && f.colorType != ctPalette, stage == seenPLTE:
				stage = inIDAT
			case stage == inIDAT:
			default:
				return f, false
			}
			idats = append(idats, body)
		case "IEND":
			if stage != afterIDAT || length != 0 {
				return f, false
			}
			if len(idats) == 1 {
				f.zlib = idats[0]
			} else {
				f.zlib = bytes.Join(idats, nil)
			}
			return f, true
		case "tRNS":
			return f, false
		default:
			if stage == 0 {
				return f, false
			}
		}
	}
}
