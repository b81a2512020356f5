//go:build gpu

package compiler_test

import (
	"math"
	"testing"

	"tfc/runtime/device"
	"tfc/runtime/device/cpu"
	"tfc/runtime/device/cuda"
	"tfc/runtime/engine"
)

// run generates steps greedy tokens of changedPrompt on b and returns the vision rows, the ids
// and each step's logits.
func run(t *testing.T, dir string, b device.Backend, steps int) (vision []float32, ids []int32, logits [][]float32) {
	t.Helper()
	e, err := engine.Open(dir, b, changedLimits)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	res, err := e.Generate(changedPrompt(), engine.Options{MaxTokens: steps, Step: func(_ int, l []float32) {
		logits = append(logits, append([]float32(nil), l...))
	}})
	if err != nil {
		t.Fatal(err)
	}
	return res.VisionRows, res.OutputIDs, logits
}

// maxDiff is the largest |a-b| over two equally long slices, and the largest |a|.
func maxDiff(t *testing.T, what string, a, b []float32) (diff, scale float64) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d values on the CPU, %d on the GPU", what, len(a), len(b))
	}
	for i := range a {
		diff = math.Max(diff, math.Abs(float64(a[i]-b[i])))
		scale = math.Max(scale, math.Abs(float64(a[i])))
	}
	return diff, scale
}

// TestChangedQwen2VLOnCUDA loads a checkpoint whose shapes and constants differ from those
// kernels/gen/qwen2vl.hip was generated for on the cuda backend, which builds kernels specialised
// for it at load, and checks vision rows, every step's logits and the greedy ids against the CPU
// backend on the same weights.
func TestChangedQwen2VLOnCUDA(t *testing.T) {
	dir := changedQwen2VL(t)
	be, err := cuda.New()
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	t.Logf("backend %s", be.Describe())
	const steps = 8
	wantVision, wantIDs, wantLogits := run(t, dir, cpu.New(), steps)
	gotVision, gotIDs, gotLogits := run(t, dir, be, steps)
	diff, scale := maxDiff(t, "vision rows", wantVision, gotVision)
	t.Logf("vision rows: max abs diff %.3g, max abs value %.3g", diff, scale)
	if diff > 1e-3*math.Max(1, scale) {
		t.Errorf("vision rows differ from the CPU's by %.3g", diff)
	}
	for s := range wantLogits {
		diff, scale := maxDiff(t, "logits", wantLogits[s], gotLogits[s])
		t.Logf("step %d: logits max abs diff %.3g, max abs value %.3g; id %d (CPU %d)", s, diff, scale, gotIDs[s], wantIDs[s])
		if diff > 1e-3*math.Max(1, scale) {
			t.Errorf("step %d: logits differ from the CPU's by %.3g", s, diff)
		}
		if gotIDs[s] != wantIDs[s] {
			t.Errorf("step %d: id %d, the CPU's %d (logits %.6g and %.6g on the CPU)", s, gotIDs[s], wantIDs[s], wantLogits[s][gotIDs[s]], wantLogits[s][wantIDs[s]])
			break
		}
	}
}
