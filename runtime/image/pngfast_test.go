package image

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"hash/adler32"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pngSpec describes a PNG written by writePNG: the kinds the fast path reads, with every filter
// and chunk layout an encoder may choose.
type pngSpec struct {
	w, h      int
	colorType byte
	depth     byte   // 8 unless set
	interlace byte   // 1: Adam7 in the header (the data is still written as one pass)
	filter    int    // 0-4 for every row, -1 a random filter a row
	level     int    // zlib level
	idatSize  int    // split the zlib stream into IDAT chunks of about this many bytes; 0: one chunk
	palette   int    // PLTE entries (colour type 3)
	extra     bool   // ancillary chunks before, between and after the IDATs
	trns      []byte // a tRNS chunk
}

// writePNG encodes pix (unfiltered 8-bit rows, bpp bytes a pixel) as spec says.
func writePNG(s pngSpec, pix []byte, rng *rand.Rand) []byte {
	bpp := map[byte]int{ctGrey: 1, ctPalette: 1, ctGreyAlpha: 2, ctRGB: 3, ctRGBA: 4}[s.colorType]
	rowLen := s.w * bpp
	var raw []byte
	prev := make([]byte, rowLen)
	for y := range s.h {
		cur := pix[y*rowLen : (y+1)*rowLen]
		ft := s.filter
		if ft < 0 {
			ft = rng.IntN(5)
		}
		raw = append(raw, byte(ft))
		for i := range cur {
			var a, b, c int
			if i >= bpp {
				a, c = int(cur[i-bpp]), int(prev[i-bpp])
			}
			b = int(prev[i])
			var pred int
			switch ft {
			case filterSub:
				pred = a
			case filterUp:
				pred = b
			case filterAverage:
				pred = (a + b) / 2
			case filterPaeth:
				p := a + b - c
				pa, pb, pc := absInt(p-a), absInt(p-b), absInt(p-c)
				switch {
				case pa <= pb && pa <= pc:
					pred = a
				case pb <= pc:
					pred = b
				default:
					pred = c
				}
			}
			raw = append(raw, cur[i]-byte(pred))
		}
		prev = cur
	}
	var z bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&z, s.level)
	zw.Write(raw)
	zw.Close()

	var buf bytes.Buffer
	buf.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(kind string, data []byte) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(data)))
		buf.Write(n[:])
		buf.WriteString(kind)
		buf.Write(data)
		binary.BigEndian.PutUint32(n[:], crc32.ChecksumIEEE(append([]byte(kind), data...)))
		buf.Write(n[:])
	}
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], uint32(s.w))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(s.h))
	ihdr[8], ihdr[9], ihdr[12] = 8, s.colorType, s.interlace
	if s.depth != 0 {
		ihdr[8] = s.depth
	}
	chunk("IHDR", ihdr)
	if s.extra {
		chunk("gAMA", []byte{0, 0, 0xb1, 0x8f})
		chunk("tEXt", []byte("Comment\x00a page"))
	}
	if s.palette > 0 {
		plte := make([]byte, 3*s.palette)
		for i := range plte {
			plte[i] = byte(rng.IntN(256))
		}
		chunk("PLTE", plte)
	}
	if s.trns != nil {
		chunk("tRNS", s.trns)
	}
	data := z.Bytes()
	for first := true; first || len(data) > 0; first = false {
		n := len(data)
		if s.idatSize > 0 {
			n = min(n, 1+rng.IntN(2*s.idatSize))
			if s.extra && rng.IntN(4) == 0 {
				chunk("IDAT", nil) // an empty IDAT inside the run
			}
		}
		chunk("IDAT", data[:n])
		data = data[n:]
	}
	if s.extra {
		chunk("tEXt", []byte("Author\x00tfc"))
	}
	chunk("IEND", nil)
	return buf.Bytes()
}

// randomPixels are rows a real page gives a PNG encoder: runs of one value, edges, noise.
func randomPixels(n int, rng *rand.Rand) []byte {
	pix := make([]byte, n)
	for i := 0; i < n; {
		run := 1 + rng.IntN(40)
		v := byte(rng.IntN(256))
		noisy := rng.IntN(3) == 0
		for j := 0; j < run && i < n; j, i = j+1, i+1 {
			pix[i] = v
			if noisy {
				pix[i] = byte(rng.IntN(256))
			}
		}
	}
	return pix
}

// libraryPNG is what Decode gave before the fast path: image/png, then the conversion to RGB.
func libraryPNG(t testing.TB, data []byte) *RGB {
	t.Helper()
	img, err := decodeLibrary(PNG, data)
	if err != nil {
		t.Fatalf("image/png: %v", err)
	}
	return img
}

