package cuda

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"tfc/runtime/device"
	"tfc/runtime/device/gpu"
	"tfc/runtime/device/gpu/gputest"
)

// fakeBackend is a cuda Backend over the fake driver, with the kernel sources srcs.
func fakeBackend(t *testing.T, srcs fs.FS) *Backend {
	t.Helper()
	lib, err := gpu.NewLibrary("cuda", srcs)
	if err != nil {
		t.Fatal(err)
	}
	be := &Backend{}
	be.Backend, err = gpu.NewBackend(gpu.Config{Name: "cuda", Driver: gputest.New(), Thread: gpu.NewThread(), Library: lib, Build: be.comp.build, Image: "cubin"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	return be
}

// TestRefusalsNameCUDA: refusals made on the host, before any driver call, say "cuda: " and
// what was wrong; a closed backend says it is closed.
func TestRefusalsNameCUDA(t *testing.T) {
	be := fakeBackend(t, fstest.MapFS{})
	buf := &gpu.Buffer{DT: device.F32, N: 8, Owner: be.Backend}
	other := &gpu.Buffer{DT: device.F32, N: 8, Owner: fakeBackend(t, fstest.MapFS{}).Backend}
	freed := &gpu.Buffer{DT: device.F32, N: 8, Owner: be.Backend, Freed: true}
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
	be.Close()
	if err := be.Sync(); !errors.Is(err, gpu.ErrStopped) || err.Error() != "cuda: the backend is closed" {
		t.Fatalf("after close: %v", err)
	}
}

// kernelK declares one kernel k(op0_X, op0_X_ld, M) as generated sources do.
const kernelK = "extern \"C\" __global__ __launch_bounds__(256) void k(\n    const float* op0_X, int op0_X_ld,\n    int M) {\n}\n"

// kernelKSource is kernelK with its schedule.
func kernelKSource(text string) device.Source {
	return device.Source{HIP: []byte(text), Schedules: []device.Schedule{{Kernel: "k",
		Params: []device.Param{
			{Name: "op0_X", Kind: device.ParamPointer, Op: 0, Field: "X"},
			{Name: "op0_X_ld", Kind: device.ParamStride, Op: 0, Field: "X"},
			{Name: "M", Kind: device.ParamRows, Op: 0, Field: "X"}},
		Launches: []device.Launch{{Symbol: "k", Threads: 256, RowsPerBlock: 1, GridY: 1}}}}}
}

// kernelKFS holds kernelK as family a, with its schedule, beside files.
func kernelKFS(t *testing.T, files fstest.MapFS) fstest.MapFS {
	t.Helper()
	sched, err := device.EncodeSchedules(kernelKSource(kernelK).Schedules)
	if err != nil {
		t.Fatal(err)
	}
	files["a.hip"] = &fstest.MapFile{Data: []byte(kernelK)}
	files["a"+device.ScheduleExt] = &fstest.MapFile{Data: sched}
	return files
}

// TestLaunchRefusalsNameCUDA: a launch the kernel sources do not declare, or whose operands do
// not match the declaration, is refused with "cuda: " before anything is built.
func TestLaunchRefusalsNameCUDA(t *testing.T) {
	be := fakeBackend(t, kernelKFS(t, fstest.MapFS{}))
	buf := &gpu.Buffer{DT: device.F32, N: 8, Owner: be.Backend}
	x := device.Tensor{Buf: buf, Rows: 2, Cols: 4}
	for _, c := range []struct {
		name string
		want string
	}{
		{"missing", "no kernel missing in the kernel sources"},
		{"k", "kernel k takes operands (op0.X) but the ops give (op0.X, op0.Y)"},
	} {
		err := be.Launch(&device.KernelRef{Name: c.name}, device.Copy{X: x, Y: x})
		if err == nil || !strings.HasPrefix(err.Error(), "cuda: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("launch of %s: %v, want cuda: ... %q", c.name, err, c.want)
		}
	}
}
