package checkpoint_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"tfc/runtime/checkpoint"
)

// halfValue is the value of an IEEE half-precision bit pattern, computed from its definition.
func halfValue(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	mant := float64(h & 0x3ff)
	switch exp {
	case 0x1f:
		if mant == 0 {
			return sign * math.Inf(1)
		}
		return math.NaN()
	case 0:
		return sign * math.Ldexp(mant, -24)
	}
	return sign * math.Ldexp(1+mant/1024, exp-15)
}

func TestF16ToFloat32EveryValue(t *testing.T) {
	src := make([]byte, 2<<16)
	for h := 0; h < 1<<16; h++ {
		binary.LittleEndian.PutUint16(src[2*h:], uint16(h))
	}
	dst := make([]float32, 1<<16)
	checkpoint.F16ToFloat32(dst, src)
	for h := 0; h < 1<<16; h++ {
		got, want := dst[h], halfValue(uint16(h))
		bits := math.Float32bits(got)
		switch {
		case math.IsNaN(want):
			// NaN keeps its sign and payload, shifted into the float32 mantissa.
			if !math.IsNaN(float64(got)) || bits>>31 != uint32(h>>15) || bits&0x7fffff != uint32(h&0x3ff)<<13 {
				t.Fatalf("f16 %#04x: got %#08x, want NaN with its sign and payload", h, bits)
			}
		case float64(got) != want || math.Signbit(float64(got)) != (h&0x8000 != 0):
			t.Fatalf("f16 %#04x: got %v (%#08x), want %v", h, got, bits, want)
		}
	}
}

func TestBF16ToFloat32(t *testing.T) {
	for _, n := range []int{0, 1, 3, 4, 5, 17} {
		src := make([]byte, 2*n)
		want := make([]uint32, n)
		for i := range n {
			h := uint16(rand.Uint32())
			if i == 0 {
				h = 0x7fc1 // a NaN with a payload
			}
			binary.LittleEndian.PutUint16(src[2*i:], h)
			want[i] = uint32(h) << 16
		}
		dst := make([]float32, n)
		checkpoint.BF16ToFloat32(dst, src)
		for i := range n {
			if got := math.Float32bits(dst[i]); got != want[i] {
				t.Fatalf("n=%d element %d: got %#08x, want %#08x", n, i, got, want[i])
			}
		}
	}
}

func TestToFloat32Parallel(t *testing.T) {
	n := 3<<20 + 5 // over the parallel threshold, not a multiple of the core count
	for _, dt := range []checkpoint.DType{checkpoint.BF16, checkpoint.F16} {
		data := make([]byte, 2*n)
		for i := range data {
			data[i] = byte(rand.Uint32())
		}
		got, want := make([]float32, n), make([]float32, n)
		if err := checkpoint.ToFloat32(got, checkpoint.Tensor{Name: "w", DType: dt, Shape: []int{n}, Data: data}); err != nil {
			t.Fatal(err)
		}
		if dt == checkpoint.BF16 {
			checkpoint.BF16ToFloat32(want, data)
		} else {
			checkpoint.F16ToFloat32(want, data)
		}
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s element %d: got %#08x, want %#08x", dt, i, math.Float32bits(got[i]), math.Float32bits(want[i]))
			}
		}
	}
}

func TestToFloat32F32(t *testing.T) {
	vals := []float32{1.5, float32(math.Inf(-1)), -0, 3e-45}
	data := make([]byte, 16)
	for i, v := range vals {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
	}
	dst := make([]float32, 4)
	if err := checkpoint.ToFloat32(dst, checkpoint.Tensor{Name: "x", DType: checkpoint.F32, Shape: []int{2, 2}, Data: data}); err != nil {
		t.Fatal(err)
	}
	for i := range vals {
		if math.Float32bits(dst[i]) != math.Float32bits(vals[i]) {
			t.Errorf("element %d: got %v, want %v", i, dst[i], vals[i])
		}
	}
	if err := checkpoint.ToFloat32(dst, checkpoint.Tensor{Name: "x", DType: checkpoint.F32, Shape: []int{4}, Data: data[:12]}); err == nil {
		t.Error("ToFloat32 accepted data shorter than the shape")
	}
}

func benchmarkConvert(b *testing.B, n int, convert func([]float32, []byte)) {
	src := make([]byte, 2*n)
	for i := range src {
		src[i] = byte(i * 31)
	}
	dst := make([]float32, n)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		convert(dst, src)
	}
}

func BenchmarkBF16ToFloat32(b *testing.B) { benchmarkConvert(b, 1<<22, checkpoint.BF16ToFloat32) }
func BenchmarkF16ToFloat32(b *testing.B)  { benchmarkConvert(b, 1<<22, checkpoint.F16ToFloat32) }

// BenchmarkToFloat32 converts a 4M-element BF16 tensor, split over the cores.
func BenchmarkToFloat32(b *testing.B) {
	n := 1 << 22
	t := checkpoint.Tensor{Name: "w", DType: checkpoint.BF16, Shape: []int{n}, Data: make([]byte, 2*n)}
	for i := range t.Data {
		t.Data[i] = byte(i * 31)
	}
	dst := make([]float32, n)
	b.SetBytes(int64(len(t.Data)))
	for b.Loop() {
		if err := checkpoint.ToFloat32(dst, t); err != nil {
			b.Fatal(err)
		}
	}
}
