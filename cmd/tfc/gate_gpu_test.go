//go:build gpu

package main

import (
	"testing"

	"tfc/runtime/device"
	"tfc/runtime/device/cuda"
)

// TestFixtureGatesCUDA is TestFixtureGates on the cuda backend: every family's fixture against
// its oracle's float64 run.
func TestFixtureGatesCUDA(t *testing.T) {
	gateFixtures(t, func() (device.Backend, error) {
		be, err := cuda.New()
		if err == nil {
			t.Cleanup(func() { be.Close() })
			t.Logf("backend %s", be.Describe())
		}
		return be, err
	})
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

// TestSweepBF16CUDA is TestSweepBF16CPU on the cuda backend: the publisher's BF16 ids on the same
// kind of card.
func TestSweepBF16CUDA(t *testing.T) { gateSweepBF16(t, "cuda") }
