package main

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestGenerateBF16 runs every family's tiny checkpoint end to end on the CPU in BF16 precision:
// it gives ids, the same ids on a second run, and the prompt F32 precision gives. Its ids are not
// compared with an oracle here (transformers' BF16 references are made on a GPU).
func TestGenerateBF16(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three fixtures twice")
	}
	for _, dir := range []string{"qwen2-vl-tiny", "qwen2.5-vl-tiny", "dots-ocr-tiny"} {
		t.Run(dir, func(t *testing.T) {
			root := filepath.Join("..", "..", "testdata", dir)
			f := generateFlags{model: root, prompt: "What is in this picture?", backend: "cpu", maxTokens: 12, context: 1024, topP: 1,
				images: []string{filepath.Join(root, "oracle", "images", "a.png")}, ignoreEOS: true}
			f.precision = "bf16"
			bf, err := runGenerate(f)
			if err != nil {
				t.Fatal(err)
			}
			if len(bf.OutputIDs) != f.maxTokens {
				t.Fatalf("%d output ids, want %d", len(bf.OutputIDs), f.maxTokens)
			}
			again, err := runGenerate(f)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(bf.OutputIDs, again.OutputIDs); d != "" {
				t.Errorf("a second BF16 run differs (-first +second)\n%s", d)
			}
			f.precision = "f32"
			ref, err := runGenerate(f)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(ref.PromptIDs, bf.PromptIDs); d != "" {
				t.Errorf("prompt ids (-f32 +bf16)\n%s", d)
			}
			same := 0
			for i := range ref.OutputIDs {
				if i < len(bf.OutputIDs) && ref.OutputIDs[i] == bf.OutputIDs[i] {
					same++
				}
			}
			t.Logf("bf16 ids %v; f32 ids %v (%d of %d equal)", bf.OutputIDs, ref.OutputIDs, same, len(ref.OutputIDs))
		})
	}
}

// TestPrecisionFlag checks that --precision refuses a name it does not know.
func TestPrecisionFlag(t *testing.T) {
	if _, err := newBackend("cpu", "fp8"); err == nil {
		t.Fatal("newBackend accepted precision fp8")
	}
}
