package sweep

import (
	"math"
	"testing"
)

// TestRounding checks the BF16 and F16 encoders on exact values, ties and the half's edges.
func TestRounding(t *testing.T) {
	for _, c := range []struct {
		f    float32
		bf16 uint16
		f16  uint16
	}{
		{1, 0x3f80, 0x3c00},
		{0.5, 0x3f00, 0x3800},
		{-2, 0xc000, 0xc000},
		{65504, 0x4780, 0x7bff},
		{1 << 16, 0x4780, 0x7c00},       // the half overflows to +Inf
		{0x1p-24, 0x3380, 0x0001},       // the smallest half subnormal
		{0x1p-26, 0x3280, 0x0000},       // below half of it: 0
		{1 + 0x1p-11, 0x3f80, 0x3c00},   // a half tie, to even
		{1 + 3*0x1p-11, 0x3f80, 0x3c02}, // a half tie, up to even
		{1 + 0x1p-8, 0x3f80, 0x3c04},    // a BF16 tie, to even
		{1 + 3*0x1p-8, 0x3f82, 0x3c0c},  // a BF16 tie, up to even
		{float32(math.Pi), 0x4049, 0x4248},
	} {
		if got := bf16(c.f); got != c.bf16 {
			t.Errorf("bf16(%g) = %#04x, want %#04x", c.f, got, c.bf16)
		}
		if got := f16(c.f); got != c.f16 {
			t.Errorf("f16(%g) = %#04x, want %#04x", c.f, got, c.f16)
		}
	}
}
