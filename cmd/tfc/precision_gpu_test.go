//go:build gpu

package main

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"tfc/gen/registry"
)

// TestGenerateBF16CUDA runs every family's tiny checkpoint (gen/registry) in BF16 precision on
// the cuda backend and on the CPU, which rounds at the same points: the ids must agree (a
// difference would have to sit at a BF16 logit tie, which these fixtures' margins make unlikely).
func TestGenerateBF16CUDA(t *testing.T) {
	for _, fam := range registry.Families {
		t.Run(fam.Name, func(t *testing.T) {
			root := filepath.Join("..", "..", fam.Fixture)
			f := generateFlags{model: root, prompt: "What is in this picture?", maxTokens: 24, context: 1024, topP: 1,
				images: []string{filepath.Join(root, "oracle", "images", "a.png")}, ignoreEOS: true, precision: "bf16"}
			f.backend = "cpu"
			want, err := runGenerate(f)
			if err != nil {
				t.Fatal(err)
			}
			f.backend = "cuda"
			got, err := runGenerate(f)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want.OutputIDs, got.OutputIDs); d != "" {
				t.Errorf("bf16 ids (-cpu +cuda)\n%s", d)
			}
		})
	}
}
