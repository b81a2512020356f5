package image

import (
	"fmt"
	stdimage "image"
	"path/filepath"
	"testing"
)

// familyConfigs are the published processor settings of each served family, read from testdata.
var familyConfigs = []struct{ name, dir string }{
	{"qwen2_vl", testdataDir}, // Qwen2-VL-7B-Instruct: max_pixels 12845056, two frames
	{"dots_ocr", filepath.Join("..", "..", "testdata", "dots-ocr-tiny")}, // dots.ocr: max_pixels 11289600, one frame
}

func familyConfig(b testing.TB, dir string) Config {
	b.Helper()
	cfg, err := LoadConfig(dir)
	if err != nil {
		b.Fatal(err)
	}
	return cfg
}

// benchPage is a 1000x1400 document page decoded from PNG.
func benchPage(b testing.TB) *RGB {
	b.Helper()
	img, err := Decode(0, encodePNG(page(1000, 1400)), DefaultLimits())
	if err != nil {
		b.Fatal(err)
	}
	return img
}

// BenchmarkPreprocess is a 1000x1400 page through each family's processor, and through Qwen2-VL's
// default max_pixels (1003520), which resizes both sides down.
func BenchmarkPreprocess(b *testing.B) {
	img := benchPage(b)
	run := func(name string, cfg Config) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, err := Preprocess(img, cfg)
				if err != nil {
					b.Fatal(err)
				}
				Release(p.Pixels) // as the server does when a request ends
			}
		})
	}
	for _, f := range familyConfigs {
		run(f.name, familyConfig(b, f.dir))
	}
	run("qwen2_vl_default", DefaultConfig())
}

// pageFiles are a 1000x1400 page as a request sends it: the clean page and the scanned one as PNG
// and as JPEG (quality 90).
func pageFiles() []struct {
	name string
	data []byte
} {
	clean, grain := page(1000, 1400), scan(1000, 1400)
	return []struct {
		name string
		data []byte
	}{
		{"png", encodePNG(clean)}, {"scan_png", encodePNG(grain)},
		{"jpeg", encodeJPEG(clean, 90)}, {"scan_jpeg", encodeJPEG(grain, 90)},
	}
}

// BenchmarkDecode decodes each of pageFiles.
func BenchmarkDecode(b *testing.B) {
	for _, f := range pageFiles() {
		b.Run(f.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(f.data)))
			for b.Loop() {
				if _, err := Decode(0, f.data, DefaultLimits()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPagePath is what a request pays for a page: decode, then dots.ocr's preprocessing.
func BenchmarkPagePath(b *testing.B) {
	cfg := familyConfig(b, familyConfigs[1].dir)
	for _, f := range pageFiles() {
		b.Run(f.name, func(b *testing.B) {
			for b.Loop() {
				img, err := Decode(0, f.data, DefaultLimits())
				if err != nil {
					b.Fatal(err)
				}
				p, err := Preprocess(img, cfg)
				if err != nil {
					b.Fatal(err)
				}
				Release(p.Pixels)
			}
		})
	}
}

// BenchmarkHorizontalRow is the horizontal pass alone on one goroutine, over the rows of the clean
// 1000x1400 page and of the scanned one: 1000 to 1008 columns (dots.ocr's size for the page) and
// 1000 to 720 (a downscale).
func BenchmarkHorizontalRow(b *testing.B) {
	for _, pg := range []struct {
		name string
		img  *stdimage.RGBA
	}{{"page", page(1000, 1400)}, {"scan", scan(1000, 1400)}} {
		img, err := FromRGBA(pg.img)
		if err != nil {
			b.Fatal(err)
		}
		for _, outW := range []int{1008, 720} {
			t := computeTaps(img.Width, outW)
			dst := make([]uint8, outW*3)
			b.Run(fmt.Sprintf("%s/%d", pg.name, outW), func(b *testing.B) {
				b.SetBytes(int64(len(img.Pix)))
				for b.Loop() {
					for y := range img.Height {
						horizontalRow(dst, img.Pix[y*img.Width*3:(y+1)*img.Width*3], t)
					}
				}
			})
		}
	}
}
