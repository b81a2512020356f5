package image

import "encoding/binary"

// adler32Update continues the Adler-32 checksum adler (1 for an empty input) over p, as
// hash/adler32.Update does, eight bytes at a time: each word's byte sum and its sum weighted
// 8, 7, ..., 1 come from two multiplications of its bytes spread into 16-bit lanes.
func adler32Update(adler uint32, p []byte) uint32 {
	const mod = 65521
	const lanes = 0x00ff00ff00ff00ff
	s1, s2 := uint64(adler&0xffff), uint64(adler>>16)
	for len(p) >= 16 {
		// A block keeps s2 below 2^64: s1 < mod + 255*n and s2 grows by at most n*s1.
		n := min(len(p), 1<<16) &^ 15
		for q := p[:n]; len(q) >= 16; q = q[16:] {
			a := binary.LittleEndian.Uint64(q)
			b := binary.LittleEndian.Uint64(q[8:])
			aLo, aHi := a&lanes, (a>>8)&lanes // bytes 0,2,4,6 and 1,3,5,7, one a lane
			bLo, bHi := b&lanes, (b>>8)&lanes
			sumA := ((aLo + aHi) * 0x0001000100010001) >> 48
			sumB := ((bLo + bHi) * 0x0001000100010001) >> 48
			// The top lane of x*K is x0*k3 + x1*k2 + x2*k1 + x3*k0; no lower lane carries into it.
			wA := (aLo*0x0008000600040002 + aHi*0x0007000500030001) >> 48
			wB := (bLo*0x0008000600040002 + bHi*0x0007000500030001) >> 48
			s2 += 16*s1 + 8*sumA + wA + wB
			s1 += sumA + sumB
		}
		s1 %= mod
		s2 %= mod
		p = p[n:]
	}
	for _, c := range p {
		s1 += uint64(c)
		s2 += s1
	}
	s1 %= mod
	s2 %= mod
	return uint32(s2<<16 | s1)
}
