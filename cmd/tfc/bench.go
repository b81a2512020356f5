package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"tfc/runtime/bench"
	"tfc/runtime/loadgen"
)

func init() {
	var o bench.Options
	var backend, precision, batches, out string
	c := &cobra.Command{
		Use:   "bench DIR",
		Short: "Measure decode tokens/s and the vision tower's time on one backend; prints JSON",
		Long: `Measure a checkpoint on one backend and print a JSON report.

Decode: --batch sequences of --prompt-tokens random ids (seeded) run together through the
server's lanes scheduler, greedy, --new-tokens each, EOS ignored; the rate is taken over the rounds
in which every sequence decodes (the report's decode_method says exactly how).
Vision: --image FILE runs the vision tower on that image, once to warm up and then --repeat
times (median); decoding and preprocessing the image are timed apart.
Profile: --profile (cuda, hip) runs each batch again with every kernel launch timed on the
device and prints, after the batch's measure, tables of the prefill rounds' and the decode
rounds' kernels (launches a round, µs a launch, share of the kernel time, and for linears
TFLOP/s, GB/s and the share of the card's listed BF16 rate), and with --image one of the
vision tower's; the JSON report carries them too.
On GPU backends the report counts the launches graphs replayed; TFC_GPU_GRAPHS=0 turns graph
replay off.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Dir = args[0]
			var err error
			if o.Batches, err = parseBatches(batches); err != nil {
				return err
			}
			if o.Backend, err = newBackend(backend, precision); err != nil {
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
	addPrecision(fl, &precision)
	fl.StringVar(&batches, "batch", "1", "sequences decoding together, a comma list (e.g. 1,8); empty skips decode")
	fl.IntVar(&o.PromptTokens, "prompt-tokens", 512, "prompt length of each sequence")
	fl.IntVar(&o.NewTokens, "new-tokens", 128, "tokens each sequence generates")
	fl.IntVar(&o.RoundRows, "max-num-batched-tokens", 0, "most rows a forward round takes, prompt pieces and decode rows (default 512, as tfc serve)")
	fl.Uint64Var(&o.Seed, "seed", 1, "seed of the random prompt ids")
	fl.StringVar(&o.Image, "image", "", "an image file (PNG, JPEG or WebP) for the vision tower measure")
	fl.IntVar(&o.Repeat, "repeat", 5, "timed vision runs after one warm-up")
	fl.StringVar(&out, "out", "", "also write the JSON report to this file")
	fl.BoolVar(&o.Profile, "profile", false, "time every kernel of the prefill and decode rounds and the vision tower on the device (cuda, hip) and print tables")
	c.AddCommand(benchServe(), benchPreprocess())
	addCommand(c)
}

// benchServe is tfc bench serve: the load generator for a running server.
func benchServe() *cobra.Command {
	var o loadgen.Options
	var images, synthetic, out string
	c := &cobra.Command{
		Use:   "serve --url URL [--images DIR | --synthetic WxH] --requests N --concurrency C",
		Short: "Send chat requests with pages to a running OpenAI-compatible server and report pages/s and latencies",
		Long: `Send --requests streamed chat requests, --concurrency at a time, each one page (a file of
--images DIR in turn, or a synthetic --synthetic WxH page) and --prompt, to the server at --url
(tfc serve or any OpenAI-compatible server, so a peer is measured with the same tool). Prints a
summary and, with --out, the JSON report: pages/s, output tok/s, time to first token, time per
output token, inter-token latency and end-to-end time (p50, p90, p99), errors.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			switch {
			case images != "" && cmd.Flags().Changed("synthetic"):
				return fmt.Errorf("give --images or --synthetic, not both")
			case images != "":
				if o.Images, err = readPages(images); err != nil {
					return err
				}
			default:
				w, h, ok := strings.Cut(synthetic, "x")
				wi, e1 := strconv.Atoi(w)
				hi, e2 := strconv.Atoi(h)
				if !ok || e1 != nil || e2 != nil {
					return fmt.Errorf("--synthetic %q: want WIDTHxHEIGHT, e.g. 1000x1400", synthetic)
				}
				page, err := loadgen.Synthetic(wi, hi)
				if err != nil {
					return err
				}
				o.Images = [][]byte{page}
			}
			rep, err := loadgen.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), rep.Summary())
			if out != "" {
				data, err := json.MarshalIndent(rep, "", " ")
				if err != nil {
					return err
				}
				if err := os.WriteFile(out, append(data, '\n'), 0o644); err != nil {
					return err
				}
			}
			if rep.Failed > 0 {
				return exitCode(1)
			}
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVar(&o.URL, "url", "http://127.0.0.1:8000", "the server's base URL")
	fl.StringVar(&o.Model, "model", "", "model name to send (default: the first GET /v1/models lists)")
	fl.StringVar(&o.APIKey, "api-key", os.Getenv("OPENAI_API_KEY"), "bearer token (default $OPENAI_API_KEY)")
	fl.StringVar(&images, "images", "", "a folder of PNG, JPEG or WebP pages, sent in name order, in turn")
	fl.StringVar(&synthetic, "synthetic", "1000x1400", "a synthetic page of this size when --images is not given")
	fl.StringVar(&o.Prompt, "prompt", "Read the text in this image.", "the text sent beside each page (\"\": the page alone)")
	fl.IntVar(&o.Requests, "requests", 16, "requests in all")
	fl.IntVar(&o.Concurrency, "concurrency", 4, "requests in flight at once")
	fl.IntVar(&o.MaxTokens, "max-tokens", 256, "max_tokens of each request")
	fl.BoolVar(&o.IgnoreEOS, "ignore-eos", false, "ask the server to ignore EOS (ignore_eos), so each page yields --max-tokens")
	fl.BoolVar(&o.Timings, "timings", false, "ask for the server's stage times and token ids (return_timings, return_token_ids; tfc serve): stages reported, and tokens that print nothing still timed")
	fl.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "limit on one request")
	fl.StringVar(&out, "out", "", "write the JSON report to this file")
	return c
}

// readPages reads the image files of dir in name order.
func readPages(dir string) ([][]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var pages [][]byte
	for _, e := range entries {
		switch strings.ToLower(filepath.Ext(e.Name())) {
		case ".png", ".jpg", ".jpeg", ".webp":
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				return nil, err
			}
			pages = append(pages, b)
		}
	}
	if len(pages) == 0 {
		return nil, fmt.Errorf("%s holds no PNG, JPEG or WebP file", dir)
	}
	return pages, nil
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
