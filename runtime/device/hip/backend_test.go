package hip

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

// fakeBackend is a hip Backend over the fake driver, with the kernel sources srcs.
func fakeBackend(t *testing.T, srcs fs.FS) *Backend {
	t.Helper()
	lib, err := gpu.NewLibrary("hip", srcs)
	if err != nil {
		t.Fatal(err)
	}
	be := &Backend{}
	be.Backend, err = gpu.NewBackend(gpu.Config{Name: "hip", Driver: gputest.New(), Thread: gpu.NewThread(), Library: lib, Build: be.build.build, Image: "code object"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	return be
}

// TestRefusalsNameHIP: refusals made on the host, before any HIP call, say "hip: " and what was
// wrong; a closed backend says it is closed.
func TestRefusalsNameHIP(t *testing.T) {
	be := fakeBackend(t, fstest.MapFS{})
	buf := &gpu.Buffer{DT: device.F32, N: 8, Owner: be.Backend}
	tt := device.Tensor{Buf: buf, Rows: 2, Cols: 4}
	for _, c := range []struct {
		err  error
		want string
	}{
		{be.Write(tt, []int32{1, 2}, 0), "I32 buffers"},
		{be.Read(tt, make([]int32, 8)), "read into []float32"},
		{be.Read(device.Tensor{Buf: buf, Rows: 2, Cols: 4, Off: 1}, make([]float32, 8)), "runs past a 8-element buffer"},
		{be.Launch(&device.KernelRef{Name: "missing"}, device.Copy{X: tt, Y: tt}), "no kernel missing in the kernel sources"},
	} {
		if c.err == nil || !strings.HasPrefix(c.err.Error(), "hip: ") || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("got %v, want hip: ... %q", c.err, c.want)
		}
	}
	be.Close()
	if err := be.Sync(); !errors.Is(err, gpu.ErrStopped) || err.Error() != "hip: the backend is closed" {
		t.Fatalf("after close: %v", err)
	}
}
