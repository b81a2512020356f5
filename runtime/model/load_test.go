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

func (f *failing) Launch(*device.Kernel, ...device.Op) error {
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
	l := &Launcher{B: be, Trace: func(*device.Kernel, string, device.Tensor) { traced++ }}
	for _, name := range []string{"a", "b", "c"} {
		l.Launch(&device.Kernel{Name: name, Source: "graphs/x.graph:7"}, "y", device.Tensor{})
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
