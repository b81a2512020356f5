package device

import "math"

// BF16ToF32 widens bfloat16 bits exactly.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 rounds to the nearest bfloat16, ties to even; NaN stays a quiet NaN.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// F16ToF32 widens IEEE half-precision bits exactly, subnormals included.
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp == 0:
		// subnormal or zero: man · 2^-24
		v := float32(man) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}

// F32ToF16 rounds to the nearest half-precision value, ties to even; overflow gives ±Inf.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	a := b & 0x7fffffff
	switch {
	case a > 0x7f800000: // NaN
		return sign | 0x7e00 | uint16(a>>13)&0x3ff
	case a >= 0x477ff000: // rounds past 65504
		return sign | 0x7c00
	case a >= 0x38800000: // normal half
		r := a + 0xfff + (a>>13)&1
		return sign | uint16((r-0x38000000)>>13)
	}
	// subnormal half: value = a · 2^-24 rounded to an integer count of 2^-24
	v := math.Float32frombits(a)
	q := math.RoundToEven(float64(v) * (1 << 24))
	return sign | uint16(q)
}
