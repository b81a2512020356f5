// Package image turns request images into the pixel_values and image_grid_thw that a vision
// tower reads, bit for bit as transformers' Qwen2-VL, GLM-4V or Pixtral image processor does.
package image

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Rule is an image processor's output-size rule, named as the graph language's image rules are.
type Rule string

const (
	RuleQwen2VL Rule = "qwen2_vl" // Qwen2-VL's smart resize (SmartResize), patches in merge-window order
	RulePixtral Rule = "pixtral"  // Pixtral's longest edge (PixtralSize), patches in raster order
	RuleGLM4V   Rule = "glm4v"    // GLM-4V's smart resize (GLM4VSize), patches as Qwen2-VL's
)

// Processor names the transformers image processor that follows r.
func (r Rule) Processor() string {
	switch r {
	case RuleQwen2VL:
		return "Qwen2-VL's image processor"
	case RulePixtral:
		return "Pixtral's image processor"
	case RuleGLM4V:
		return "GLM-4V's image processor"
	}
	return "an unknown image processor"
}

// Config holds the image processor settings of one checkpoint (its preprocessor_config.json).
type Config struct {
	Rule              Rule // the output-size rule, from image_processor_type
	PatchSize         int
	TemporalPatchSize int
	MergeSize         int
	MinPixels         int
	MaxPixels         int
	DoResize          bool
	DoRescale         bool
	DoNormalize       bool
	RescaleFactor     float64
	ImageMean         [3]float64
	ImageStd          [3]float64
	// LongestEdge is Pixtral's bound on the longest side (RulePixtral only; MergeSize and
	// TemporalPatchSize are 1 there, the model merges).
	LongestEdge int
}

// Factor is the side length every resized dimension is a multiple of.
func (c Config) Factor() int { return c.PatchSize * c.MergeSize }

// PatchDim is the length of one row of pixel_values: 3 channels x temporal x patch x patch.
func (c Config) PatchDim() int { return 3 * c.TemporalPatchSize * c.PatchSize * c.PatchSize }

// WithPixels returns c with a request's min_pixels/max_pixels override; zero keeps the checkpoint's value.
func (c Config) WithPixels(minPixels, maxPixels int) Config {
	if minPixels > 0 {
		c.MinPixels = minPixels
	}
	if maxPixels > 0 {
		c.MaxPixels = maxPixels
	}
	return c
}

// DefaultConfig is what transformers' Qwen2VLImageProcessor uses when preprocessor_config.json is silent.
func DefaultConfig() Config {
	return Config{
		Rule:              RuleQwen2VL,
		PatchSize:         14,
		TemporalPatchSize: 2,
		MergeSize:         2,
		MinPixels:         56 * 56,
		MaxPixels:         28 * 28 * 1280,
		DoResize:          true,
		DoRescale:         true,
		DoNormalize:       true,
		RescaleFactor:     1.0 / 255,
		ImageMean:         [3]float64{0.48145466, 0.4578275, 0.40821073},
		ImageStd:          [3]float64{0.26862954, 0.26130258, 0.27577711},
	}
}

// preprocessorJSON is the part of preprocessor_config.json that decides pixel_values.
type preprocessorJSON struct {
	ProcessorType     string             `json:"image_processor_type"`
	MinPixels         *int               `json:"min_pixels"`
	MaxPixels         *int               `json:"max_pixels"`
	Size              map[string]float64 `json:"size"`
	PatchSize         json.RawMessage    `json:"patch_size"`
	TemporalPatchSize *int               `json:"temporal_patch_size"`
	MergeSize         *int               `json:"merge_size"`
	DoResize          *bool              `json:"do_resize"`
	DoRescale         *bool              `json:"do_rescale"`
	DoNormalize       *bool              `json:"do_normalize"`
	DoConvertRGB      *bool              `json:"do_convert_rgb"`
	RescaleFactor     *float64           `json:"rescale_factor"`
	ImageMean         []float64          `json:"image_mean"`
	ImageStd          []float64          `json:"image_std"`
	Resample          *int               `json:"resample"`
}

// LoadConfig reads dir/preprocessor_config.json; min/max pixels come from size.{shortest_edge,longest_edge}
// and are overridden by top-level min_pixels/max_pixels, as transformers does.
func LoadConfig(dir string) (Config, error) {
	path := filepath.Join(dir, "preprocessor_config.json")
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Config{}, fmt.Errorf("%s is missing; the checkpoint needs its preprocessor_config.json to process images", path)
	}
	if err != nil {
		return Config{}, err
	}
	return ParseConfig(path, data)
}

