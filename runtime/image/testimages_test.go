package image

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"flag"
	"hash/crc32"
	stdimage "image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated images in testdata/images")

const testdataDir = "../../testdata/images"

// generated is one synthetic test image: its file name and how to encode it.
type generated struct {
	name   string
	encode func() []byte
}

// testImages lists every generated file in testdata/images, in a fixed order.
func testImages() []generated {
	rgb := func(w, h, seed int) func() []byte {
		return func() []byte { return encodePNG(pattern(w, h, seed, false)) }
	}
	return []generated{
		{"tiny_rgb_30x20.png", rgb(30, 20, 1)},
		{"small_rgb_45x50.png", rgb(45, 50, 2)},
		{"exact_rgb_56x56.png", rgb(56, 56, 3)},
		{"vertical_only_rgb_112x130.png", rgb(112, 130, 4)},
		{"tall_rgb_90x700.png", rgb(90, 700, 5)},
		{"wide_rgb_900x110.png", rgb(900, 110, 6)},
		{"odd_rgb_333x257.png", rgb(333, 257, 7)},
		{"odd_rgb_517x389.png", rgb(517, 389, 8)},
		{"huge_rgb_3700x3500.png", func() []byte { return encodePNG(smooth(3700, 3500)) }},
		{"page_rgb_1654x2339.png", func() []byte { return encodePNG(page(1654, 2339)) }},
		{"gray_l_301x199.png", func() []byte { return encodePNG(toGray(pattern(301, 199, 9, false))) }},
		{"gray_la_151x249.png", func() []byte { return encodeGrayAlphaPNG(pattern(151, 249, 10, true)) }},
		{"gray_1bit_97x61.png", func() []byte { return encodeOneBitPNG(pattern(97, 61, 11, false)) }},
		{"palette_320x240.png", func() []byte { return encodePNG(toPaletted(pattern(320, 240, 12, false), false)) }},
		{"palette_trns_200x200.png", func() []byte { return encodePNG(toPaletted(pattern(200, 200, 13, true), true)) }},
		{"rgba_400x300.png", func() []byte { return encodePNG(pattern(400, 300, 14, true)) }},
		{"gray16_250x180.png", func() []byte { return encodePNG(gray16(250, 180)) }},
		{"gray16_trns_120x90.png", func() []byte { return encodeGrayTRNS(gray16(120, 90), 16) }},
		{"gray_trns_130x70.png", func() []byte { return encodeGrayTRNS(gray16(130, 70), 8) }},
		{"rgb16_210x330.png", func() []byte { return encodePNG(rgb16(210, 330, 15, false)) }},
		{"rgba16_160x120.png", func() []byte { return encodePNG(rgb16(160, 120, 16, true)) }},
		{"photo_q90_640x480.jpg", func() []byte { return encodeJPEG(pattern(640, 480, 17, false), 90) }},
		{"odd_q75_333x257.jpg", func() []byte { return encodeJPEG(pattern(333, 257, 18, false), 75) }},
		{"gray_q85_300x200.jpg", func() []byte { return encodeJPEG(toGray(pattern(300, 200, 19, false)), 85) }},
		{"lossless_rgba_250x170.webp", func() []byte { return encodeLosslessWebP(pattern(250, 170, 20, true)) }},
	}
}

// badImages are inputs Decode must refuse, with the text its error must hold.
func badImages() []struct{ name, want string } {
	return []struct{ name, want string }{
		{"bad_not_an_image.txt", "is not PNG, JPEG or WebP; send one of those"},
		{"bad_empty.png", "is empty"},
		{"bad_truncated.png", "could not be decoded: truncated PNG"},
		{"bad_truncated.jpg", "could not be decoded: truncated JPEG"},
		{"bad_bomb_100000x100000.png", "over the 89478485-pixel limit"},
		{"bad_zero_width.png", "could not be decoded"},
	}
}

func badImageBytes(name string) []byte {
	switch name {
	case "bad_not_an_image.txt":
		return []byte("this is a text file, not an image\n")
	case "bad_empty.png":
		return nil
	case "bad_truncated.png":
		full := encodePNG(pattern(64, 64, 21, false))
		return full[:len(full)*2/3]
	case "bad_truncated.jpg":
		full := encodeJPEG(pattern(64, 64, 22, false), 90)
		return full[:len(full)/2]
	case "bad_bomb_100000x100000.png":
		return rawPNG(100000, 100000, 8, 2, make([]byte, 64))
	case "bad_zero_width.png":
		return rawPNG(0, 10, 8, 2, nil)
	}
	panic(name)
}

