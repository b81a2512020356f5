package cpu_test

import (
	"math"
	"math/rand"
	"testing"

	"tfc/contracts"
	"tfc/runtime/device"
	"tfc/runtime/device/cpu"
)

// TestRopeAlternatingHand rotates one head of 8 (2 pairs an axis) at row 3, column 5 in the
// alternating mode and checks it against angles worked by hand: pair 0 rows at θ^0, pair 1 rows
// at θ^(-4/8), pair 2 columns at θ^(-2/8), pair 3 columns at θ^(-6/8). The per-axis mode on the
// same input is the planted control: its column frequencies are θ^0 and θ^(-1/2), so it must differ.
func TestRopeAlternatingHand(t *testing.T) {
	const theta = 100.0
	x := []float32{1, 2, 3, 4, 0.5, -1, 2, -0.25}
	angles := []float64{3 * 1, 3 * math.Pow(theta, -0.5), 5 * math.Pow(theta, -0.25), 5 * math.Pow(theta, -0.75)}
	want := make([]float64, 8)
	for j, a := range angles {
		u, v := float64(x[j]), float64(x[j+4])
		want[j], want[j+4] = u*math.Cos(a)-v*math.Sin(a), v*math.Cos(a)+u*math.Sin(a)
	}
	run := func(mode device.RopeMode) []float32 {
		be := cpu.New()
		b := &contracts.Builder{Backend: be, Rng: rand.New(rand.NewSource(1))}
		defer b.Free()
		xt := b.Out(device.F32, 1, 8)
		if err := be.Write(xt, x, device.F32); err != nil {
			t.Fatal(err)
		}
		op := device.Rope{X: xt, Pos: b.Ints(1, 2, []int32{3, 5}), Heads: 1, HeadDim: 8, Theta: theta, Sections: []int{2, 2}, Mode: mode}
		if err := launch(be, op); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, 8)
		if err := be.Read(xt, got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	worst := func(got []float32) float64 {
		w := 0.0
		for i := range got {
			w = max(w, math.Abs(float64(got[i])-want[i]))
		}
		return w
	}
	if w := worst(run(device.RopeAlternating)); w > 1e-5 {
		t.Errorf("alternating rope is %g from the hand-worked rotation", w)
	}
	if w := worst(run(device.RopePerAxis)); w < 1e-2 {
		t.Errorf("control: the per-axis rope is only %g from the alternating rotation; the test cannot tell them apart", w)
	}
	inv, axis, err := device.RopeFreqs(8, theta, []int{2, 2}, device.RopeAlternating)
	if err != nil {
		t.Fatal(err)
	}
	for j, e := range []float64{0, -0.5, -0.25, -0.75} {
		if math.Abs(float64(inv[j])-math.Pow(theta, e)) > 1e-6 || axis[j] != j/2 {
			t.Errorf("RopeFreqs pair %d: %g axis %d, want %g axis %d", j, inv[j], axis[j], math.Pow(theta, e), j/2)
		}
	}
	if _, _, err := device.RopeFreqs(10, theta, []int{2, 3}, device.RopeAlternating); err == nil {
		t.Error("RopeFreqs took unequal sections in alternating mode")
	}
}
