package image

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"sync"
)

// scratch holds the horizontally resized images between calls.
var scratch = sync.Pool{New: func() any { return new([]uint8) }}

// Patches is one image ready for the vision tower.
type Patches struct {
	Pixels  []float32 // pixel_values, Rows x Cols, in the processor's patch order
	GridTHW [3]int    // image_grid_thw: temporal, height and width in patches
	Rows    int       // GridTHW[0]*GridTHW[1]*GridTHW[2]
	Cols    int       // 3 * temporal_patch_size * patch_size * patch_size
	Hash    string    // sha256 of the decoded pixels (RGB.Hash)
}

// Sha256 is the hex sha256 of Pixels as float32 little-endian bytes.
func (p *Patches) Sha256() string {
	h := sha256.New()
	buf := make([]byte, 4*4096)
	for i := 0; i < len(p.Pixels); i += 4096 {
		n := min(4096, len(p.Pixels)-i)
		for j := 0; j < n; j++ {
			binary.LittleEndian.PutUint32(buf[4*j:], math.Float32bits(p.Pixels[i+j]))
		}
		h.Write(buf[:4*n])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Preprocess resizes, rescales, normalises and patchifies img as transformers' Qwen2-VL image processor.
func Preprocess(img *RGB, cfg Config) (*Patches, error) {
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
		buf := scratch.Get().(*[]uint8)
		if cap(*buf) < w*img.Height*3 {
			*buf = make([]uint8, w*img.Height*3)
		}
		defer scratch.Put(buf)
		src = resizeHorizontalInto(img, w, *buf)
	}
	var vertical *taps
	if h != img.Height {
		t := computeTaps(img.Height, h)
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
					verticalRow(src, vertical, bh*stripRows+r, strip[r*rowLen:(r+1)*rowLen], acc)
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

// valueTable maps each channel's 8-bit value to its pixel_values float, computed with the float32
// operations of transformers' fused rescale-and-normalise: (x - mean/rescale) / (std/rescale).
func valueTable(cfg Config) [3][256]float32 {
	var lut [3][256]float32
	inv := float32(1 / cfg.RescaleFactor)
	for c := 0; c < 3; c++ {
		mean := float32(float32(cfg.ImageMean[c]) * inv)
		std := float32(float32(cfg.ImageStd[c]) * inv)
		for v := 0; v < 256; v++ {
			x := float32(v)
			switch {
			case cfg.DoRescale && cfg.DoNormalize:
				lut[c][v] = float32(x-mean) / std
			case cfg.DoNormalize:
				lut[c][v] = float32(x-float32(cfg.ImageMean[c])) / float32(cfg.ImageStd[c])
			case cfg.DoRescale:
				lut[c][v] = x * float32(cfg.RescaleFactor)
			default:
				lut[c][v] = x
			}
		}
	}
	return lut
}