// ParseConfig parses the contents of a preprocessor_config.json; name is used in errors.
func ParseConfig(name string, data []byte) (Config, error) {
	var j preprocessorJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return Config{}, fmt.Errorf("%s: %v; fix the JSON", name, err)
	}
	c := DefaultConfig()
	patch, err := parsePatchSize(name, j.PatchSize)
	if err != nil {
		return Config{}, err
	}
	c.Rule = ruleOf(j.ProcessorType)
	if c.Rule == RuleGLM4V {
		// transformers' Glm4vImageProcessor size: shortest_edge 112*112, longest_edge 28*28*15000 pixels
		c.MinPixels, c.MaxPixels = 112*112, 28*28*15000
	}
	pixtral := c.Rule == RulePixtral
	if pixtral {
		// transformers' PixtralImageProcessor defaults: longest edge 1024, patch 16
		c.PatchSize, c.MergeSize, c.TemporalPatchSize, c.LongestEdge = 16, 1, 1, 1024
		if v, ok := j.Size["longest_edge"]; ok {
			c.LongestEdge = int(v)
		}
		if c.LongestEdge <= 0 {
			return Config{}, fmt.Errorf("%s: size.longest_edge is %d; Pixtral's rule needs a positive longest edge", name, c.LongestEdge)
		}
	} else if j.Size != nil {
		if v, ok := j.Size["shortest_edge"]; ok {
			c.MinPixels = int(v)
		} else if v, ok := j.Size["min_pixels"]; ok {
			c.MinPixels = int(v)
		}
		if v, ok := j.Size["longest_edge"]; ok {
			c.MaxPixels = int(v)
		} else if v, ok := j.Size["max_pixels"]; ok {
			c.MaxPixels = int(v)
		}
	}
	setInt := func(dst *int, src *int) {
		if src != nil {
			*dst = *src
		}
	}
	setBool := func(dst *bool, src *bool) {
		if src != nil {
			*dst = *src
		}
	}
	setInt(&c.MinPixels, j.MinPixels)
	setInt(&c.MaxPixels, j.MaxPixels)
	setInt(&c.PatchSize, patch)
	if !pixtral {
		setInt(&c.TemporalPatchSize, j.TemporalPatchSize)
		setInt(&c.MergeSize, j.MergeSize)
	}
	setBool(&c.DoResize, j.DoResize)
	setBool(&c.DoRescale, j.DoRescale)
	setBool(&c.DoNormalize, j.DoNormalize)
	if j.RescaleFactor != nil {
		c.RescaleFactor = *j.RescaleFactor
	}
	if j.ImageMean != nil {
		if len(j.ImageMean) != 3 {
			return Config{}, fmt.Errorf("%s: image_mean has %d values; give one per RGB channel", name, len(j.ImageMean))
		}
		copy(c.ImageMean[:], j.ImageMean)
	}
	if j.ImageStd != nil {
		if len(j.ImageStd) != 3 {
			return Config{}, fmt.Errorf("%s: image_std has %d values; give one per RGB channel", name, len(j.ImageStd))
		}
		copy(c.ImageStd[:], j.ImageStd)
	}
	if j.DoConvertRGB != nil && !*j.DoConvertRGB {
		return Config{}, fmt.Errorf("%s: do_convert_rgb is false; tfc always converts to RGB, set it to true", name)
	}
	if j.Resample != nil && *j.Resample != 3 {
		return Config{}, fmt.Errorf("%s: resample is %d; tfc implements bicubic only, set it to 3", name, *j.Resample)
	}
	return c, c.validate(name)
}

// ruleOf picks the rule of an image_processor_type: Pixtral's, GLM-4V's (GLM-4.1V, GLM-4.6V,
// GLM-OCR), else Qwen2-VL's.
func ruleOf(processorType string) Rule {
	switch {
	case strings.HasPrefix(processorType, "Pixtral"):
		return RulePixtral
	case strings.HasPrefix(processorType, "Glm4v"), strings.HasPrefix(processorType, "Glm46V"), strings.HasPrefix(processorType, "GlmOcr"):
		return RuleGLM4V
	}
	return RuleQwen2VL
}

// parsePatchSize reads patch_size as an integer or as {"height": p, "width": p}.
func parsePatchSize(name string, raw json.RawMessage) (*int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var n int
	if err := json.Unmarshal(raw, &n); err == nil {
		return &n, nil
	}
	var hw struct{ Height, Width int }
	if err := json.Unmarshal(raw, &hw); err != nil {
		return nil, fmt.Errorf("%s: patch_size %s is neither an integer nor {height, width}", name, raw)
	}
	if hw.Height != hw.Width {
		return nil, fmt.Errorf("%s: patch_size is %dx%d; tfc takes square patches", name, hw.Height, hw.Width)
	}
	return &hw.Height, nil
}

func (c Config) validate(name string) error {
	switch {
	case c.Rule != RuleQwen2VL && c.Rule != RulePixtral && c.Rule != RuleGLM4V:
		return fmt.Errorf("%s: image rule %q is none of %s, %s, %s", name, string(c.Rule), RuleQwen2VL, RulePixtral, RuleGLM4V)
	case c.PatchSize <= 0 || c.MergeSize <= 0 || c.TemporalPatchSize <= 0:
		return fmt.Errorf("%s: patch_size, merge_size and temporal_patch_size must be positive", name)
	case c.Rule == RulePixtral && c.LongestEdge <= 0:
		return fmt.Errorf("%s: longest edge %d; Pixtral's rule needs a positive longest edge", name, c.LongestEdge)
	case c.Rule != RulePixtral && (c.MinPixels <= 0 || c.MaxPixels < c.MinPixels):
		return fmt.Errorf("%s: min_pixels %d and max_pixels %d must satisfy 0 < min <= max", name, c.MinPixels, c.MaxPixels)
	case c.DoNormalize && (c.ImageStd[0] == 0 || c.ImageStd[1] == 0 || c.ImageStd[2] == 0):
		return fmt.Errorf("%s: image_std has a zero; every channel needs a non-zero std", name)
	case c.DoRescale && c.RescaleFactor == 0:
		return fmt.Errorf("%s: rescale_factor is 0; use 1/255", name)
	}
	return nil
}
