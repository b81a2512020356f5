package image

import (
	"bytes"
	stdimage "image"
	"image/png"
	"math/rand/v2"
	"testing"
)

// TestFromRGBAIsItsPNG: an opaque RGBA image gives the pixels Decode gives for its PNG encoding
// (what a chat request carrying the page as a PNG reads); a translucent one is refused.
func TestFromRGBAIsItsPNG(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, size := range [][2]int{{1, 1}, {7, 3}, {100, 141}, {33, 200}} {
		m := stdimage.NewRGBA(stdimage.Rect(0, 0, size[0], size[1]))
		for i := range m.Pix {
			m.Pix[i] = uint8(r.IntN(256))
			if i%4 == 3 {
				m.Pix[i] = 255
			}
		}
		var buf bytes.Buffer
		if err := png.Encode(&buf, m); err != nil {
			t.Fatal(err)
		}
		want, err := Decode(1, buf.Bytes(), DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		got, err := FromRGBA(m)
		if err != nil {
			t.Fatal(err)
		}
		if got.Width != want.Width || got.Height != want.Height || !bytes.Equal(got.Pix, want.Pix) || got.Hash() != want.Hash() {
			t.Errorf("%v: FromRGBA differs from decoding the PNG", size)
		}
		m.Pix[3] = 128
		if _, err := FromRGBA(m); err == nil {
			t.Errorf("%v: a translucent image was taken", size)
		}
	}
}