// TestGeneratedImages regenerates every synthetic image and checks the committed files match (-update rewrites them).
func TestGeneratedImages(t *testing.T) {
	files := map[string][]byte{}
	for _, g := range testImages() {
		files[g.name] = g.encode()
	}
	for _, b := range badImages() {
		files[b.name] = badImageBytes(b.name)
	}
	for name, data := range files {
		path := filepath.Join(testdataDir, name)
		if *update {
			if err := os.MkdirAll(testdataDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		old, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v; run go test ./runtime/image -run TestGeneratedImages -update", err)
		}
		if !bytes.Equal(old, data) {
			t.Errorf("%s is stale; run go test ./runtime/image -run TestGeneratedImages -update", path)
		}
	}
}

// mix is a small integer hash, the deterministic noise source of the generators.
func mix(x, y, seed int) uint32 {
	h := uint32(x)*0x9E3779B1 ^ uint32(y)*0x85EBCA77 ^ uint32(seed)*0xC2B2AE3D
	h ^= h >> 15
	h *= 0x2C1B3C6D
	h ^= h >> 12
	h *= 0x297A2D39
	h ^= h >> 15
	return h
}

// pattern draws gradients, hard edges, a disc and a noisy patch, so resampling is exercised everywhere.
func pattern(w, h, seed int, alpha bool) *stdimage.NRGBA {
	m := stdimage.NewNRGBA(stdimage.Rect(0, 0, w, h))
	cx, cy, rad := w*2/3, h/3, min(w, h)/4
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			r := uint8(x * 255 / max(w-1, 1))
			g := uint8(y * 255 / max(h-1, 1))
			b := uint8((x*7 + y*13 + seed*31) % 256)
			if ((x/11)+(y/7))%2 == 0 && x < w/2 {
				r, g = 255-r, 40
			}
			if dx, dy := x-cx, y-cy; dx*dx+dy*dy < rad*rad {
				r, g, b = 250, 250, 10
			}
			if x > w/4 && x < w/4+min(40, w/3) && y > h/2 && y < h/2+min(40, h/3) {
				n := mix(x, y, seed)
				r, g, b = uint8(n), uint8(n>>8), uint8(n>>16)
			}
			a := uint8(255)
			if alpha {
				a = uint8((x*255/max(w-1, 1) + y) % 256)
			}
			m.SetNRGBA(x, y, color.NRGBA{r, g, b, a})
		}
	}
	return m
}

// smooth is a large image that compresses well: gradients and blocks only.
func smooth(w, h int) *stdimage.RGBA {
	m := stdimage.NewRGBA(stdimage.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			b := uint8(20)
			if (x/37+y/53)%2 == 0 {
				b = 220
			}
			m.SetRGBA(x, y, color.RGBA{uint8(x * 255 / (w - 1)), uint8(y * 255 / (h - 1)), b, 255})
		}
	}
	return m
}

// page looks like a scanned document: white paper, dark lines of word-like boxes, a grey figure.
func page(w, h int) *stdimage.RGBA {
	m := stdimage.NewRGBA(stdimage.Rect(0, 0, w, h))
	for i := range m.Pix {
		m.Pix[i] = 255
	}
	set := func(x0, y0, x1, y1 int, c color.RGBA) {
		for y := y0; y < y1; y++ {
			for x := x0; x < x1; x++ {
				m.SetRGBA(x, y, c)
			}
		}
	}
	margin := w / 10
	for line, y := 0, h/12; y < h-h/12; line, y = line+1, y+38 {
		if line%14 == 5 {
			set(margin, y, w-margin, y+300, color.RGBA{200, 210, 225, 255})
			y += 300
			continue
		}
		for x := margin; x < w-margin; {
			word := 20 + int(mix(x, y, 1)%90)
			if x+word > w-margin {
				break
			}
			set(x, y, x+word, y+22, color.RGBA{25, 25, 30, 255})
			x += word + 14
		}
	}
	return m
}

// scan is page with the grain of a scanner: every channel moved by up to 4 levels, so that PNG
// compresses it about 2:1 (page compresses 500:1) and inflating dominates its decode.
func scan(w, h int) *stdimage.RGBA {
	m := page(w, h)
	for i := range m.Pix {
		if i%4 != 3 {
			v := int(m.Pix[i]) + int(mix(i%(w*4), i/(w*4), 7)%9) - 4
			m.Pix[i] = uint8(min(max(v, 0), 255))
		}
	}
	return m
}

func toGray(src *stdimage.NRGBA) *stdimage.Gray {
	m := stdimage.NewGray(src.Rect)
	for i := 0; i < len(m.Pix); i++ {
		p := src.Pix[4*i:]
		m.Pix[i] = uint8((299*int(p[0]) + 587*int(p[1]) + 114*int(p[2])) / 1000)
	}
	return m
}

