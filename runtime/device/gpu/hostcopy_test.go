package gpu

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tfc/runtime/device"
)

// TestEncodeDecode: values written in each dtype read back as the dtype rounds them.
func TestEncodeDecode(t *testing.T) {
	src := []float32{1, -2.5, 0.1, 65504, 3.0e-5}
	for _, dt := range []device.DType{device.F32, device.BF16, device.F16} {
		host, err := Encode(dt, len(src), src, device.F32)
		if err != nil {
			t.Fatal(err)
		}
		if len(host) != len(src)*dt.Size() {
			t.Fatalf("%v: %d bytes", dt, len(host))
		}
		got := make([]float32, len(src))
		if err := CheckRead(dt, 1, len(src), got); err != nil {
			t.Fatal(err)
		}
		Decode(dt, host, got)
		for i, v := range got {
			tol := map[device.DType]float32{device.F32: 0, device.BF16: 1.0 / 128, device.F16: 1.0 / 1024}[dt]
			d := v - src[i]
			if d < 0 {
				d = -d
			}
			if d > tol*max(1, abs(src[i])) {
				t.Errorf("%v: %g read back as %g", dt, src[i], v)
			}
		}
		again, err := Encode(dt, len(src), host, dt)
		if err != nil || !slices.Equal(again, host) {
			t.Errorf("%v: bytes of the same dtype are not copied as stored: %v", dt, err)
		}
	}
	ids := []int32{7, -1, 1 << 30}
	host, err := Encode(device.I32, 3, ids, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]int32, 3)
	Decode(device.I32, host, got)
	if !slices.Equal(got, ids) {
		t.Fatalf("ids read back as %v", got)
	}
}

func abs(v float32) float32 {
	if v < 0 {
		return -v
	}
	return v
}

func TestHostCopyRefusals(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{func() error { _, err := Encode(device.F32, 2, []int32{1, 2}, 0); return err }(), "I32 buffers"},
		{func() error { _, err := Encode(device.I32, 2, []float32{1, 2}, 0); return err }(), "[]int32"},
		{func() error { _, err := Encode(device.F32, 3, []float32{1, 2}, 0); return err }(), "2 float32 values"},
		{func() error { _, err := Encode(device.F32, 2, []byte{1, 2, 3}, device.BF16); return err }(), "want 4 bytes"},
		{CheckRead(device.I32, 1, 2, make([]float32, 2)), "[]int32"},
		{CheckRead(device.F32, 2, 2, make([]float32, 3)), "3 float32"},
		{View("read", device.Tensor{Rows: 2, Cols: 4, Off: 1}, 8), "runs past"},
		{View("read", device.Tensor{Rows: 2, Cols: 4, Stride: 3}, 100), "malformed"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("got %v, want it to say %q", c.err, c.want)
		}
	}
	if err := View("read", device.Tensor{Rows: 2, Cols: 4, Off: 1, Stride: 5}, 10); err != nil {
		t.Error(err)
	}
}

func TestCache(t *testing.T) {
	c := Cache{Dir: filepath.Join(t.TempDir(), "objs"), Ext: ".hsaco"}
	if _, ok := c.Load("k"); ok {
		t.Fatal("an empty cache had k")
	}
	c.Store("k", []byte("object"))
	if data, ok := c.Load("k"); !ok || string(data) != "object" {
		t.Fatalf("load after store: %q %v", data, ok)
	}
	if files, _ := filepath.Glob(filepath.Join(c.Dir, "*")); len(files) != 1 || filepath.Base(files[0]) != "k.hsaco" {
		t.Fatalf("cache folder holds %v", files)
	}
	var none Cache
	none.Store("k", []byte("x"))
	if _, ok := none.Load("k"); ok {
		t.Fatal("the zero cache kept something")
	}
	if _, err := os.Stat("k"); err == nil {
		t.Fatal("the zero cache wrote into the working folder")
	}
}

// TestBytesMatchValues: the byte copies of float32 and int32 slices give the bytes the
// value-at-a-time loops give (including NaN payloads and -0), both ways and for every dtype.
func TestBytesMatchValues(t *testing.T) {
	if !littleEndian {
		t.Skip("a big-endian host takes the loops only")
	}
	fs := []float32{1, -2.5, float32(math.Copysign(0, -1)), math.Float32frombits(0x7fc01234), float32(math.Inf(-1)), 3.0e-41}
	is := []int32{7, -1, 1 << 30, math.MinInt32}
	encode := func(dt device.DType, src any) []byte {
		n := len(fs)
		if _, ok := src.([]int32); ok {
			n = len(is)
		}
		b, err := Encode(dt, n, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, dt := range []device.DType{device.F32, device.BF16, device.F16} {
		fast := encode(dt, fs)
		littleEndian = false
		slow := encode(dt, fs)
		back := make([]float32, len(fs))
		Decode(dt, slow, back)
		littleEndian = true
		if !slices.Equal(fast, slow) {
			t.Errorf("%v: encoded bytes differ: %x against %x", dt, fast, slow)
		}
		got := make([]float32, len(fs))
		Decode(dt, fast, got)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(back[i]) {
				t.Errorf("%v: element %d decodes to %08x, the loop's %08x", dt, i, math.Float32bits(got[i]), math.Float32bits(back[i]))
			}
		}
	}
	fast := encode(device.I32, is)
	littleEndian = false
	slow := encode(device.I32, is)
	littleEndian = true
	if !slices.Equal(fast, slow) {
		t.Errorf("int32 bytes differ: %x against %x", fast, slow)
	}
	got := make([]int32, len(is))
	Decode(device.I32, fast, got)
	if !slices.Equal(got, is) {
		t.Errorf("int32 read back as %v", got)
	}
}

// TestRoundBitsMatchValues: RoundF32ToBF16 on words gives device.RoundBF16's bits for every value
// of a sweep over the exponents and the rounding bits, and keeps NaNs as written.
func TestRoundBitsMatchValues(t *testing.T) {
	var words []uint32
	for e := uint32(0); e < 256; e++ {
		for _, m := range []uint32{0, 1, 0x7fff, 0x8000, 0x8001, 0x18000, 0x7fffff, 0x7f8000, 0x12345} {
			words = append(words, e<<23|m, 1<<31|e<<23|m)
		}
	}
	host := make([]byte, 4*len(words))
	for i, w := range words {
		binary.LittleEndian.PutUint32(host[4*i:], w)
	}
	RoundF32ToBF16(host)
	for i, w := range words {
		x := math.Float32frombits(w)
		want := w
		if x == x {
			want = math.Float32bits(device.RoundBF16(x))
		}
		if got := binary.LittleEndian.Uint32(host[4*i:]); got != want {
			t.Fatalf("%08x rounds to %08x, want %08x", w, got, want)
		}
	}
}
