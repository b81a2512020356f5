package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"tfc/runtime/bench"
)

func init() {
	var o bench.Options
	var backend, batches, out string
	c := &cobra.Command{
		Use:   "bench DIR",
		Short: "Measure decode tokens/s and the vision tower's time on one backend; prints JSON",
		Long: `Measure a checkpoint on one backend and print a JSON report.

Decode: --batch sequences of --prompt-tokens random ids (seeded) run together through the
server's lanes scheduler, greedy, --new-tokens each, EOS ignored; the rate is taken over the rounds
in which every sequence decodes (the report's decode_method says exactly how).
Vision: --image FILE runs the vision tower on that image, once to warm up and then --repeat
times (median); decoding and preprocessing the image are timed apart.
Profile: --profile (cuda, hip) runs each batch's decode again with every kernel launch timed on
the device and prints, after the batch's measure, a table of the decode rounds' kernels
(launches a round, µs a launch, share of the kernel time); the JSON report carries it too.
On GPU backends the report counts the launches graphs replayed; TFC_GPU_GRAPHS=0 turns graph
replay off.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Dir = args[0]
			var err error
			if o.Batches, err = parseBatches(batches); err != nil {
				return err
			}
			if o.Backend, err = newBackend(backend); err != nil {
				return err
			}
			o.Log = cmd.ErrOrStderr()
			rep, err := bench.Run(o)
			if err != nil {
				return err
			}
			data, err := json.MarshalIndent(rep, "", " ")
			if err != nil {
				return err
			}
			data = append(data, '\n')
			if out != "" {
				if err := os.WriteFile(out, data, 0o644); err != nil {
					return err
				}
			}
			_, err = cmd.OutOrStdout().Write(data)
			return err
		},
	}
	fl := c.Flags()
	fl.StringVar(&backend, "backend", "cpu", "device backend: cpu, cuda or hip")
	fl.StringVar(&batches, "batch", "1", "sequences decoding together, a comma list (e.g. 1,8); empty skips decode")
	fl.IntVar(&o.PromptTokens, "prompt-tokens", 512, "prompt length of each sequence")
	fl.IntVar(&o.NewTokens, "new-tokens", 128, "tokens each sequence generates")
	fl.Uint64Var(&o.Seed, "seed", 1, "seed of the random prompt ids")
	fl.StringVar(&o.Image, "image", "", "an image file (PNG, JPEG or WebP) for the vision tower measure")
	fl.IntVar(&o.Repeat, "repeat", 5, "timed vision runs after one warm-up")
	fl.StringVar(&out, "out", "", "also write the JSON report to this file")
	fl.BoolVar(&o.Profile, "profile", false, "time every kernel of the decode rounds on the device (cuda, hip) and print a table")
	addCommand(c)
}

// parseBatches reads a comma list of batch sizes.
func parseBatches(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--batch %q: each entry must be a whole number of at least 1, e.g. --batch 1,8", s)
		}
		out = append(out, n)
	}
	return out, nil
}
