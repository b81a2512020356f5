package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"tfc/runtime/device"
	"tfc/runtime/server"
)

func init() {
	var o server.Options
	var backend, precision string
	var cacheMiB, visionMiB int64
	var keyFile string
	c := &cobra.Command{
		Use:   "serve DIR",
		Short: "Serve a checkpoint over an OpenAI-compatible HTTP API",
		Long: `Serve a checkpoint over an OpenAI-compatible HTTP API: /v1/chat/completions,
/v1/completions, /v1/ocr, /tokenize, /detokenize, /v1/models, /health and /metrics.
SIGINT or SIGTERM stops it: requests in flight get a grace period, then are cancelled.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Dir = args[0]
			if o.MaxTokens < 1 {
				return fmt.Errorf("--max-tokens is %d; it must be at least 1", o.MaxTokens)
			}
			if o.MaxPages < 1 {
				return fmt.Errorf("--max-pages is %d; it must be at least 1", o.MaxPages)
			}
			if cacheMiB < 0 || visionMiB < 0 {
				return fmt.Errorf("--prompt-cache-mib and --vision-cache-mib must not be negative")
			}
			key, err := apiKey(o.APIKey, keyFile, os.Getenv("TFC_API_KEY"))
			if err != nil {
				return err
			}
			o.APIKey = key
			o.CacheBytes, o.VisionCache = cacheMiB<<20, visionMiB<<20
			o.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
			o.Backend = func() (device.Backend, error) { return newBackend(backend, precision) }
			if st, err := os.Stderr.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
				o.Progress = loadBar()
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return server.Run(ctx, o)
		},
	}
	fl := c.Flags()
	fl.StringVar(&o.Host, "host", "127.0.0.1", "address to bind; 0.0.0.0 serves other machines")
	fl.IntVar(&o.Port, "port", 8000, "port to listen on")
	fl.StringVar(&o.Name, "name", "", "model name clients send (default: the checkpoint folder's name)")
	fl.IntVar(&o.Parallel, "parallel", 4, "requests decoding at once")
	fl.IntVar(&o.Context, "context", 0, "tokens per request, prompt and output (default 8192, or the checkpoint's max_position_embeddings when smaller)")
	fl.IntVar(&o.MaxTokens, "max-tokens", 1024, "max_tokens of a chat request that sets none")
	fl.IntVar(&o.RoundRows, "max-num-batched-tokens", server.DefaultRoundRows, "most rows a forward round takes, prompt pieces and decode rows: longer prompts fill over several rounds")
	fl.BoolVar(&o.NoRepetitionStop, "no-repetition-stop", false, "let outputs that repeat a period run on to max_tokens (requests may still ask for the stop with repetition_stop)")
	fl.StringVar(&backend, "backend", "cpu", "device backend: cpu, cuda or hip")
	addPrecision(fl, &precision)
	fl.StringVar(&o.APIKey, "api-key", "", "require this key as \"Authorization: Bearer KEY\" (default $TFC_API_KEY, which keeps it out of ps)")
	fl.StringVar(&keyFile, "api-key-file", "", "read the key from this file (its first line), out of the command line and the environment")
	fl.BoolVar(&o.NoDrafts, "no-drafts", false, "turn copy drafts off")
	fl.BoolVar(&o.NoCache, "no-prompt-cache", false, "turn the prompt cache off")
	fl.BoolVar(&o.FetchImages, "allow-image-urls", false, "fetch http(s) image and document URLs (otherwise only data URLs are accepted)")
	fl.IntVar(&o.MaxPages, "max-pages", server.DefaultMaxPages, "most pages of a document sent to /v1/ocr")
	fl.Int64Var(&cacheMiB, "prompt-cache-mib", 0, "MiB of KV pages the prompt cache may keep (default: what running requests leave free)")
	fl.Int64Var(&visionMiB, "vision-cache-mib", 256, "MiB of vision-tower rows kept by image, so a page sent again skips the tower (0: none)")
	addCommand(c)
}

// apiKey is the key the server requires: --api-key, or the first line of --api-key-file, or
// $TFC_API_KEY; none is no key.
func apiKey(flag, file, env string) (string, error) {
	if file == "" {
		if flag != "" {
			return flag, nil
		}
		return env, nil
	}
	if flag != "" {
		return "", fmt.Errorf("--api-key and --api-key-file both give a key; give one")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--api-key-file: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if key := strings.TrimSpace(line); key != "" {
		return key, nil
	}
	return "", fmt.Errorf("--api-key-file: %s has no key on its first line", file)
}

// loadBar draws the weight loading progress on a terminal.
func loadBar() func(done, total int64) {
	var bar *progressbar.ProgressBar
	return func(done, total int64) {
		if bar == nil {
			bar = progressbar.DefaultBytes(total, "loading weights")
		}
		bar.Set64(done)
		if done >= total {
			bar.Finish()
			fmt.Fprintln(os.Stderr)
		}
	}
}
