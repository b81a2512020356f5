package image

import (
	"math/rand/v2"
	"testing"
)

// GLM-4V's default size bounds, in pixels.
const glmMin, glmMax = 112 * 112, 28 * 28 * 15000

// TestGLM4VSize checks GLM-4V's rule (factor 28, temporal 2, the default bounds) against sizes
// worked by hand from transformers' smart_resize, and against SmartResize where the two differ.
func TestGLM4VSize(t *testing.T) {
	for _, c := range []struct {
		name               string
		h, w, wantH, wantW int
		smartH, smartW     int // SmartResize of the same inputs
	}{
		// 20 < 28: scale max(28/20, 28/50) = 1.4 gives 28x70; 2*28*round-even(2.5)*28 = 2*28*56 =
		// 3136 < 12544, so beta = sqrt(12544/(2*28*70)) = sqrt(3.2) = 1.789: ceil(1.789)*28,
		// ceil(4.472)*28. SmartResize keeps 20x50: beta = sqrt(12544/1000) = 3.542, ceil(2.53), ceil(6.32).
		{"scaled up", 20, 50, 56, 140, 84, 196},
		// scale 2.8: 175*2.8 is 489.99999999999994 in float64, truncated to 489; round(489/28 =
		// 17.46) = 17. An exact 490 would be 17.5, rounded to even 18 (504). SmartResize reaches
		// 28x476 through its min_pixels branch: beta = sqrt(12544/1750) = 2.677, ceil(0.96), ceil(16.7).
		{"scale truncates", 10, 175, 28, 476, 28, 476},
		// 1988x2996 by rounding, 2*1988*2996 = 11912096 > 11760000: beta = sqrt(2*2000*3000/11760000)
		// = 1.0102, floor(70.71)*28, floor(106.07)*28. SmartResize's 1988*2996 = 5956048 fits.
		{"over max_pixels", 2000, 3000, 1960, 2968, 1988, 2996},
		// 28x56 by rounding, 2*28*56 = 3136 < 12544: beta = sqrt(12544/(2*40*60)) = 1.6166,
		// ceil(2.309)*28, ceil(3.464)*28. SmartResize: beta = sqrt(12544/2400) = 2.286, ceil(3.27), ceil(4.90).
		{"under min_pixels", 40, 60, 84, 112, 112, 140},
		// round-even(2.5) = 2 and round-even(4.5) = 4: 2*56*112 = 12544, not under the minimum.
		// SmartResize's 56*112 = 6272 is: beta = sqrt(12544/8820) = 1.1926, ceil(2.98), ceil(5.37).
		{"in range at min", 70, 126, 56, 112, 84, 168},
		// round(35.71) = 36, round(25) = 25: 2*1008*700 = 1411200 in range; as SmartResize
		{"in range", 1000, 700, 1008, 700, 1008, 700},
	} {
		h, w, err := GLM4VSize(c.h, c.w, 28, 2, glmMin, glmMax)
		if err != nil || h != c.wantH || w != c.wantW {
			t.Errorf("%s: GLM4VSize(%d, %d) = %d, %d, %v; want %d, %d", c.name, c.h, c.w, h, w, err, c.wantH, c.wantW)
		}
		h, w, err = SmartResize(c.h, c.w, 28, glmMin, glmMax)
		if err != nil || h != c.smartH || w != c.smartW {
			t.Errorf("%s: SmartResize(%d, %d) = %d, %d, %v; want %d, %d", c.name, c.h, c.w, h, w, err, c.smartH, c.smartW)
		}
	}
	// with one frame the area bound is SmartResize's
	if h, w, err := GLM4VSize(2000, 3000, 28, 1, glmMin, glmMax); err != nil || h != 1988 || w != 2996 {
		t.Errorf("GLM4VSize(2000, 3000) with temporal 1 = %d, %d, %v; want 1988, 2996", h, w, err)
	}
	for _, c := range []struct {
		name           string
		h, w, temporal int
	}{
		{"aspect ratio 201", 28, 5628, 2},
		{"aspect ratio 210 once scaled up to 28x5880", 10, 2100, 2},
		{"no pixels", 0, 5, 2},
		{"temporal 0", 28, 28, 0},
	} {
		if h, w, err := GLM4VSize(c.h, c.w, 28, c.temporal, glmMin, glmMax); err == nil {
			t.Errorf("%s: GLM4VSize(%d, %d) = %d, %d; want an error", c.name, c.h, c.w, h, w)
		}
	}
}

