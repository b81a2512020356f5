//go:build gpu

package main

import (
	"testing"

	"tfc/runtime/device"
	"tfc/runtime/device/cuda"
)

// TestQwen2VLGateCUDA is TestQwen2VLGate on the cuda backend: prompt ids, pixel values, vision
// rows, greedy ids and top-5 logits of the tiny checkpoint against transformers' float64 run.
func TestQwen2VLGateCUDA(t *testing.T) {
	be, err := cuda.New()
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	t.Logf("backend %s", be.Describe())
	gateQwen2VL(t, be)
}

// TestDotsOCRGateCUDA is TestDotsOCRGate on the cuda backend.
func TestDotsOCRGateCUDA(t *testing.T) {
	be, err := cuda.New()
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	t.Logf("backend %s", be.Describe())
	gateDotsOCR(t, be)
}

// TestSweepCUDA is TestSweepCPU on the cuda backend: every sweep config's ids and logits against
// the publisher's float64 run.
func TestSweepCUDA(t *testing.T) {
	gateSweep(t, func() (device.Backend, error) {
		be, err := cuda.New()
		if err == nil {
			t.Cleanup(func() { be.Close() })
		}
		return be, err
	})
}
