package contracts

import (
	"math"

	"tfc/runtime/device"
)

// Round rounds x to the nearest value of dt (ties to even), going through float32 first as a
// backend does when it stores a float32 result: F32 keeps 24 significant bits, BF16 8, F16 11.
// I32 values are returned unchanged.
func Round(dt device.DType, x float64) float64 {
	switch dt {
	case device.F32:
		return float64(float32(x))
	case device.BF16:
		return roundBits(float64(float32(x)), 8, -126, 127)
	case device.F16:
		return roundBits(float64(float32(x)), 11, -14, 15)
	}
	return x
}

// roundBits rounds x to p significant bits with exponents in [emin, emax], subnormals below
// 2^emin, ties to even, and ±Inf past the largest finite value.
func roundBits(x float64, p, emin, emax int) float64 {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	_, e := math.Frexp(math.Abs(x)) // |x| = f·2^e, f in [0.5, 1)
	e--                             // |x| in [2^e, 2^(e+1))
	if e < emin {
		e = emin
	}
	ulp := math.Ldexp(1, e-p+1)
	r := math.RoundToEven(x/ulp) * ulp
	maxFinite := math.Ldexp(2-math.Ldexp(1, 1-p), emax)
	if math.Abs(r) > maxFinite {
		return math.Copysign(math.Inf(1), x)
	}
	return r
}
