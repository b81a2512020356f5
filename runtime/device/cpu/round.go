package cpu

import (
	"math"

	"tfc/runtime/device"
)

// rounds reports whether rounding point point of op (package catalog's Round) is on: in BF16
// precision, unless a test skips it.
func (be *Backend) rounds(op, point string) bool {
	return be.prec == device.BF16Precision && be.skip != op+"."+point
}

// rnd rounds x to BF16 when on.
func rnd(on bool, x float32) float32 {
	if on {
		return device.RoundBF16(x)
	}
	return x
}

// roundAll rounds every element of xs to BF16 when on.
func roundAll(on bool, xs []float32) {
	if on {
		for i, x := range xs {
			xs[i] = device.RoundBF16(x)
		}
	}
}

// actRounded is act, rounded when on. QuickGELU is three torch ops in transformers
// (x * sigmoid(1.702 * x)), each of which rounds.
func actRounded(a device.Act, x float32, on bool) float32 {
	if !on {
		return act(a, x)
	}
	if a == device.ActQuickGELU {
		t := device.RoundBF16(1.702 * x)
		s := device.RoundBF16(float32(1 / (1 + math.Exp(-float64(t)))))
		return device.RoundBF16(x * s)
	}
	return device.RoundBF16(act(a, x))
}
