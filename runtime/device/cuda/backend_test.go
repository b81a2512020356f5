package cuda

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"tfc/runtime/device"
	"tfc/runtime/device/gpu"
)

// TestRefusalsNameCUDA: refusals made on the host, before any driver call, say "cuda: " and
// what was wrong; a closed backend says it is closed.
func TestRefusalsNameCUDA(t *testing.T) {
	be := &Backend{th: gpu.NewThread()}
	buf := &gpu.Buffer{DT: device.F32, N: 8, Owner: be}
	other := &gpu.Buffer{DT: device.F32, N: 8, Owner: &Backend{}}
	freed := &gpu.Buffer{DT: device.F32, N: 8, Owner: be, Freed: true}
	tt := device.Tensor{Buf: buf, Rows: 2, Cols: 4}
	for _, c := range []struct {
		err  error
		want string
	}{
		{be.Write(tt, []int32{1, 2}, 0), "I32 buffers"},
		{be.Write(tt, []float32{1, 2}, device.F32), "2 float32 values"},
		{be.Read(tt, make([]int32, 8)), "read into []float32"},
		{be.Read(tt, make([]float64, 8)), "pass []float32 or []int32"},
		{be.Read(device.Tensor{Buf: buf, Rows: 2, Cols: 4, Off: 1}, make([]float32, 8)), "runs past a 8-element buffer"},
		{be.Write(device.Tensor{Buf: buf, Rows: 2, Cols: 4, Stride: 3}, make([]float32, 8), device.F32), "malformed"},
		{be.Read(device.Tensor{Buf: other, Rows: 1, Cols: 1}, make([]float32, 1)), "not this backend's"},
		{be.Read(device.Tensor{Buf: freed, Rows: 1, Cols: 1}, make([]float32, 1)), "freed"},
	} {
		if c.err == nil || !strings.HasPrefix(c.err.Error(), "cuda: ") || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("got %v, want cuda: ... %q", c.err, c.want)
		}
	}
	be.th.Stop()
	if err := be.Sync(); !errors.Is(err, gpu.ErrStopped) || err.Error() != "cuda: the backend is closed" {
		t.Fatalf("after close: %v", err)
	}
}

// kernelK declares one kernel k(op0_X, op0_X_ld, M) as generated sources do.
const kernelK = "extern \"C\" __global__ __launch_bounds__(256) void k(\n    const float* op0_X, int op0_X_ld,\n    int M) {\n}\n"

// TestLaunchRefusalsNameCUDA: a launch the kernel sources do not declare, or whose operands do
// not match the declaration, is refused with "cuda: " before anything is built.
func TestLaunchRefusalsNameCUDA(t *testing.T) {
	lib, err := gpu.NewLibrary("cuda", fstest.MapFS{"a.hip": {Data: []byte(kernelK)}})
	if err != nil {
		t.Fatal(err)
	}
	be := &Backend{th: gpu.NewThread(), lib: lib}
	defer be.th.Stop()
	buf := &gpu.Buffer{DT: device.F32, N: 8, Owner: be}
	x := device.Tensor{Buf: buf, Rows: 2, Cols: 4}
	for _, c := range []struct {
		name string
		want string
	}{
		{"missing", "no kernel missing in the kernel sources"},
		{"k", "declares parameters (op0_X, op0_X_ld, M) but the ops give (op0_X, op0_X_ld, op0_Y, op0_Y_ld, M)"},
	} {
		err := be.Launch(&device.Kernel{Name: c.name}, device.Copy{X: x, Y: x})
		if err == nil || !strings.HasPrefix(err.Error(), "cuda: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("launch of %s: %v, want cuda: ... %q", c.name, err, c.want)
		}
	}
}