func sameRGB(a, b *RGB) bool {
	return a.Width == b.Width && a.Height == b.Height && bytes.Equal(a.Pix, b.Pix)
}

// TestPNGFastMatchesImagePNG: every kind the fast path reads, under every filter, compression
// level and chunk layout, decodes to image/png's pixels.
func TestPNGFastMatchesImagePNG(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := [][2]int{{1, 1}, {2, 3}, {3, 1}, {1, 9}, {7, 5}, {33, 17}, {257, 3}, {640, 40}}
	for _, ct := range []byte{ctGrey, ctGreyAlpha, ctRGB, ctPalette, ctRGBA} {
		for _, size := range sizes {
			for filter := -1; filter <= 4; filter++ {
				s := pngSpec{w: size[0], h: size[1], colorType: ct, filter: filter, level: rng.IntN(10)}
				if rng.IntN(2) == 0 {
					s.idatSize = 1 + rng.IntN(64)
				}
				s.extra = rng.IntN(2) == 0
				bpp := map[byte]int{ctGrey: 1, ctPalette: 1, ctGreyAlpha: 2, ctRGB: 3, ctRGBA: 4}[ct]
				pix := randomPixels(s.w*s.h*bpp, rng)
				if ct == ctPalette {
					s.palette = 1 + rng.IntN(256) // indices past the palette are black
				}
				name := fmt.Sprintf("type%d_%dx%d_filter%d", ct, s.w, s.h, filter)
				data := writePNG(s, pix, rng)
				got := decodePNGFast(data)
				if got == nil {
					t.Fatalf("%s: the fast path declined a file it reads", name)
				}
				if want := libraryPNG(t, data); !sameRGB(got, want) {
					t.Fatalf("%s: pixels differ from image/png's", name)
				}
			}
		}
	}
}

// TestPNGFastTestdata: the test images it reads decode as image/png decodes them; the others
// (16-bit, tRNS, low bit depths) are left to image/png.
func TestPNGFastTestdata(t *testing.T) {
	names, _ := filepath.Glob(filepath.Join(testdataDir, "*.png"))
	taken := 0
	for _, n := range names {
		data, _ := os.ReadFile(n)
		if cfg, err := decodeConfig(PNG, data); err != nil || cfg.Width*cfg.Height > 1<<24 {
			continue // Decode stops these before any pixel
		}
		got := decodePNGFastSafe(data)
		want, err := decodeLibrary(PNG, data)
		if got == nil {
			continue
		}
		taken++
		if err != nil {
			t.Errorf("%s: the fast path decoded a file image/png rejects (%v)", filepath.Base(n), err)
		} else if !sameRGB(got, want) {
			t.Errorf("%s: pixels differ from image/png's", filepath.Base(n))
		}
	}
	if taken < 14 {
		t.Errorf("the fast path read %d of %d test PNGs, want at least 14", taken, len(names))
	}
}

// TestPNGFastDeclines: files with what the fast path lacks, and damaged files, go to image/png,
// and Decode answers for them exactly as image/png's path does.
func TestPNGFastDeclines(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pix := randomPixels(20*10*3, rng)
	good := writePNG(pngSpec{w: 20, h: 10, colorType: ctRGB, filter: -1, level: 6, idatSize: 40}, pix, rng)
	if decodePNGFast(good) == nil {
		t.Fatal("the fast path declined the well-formed file")
	}
	// Byte offsets: the IHDR chunk is bytes 8-32, the first IDAT's data starts at 41.
	mutate := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	cases := map[string][]byte{
		"tRNS":          writePNG(pngSpec{w: 20, h: 10, colorType: ctRGB, level: 6, trns: []byte{0, 1, 0, 2, 0, 3}}, pix, rng),
		"interlaced":    writePNG(pngSpec{w: 20, h: 10, colorType: ctRGB, level: 6, interlace: 1}, pix, rng),
		"16-bit":        writePNG(pngSpec{w: 10, h: 10, colorType: ctRGB, depth: 16, level: 6}, pix, rng),
		"palette, none": writePNG(pngSpec{w: 20, h: 30, colorType: ctPalette, level: 6}, pix, rng),
		"filter 5":      writePNG(pngSpec{w: 20, h: 10, colorType: ctRGB, filter: 5, level: 6}, pix, rng),
		"bad CRC":       mutate(func(b []byte) []byte { b[45]++; return b }),
		"bad IHDR CRC":  mutate(func(b []byte) []byte { b[29]++; return b }),
		"truncated":     good[:len(good)-20],
		"no IEND":       good[:len(good)-12],
		"after IEND":    append(bytes.Clone(good), "trailing bytes"...),
		"chunk first":   append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x00abCd\xa0\x5c\x07\x4b"), good[8:]...),
		"bad adler":     corruptAdler(good),
		"extra data":    withZlib(good, func(z []byte) []byte { return append(z[:len(z)-4:len(z)-4], 0, 0, 0, 0, 0) }),
		"short data":    withZlib(good, func(z []byte) []byte { return z[:len(z)/2] }),
		"zlib dict flag": withZlib(good, func(z []byte) []byte {
			z[1] = z[1]&0xe0 | 0x20
			z[1] |= byte((31 - (uint(z[0])<<8|uint(z[1]))%31) % 31)
			return z
		}),
	}
	for name, data := range cases {
		got := decodePNGFastSafe(data)
		want, err := decodeLibrary(PNG, data)
		switch {
		case got != nil && err != nil:
			t.Errorf("%s: the fast path decoded a file image/png rejects (%v)", name, err)
		case got != nil && !sameRGB(got, want):
			t.Errorf("%s: pixels differ from image/png's", name)
		}
		if got != nil && name != "after IEND" {
			t.Errorf("%s: the fast path read it; it should leave it to image/png", name)
		}
	}
}

