package model

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"tfc/runtime/device"
	"tfc/runtime/device/cpu"
)

// failing counts launches and fails the second.
type failing struct {
	device.Backend
	calls int
}

func (f *failing) Launch(*device.KernelRef, ...device.Op) error {
	f.calls++
	if f.calls == 2 {
		return errors.New("boom")
	}
	return nil
}

// TestLauncherKeepsTheFirstError: after a failed launch the rest are skipped and Trace sees no
// more; Finish returns that error, naming the kernel and its graph lines.
func TestLauncherKeepsTheFirstError(t *testing.T) {
	be := &failing{Backend: cpu.New()}
	traced := 0
	l := &Launcher{B: be, Trace: func(*device.KernelRef, string, device.Tensor) { traced++ }}
	for _, name := range []string{"a", "b", "c"} {
		l.Launch(&device.KernelRef{Name: name, Source: "graphs/x.graph:7"}, "y", device.Tensor{})
	}
	if be.calls != 2 || traced != 1 {
		t.Fatalf("%d launches, %d traced; want 2 and 1", be.calls, traced)
	}
	if _, err := l.Finish(device.Tensor{}); err == nil || err.Error() != "b (graphs/x.graph:7): boom" {
		t.Fatalf("Finish = %v", err)
	}
}

// TestWriteInput: a length other than the tensor's is refused by name and shape; an empty input
// writes nothing; the values land.
func TestWriteInput(t *testing.T) {
	be := cpu.New()
	buf, _ := be.Alloc(device.I32, 6)
	x := device.Tensor{Buf: buf, Rows: 2, Cols: 3}
	err := WriteInput(be, x, []int32{1, 2}, device.I32, "fam", "ids", "[1, R]")
	if err == nil || err.Error() != "fam: input ids has 2 values; it must be [1, R] = 6" {
		t.Fatalf("short input: %v", err)
	}
	if err := WriteInput(be, device.Tensor{Buf: buf}, []int32{}, device.I32, "fam", "ids", "[1, R]"); err != nil {
		t.Fatalf("empty input: %v", err)
	}
	if err := WriteInput(be, x, []string{}, device.I32, "fam", "ids", "[1, R]"); err == nil || !strings.Contains(err.Error(), "not []float32 or []int32") {
		t.Fatalf("a []string: %v", err)
	}
	if err := WriteInput(be, x, []int32{1, 2, 3, 4, 5, 6}, device.I32, "fam", "ids", "[1, R]"); err != nil {
		t.Fatal(err)
	}
	got := make([]int32, 6)
	if err := be.Read(x, got); err != nil || got[5] != 6 {
		t.Fatalf("read %v %v", got, err)
	}
}

// TestUnfold: a [2, 6] matrix whose columns are torch unfold's (channel c, window slot k at
// c*3 + k) comes out in merge's order (k*2 + c), for one- and two-byte elements.
func TestUnfold(t *testing.T) {
	in := []byte{
		0, 10, 20, 1, 11, 21, // row 0: c0k0 c0k1 c0k2 c1k0 c1k1 c1k2
		100, 110, 120, 101, 111, 121,
	}
	want := []byte{0, 1, 10, 11, 20, 21, 100, 101, 110, 111, 120, 121}
	got, err := Unfold(in, 2, 6, 3, 1)
	if err != nil || string(got) != string(want) {
		t.Fatalf("Unfold = %v, %v; want %v", got, err, want)
	}
	if in[1] != 10 {
		t.Fatal("Unfold changed its input")
	}
	wide := make([]byte, 2*len(in))
	for i, b := range in {
		wide[2*i], wide[2*i+1] = b, ^b
	}
	got, err = Unfold(wide, 2, 6, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range want {
		if got[2*i] != b || got[2*i+1] != ^b {
			t.Fatalf("two-byte Unfold element %d = %d,%d; want %d,%d", i, got[2*i], got[2*i+1], b, ^b)
		}
	}
	if _, err := Unfold(in, 2, 6, 4, 1); err == nil {
		t.Error("a factor that does not divide the width unfolded")
	}
}

// TestUploadUnfold: Upload loads a weight with Unfold set in merge's column order.
func TestUploadUnfold(t *testing.T) {
	be := cpu.New()
	bufs := NewBuffers(be)
	defer bufs.Free()
	src := []float32{0, 10, 1, 11, 2, 12} // [1, 6]: c*2 + k for 3 channels, 2 slots
	data := make([]byte, 4*len(src))
	for i, v := range src {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
	}
	var dst device.Tensor
	w := WeightAt("w", []int{1, 6}, &dst)
	w.Unfold = 2
	get := func(string) ([]byte, device.DType, error) { return data, device.F32, nil }
	if err := Upload(bufs, []Weight{w}, get, "f", "g"); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 6)
	if err := be.Read(dst, got); err != nil {
		t.Fatal(err)
	}
	want := []float32{0, 1, 2, 10, 11, 12}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("loaded %v, want %v", got, want)
		}
	}
}

