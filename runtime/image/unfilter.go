package image

import "encoding/binary"

// PNG row filters (PNG specification, section 9).
const (
	filterNone = iota
	filterSub
	filterUp
	filterAverage
	filterPaeth
)

// unfilter reverses PNG filter ft on row cur in place, prev being the previous row already
// reversed (zeros for the first row), bpp bytes a pixel; it reports false for an unknown filter.
func unfilter(ft byte, cur, prev []byte, bpp int) bool {
	prev = prev[:len(cur)]
	switch ft {
	case filterNone:
	case filterSub:
		unfilterSub(cur, bpp)
	case filterUp:
		unfilterUp(cur, prev)
	case filterAverage:
		unfilterAverage(cur, prev, bpp)
	case filterPaeth:
		unfilterPaeth(cur, prev, bpp)
	default:
		return false
	}
	return true
}

func unfilterSub(cur []byte, bpp int) {
	switch bpp {
	case 3:
		var r, g, b byte
		for i := 0; i+3 <= len(cur); i += 3 {
			p := cur[i : i+3 : i+3]
			r += p[0]
			g += p[1]
			b += p[2]
			p[0], p[1], p[2] = r, g, b
		}
	case 4:
		var r, g, b, a byte
		for i := 0; i+4 <= len(cur); i += 4 {
			p := cur[i : i+4 : i+4]
			r += p[0]
			g += p[1]
			b += p[2]
			a += p[3]
			p[0], p[1], p[2], p[3] = r, g, b, a
		}
	default:
		for i := bpp; i < len(cur); i++ {
			cur[i] += cur[i-bpp]
		}
	}
}

// unfilterUp adds prev to cur bytewise, eight bytes at a time without carries between bytes.
func unfilterUp(cur, prev []byte) {
	const high = 0x8080808080808080
	i := 0
	for ; i+8 <= len(cur); i += 8 {
		a := binary.LittleEndian.Uint64(cur[i:])
		b := binary.LittleEndian.Uint64(prev[i:])
		binary.LittleEndian.PutUint64(cur[i:], ((a&^high)+(b&^high))^((a^b)&high))
	}
	for ; i < len(cur); i++ {
		cur[i] += prev[i]
	}
}

func unfilterAverage(cur, prev []byte, bpp int) {
	for i := 0; i < bpp && i < len(cur); i++ {
		cur[i] += prev[i] / 2
	}
	if bpp == 3 {
		if len(cur) < 3 {
			return
		}
		r, g, b := uint(cur[0]), uint(cur[1]), uint(cur[2])
		for i := 3; i+3 <= len(cur); i += 3 {
			p, q := cur[i:i+3:i+3], prev[i:i+3:i+3]
			r = uint(p[0]+byte((r+uint(q[0]))>>1)) & 0xff
			g = uint(p[1]+byte((g+uint(q[1]))>>1)) & 0xff
			b = uint(p[2]+byte((b+uint(q[2]))>>1)) & 0xff
			p[0], p[1], p[2] = byte(r), byte(g), byte(b)
		}
		return
	}
	for i := bpp; i < len(cur); i++ {
		cur[i] += uint8((int(cur[i-bpp]) + int(prev[i])) / 2)
	}
}

func absInt(x int) int {
	m := x >> 63
	return (x ^ m) - m
}

// unfilterPaeth is image/png's filterPaeth: one channel at a time along the row.
func unfilterPaeth(cur, prev []byte, bpp int) {
	for k := 0; k < bpp; k++ {
		a, c := 0, 0
		for j := k; j < len(cur); j += bpp {
			b := int(prev[j])
			pa := b - c
			pb := a - c
			pc := absInt(pa + pb)
			pa = absInt(pa)
			pb = absInt(pb)
			if pa <= pb && pa <= pc {
				// a
			} else if pb <= pc {
				a = b
			} else {
				a = c
			}
			a = (a + int(cur[j])) & 0xff
			cur[j] = uint8(a)
			c = b
		}
	}
}
