package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"tfc/runtime/image"
)

// publishedConfigs are the image processor settings of each family's published checkpoint
// (Qwen2-VL-7B-Instruct and dots.ocr), for timing without a checkpoint at hand.
var publishedConfigs = map[string]func() image.Config{
	"qwen2_vl": func() image.Config { return image.DefaultConfig().WithPixels(3136, 12845056) },
	"dots_ocr": func() image.Config {
		c := image.DefaultConfig().WithPixels(3136, 11289600)
		c.TemporalPatchSize = 1
		return c
	},
}

// preprocessTimes is the median of each stage over the runs on one image.
type preprocessTimes struct {
	Image      string  `json:"image"`
	Width      int     `json:"width"`
	Height     int     `json:"height"`
	Resized    [2]int  `json:"resized"` // width, height
	GridTHW    [3]int  `json:"grid_thw"`
	Runs       int     `json:"runs"`
	Threads    int     `json:"threads"`              // GOMAXPROCS
	DecodeMs   float64 `json:"decode_ms"`            // bytes to RGB
	ResizeMs   float64 `json:"resize_ms"`            // the resize alone
	PatchMs    float64 `json:"normalise_patch_ms"`   // rescale, normalise and patchify of the resized image, with its pixel hash
	Preprocess float64 `json:"preprocess_ms"`        // the fused resize, normalise and patchify the server runs, with the pixel hash
	TotalMs    float64 `json:"decode_preprocess_ms"` // decode plus preprocess, as a request pays
}

// benchPreprocess is tfc bench preprocess: image decode and preprocessing timed by stage.
func benchPreprocess() *cobra.Command {
	var family, modelDir string
	var runs int
	c := &cobra.Command{
		Use:   "preprocess IMAGE... [--family qwen2_vl|dots_ocr | --model DIR] [--runs N]",
		Short: "Time image decode and preprocessing by stage (median of --runs) and print JSON",
		Long: `Decode and preprocess each image --runs times after one warm-up and print, per image, the
median milliseconds of: decode, the resize alone, normalise and patchify of the resized image
alone, the fused preprocessing the server runs, and decode plus preprocessing. The processor's
settings are the family's published ones (--family) or a checkpoint's preprocessor_config.json
(--model). tools/oracle/preprocess_speed.py times transformers' processor the same way.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := benchConfig(family, modelDir)
			if err != nil {
				return err
			}
			if runs < 1 {
				return fmt.Errorf("--runs %d: give at least 1", runs)
			}
			var out []preprocessTimes
			for _, path := range args {
				t, err := timePreprocess(path, cfg, runs)
				if err != nil {
					return err
				}
				out = append(out, t)
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", " ")
			return enc.Encode(out)
		},
	}
	c.Flags().StringVar(&family, "family", "qwen2_vl", "published processor settings: qwen2_vl or dots_ocr")
	c.Flags().StringVar(&modelDir, "model", "", "a checkpoint directory whose preprocessor_config.json is used instead of --family")
	c.Flags().IntVar(&runs, "runs", 20, "timed runs after one warm-up")
	return c
}

func benchConfig(family, modelDir string) (image.Config, error) {
	if modelDir != "" {
		return image.LoadConfig(modelDir)
	}
	mk, ok := publishedConfigs[family]
	if !ok {
		return image.Config{}, fmt.Errorf("--family %q: want qwen2_vl or dots_ocr, or give --model DIR", family)
	}
	return mk(), nil
}

func timePreprocess(path string, cfg image.Config, runs int) (preprocessTimes, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return preprocessTimes{}, err
	}
	t := preprocessTimes{Image: filepath.Base(path), Runs: runs, Threads: runtime.GOMAXPROCS(0)}
	var decode, resize, patch, fused []float64
	for i := 0; i <= runs; i++ {
		t0 := time.Now()
		img, err := image.Decode(1, data, image.DefaultLimits())
		if err != nil {
			return t, fmt.Errorf("%s: %w", path, err)
		}
		t1 := time.Now()
		p, err := image.Preprocess(img, cfg)
		if err != nil {
			return t, fmt.Errorf("%s: %w", path, err)
		}
		t2 := time.Now()
		w, h := p.GridTHW[2]*cfg.PatchSize, p.GridTHW[1]*cfg.PatchSize
		resized := image.Resize(img, w, h)
		t3 := time.Now()
		noResize := cfg
		noResize.DoResize = false
		q, err := image.Preprocess(resized, noResize)
		if err != nil {
			return t, fmt.Errorf("%s: %w", path, err)
		}
		t4 := time.Now()
		image.Release(p.Pixels) // as the server does when a request ends
		image.Release(q.Pixels)
		if i == 0 { // warm-up
			t.Width, t.Height, t.Resized, t.GridTHW = img.Width, img.Height, [2]int{w, h}, p.GridTHW
			continue
		}
		decode = append(decode, ms(t1.Sub(t0)))
		fused = append(fused, ms(t2.Sub(t1)))
		resize = append(resize, ms(t3.Sub(t2)))
		patch = append(patch, ms(t4.Sub(t3)))
	}
	t.DecodeMs, t.ResizeMs, t.PatchMs, t.Preprocess = median(decode), median(resize), median(patch), median(fused)
	totals := make([]float64, runs)
	for i := range totals {
		totals[i] = decode[i] + fused[i]
	}
	t.TotalMs = median(totals)
	return t, nil
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
