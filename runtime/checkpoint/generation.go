package checkpoint

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// Generation holds the token ids and sampling defaults of generation_config.json. A nil
// pointer is a value the file does not set.
type Generation struct {
	Source            string // the file it was read from: generation_config.json, or config.json when that is absent
	EOS               []int  // every end-of-sequence id, in the file's order, without repeats
	BOS, Pad          *int
	DoSample          *bool
	Temperature       *float64
	TopP              *float64
	TopK              *int
	RepetitionPenalty *float64
}

// readGeneration reads dir/generation_config.json, or the token ids of config.json when the
// checkpoint has no generation config.
func readGeneration(dir string, cfg *Config) (*Generation, error) {
	src := cfg
	gc, err := ReadConfig(filepath.Join(dir, "generation_config.json"))
	switch {
	case err == nil:
		src = gc
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	sampling := src == gc
	g := &Generation{Source: src.File()}
	prefix := ""
	if src == cfg {
		prefix = "text_config." // transformers 5 writes the token ids of a VLM under text_config
	}
	ids := func(key string) string {
		if prefix == "" {
			return key
		}
		return key + "|" + prefix + key
	}
	if src.Has(ids("eos_token_id")) {
		eos, err := src.IntOrList(ids("eos_token_id"))
		if err != nil {
			return nil, err
		}
		seen := map[int]bool{}
		for _, id := range eos {
			if !seen[id] {
				seen[id] = true
				g.EOS = append(g.EOS, id)
			}
		}
	}
	if g.BOS, err = optional(src, ids("bos_token_id"), src.Int); err != nil {
		return nil, err
	}
	if g.Pad, err = optional(src, ids("pad_token_id"), src.Int); err != nil {
		return nil, err
	}
	if !sampling {
		return g, nil
	}
	if g.DoSample, err = optional(src, "do_sample", src.Bool); err != nil {
		return nil, err
	}
	if g.Temperature, err = optional(src, "temperature", src.Float); err != nil {
		return nil, err
	}
	if g.TopP, err = optional(src, "top_p", src.Float); err != nil {
		return nil, err
	}
	if g.TopK, err = optional(src, "top_k", src.Int); err != nil {
		return nil, err
	}
	if g.RepetitionPenalty, err = optional(src, "repetition_penalty", src.Float); err != nil {
		return nil, err
	}
	return g, nil
}

// optional reads key with get when it is set, and nil when it is not.
func optional[T any](c *Config, key string, get func(string) (T, error)) (*T, error) {
	if !c.Has(key) {
		return nil, nil
	}
	v, err := get(key)
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// fileExists reports whether path names an existing regular file (following links).
func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}
