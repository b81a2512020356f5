package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"tfc/runtime/image"
)

func init() {
	var modelDir, imagePath string
	var asJSON bool
	var minPixels, maxPixels int
	cmd := &cobra.Command{
		Use:   "preprocess --model DIR --image PATH [--json]",
		Short: "Run the checkpoint's image processor on one image and print pixel_values' grid, shape and sha256",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := image.LoadConfig(modelDir)
			if err != nil {
				return err
			}
			data, err := os.ReadFile(imagePath)
			if err != nil {
				return err
			}
			img, err := image.Decode(1, data, image.DefaultLimits())
			if err != nil {
				return err
			}
			p, err := image.Preprocess(img, cfg.WithPixels(minPixels, maxPixels))
			if err != nil {
				return fmt.Errorf("%s: %w", imagePath, err)
			}
			out := struct {
				GridTHW [3]int `json:"grid_thw"`
				Shape   [2]int `json:"shape"`
				Sha256  string `json:"sha256"`
			}{p.GridTHW, [2]int{p.Rows, p.Cols}, p.Sha256()}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(out)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %dx%d -> grid_thw %v, pixel_values [%d, %d], sha256 %s\n",
				imagePath, img.Width, img.Height, out.GridTHW, p.Rows, p.Cols, out.Sha256)
			return nil
		},
	}
	cmd.Flags().StringVar(&modelDir, "model", "", "checkpoint directory holding preprocessor_config.json")
	cmd.Flags().StringVar(&imagePath, "image", "", "PNG, JPEG or WebP file")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"grid_thw", "shape", "sha256"} as JSON`)
	cmd.Flags().IntVar(&minPixels, "min-pixels", 0, "override min_pixels (0 keeps the checkpoint's)")
	cmd.Flags().IntVar(&maxPixels, "max-pixels", 0, "override max_pixels (0 keeps the checkpoint's)")
	cmd.MarkFlagRequired("model")
	cmd.MarkFlagRequired("image")
	addCommand(cmd)
}
