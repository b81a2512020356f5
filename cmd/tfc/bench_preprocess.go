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
	var modelDir string
	var runs, maxPixels int
	c := &cobra.Command{
		Use:   "preprocess IMAGE... --model DIR [--max-pixels N] [--runs N]",
		Short: "Time image decode and preprocessing by stage (median of --runs) and print JSON",
		Long: `Decode and preprocess each image --runs times after one warm-up and print, per image, the
median milliseconds of: decode, the resize alone, normalise and patchify of the resized image
alone, the fused preprocessing the server runs, and decode plus preprocessing. The processor's
settings are a checkpoint's preprocessor_config.json (--model), its pixel budget replaced by
--max-pixels when given (a published checkpoint's, e.g. 12845056 for Qwen2-VL-7B-Instruct, on a
tiny one). tools/oracle/preprocess_speed.py times transformers' processor the same way.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if modelDir == "" {
				return fmt.Errorf("--model DIR is needed: the checkpoint whose preprocessor_config.json sets the processor")
			}
			if maxPixels < 0 {
				return fmt.Errorf("--max-pixels %d: give a positive pixel budget, or leave it out", maxPixels)
			}
			cfg, err := image.LoadConfig(modelDir)
			if err != nil {
				return err
			}
			cfg = cfg.WithPixels(0, maxPixels)
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
	c.Flags().StringVar(&modelDir, "model", "", "the checkpoint directory whose preprocessor_config.json sets the processor")
	c.Flags().IntVar(&maxPixels, "max-pixels", 0, "the processor's pixel budget instead of the checkpoint's (0: the checkpoint's)")
	c.Flags().IntVar(&runs, "runs", 20, "timed runs after one warm-up")
	return c
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
