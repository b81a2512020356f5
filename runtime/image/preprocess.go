package image

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
)

// Patches is one image ready for the vision tower.
type Patches struct {
	Pixels  []float32 // pixel_values, Rows x Cols, in the processor's patch order
	GridTHW [3]int    // image_grid_thw: temporal, height and width in patches
	Rows    int       // GridTHW[0]*GridTHW[1]*GridTHW[2]
	Cols    int       // 3 * temporal_patch_size * patch_size * patch_size
	Hash    string    // the decoded pixels' identity (RGB.Hash)
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

// Preprocess resizes, rescales, normalises and patchifies img as transformers' image processor of
// cfg.Rule does: Qwen2-VL's and GLM-4V's differ only in the output size; Pixtral's cuts patches in
// raster order (MergeSize 1).
func Preprocess(img *RGB, cfg Config) (*Patches, error) {
	if err := cfg.validate("image config"); err != nil {
		return nil, err
	}
	h, w := img.Height, img.Width
	if cfg.DoResize {
		var err error
		switch cfg.Rule {
		case RulePixtral:
			h, w, err = PixtralSize(img.Height, img.Width, cfg.LongestEdge, cfg.PatchSize)
		case RuleGLM4V:
			h, w, err = GLM4VSize(img.Height, img.Width, cfg.Factor(), cfg.TemporalPatchSize, cfg.MinPixels, cfg.MaxPixels)
		default: // RuleQwen2VL; validate refuses any other
			h, w, err = SmartResize(img.Height, img.Width, cfg.Factor(), cfg.MinPixels, cfg.MaxPixels)
		}
		if err != nil {
			return nil, err
		}
	}
	p, m := cfg.PatchSize, cfg.MergeSize
	if h%(p*m) != 0 || w%(p*m) != 0 {
		return nil, fmt.Errorf("image is %dx%d, not a multiple of patch_size*merge_size=%d; enable do_resize", w, h, p*m)
	}
	// The hash overlaps the resize.
	hash := make(chan string, 1)
	go func() { hash <- img.Hash() }()
	var hor, ver *taps
	if w != img.Width {
		hor = computeTaps(img.Width, w)
	}
	if h != img.Height {
		ver = computeTaps(img.Height, h)
	}
	r := newResampler(img, hor, ver)
	gh, gw := h/p, w/p
	out := &Patches{
		GridTHW: [3]int{1, gh, gw},
		Rows:    gh * gw,
		Cols:    cfg.PatchDim(),
		Pixels:  newPixels(gh * gw * cfg.PatchDim()),
	}
	pt := newPatcher(cfg, gw)
	// Each strip of merge*patch resized rows fills the patches of one row of merged blocks.
	stripRows := p * m
	rowLen := w * 3
	parallelRows(gh/m, func(b0, b1 int) {
		if hor == nil && ver == nil {
			for bh := b0; bh < b1; bh++ {
				pt.putStrip(out.Pixels, bh, img.Pix[bh*stripRows*rowLen:(bh+1)*stripRows*rowLen], rowLen)
			}
			return
		}
		var work resampleWork
		defer work.release()
		strip := getBuffer(stripRows * rowLen)
		defer rowBuffers.Put(strip)
		for bh := b0; bh < b1; bh++ {
			for row := range stripRows {
				copy((*strip)[row*rowLen:(row+1)*rowLen], r.row(&work, bh*stripRows+row))
			}
			pt.putStrip(out.Pixels, bh, *strip, rowLen)
		}
	})
	out.Hash = <-hash
	return out, nil
}

// patcher writes resized RGB rows into pixel_values, whose row order is (block row, block col, row in
// block, col in block) and column order (channel, frame, y, x).
type patcher struct {
	lut               [3][256]float32
	p, m, tp, blocksW int
	cols              int
}

func newPatcher(cfg Config, gw int) *patcher {
	return &patcher{lut: valueTable(cfg), p: cfg.PatchSize, m: cfg.MergeSize, tp: cfg.TemporalPatchSize, blocksW: gw / cfg.MergeSize, cols: cfg.PatchDim()}
}

// putStrip writes the patches of block row bh from strip, its merge*patch resized rows of rowLen bytes.
func (pt *patcher) putStrip(dst []float32, bh int, strip []uint8, rowLen int) {
	p, m, tp := pt.p, pt.m, pt.tp
	pp := p * p
	for bw := 0; bw < pt.blocksW; bw++ {
		for mh := 0; mh < m; mh++ {
			for mw := 0; mw < m; mw++ {
				patch := ((bh*pt.blocksW+bw)*m+mh)*m + mw
				d := dst[patch*pt.cols : (patch+1)*pt.cols]
				x0 := (bw*m + mw) * p * 3
				for c := 0; c < 3; c++ {
					lut := &pt.lut[c]
					frame := d[c*tp*pp : (c*tp+1)*pp]
					for py := 0; py < p; py++ {
						s := strip[(mh*p+py)*rowLen+x0+c:]
						line := frame[py*p : py*p+p]
						if p == 14 {
							lut14((*[14]float32)(line), lut, (*[40]uint8)(s))
							continue
						}
						if tp == 2 {
							next := d[(c*tp+1)*pp+py*p:][:len(line)]
							j := 0
							for k := range line {
								v := lut[s[j]]
								line[k], next[k] = v, v
								j += 3
							}
							continue
						}
						j := 0
						for k := range line {
							line[k] = lut[s[j]]
							j += 3
						}
					}
					for t := 1; t < tp && (tp != 2 || p == 14); t++ { // the other frames repeat the first
						copy(d[(c*tp+t)*pp:(c*tp+t+1)*pp], frame)
					}
				}
			}
		}
	}
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

// lut14 maps every third byte of s, one channel of 14 RGB pixels, through lut into d.
func lut14(d *[14]float32, lut *[256]float32, s *[40]uint8) {
	d[0], d[1], d[2], d[3], d[4], d[5], d[6] = lut[s[0]], lut[s[3]], lut[s[6]], lut[s[9]], lut[s[12]], lut[s[15]], lut[s[18]]
	d[7], d[8], d[9], d[10], d[11], d[12], d[13] = lut[s[21]], lut[s[24]], lut[s[27]], lut[s[30]], lut[s[33]], lut[s[36]], lut[s[39]]
}