// TestUploadStack: a stacked weight holds its parts' rows one after another, in one [rows, cols]
// view; the manifest lists the parts; parts of two dtypes are refused by name.
func TestUploadStack(t *testing.T) {
	f32 := func(vs ...float32) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
		return b
	}
	tensors := map[string][]byte{"a": f32(1, 2, 3, 4), "b": f32(5, 6), "c": {0, 0}}
	get := func(name string) ([]byte, device.DType, error) {
		if name == "c" {
			return tensors[name], device.BF16, nil
		}
		return tensors[name], device.F32, nil
	}
	be := cpu.New()
	var dst device.Tensor
	ws := []Weight{StackAt([]Weight{{Name: "a", Shape: []int{2, 2}}, {Name: "b", Shape: []int{1, 2}}}, &dst)}
	if err := Upload(NewBuffers(be), ws, get, "fam", "x.graph"); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 6)
	if err := be.Read(dst, got); err != nil || dst.Rows != 3 || dst.Cols != 2 || got[0] != 1 || got[3] != 4 || got[5] != 6 {
		t.Fatalf("stack [%d,%d] = %v (%v)", dst.Rows, dst.Cols, got, err)
	}
	if m := Manifest(ws); len(m) != 2 || m[0].Name != "a" || m[1].Name != "b" {
		t.Fatalf("manifest %v", m)
	}
	ws = []Weight{StackAt([]Weight{{Name: "b", Shape: []int{2}}, {Name: "c", Shape: []int{1}}}, &dst)}
	if err := Upload(NewBuffers(be), ws, get, "fam", "x.graph"); err == nil || !strings.Contains(err.Error(), "tensor b is F32 and c is BF16") {
		t.Fatalf("mixed dtypes: %v", err)
	}
}

// TestDeinterleave reads two heads of 4 rows (pairs (0,1), (2,3)) of one-byte rows of 2 in
// rope's halves order: rows 0, 2, 1, 3 of each head.
func TestDeinterleave(t *testing.T) {
	in := []byte{0, 1, 10, 11, 20, 21, 30, 31, 40, 41, 50, 51, 60, 61, 70, 71}
	want := []byte{0, 1, 20, 21, 10, 11, 30, 31, 40, 41, 60, 61, 50, 51, 70, 71}
	got, err := Deinterleave(in, 8, 2, 2, 1)
	if err != nil || string(got) != string(want) {
		t.Fatalf("Deinterleave = %v, %v; want %v", got, err, want)
	}
	if in[2] != 10 {
		t.Fatal("Deinterleave changed its input")
	}
	if _, err := Deinterleave(in, 8, 2, 3, 1); err == nil {
		t.Error("three heads of 8 rows deinterleaved")
	}
	if _, err := Deinterleave(in[:12], 6, 2, 2, 1); err == nil {
		t.Error("heads of 3 rows (an odd count) deinterleaved")
	}
}

// TestUploadF16InBF16: in BF16 precision an F16 weight loads as BF16 rounded to nearest even
// (ties to even, 65504 to 65536); in F32 precision it stays F16 as stored.
func TestUploadF16InBF16(t *testing.T) {
	halves := []float32{1 + 1.0/256, 1 + 3.0/256, 1 + 1.0/128 + 1.0/1024, 65504, -6.1035156e-05, 5.9604645e-08}
	want := []float32{1, 1 + 1.0/64, 1 + 1.0/128, 65536, -6.1035156e-05, 5.9604645e-08}
	data := make([]byte, 2*len(halves))
	for i, v := range halves {
		binary.LittleEndian.PutUint16(data[2*i:], device.F32ToF16(v))
	}
	get := func(string) ([]byte, device.DType, error) { return data, device.F16, nil }
	for _, prec := range []device.Precision{device.F32Precision, device.BF16Precision} {
		be := cpu.New(cpu.Precision(prec))
		var dst device.Tensor
		if err := Upload(NewBuffers(be), []Weight{WeightAt("w", []int{len(halves)}, &dst)}, get, "f", "g"); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, len(halves))
		if err := be.Read(dst, got); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			w := halves[i]
			if prec == device.BF16Precision {
				w = want[i]
			}
			if got[i] != w {
				t.Fatalf("%s: weight %d loads as %g, want %g (stored %g)", prec, i, got[i], w, halves[i])
			}
		}
	}
}
