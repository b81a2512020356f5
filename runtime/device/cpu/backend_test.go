package cpu_test

import (
	"encoding/binary"
	"flag"
	"math"
	"math/rand"
	"strings"
	"testing"
	"time"

	"tfc/contracts"
	"tfc/runtime/device"
	"tfc/runtime/device/cpu"
)

var seedFlag = flag.Int64("seed", 0, "random seed for test inputs (0: from the clock)")

func rng(t testing.TB) *rand.Rand {
	s := *seedFlag
	if s == 0 {
		s = time.Now().UnixNano()
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d; rerun with -seed=%d", s, s)
		}
	})
	return rand.New(rand.NewSource(s))
}

func randomF32(r *rand.Rand) float32 {
	for {
		f := math.Float32frombits(r.Uint32())
		if !math.IsNaN(float64(f)) {
			return f
		}
	}
}

func TestBF16Rounding(t *testing.T) {
	r := rng(t)
	edges := []float32{0, -0, 1, -1, 1.00390625, 1.01171875, 3.3895314e38, 3.3961776e38, math.MaxFloat32, 1e-40, -1e-45,
		float32(math.Inf(1)), float32(math.Inf(-1))}
	for i := 0; i < 1<<20; i++ {
		edges = append(edges, randomF32(r))
	}
	for _, f := range edges {
		got := float64(device.BF16ToF32(device.F32ToBF16(f)))
		want := contracts.Round(device.BF16, float64(f))
		if got != want && !(got == 0 && want == 0) {
			t.Fatalf("bf16(%g) = %g, want %g", f, got, want)
		}
	}
	if h := device.F32ToBF16(float32(math.NaN())); !math.IsNaN(float64(device.BF16ToF32(h))) {
		t.Fatalf("bf16(NaN) = %#x is not NaN", h)
	}
}

func TestF16RoundTrip(t *testing.T) {
	r := rng(t)
	for h := 0; h < 1<<16; h++ {
		f := device.F16ToF32(uint16(h))
		if math.IsNaN(float64(f)) {
			if !math.IsNaN(float64(device.F16ToF32(device.F32ToF16(f)))) {
				t.Fatalf("f16 NaN %#x lost", h)
			}
			continue
		}
		if back := device.F32ToF16(f); back != uint16(h) {
			t.Fatalf("f16 %#x → %g → %#x", h, f, back)
		}
	}
	for i := 0; i < 1<<20; i++ {
		f := randomF32(r)
		if i%2 == 0 {
			f = float32(r.NormFloat64() * math.Pow(2, float64(r.Intn(40)-25)))
		}
		got := float64(device.F16ToF32(device.F32ToF16(f)))
		if want := contracts.Round(device.F16, float64(f)); got != want {
			t.Fatalf("f16(%g) = %g, want %g", f, got, want)
		}
	}
}

func alloc(t *testing.T, be device.Backend, dt device.DType, n int) device.Buffer {
	t.Helper()
	b, err := be.Alloc(dt, n)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWriteReadConversions(t *testing.T) {
	be := cpu.New()
	// raw BF16 bytes into an F32 tensor convert exactly; into a BF16 tensor the bits are kept
	raw := []byte{}
	bits := []uint16{0x3f80, 0xbfc0, 0x7f80, 0x0001, 0x4049}
	for _, h := range bits {
		raw = binary.LittleEndian.AppendUint16(raw, h)
	}
	f := device.Tensor{Buf: alloc(t, be, device.F32, 5), Rows: 1, Cols: 5}
	if err := be.Write(f, raw, device.BF16); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 5)
	if err := be.Read(f, got); err != nil {
		t.Fatal(err)
	}
	for i, h := range bits {
		if math.Float32bits(got[i]) != uint32(h)<<16 {
			t.Errorf("bf16 %#x read back as %g", h, got[i])
		}
	}
	// F32 into BF16 rounds to nearest even; strided views write and read only their columns
	buf := alloc(t, be, device.BF16, 12)
	wide := device.Tensor{Buf: buf, Rows: 3, Cols: 4}
	col := wide.ColSlice(1, 3)
	in := []float32{1.00390625, 1.01171875, -2.5, 3, 1e-3, 7}
	if err := be.Write(col, in, device.F32); err != nil {
		t.Fatal(err)
	}
	all := make([]float32, 12)
	if err := be.Read(wide, all); err != nil {
		t.Fatal(err)
	}
	want := []float32{0, 1, 1.015625, 0, 0, -2.5, 3, 0, 0, float32(contracts.Round(device.BF16, 1e-3)), 7, 0}
	for i := range want {
		if all[i] != want[i] {
			t.Errorf("element %d = %g, want %g", i, all[i], want[i])
		}
	}
	// F16 bytes into F32
	h := device.Tensor{Buf: alloc(t, be, device.F32, 2), Rows: 1, Cols: 2}
	if err := be.Write(h, []byte{0x00, 0x3c, 0x01, 0x00}, device.F16); err != nil {
		t.Fatal(err)
	}
	if err := be.Read(h, got[:2]); err != nil {
		t.Fatal(err)
	}
	if got[0] != 1 || got[1] != float32(math.Ldexp(1, -24)) {
		t.Errorf("f16 bytes read back as %v", got[:2])
	}
}

func TestWriteReadErrors(t *testing.T) {
	be := cpu.New()
	other := cpu.New()
	f := device.Tensor{Buf: alloc(t, be, device.F32, 6), Rows: 2, Cols: 3}
	i := device.Tensor{Buf: alloc(t, be, device.I32, 6), Rows: 2, Cols: 3}
	freed := device.Tensor{Buf: alloc(t, be, device.F32, 6), Rows: 2, Cols: 3}
	be.Free(freed.Buf)
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"short", be.Write(f, make([]float32, 5), device.F32), "5 float32 values"},
		{"ints into floats", be.Write(f, make([]int32, 6), device.I32), "I32 buffers"},
		{"floats into ints", be.Write(i, make([]float32, 6), device.F32), "write []int32"},
		{"bad bytes", be.Write(f, make([]byte, 7), device.BF16), "want 12 bytes"},
		{"past end", be.Write(device.Tensor{Buf: f.Buf, Off: 1, Rows: 2, Cols: 3}, make([]float32, 6), device.F32), "runs past"},
		{"foreign", other.Write(f, make([]float32, 6), device.F32), "not a buffer of this cpu backend"},
		{"freed", be.Read(freed, make([]float32, 6)), "freed"},
		{"read type", be.Read(i, make([]float32, 6)), "[]int32"},
		{"unknown", be.Write(f, "x", device.F32), "pass []float32"},
	}
	for _, c := range cases {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to mention %q", c.name, c.err, c.want)
		}
	}
}