// corruptAdler changes the zlib stream's checksum (its last four bytes) and the chunk's CRC with it.
func corruptAdler(data []byte) []byte {
	return withZlib(data, func(z []byte) []byte { z[len(z)-1]++; return z })
}

// withZlib rewrites data with its IDAT chunks joined into one holding f of the zlib stream.
func withZlib(data []byte, f func(z []byte) []byte) []byte {
	var z []byte
	var before, after [][]byte
	p := data[8:]
	seen := false
	for len(p) >= 12 {
		n := binary.BigEndian.Uint32(p)
		c := p[:12+n]
		switch {
		case string(p[4:8]) == "IDAT":
			z = append(z, p[8:8+n]...)
			seen = true
		case seen:
			after = append(after, c)
		default:
			before = append(before, c)
		}
		p = p[12+n:]
	}
	z = f(z)
	var buf bytes.Buffer
	buf.Write(data[:8])
	for _, c := range before {
		buf.Write(c)
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(z)))
	buf.Write(n[:])
	buf.WriteString("IDAT")
	buf.Write(z)
	binary.BigEndian.PutUint32(n[:], crc32.ChecksumIEEE(append([]byte("IDAT"), z...)))
	buf.Write(n[:])
	for _, c := range after {
		buf.Write(c)
	}
	return buf.Bytes()
}

func TestAdler32(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 7, 15, 16, 17, 31, 100, 5552, 5553, 65535, 65536, 65537, 200000, 1 << 20} {
		p := make([]byte, n)
		for i := range p {
			p[i] = 255 // the largest sums
			if n%2 == 1 {
				p[i] = byte(rng.IntN(256))
			}
		}
		if got, want := adler32Update(1, p), adler32.Checksum(p); got != want {
			t.Errorf("%d bytes: %08x, want %08x", n, got, want)
		}
		cut := n / 3
		if got, want := adler32Update(adler32Update(1, p[:cut]), p[cut:]), adler32.Checksum(p); got != want {
			t.Errorf("%d bytes in two calls: %08x, want %08x", n, got, want)
		}
	}
}

// FuzzPNGFast: whatever the fast path decodes, image/png decodes to the same pixels.
func FuzzPNGFast(f *testing.F) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, ct := range []byte{ctGrey, ctGreyAlpha, ctRGB, ctPalette, ctRGBA} {
		s := pngSpec{w: 9, h: 7, colorType: ct, filter: -1, level: 6, idatSize: 30, extra: true}
		if ct == ctPalette {
			s.palette = 20
		}
		f.Add(writePNG(s, randomPixels(9*7*4, rng), rng))
	}
	names, _ := filepath.Glob(filepath.Join(testdataDir, "*.png"))
	for _, n := range names {
		if info, err := os.Stat(n); err == nil && info.Size() < 32<<10 && !strings.Contains(n, "huge") {
			data, _ := os.ReadFile(n)
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := decodeConfig(PNG, data)
		if err != nil || int64(cfg.Width)*int64(cfg.Height) > 1<<20 {
			return // Decode stops these before any pixel
		}
		got := decodePNGFastSafe(data)
		if got == nil {
			return
		}
		want, err := decodeLibrary(PNG, data)
		if err != nil {
			t.Fatalf("the fast path decoded a file image/png rejects (%v)", err)
		}
		if !sameRGB(got, want) {
			t.Fatal("pixels differ from image/png's")
		}
	})
}
