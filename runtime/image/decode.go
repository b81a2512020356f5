package image

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	stdimage "image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/image/webp"
)

// RGB is a decoded image as 8-bit RGB, row-major, 3 bytes a pixel.
type RGB struct {
	Width, Height int
	Pix           []uint8
}

// hashChunk is the bytes of pixels each leaf of Hash's tree covers.
const hashChunk = 1 << 16

// Hash is the image's identity in the prompt and vision caches: the sha256 (hex) of its size and
// of the sha256 of each 64 KiB of its pixels in order, the leaves taken in parallel (a page's
// 4 MB would take a core 2 ms, longer than its resize).
func (m *RGB) Hash() string {
	leaves := make([][sha256.Size]byte, (len(m.Pix)+hashChunk-1)/hashChunk)
	parallelRows(len(leaves), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			leaves[i] = sha256.Sum256(m.Pix[i*hashChunk : min((i+1)*hashChunk, len(m.Pix))])
		}
	})
	h := sha256.New()
	var dims [8]byte
	binary.LittleEndian.PutUint32(dims[0:], uint32(m.Width))
	binary.LittleEndian.PutUint32(dims[4:], uint32(m.Height))
	h.Write(dims[:])
	for _, l := range leaves {
		h.Write(l[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Limits bound what Decode accepts; both are checked before any pixel is decoded.
type Limits struct {
	MaxBytes  int // size of the encoded file
	MaxPixels int // width x height read from the header
}

// DefaultLimits accepts what a server should: 64 MiB files and PIL's default pixel cap.
func DefaultLimits() Limits { return Limits{MaxBytes: 64 << 20, MaxPixels: 89478485} }

// Format names an encoded image format.
type Format string

const (
	PNG  Format = "PNG"
	JPEG Format = "JPEG"
	WebP Format = "WebP"
)

// Sniff reports the format from the file's magic bytes, or "" when it is none of PNG, JPEG or WebP.
func Sniff(data []byte) Format {
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		return PNG
	case bytes.HasPrefix(data, []byte{0xff, 0xd8, 0xff}):
		return JPEG
	case len(data) >= 12 && string(data[0:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		return WebP
	}
	return ""
}

// Decode decodes image number index (used in errors) to RGB as PIL's Image.open(...).convert("RGB") does.
func Decode(index int, data []byte, limits Limits) (*RGB, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("image %d is empty; send the image's bytes", index)
	}
	if limits.MaxBytes > 0 && len(data) > limits.MaxBytes {
		return nil, fmt.Errorf("image %d is %d bytes, over the %d-byte limit; send a smaller file", index, len(data), limits.MaxBytes)
	}
	format := Sniff(data)
	if format == "" {
		return nil, fmt.Errorf("image %d is not PNG, JPEG or WebP; send one of those", index)
	}
	cfg, err := decodeConfig(format, data)
	if err != nil {
		return nil, decodeError(index, format, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return nil, fmt.Errorf("image %d has size %dx%d; send an image with pixels", index, cfg.Width, cfg.Height)
	}
	if limits.MaxPixels > 0 && int64(cfg.Width)*int64(cfg.Height) > int64(limits.MaxPixels) {
		return nil, fmt.Errorf("image %d is %dx%d, over the %d-pixel limit; send a smaller image", index, cfg.Width, cfg.Height, limits.MaxPixels)
	}
	if format == PNG {
		if img := decodePNGFastSafe(data); img != nil && img.Width == cfg.Width && img.Height == cfg.Height {
			return img, nil
		}
	}
	img, err := decodeLibrary(format, data)
	if err != nil {
		return nil, decodeError(index, format, err)
	}
	if img.Width != cfg.Width || img.Height != cfg.Height {
		return nil, fmt.Errorf("image %d could not be decoded: %s header says %dx%d but the data is %dx%d; send a valid file", index, format, cfg.Width, cfg.Height, img.Width, img.Height)
	}
	return img, nil
}

// decodeLibrary decodes with the standard library's decoders (and x/image's WebP) and converts to RGB.
func decodeLibrary(format Format, data []byte) (*RGB, error) {
	img, err := decodePixels(format, data)
	if err != nil {
		return nil, err
	}
	if format == PNG && len(data) > 25 && data[24] == 16 && data[25] == 0 {
		if m, ok := img.(*stdimage.NRGBA64); ok {
			return grey16KeyedToRGB(m), nil
		}
	}
	return toRGB(img, format), nil
}

// FromRGBA is an opaque image as RGB: the pixels Decode gives for its PNG encoding, without the
// encoding (a rendered PDF page).
func FromRGBA(m *stdimage.RGBA) (*RGB, error) {
	if !m.Opaque() {
		return nil, fmt.Errorf("image: FromRGBA needs an opaque image")
	}
	return toRGB(m, PNG), nil
}

// grey16KeyedToRGB handles 16-bit grey PNG with a tRNS key, which Go widens to NRGBA64 but PIL opens as
// mode I;16, whose conversion to RGB clips at 255.
func grey16KeyedToRGB(m *stdimage.NRGBA64) *RGB {
	w, h := m.Rect.Dx(), m.Rect.Dy()
	out := &RGB{Width: w, Height: h, Pix: make([]uint8, w*h*3)}
	for y := 0; y < h; y++ {
		src := m.Pix[y*m.Stride:]
		dst := out.Pix[y*w*3:]
		for x := 0; x < w; x++ {
			v := src[8*x+1]
			if src[8*x] != 0 {
				v = 255
			}
			dst[3*x], dst[3*x+1], dst[3*x+2] = v, v, v
		}
	}
	return out
}

func decodeConfig(format Format, data []byte) (stdimage.Config, error) {
	r := bytes.NewReader(data)
	switch format {
	case PNG:
		return png.DecodeConfig(r)
	case JPEG:
		return jpeg.DecodeConfig(r)
	default:
		return webp.DecodeConfig(r)
	}
}

func decodePixels(format Format, data []byte) (img stdimage.Image, err error) {
	defer func() {
		if p := recover(); p != nil {
			img, err = nil, fmt.Errorf("decoder failed: %v", p)
		}
	}()
	r := bytes.NewReader(data)
	switch format {
	case PNG:
		return png.Decode(r)
	case JPEG:
		return jpeg.Decode(r)
	default:
		return webp.Decode(r)
	}
}

// decodePNGFastSafe is decodePNGFast with a panic (an allocation too large) taken as "not here".
func decodePNGFastSafe(data []byte) (img *RGB) {
	defer func() {
		if recover() != nil {
			img = nil
		}
	}()
	return decodePNGFast(data)
}

func decodeError(index int, format Format, err error) error {
	if truncated(err) {
		return fmt.Errorf("image %d could not be decoded: truncated %s; send the complete file", index, format)
	}
	return fmt.Errorf("image %d could not be decoded: invalid %s (%v); send a valid %s file", index, format, err, format)
}

// truncated reports whether a decoder failed because its input ended early.
func truncated(err error) bool {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "not enough pixel data") || strings.Contains(msg, "short Huffman data")
}

// toRGB converts a decoded image to RGB the way PIL's convert("RGB") treats the same file: alpha is
// dropped without compositing, 16-bit colour keeps the high byte, 16-bit grey clips at 255, and YCbCr
// goes through the chroma upsampling and colour tables of the library PIL decodes that format with.
func toRGB(img stdimage.Image, format Format) *RGB {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	out := &RGB{Width: w, Height: h, Pix: make([]uint8, w*h*3)}
	var row func(y int, dst []uint8)
	switch m := img.(type) {
	case *stdimage.Gray:
		row = func(y int, dst []uint8) {
			src := m.Pix[(y)*m.Stride:]
			for x := 0; x < w; x++ {
				v := src[x]
				dst[3*x], dst[3*x+1], dst[3*x+2] = v, v, v
			}
		}
	case *stdimage.Gray16:
		row = func(y int, dst []uint8) {
			src := m.Pix[y*m.Stride:]
			for x := 0; x < w; x++ {
				v := src[2*x+1]
				if src[2*x] != 0 {
					v = 255
				}
				dst[3*x], dst[3*x+1], dst[3*x+2] = v, v, v
			}
		}
	case *stdimage.RGBA:
		row = func(y int, dst []uint8) { copy4to3(dst, m.Pix[y*m.Stride:], w) }
	case *stdimage.NRGBA:
		row = func(y int, dst []uint8) { copy4to3(dst, m.Pix[y*m.Stride:], w) }
	case *stdimage.RGBA64:
		row = func(y int, dst []uint8) { copyHigh(dst, m.Pix[y*m.Stride:], w) }
	case *stdimage.NRGBA64:
		row = func(y int, dst []uint8) { copyHigh(dst, m.Pix[y*m.Stride:], w) }
	case *stdimage.Paletted:
		var lut [256][3]uint8
		for i, c := range m.Palette {
			lut[i] = paletteRGB(c)
		}
		row = func(y int, dst []uint8) {
			src := m.Pix[y*m.Stride:]
			for x := 0; x < w; x++ {
				p := lut[src[x]]
				dst[3*x], dst[3*x+1], dst[3*x+2] = p[0], p[1], p[2]
			}
		}
	case *stdimage.YCbCr:
		row = ycbcrRows(m, format)
	case *stdimage.NYCbCrA:
		row = ycbcrRows(&m.YCbCr, format)
	default:
		row = func(y int, dst []uint8) {
			for x := 0; x < w; x++ {
				c := color.NRGBAModel.Convert(img.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
				dst[3*x], dst[3*x+1], dst[3*x+2] = c.R, c.G, c.B
			}
		}
	}
	parallelRows(h, func(y0, y1 int) {
		for y := y0; y < y1; y++ {
			row(y, out.Pix[y*w*3:(y+1)*w*3])
		}
	})
	return out
}

func copy4to3(dst, src []uint8, w int) {
	for x := 0; x < w; x++ {
		dst[3*x], dst[3*x+1], dst[3*x+2] = src[4*x], src[4*x+1], src[4*x+2]
	}
}

func copyHigh(dst, src []uint8, w int) {
	for x := 0; x < w; x++ {
		dst[3*x], dst[3*x+1], dst[3*x+2] = src[8*x], src[8*x+2], src[8*x+4]
	}
}

func paletteRGB(c color.Color) [3]uint8 {
	switch p := c.(type) {
	case color.NRGBA:
		return [3]uint8{p.R, p.G, p.B}
	case color.RGBA:
		if p.A == 255 {
			return [3]uint8{p.R, p.G, p.B}
		}
	}
	n := color.NRGBAModel.Convert(c).(color.NRGBA)
	return [3]uint8{n.R, n.G, n.B}
}

func ycbcrRows(m *stdimage.YCbCr, format Format) func(y int, dst []uint8) {
	if format == WebP {
		return webpRows(m)
	}
	return jpegRows(m)
}

// parallelRows runs fn over [0,n) split into contiguous chunks, one goroutine per core.
func parallelRows(n int, fn func(lo, hi int)) {
	workers := runtime.GOMAXPROCS(0)
	if workers > n {
		workers = n
	}
	if workers <= 1 || n < 16 {
		fn(0, n)
		return
	}
	chunk := (n + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(lo, hi)
		}()
	}
	wg.Wait()
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