// toPaletted quantises to a fixed 6x6x6 cube plus grey ramp; with alpha, some entries get transparency.
func toPaletted(src *stdimage.NRGBA, withAlpha bool) *stdimage.Paletted {
	pal := color.Palette{}
	for r := 0; r < 6; r++ {
		for g := 0; g < 6; g++ {
			for b := 0; b < 6; b++ {
				a := uint8(255)
				if withAlpha && (r+g+b)%3 == 0 {
					a = uint8(40 * (r + 1))
				}
				pal = append(pal, color.NRGBA{uint8(r * 51), uint8(g * 51), uint8(b * 51), a})
			}
		}
	}
	for len(pal) < 256 {
		v := uint8((len(pal) - 216) * 6)
		pal = append(pal, color.NRGBA{v, v, v, 255})
	}
	m := stdimage.NewPaletted(src.Rect, pal)
	for i := 0; i < len(m.Pix); i++ {
		p := src.Pix[4*i:]
		m.Pix[i] = uint8((int(p[0])+25)/51*36 + (int(p[1])+25)/51*6 + (int(p[2])+25)/51)
	}
	return m
}

func gray16(w, h int) *stdimage.Gray16 {
	m := stdimage.NewGray16(stdimage.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			v := uint16(x * 65535 / (w - 1))
			if y < h/3 {
				v = uint16(x * 300 / (w - 1))
			} else if y < h/2 {
				v = uint16(mix(x, y, 3))
			}
			m.SetGray16(x, y, color.Gray16{v})
		}
	}
	return m
}

func rgb16(w, h, seed int, alpha bool) *stdimage.NRGBA64 {
	m := stdimage.NewNRGBA64(stdimage.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			n := mix(x, y, seed)
			a := uint16(65535)
			if alpha {
				a = uint16(n >> 16)
			}
			m.SetNRGBA64(x, y, color.NRGBA64{uint16(x * 65535 / (w - 1)), uint16(y * 65535 / (h - 1)), uint16(n), a})
		}
	}
	return m
}

func encodePNG(m stdimage.Image) []byte {
	var buf bytes.Buffer
	if err := png.Encode(&buf, m); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

func encodeJPEG(m stdimage.Image, quality int) []byte {
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, m, &jpeg.Options{Quality: quality}); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// rawPNG writes a PNG with the given header and unfiltered scanlines (image/png cannot write these modes).
func rawPNG(w, h, depth int, colorType byte, rows []byte) []byte {
	return rawPNGWithTRNS(w, h, depth, colorType, rows, nil)
}

// rawPNGWithTRNS is rawPNG with a tRNS chunk when trns is not nil.
func rawPNGWithTRNS(w, h, depth int, colorType byte, rows, trns []byte) []byte {
	var buf bytes.Buffer
	buf.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(kind string, data []byte) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(data)))
		buf.Write(n[:])
		crc := crc32.NewIEEE()
		crc.Write([]byte(kind))
		crc.Write(data)
		buf.WriteString(kind)
		buf.Write(data)
		binary.BigEndian.PutUint32(n[:], crc.Sum32())
		buf.Write(n[:])
	}
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], uint32(w))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(h))
	ihdr[8], ihdr[9] = byte(depth), colorType
	chunk("IHDR", ihdr)
	if trns != nil {
		chunk("tRNS", trns)
	}
	var z bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&z, zlib.BestCompression)
	zw.Write(rows)
	zw.Close()
	chunk("IDAT", z.Bytes())
	chunk("IEND", nil)
	return buf.Bytes()
}

// encodeGrayTRNS writes 8- or 16-bit grey with a tRNS colour key, which Go decodes to NRGBA/NRGBA64.
func encodeGrayTRNS(m *stdimage.Gray16, depth int) []byte {
	w, h := m.Rect.Dx(), m.Rect.Dy()
	var rows []byte
	for y := 0; y < h; y++ {
		rows = append(rows, 0)
		for x := 0; x < w; x++ {
			v := m.Gray16At(x, y).Y
			if depth == 8 {
				rows = append(rows, uint8(v>>8))
			} else {
				rows = append(rows, uint8(v>>8), uint8(v))
			}
		}
	}
	key := m.Gray16At(w/2, h/2).Y
	if depth == 8 {
		return rawPNGWithTRNS(w, h, 8, 0, rows, []byte{0, uint8(key >> 8)})
	}
	return rawPNGWithTRNS(w, h, 16, 0, rows, []byte{uint8(key >> 8), uint8(key)})
}

