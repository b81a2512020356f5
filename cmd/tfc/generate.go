package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"tfc/runtime/chattemplate"
	"tfc/runtime/device"
	"tfc/runtime/device/cpu"
	"tfc/runtime/device/cuda"
	"tfc/runtime/device/hip"
	"tfc/runtime/engine"
	"tfc/runtime/model"
	"tfc/runtime/sample"
)

// generateFlags are the one-shot generation settings.
type generateFlags struct {
	model, prompt, backend string
	precision              string
	images                 []string
	maxTokens, context     int
	temperature, topP      float64
	topK                   int
	seed                   uint64
	json, ignoreEOS        bool
	step                   func(step int, logits []float32) // sees each step's logits (tests)
}

// generateOutput is what --json prints.
type generateOutput struct {
	PromptIDs    []int32 `json:"prompt_ids"`
	OutputIDs    []int32 `json:"output_ids"`
	Text         string  `json:"text"`
	FinishReason string  `json:"finish_reason"`
	TokenSHA256  string  `json:"token_sha256"`
}

func init() {
	var f generateFlags
	c := &cobra.Command{
		Use:   "generate --model DIR --prompt TEXT [--image PATH]...",
		Short: "Generate one reply to one user message of images and text",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			out, err := runGenerate(f)
			if err != nil {
				return err
			}
			if f.json {
				enc := json.NewEncoder(os.Stdout)
				return enc.Encode(out)
			}
			fmt.Println(out.Text)
			fmt.Fprintf(os.Stderr, "[%d prompt tokens, %d output tokens, finish %s]\n", len(out.PromptIDs), len(out.OutputIDs), out.FinishReason)
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.model, "model", "", "checkpoint directory")
	fl.StringVar(&f.prompt, "prompt", "", "the user message's text")
	fl.StringArrayVar(&f.images, "image", nil, "an image file (PNG, JPEG or WebP), before the text; repeat for more")
	fl.IntVar(&f.maxTokens, "max-tokens", 64, "most tokens to generate")
	fl.IntVar(&f.context, "context", 4096, "context length to plan for")
	fl.Float64Var(&f.temperature, "temperature", 0, "sampling temperature; 0 is greedy")
	fl.IntVar(&f.topK, "top-k", 0, "sample from the k most likely tokens; 0 is no limit")
	fl.Float64Var(&f.topP, "top-p", 1, "sample from the smallest set of tokens whose probability reaches p")
	fl.Uint64Var(&f.seed, "seed", 0, "sampling seed")
	fl.StringVar(&f.backend, "backend", "cpu", "device backend: cpu, cuda (NVIDIA, through the HIP sources) or hip (AMD)")
	addPrecision(fl, &f.precision)
	fl.BoolVar(&f.ignoreEOS, "ignore-eos", false, "keep generating past end-of-sequence ids, to --max-tokens")
	fl.BoolVar(&f.json, "json", false, "print prompt_ids, output_ids, text, finish_reason and token_sha256 as one JSON object")
	c.MarkFlagRequired("model")
	addCommand(c)
}

// precisionHelp says what --precision does, the same on every command that runs a model.
const precisionHelp = "activation precision: f32 (F32 activations, the exactness reference) or bf16 (activations rounded to BF16 where the publisher's torch run rounds them, F32 accumulation in every kernel); empty: bf16 on cuda and hip, f32 on cpu"

// addPrecision adds --precision to a command that runs a model.
func addPrecision(fl *pflag.FlagSet, p *string) { fl.StringVar(p, "precision", "", precisionHelp) }

// defaultPrecision is the precision of a backend run without --precision: the publisher's (bf16)
// on a GPU, the exactness reference (f32) on the CPU.
func defaultPrecision(backend string) string {
	if backend == "cpu" {
		return "f32"
	}
	return "bf16"
}

// newBackend opens the named backend in the named precision (bf16 or f32; empty: the backend's
// default).
func newBackend(name, precision string) (device.Backend, error) {
	if precision == "" {
		precision = defaultPrecision(name)
	}
	prec, err := device.ParsePrecision(precision)
	if err != nil {
		return nil, err
	}
	switch name {
	case "cpu":
		return cpu.New(cpu.Precision(prec)), nil
	case "cuda":
		b, err := cuda.New(cuda.Precision(prec))
		if err != nil {
			return nil, err
		}
		return b, nil
	case "hip":
		b, err := hip.New(hip.Precision(prec))
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	return nil, fmt.Errorf("backend %q is not available; use --backend cpu, cuda or hip", name)
}

func runGenerate(f generateFlags) (*generateOutput, error) {
	fe, err := engine.LoadFrontend(f.model)
	if err != nil {
		return nil, err
	}
	var files [][]byte
	var parts []map[string]any
	for _, path := range f.images {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		files = append(files, data)
		parts = append(parts, map[string]any{"type": "image"})
	}
	parts = append(parts, map[string]any{"type": "text", "text": f.prompt})
	messages, err := json.Marshal([]map[string]any{{"role": "user", "content": parts}})
	if err != nil {
		return nil, err
	}
	imgs, err := fe.Images(files)
	if err != nil {
		return nil, err
	}
	b, err := newBackend(f.backend, f.precision)
	if err != nil {
		return nil, err
	}
	limits := model.Limits{Context: f.context, Parallel: 1, Rows: 512, PageSize: 16, Patches: 16384}
	e, err := engine.Open(f.model, b, limits)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	if f.ignoreEOS {
		e.EOS = map[int]bool{}
	}
	if err := fe.Fits(e.Info); err != nil {
		return nil, fmt.Errorf("%s: %w", f.model, err)
	}
	p, _, err := fe.Build(messages, imgs, e.Info.ImageToken, e.Info.Merge, chattemplate.Options{AddGenerationPrompt: true})
	if err != nil {
		return nil, err
	}
	res, err := e.Generate(p, engine.Options{MaxTokens: f.maxTokens, Step: f.step, Sample: sample.Params{
		Temperature: f.temperature, TopK: f.topK, TopP: f.topP, Seed: f.seed}})
	if err != nil {
		return nil, err
	}
	ids := make([]int, len(res.OutputIDs))
	for i, id := range res.OutputIDs {
		ids[i] = int(id)
	}
	return &generateOutput{
		PromptIDs:    p.IDs,
		OutputIDs:    res.OutputIDs,
		Text:         fe.Tok.Decode(ids, true),
		FinishReason: res.FinishReason,
		TokenSHA256:  TokenSHA256(res.OutputIDs),
	}, nil
}

// TokenSHA256 is the sha256 of the ids joined by commas, in decimal.
func TokenSHA256(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	sum := sha256.Sum256([]byte(strings.Join(s, ",")))
	return hex.EncodeToString(sum[:])
}
