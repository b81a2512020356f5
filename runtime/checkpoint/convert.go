package checkpoint

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"sync"
)

// ToFloat32 converts the tensor's elements into dst, which must hold exactly that many.
// BF16 and F16 widen exactly, subnormals, infinities and NaN payloads included.
func ToFloat32(dst []float32, t Tensor) error {
	n := t.Elements()
	if len(dst) != n {
		return fmt.Errorf("tensor %s has %d elements but the destination holds %d", t.Name, n, len(dst))
	}
	if size := t.DType.Size(); size == 0 || len(t.Data) != n*size {
		return fmt.Errorf("tensor %s: %d data bytes do not hold %d elements of %s", t.Name, len(t.Data), n, t.DType)
	}
	convert := F32ToFloat32
	switch t.DType {
	case BF16:
		convert = BF16ToFloat32
	case F16:
		convert = F16ToFloat32
	}
	parallel(dst, t.Data, t.DType.Size(), convert)
	return nil
}

// parallelMin is the element count from which a conversion is split over the cores.
const parallelMin = 1 << 20

// parallel runs convert over chunks of dst and src on every core.
func parallel(dst []float32, src []byte, size int, convert func([]float32, []byte)) {
	workers := runtime.GOMAXPROCS(0)
	if len(dst) < parallelMin || workers == 1 {
		convert(dst, src)
		return
	}
	chunk := (len(dst) + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := 0; lo < len(dst); lo += chunk {
		hi := min(lo+chunk, len(dst))
		wg.Go(func() { convert(dst[lo:hi], src[lo*size:hi*size]) })
	}
	wg.Wait()
}

// BF16ToFloat32 widens len(dst) little-endian bfloat16 values from src.
func BF16ToFloat32(dst []float32, src []byte) {
	src = src[:2*len(dst)]
	i := 0
	for ; i+4 <= len(dst); i += 4 {
		s := src[2*i : 2*i+8]
		d := dst[i : i+4]
		d[0] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(s[0:])) << 16)
		d[1] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(s[2:])) << 16)
		d[2] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(s[4:])) << 16)
		d[3] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(s[6:])) << 16)
	}
	for ; i < len(dst); i++ {
		dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:])) << 16)
	}
}

// F16ToFloat32 widens len(dst) little-endian IEEE half-precision values from src.
func F16ToFloat32(dst []float32, src []byte) {
	table := f16Table()
	src = src[:2*len(dst)]
	i := 0
	for ; i+4 <= len(dst); i += 4 {
		s := src[2*i : 2*i+8]
		d := dst[i : i+4]
		d[0] = math.Float32frombits(table[binary.LittleEndian.Uint16(s[0:])])
		d[1] = math.Float32frombits(table[binary.LittleEndian.Uint16(s[2:])])
		d[2] = math.Float32frombits(table[binary.LittleEndian.Uint16(s[4:])])
		d[3] = math.Float32frombits(table[binary.LittleEndian.Uint16(s[6:])])
	}
	for ; i < len(dst); i++ {
		dst[i] = math.Float32frombits(table[binary.LittleEndian.Uint16(src[2*i:])])
	}
}

// F32ToFloat32 copies len(dst) little-endian float32 values from src.
func F32ToFloat32(dst []float32, src []byte) {
	src = src[:4*len(dst)]
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

// f16Table maps every half-precision bit pattern to its float32 bit pattern.
var f16Table = sync.OnceValue(func() *[1 << 16]uint32 {
	var t [1 << 16]uint32
	for h := range t {
		t[h] = f16Bits(uint16(h))
	}
	return &t
})

// f16Bits widens one half-precision value to float32 bits.
func f16Bits(h uint16) uint32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // infinity or NaN, payload kept
		return sign | 0x7f800000 | mant<<13
	case exp != 0: // normal
		return sign | (exp+127-15)<<23 | mant<<13
	case mant == 0: // signed zero
		return sign
	}
	// subnormal: shift the mantissa up until its leading one is the implicit bit
	e := uint32(127 - 15 + 1)
	for mant&0x400 == 0 {
		mant <<= 1
		e--
	}
	return sign | e<<23 | (mant&0x3ff)<<13
}