func encodeGrayAlphaPNG(src *stdimage.NRGBA) []byte {
	g := toGray(src)
	w, h := src.Rect.Dx(), src.Rect.Dy()
	rows := make([]byte, 0, h*(1+2*w))
	for y := 0; y < h; y++ {
		rows = append(rows, 0)
		for x := 0; x < w; x++ {
			rows = append(rows, g.Pix[y*w+x], src.Pix[(y*w+x)*4+3])
		}
	}
	return rawPNG(w, h, 8, 4, rows)
}

func encodeOneBitPNG(src *stdimage.NRGBA) []byte {
	g := toGray(src)
	w, h := src.Rect.Dx(), src.Rect.Dy()
	stride := (w + 7) / 8
	rows := make([]byte, 0, h*(1+stride))
	for y := 0; y < h; y++ {
		line := make([]byte, stride)
		for x := 0; x < w; x++ {
			if g.Pix[y*w+x] >= 128 {
				line[x/8] |= 0x80 >> (x % 8)
			}
		}
		rows = append(append(rows, 0), line...)
	}
	return rawPNG(w, h, 1, 0, rows)
}

// bitWriter packs bits least-significant first, as VP8L reads them.
type bitWriter struct {
	buf   []byte
	acc   uint64
	nbits uint
}

func (b *bitWriter) write(v uint32, n uint) {
	b.acc |= uint64(v) << b.nbits
	b.nbits += n
	for b.nbits >= 8 {
		b.buf = append(b.buf, byte(b.acc))
		b.acc >>= 8
		b.nbits -= 8
	}
}

func (b *bitWriter) bytes() []byte {
	if b.nbits > 0 {
		b.buf = append(b.buf, byte(b.acc))
	}
	return b.buf
}

// encodeLosslessWebP writes a VP8L stream with no transforms and flat 8-bit prefix codes.
func encodeLosslessWebP(m *stdimage.NRGBA) []byte {
	w, h := m.Rect.Dx(), m.Rect.Dy()
	var bw bitWriter
	bw.write(0x2f, 8)
	bw.write(uint32(w-1), 14)
	bw.write(uint32(h-1), 14)
	bw.write(1, 1) // alpha is used
	bw.write(0, 3) // version
	bw.write(0, 1) // no transform
	bw.write(0, 1) // no colour cache
	bw.write(0, 1) // no meta prefix codes
	flat := func(alphabet int) {
		bw.write(0, 1) // normal code
		bw.write(8, 4) // 12 code-length code lengths follow
		for i := 0; i < 12; i++ {
			l := uint32(0)
			if i == 2 || i == 11 { // the slots of code lengths 0 and 8
				l = 1
			}
			bw.write(l, 3)
		}
		bw.write(0, 1) // max_symbol = alphabet size
		for s := 0; s < alphabet; s++ {
			if s < 256 {
				bw.write(1, 1) // code length 8
			} else {
				bw.write(0, 1) // code length 0
			}
		}
	}
	flat(256 + 24) // green and length prefixes
	flat(256)      // red
	flat(256)      // blue
	flat(256)      // alpha
	bw.write(1, 1) // distance: simple code
	bw.write(0, 1) // one symbol
	bw.write(0, 1) // 1-bit symbol
	bw.write(0, 1) // symbol 0
	sym := func(v uint8) {
		var r uint32
		for i := 0; i < 8; i++ {
			r = r<<1 | uint32(v>>i&1)
		}
		bw.write(r, 8)
	}
	for i := 0; i < w*h; i++ {
		p := m.Pix[4*i:]
		sym(p[1])
		sym(p[0])
		sym(p[2])
		sym(p[3])
	}
	payload := bw.bytes()
	var out bytes.Buffer
	size := len(payload)
	pad := size % 2
	out.WriteString("RIFF")
	binary.Write(&out, binary.LittleEndian, uint32(4+8+size+pad))
	out.WriteString("WEBPVP8L")
	binary.Write(&out, binary.LittleEndian, uint32(size))
	out.Write(payload)
	if pad == 1 {
		out.WriteByte(0)
	}
	return out.Bytes()
}

func TestLosslessWebPRoundTrip(t *testing.T) {
	src := pattern(37, 23, 5, true)
	img, err := Decode(0, encodeLosslessWebP(src), DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 37*23; i++ {
		for c := 0; c < 3; c++ {
			if img.Pix[3*i+c] != src.Pix[4*i+c] {
				t.Fatalf("pixel %d channel %d: got %d want %d", i, c, img.Pix[3*i+c], src.Pix[4*i+c])
			}
		}
	}
}