// glmConfig is a preprocessor_config.json of GLM-4V's form: size in pixels, CLIP's mean and std.
const glmConfig = `{"image_processor_type": "Glm4vImageProcessor", "do_convert_rgb": true, "do_normalize": true,
 "do_rescale": true, "do_resize": true, "image_mean": [0.48145466, 0.4578275, 0.40821073],
 "image_std": [0.26862954, 0.26130258, 0.27577711], "merge_size": 2, "patch_size": 14, "resample": 3,
 "rescale_factor": 0.00392156862745098, "size": {"shortest_edge": 12544, "longest_edge": 9633792},
 "temporal_patch_size": 2}`

func TestGLM4VConfig(t *testing.T) {
	c, err := ParseConfig("g.json", []byte(glmConfig))
	if err != nil {
		t.Fatal(err)
	}
	if c.Rule != RuleGLM4V || c.MinPixels != 12544 || c.MaxPixels != 9633792 || c.PatchSize != 14 || c.MergeSize != 2 || c.TemporalPatchSize != 2 || c.PatchDim() != 1176 {
		t.Errorf("parsed %+v; want glm4v, min/max 12544/9633792, patch 14, merge 2, temporal 2", c)
	}
	// silent: transformers' class defaults, GLM's size rather than Qwen2-VL's
	for _, typ := range []string{"Glm4vImageProcessor", "Glm4vImageProcessorFast", "Glm46VImageProcessor", "GlmOcrImageProcessor"} {
		d, err := ParseConfig("d.json", []byte(`{"image_processor_type": "`+typ+`"}`))
		if err != nil || d.Rule != RuleGLM4V || d.MinPixels != glmMin || d.MaxPixels != glmMax || d.PatchSize != 14 || d.MergeSize != 2 || d.TemporalPatchSize != 2 {
			t.Errorf("%s defaults %+v, %v; want glm4v, min/max %d/%d, patch 14, merge 2, temporal 2", typ, d, err, glmMin, glmMax)
		}
	}
	o, err := ParseConfig("o.json", []byte(`{"image_processor_type": "Glm4vImageProcessor", "size": {"shortest_edge": 100, "longest_edge": 200}, "max_pixels": 5000}`))
	if err != nil || o.MinPixels != 100 || o.MaxPixels != 5000 {
		t.Errorf("max_pixels must override size.longest_edge: %+v %v", o, err)
	}
	if q, err := ParseConfig("q.json", []byte(`{"image_processor_type": "Qwen2VLImageProcessor"}`)); err != nil || q.Rule != RuleQwen2VL || q.MaxPixels != 28*28*1280 {
		t.Errorf("a Qwen2-VL config reads as %+v, %v", q, err)
	}
}

// TestGLM4VPreprocess: a 50x20 picture gets GLM-4V's size (140x56, a 10x4 grid), and its patches
// are the resampler's output cut as Qwen2-VL's processor cuts them.
func TestGLM4VPreprocess(t *testing.T) {
	cfg, err := ParseConfig("g.json", []byte(glmConfig))
	if err != nil {
		t.Fatal(err)
	}
	img := randomImage(rand.New(rand.NewPCG(5, 6)), 50, 20)
	got, err := Preprocess(img, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got.GridTHW != [3]int{1, 4, 10} || got.Rows != 40 || got.Cols != 1176 {
		t.Fatalf("grid %v, %d x %d; want [1 4 10], 40 x 1176", got.GridTHW, got.Rows, got.Cols)
	}
	qwen := cfg
	qwen.Rule, qwen.DoResize = RuleQwen2VL, false
	want, err := Preprocess(Resize(img, 140, 56), qwen)
	if err != nil {
		t.Fatal(err)
	}
	if got.Sha256() != want.Sha256() {
		t.Error("Preprocess differs from Resize then cutting as Qwen2-VL without resizing")
	}
}
