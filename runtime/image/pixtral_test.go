package image

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestPixtralSize checks the Pixtral rule against sizes worked with Python's float division and
// floor, as transformers' get_resize_output_image_size computes them.
func TestPixtralSize(t *testing.T) {
	for _, c := range []struct{ h, w, longest, patch, wantH, wantW int }{
		{84, 56, 112, 14, 84, 56},    // fits, multiples of the patch: unchanged
		{60, 90, 112, 14, 70, 98},    // fits; each side rounds up to the patch
		{150, 170, 112, 14, 98, 112}, // scaled by 170/112, floored, then rounded up
		{1, 1, 1540, 14, 14, 14},     // one pixel is one patch
		{3000, 1000, 1540, 14, 1540, 518},
		{1541, 1541, 1540, 14, 1540, 1540},
		{2200, 1700, 1540, 14, 1540, 1190},
		{1000, 3001, 1540, 14, 518, 1540},
	} {
		h, w, err := PixtralSize(c.h, c.w, c.longest, c.patch)
		if err != nil || h != c.wantH || w != c.wantW {
			t.Errorf("PixtralSize(%d, %d, %d, %d) = %d, %d, %v; want %d, %d", c.h, c.w, c.longest, c.patch, h, w, err, c.wantH, c.wantW)
		}
	}
	if _, _, err := PixtralSize(0, 5, 1540, 14); err == nil {
		t.Error("PixtralSize took an empty image")
	}
}

// pixtralConfig is tools/oracle/lighton_ocr.py's preprocessor_config.json.
const pixtralConfig = `{"image_processor_type": "PixtralImageProcessor", "do_convert_rgb": true, "do_normalize": true,
 "do_rescale": true, "do_resize": true, "image_mean": [0.48145466, 0.4578275, 0.40821073],
 "image_std": [0.26862954, 0.26130258, 0.27577711], "patch_size": {"height": 14, "width": 14},
 "resample": 3, "rescale_factor": 0.00392156862745098, "size": {"longest_edge": 112}}`

func TestPixtralConfig(t *testing.T) {
	c, err := ParseConfig("p.json", []byte(pixtralConfig))
	if err != nil {
		t.Fatal(err)
	}
	if c.Rule != RulePixtral || c.LongestEdge != 112 || c.PatchSize != 14 || c.MergeSize != 1 || c.TemporalPatchSize != 1 || c.PatchDim() != 588 {
		t.Errorf("parsed %+v; want Pixtral, longest edge 112, patch 14, merge 1, temporal 1, 588 values a patch", c)
	}
	d, err := ParseConfig("d.json", []byte(`{"image_processor_type": "PixtralImageProcessor"}`))
	if err != nil || d.LongestEdge != 1024 || d.PatchSize != 16 {
		t.Errorf("defaults %+v, %v; want transformers' longest edge 1024 and patch 16", d, err)
	}
	if _, err := ParseConfig("b.json", []byte(`{"image_processor_type": "PixtralImageProcessor", "patch_size": {"height": 14, "width": 16}}`)); err == nil {
		t.Error("took a non-square patch")
	}
	q, err := ParseConfig("q.json", []byte(`{"patch_size": 14, "merge_size": 2}`))
	if err != nil || q.Rule != RuleQwen2VL {
		t.Errorf("a Qwen2-VL config reads as %+v, %v", q, err)
	}
}

// TestPixtralPatchOrder cuts a 28x42 picture (no resize) into 3x2 patches and checks every value
// against its pixel: patches in raster order, values (channel, y, x). One value is worked by hand:
// 255 in the red channel is (1 - 0.48145466) / 0.26862954.
func TestPixtralPatchOrder(t *testing.T) {
	cfg, err := ParseConfig("p.json", []byte(pixtralConfig))
	if err != nil {
		t.Fatal(err)
	}
	img := randomImage(rand.New(rand.NewPCG(1, 2)), 28, 42)
	img.Pix[0] = 255
	p, err := Preprocess(img, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p.GridTHW != [3]int{1, 3, 2} || p.Rows != 6 || p.Cols != 588 {
		t.Fatalf("grid %v, %d x %d; want [1 3 2], 6 x 588", p.GridTHW, p.Rows, p.Cols)
	}
	if got := float64(p.Pixels[0]); math.Abs(got-1.930336254158794) > 1e-6 {
		t.Errorf("red 255 normalises to %v, want 1.9303362", got)
	}
	lut := valueTable(cfg)
	for r := 0; r < 3; r++ {
		for c := 0; c < 2; c++ {
			row := p.Pixels[(r*2+c)*588:]
			for ch := 0; ch < 3; ch++ {
				for y := 0; y < 14; y++ {
					for x := 0; x < 14; x++ {
						v := img.Pix[((r*14+y)*28+c*14+x)*3+ch]
						if got := row[ch*196+y*14+x]; got != lut[ch][v] {
							t.Fatalf("patch (%d, %d) channel %d at (%d, %d) is %v, want %v", r, c, ch, y, x, got, lut[ch][v])
						}
					}
				}
			}
		}
	}
}

// TestPixtralResize checks that a picture the rule resizes (90x60 to 98x70, an odd 5x7 grid) is
// the resampler's output cut as above.
func TestPixtralResize(t *testing.T) {
	cfg, err := ParseConfig("p.json", []byte(pixtralConfig))
	if err != nil {
		t.Fatal(err)
	}
	img := randomImage(rand.New(rand.NewPCG(3, 4)), 90, 60)
	got, err := Preprocess(img, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got.GridTHW != [3]int{1, 5, 7} {
		t.Fatalf("grid %v, want [1 5 7]", got.GridTHW)
	}
	noResize := cfg
	noResize.DoResize = false
	want, err := Preprocess(Resize(img, 98, 70), noResize)
	if err != nil {
		t.Fatal(err)
	}
	if got.Sha256() != want.Sha256() {
		t.Error("Preprocess differs from Resize then cutting without resizing")
	}
}
