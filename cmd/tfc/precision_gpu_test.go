//go:build gpu

package main

import (
	"path/filepath"
	"testing"

	"tfc/gen/registry"
)

// TestGenerateBF16CUDA runs every family's tiny checkpoint (gen/registry) in BF16 precision on
// the cuda backend and on the CPU, which round at the same points but sum in other orders: the
// ids must agree, or first differ at a step where the CPU's margin between the two ids is at most
// one BF16 step of its top logit (a one-ulp difference upstream can move a logit that far).
func TestGenerateBF16CUDA(t *testing.T) {
	for _, fam := range registry.Families {
		t.Run(fam.Name, func(t *testing.T) {
			root := filepath.Join("..", "..", fam.Fixture)
			f := generateFlags{model: root, prompt: "What is in this picture?", maxTokens: 24, context: 1024, topP: 1,
				images: []string{filepath.Join(root, "oracle", "images", "a.png")}, ignoreEOS: true, precision: "bf16"}
			cpu, cuda := runSteps(t, f, "cpu"), runSteps(t, f, "cuda")
			checkBF16Divergence(t, cpu, cuda)
		})
	}
}
