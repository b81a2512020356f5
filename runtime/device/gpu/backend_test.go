package gpu

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"tfc/runtime/device"
	"tfc/runtime/device/gpu/gputest"
)

var _ Driver = (*gputest.Driver)(nil)

// fakeBackend is a Backend over the fake driver with kernels a, b and c, each taking one Copy.
func fakeBackend(t *testing.T, opts ...func(*Config)) (*Backend, *gputest.Driver) {
	t.Helper()
	fsys := fstest.MapFS{}
	addFamily(t, fsys, "f", source("", copySchedule("a", "X", "Y"), copySchedule("b", "X", "Y"), copySchedule("c", "X", "Y")))
	lib, err := NewLibrary("fake", fsys)
	if err != nil {
		t.Fatal(err)
	}
	d := gputest.New()
	for _, k := range []string{"a", "b", "c"} {
		d.ParamCount[k] = len(copySchedule(k, "X", "Y").Params)
	}
	c := Config{Name: "fake", Driver: d, Thread: NewThread(), Library: lib, Image: "image",
		Build: func(fs.FS, string) ([]byte, error) { return []byte("image"), nil }}
	for _, o := range opts {
		o(&c)
	}
	be, err := NewBackend(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	return be, d
}

func alloc(t *testing.T, be *Backend, dt device.DType, rows, cols int) device.Tensor {
	t.Helper()
	b, err := be.Alloc(dt, rows*cols)
	if err != nil {
		t.Fatal(err)
	}
	return device.Tensor{Buf: b, Rows: rows, Cols: cols}
}

// chainABA launches a, b, a on x → y; off shifts x by that many elements.
func chainABA(t *testing.T, be *Backend, x, y device.Tensor) {
	t.Helper()
	for _, k := range []string{"a", "b", "a"} {
		if err := be.Launch(&device.KernelRef{Name: k}, device.Copy{X: x, Y: y}); err != nil {
			t.Fatal(err)
		}
	}
}

// launchOps keeps the launch, capture and graph calls of ops.
func launchOps(ops []string) []string {
	var out []string
	for _, o := range ops {
		for _, p := range []string{"Launch", "BeginCapture", "EndCapture", "Instantiate", "DestroyGraph", "RecordEvent"} {
			if strings.HasPrefix(o, p) {
				out = append(out, o)
				break
			}
		}
	}
	return out
}

// TestWriteReadRoundTrip: values written through a strided view come back in place, the rest of
// the buffer reads as the zeros Alloc gave it, and copies wait for nothing until Read.
func TestWriteReadRoundTrip(t *testing.T) {
	be, d := fakeBackend(t)
	whole := alloc(t, be, device.F32, 3, 4)
	view := whole.ColSlice(1, 3) // 3 rows of 2, stride 4
	if err := be.Write(view, []float32{1, 2, 3, 4, 5, 6}, device.F32); err != nil {
		t.Fatal(err)
	}
	if n := d.Count("SyncStream"); n != 0 {
		t.Errorf("Write synchronised the stream %d times", n)
	}
	got := make([]float32, 12)
	if err := be.Read(whole, got); err != nil {
		t.Fatal(err)
	}
	want := []float32{0, 1, 2, 0, 0, 3, 4, 0, 0, 5, 6, 0}
	if !slices.Equal(got, want) {
		t.Errorf("read %v, want %v", got, want)
	}
	part := make([]float32, 6)
	if err := be.Read(view, part); err != nil || !slices.Equal(part, []float32{1, 2, 3, 4, 5, 6}) {
		t.Errorf("strided read %v %v", part, err)
	}
	ids := alloc(t, be, device.I32, 1, 3)
	if err := be.Write(ids, []int32{-1, 7, 1 << 30}, 0); err != nil {
		t.Fatal(err)
	}
	back := make([]int32, 3)
	if err := be.Read(ids, back); err != nil || !slices.Equal(back, []int32{-1, 7, 1 << 30}) {
		t.Errorf("I32 read %v %v", back, err)
	}
	ops := d.Ops()
	if i := slices.Index(ops, "CopyToHost"); i < 0 || !slices.Contains(ops[i:], "SyncStream") {
		t.Errorf("Read does not wait for the stream after its copy: %v", ops)
	}
}

// TestLaunchesAreDeferredToRead: launches reach the driver only when a Read needs them, in the
// order they were made, before the Read's copy.
func TestLaunchesAreDeferredToRead(t *testing.T) {
	be, d := fakeBackend(t)
	x, y := alloc(t, be, device.F32, 2, 4), alloc(t, be, device.F32, 2, 4)
	d.Reset()
	chainABA(t, be, x, y)
	if err := be.Launch(&device.KernelRef{Name: "c"}, device.Copy{X: y, Y: x}); err != nil {
		t.Fatal(err)
	}
	if ops := launchOps(d.Ops()); len(ops) != 0 {
		t.Fatalf("launches reached the driver before a Read: %v", ops)
	}
	if err := be.Read(x, make([]float32, 8)); err != nil {
		t.Fatal(err)
	}
	want := []string{"Launch a", "Launch b", "Launch a", "Launch c", "CopyToHost", "SyncStream"}
	if got := d.Ops(); !slices.Equal(got[len(got)-len(want):], want) {
		t.Errorf("driver calls %v, want them to end with %v", got, want)
	}
	calls := d.Calls()
	first := calls[len(calls)-len(want)]
	xp, yp := x.Buf.(*Buffer).Ptr, y.Buf.(*Buffer).Ptr
	if !slices.Equal(first.Params, []uint64{xp, 4, yp, 4, 2}) || first.Grid != [2]uint32{2, 1} {
		t.Errorf("launch of a: params %v grid %v, want [%d 4 %d 4 2] (2,1)", first.Params, first.Grid, xp, yp)
	}
}

// TestRepeatedRunIsReplayed: a run is launched kernel by kernel the first time, captured into a
// graph and replayed the second time, and replayed with no kernel launch the third.
func TestRepeatedRunIsReplayed(t *testing.T) {
	be, d := fakeBackend(t)
	x, y := alloc(t, be, device.F32, 2, 4), alloc(t, be, device.F32, 2, 4)
	var plain []gputest.Call
	for i, want := range [][]string{
		{"Launch a", "Launch b", "Launch a"},
		{"BeginCapture", "EndCapture", "Instantiate", "LaunchGraph"},
		{"LaunchGraph"},
	} {
		d.Reset()
		chainABA(t, be, x, y)
		if err := be.Sync(); err != nil {
			t.Fatal(err)
		}
		got := slices.DeleteFunc(d.Ops(), func(o string) bool { return o == "SyncStream" || strings.HasPrefix(o, "Function") || o == "LoadModule" })
		if !slices.Equal(got, want) {
			t.Errorf("run %d: driver calls %v, want %v", i+1, got, want)
		}
		if i == 0 {
			plain = slices.DeleteFunc(d.Calls(), func(c gputest.Call) bool { return c.Op != "Launch" })
		}
	}
	graphs := d.Graphs()
	if len(graphs) != 1 || len(graphs[0]) != 3 {
		t.Fatalf("graphs %v, want one of 3 launches", graphs)
	}
	for i, c := range graphs[0] {
		p := plain[i]
		if c.Kernel != p.Kernel || c.Grid != p.Grid || !slices.Equal(c.Params, p.Params) {
			t.Errorf("captured launch %d: %+v, launched plainly as %+v", i, c, p)
		}
	}
	if c := be.Launches(); c.Replayed != 6 || c.Plain != 3 || c.Graphs != 1 || c.Failed != 0 {
		t.Errorf("counts %+v, want 6 replayed, 3 plain, 1 graph", c)
	}
}

// TestRunDifferingInOneByteIsNotReplayed: a run whose parameters differ from a captured run's
// in one value (an operand one element further on, or another M) is launched plainly.
func TestRunDifferingInOneByteIsNotReplayed(t *testing.T) {
	be, d := fakeBackend(t)
	x, y := alloc(t, be, device.F32, 3, 4), alloc(t, be, device.F32, 3, 4)
	x2, y2 := x.Slice(0, 2), y.Slice(0, 2)
	for range 2 {
		chainABA(t, be, x2, y2)
		if err := be.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	shifted := x2
	shifted.Off = 1
	for name, xy := range map[string][2]device.Tensor{"x one element on": {shifted, y2}, "M of 3": {x, y}} {
		d.Reset()
		chainABA(t, be, xy[0], xy[1])
		if err := be.Sync(); err != nil {
			t.Fatal(err)
		}
		if got := launchOps(d.Ops()); !slices.Equal(got, []string{"Launch a", "Launch b", "Launch a"}) {
			t.Errorf("%s: driver calls %v, want three plain launches", name, got)
		}
	}
	d.Reset()
	chainABA(t, be, x2, y2)
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := d.Ops(); !slices.Equal(got, []string{"LaunchGraph", "SyncStream"}) {
		t.Errorf("the captured run again: %v, want its graph replayed", got)
	}
}

// TestCaptureFailureFallsBack: a capture or instantiation that fails leaves no error to the
// caller; the run is launched plainly, and that run is not captured again.
func TestCaptureFailureFallsBack(t *testing.T) {
	for _, failing := range []string{"BeginCapture", "CaptureLaunch", "EndCapture", "Instantiate"} {
		t.Run(failing, func(t *testing.T) {
			be, d := fakeBackend(t)
			d.Fail = func(op string) error {
				if op == failing {
					return errors.New("fake: " + op + " not supported")
				}
				return nil
			}
			x, y := alloc(t, be, device.F32, 2, 4), alloc(t, be, device.F32, 2, 4)
			for i := range 3 {
				d.Reset()
				chainABA(t, be, x, y)
				if err := be.Sync(); err != nil {
					t.Fatalf("run %d: %v", i+1, err)
				}
				ops := d.Ops()
				if got := slices.DeleteFunc(launchOps(ops), func(o string) bool { return !strings.HasPrefix(o, "Launch ") }); !slices.Equal(got, []string{"Launch a", "Launch b", "Launch a"}) {
					t.Errorf("run %d: %v, want three plain launches", i+1, ops)
				}
				if i == 2 && slices.Contains(ops, "BeginCapture") {
					t.Errorf("run 3 tried to capture again: %v", ops)
				}
			}
			if c := be.Launches(); c.Failed != 1 || c.Graphs != 0 || c.Plain != 9 {
				t.Errorf("counts %+v, want 1 failed capture and 9 plain launches", c)
			}
			if live := d.Live(); live["graph"] != 0 || live["exec"] != 0 {
				t.Errorf("a failed capture left %v", live)
			}
		})
	}
}

// TestGraphsOff: with graphs turned off, launches go to the driver at once and repeated runs
// are always launched kernel by kernel.
func TestGraphsOff(t *testing.T) {
	t.Setenv("TFC_GPU_GRAPHS", "0")
	be, d := fakeBackend(t)
	x, y := alloc(t, be, device.F32, 2, 4), alloc(t, be, device.F32, 2, 4)
	chainABA(t, be, x, y)
	be.th.Do(func() error { return nil }) // wait for the thread without flushing
	if n := d.Count("Launch"); n != 3 {
		t.Fatalf("%d of 3 launches reached the driver without a Read", n)
	}
	for range 2 {
		chainABA(t, be, x, y)
		if err := be.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if n, g := d.Count("Launch"), d.Count("BeginCapture"); n != 9 || g != 0 {
		t.Errorf("%d launches and %d captures with TFC_GPU_GRAPHS=0, want 9 and 0", n, g)
	}
}

// TestProfileTimesEachLaunch: while profiling, each launch lies between two events, repeated
// runs are not replayed, events are reused, and the profile sums the device time by kernel.
func TestProfileTimesEachLaunch(t *testing.T) {
	be, d := fakeBackend(t)
	d.KernelTime["a"] = 3 * time.Microsecond
	d.KernelTime["b"] = 5 * time.Microsecond
	x, y := alloc(t, be, device.F32, 2, 4), alloc(t, be, device.F32, 2, 4)
	chainABA(t, be, x, y) // launched before profiling: not in the profile
	be.Profile(true)
	d.Reset()
	for range 3 {
		chainABA(t, be, x, y)
		if err := be.Read(x, make([]float32, 8)); err != nil {
			t.Fatal(err)
		}
	}
	ops := launchOps(d.Ops())
	for i := 0; i < len(ops); i += 3 {
		if ops[i] != "RecordEvent" || !strings.HasPrefix(ops[i+1], "Launch ") || ops[i+2] != "RecordEvent" {
			t.Fatalf("launch not bracketed by events: %v", ops[i:min(i+3, len(ops))])
		}
	}
	if len(ops) != 27 {
		t.Errorf("%d calls, want 9 launches between events, no graphs: %v", len(ops), ops)
	}
	if n := d.Count("NewEvent"); n != 6 {
		t.Errorf("%d events created for 3 runs of 3 launches, want 6 (reused after each Read)", n)
	}
	want := []device.KernelTime{{Name: "a", Launches: 6, Total: 18 * time.Microsecond}, {Name: "b", Launches: 3, Total: 15 * time.Microsecond}}
	got := be.Profiled()
	if len(got) != len(want) {
		t.Fatalf("profile %v, want %v", got, want)
	}
	for i := range want {
		if got[i].Name != want[i].Name || got[i].Launches != want[i].Launches || (got[i].Total-want[i].Total).Abs() > 10*time.Nanosecond {
			t.Errorf("profile %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	be.Profile(false)
	d.Reset()
	for range 2 {
		chainABA(t, be, x, y)
		be.Sync()
	}
	// the run was flushed once before profiling, so its first run after is captured already
	if d.Count("LaunchGraph") != 2 || d.Count("RecordEvent") != 0 {
		t.Errorf("after profiling: %v, want the run replayed by a graph and no events", d.Ops())
	}
	if p := be.Profiled(); len(p) != 2 || p[0].Launches != 6 {
		t.Errorf("the profile changed after profiling was turned off: %v", p)
	}
	be.Profile(true)
	if p := be.Profiled(); len(p) != 0 {
		t.Errorf("profiling on again did not start afresh: %v", p)
	}
}

// TestDeferredLaunchErrorSurfaces: a launch the driver refuses is reported, naming the kernel, by
// the next call that waits after it reached the driver, and once only.
func TestDeferredLaunchErrorSurfaces(t *testing.T) {
	be, d := fakeBackend(t)
	x, y := alloc(t, be, device.F32, 2, 4), alloc(t, be, device.F32, 2, 4)
	refused := errors.New("fake: launch failed")
	d.Fail = func(op string) error {
		if op == "Launch" {
			return refused
		}
		return nil
	}
	if err := be.Launch(&device.KernelRef{Name: "b"}, device.Copy{X: x, Y: y}); err != nil {
		t.Fatalf("the launch failed before it reached the driver: %v", err)
	}
	err := be.Write(x, make([]float32, 8), device.F32) // queued without waiting: the next call reports
	if err == nil {
		err = be.Sync()
	}
	if !errors.Is(err, refused) || !strings.Contains(err.Error(), "kernel b grid (2,1)") {
		t.Fatalf("Write and Sync after a failed launch: %v", err)
	}
	d.Fail = nil
	if err := be.Sync(); err != nil {
		t.Fatalf("the error was reported twice: %v", err)
	}
	d.Fail = func(op string) error {
		if op == "Launch" {
			return refused
		}
		return nil
	}
	be.Launch(&device.KernelRef{Name: "b"}, device.Copy{X: x, Y: y})
	be.Free(y.Buf) // flushes the run; its error waits for the next call
	d.Fail = nil
	if err := be.Launch(&device.KernelRef{Name: "a"}, device.Copy{X: x, Y: x}); !errors.Is(err, refused) {
		t.Fatalf("Launch after a failed launch and a Free: %v", err)
	}
}

// TestCloseReleasesEverything: Close destroys the stream, events, graphs and modules.
func TestCloseReleasesEverything(t *testing.T) {
	be, d := fakeBackend(t)
	x, y := alloc(t, be, device.F32, 2, 4), alloc(t, be, device.F32, 2, 4)
	for range 2 {
		chainABA(t, be, x, y)
		be.Sync()
	}
	be.Profile(true)
	chainABA(t, be, x, y)
	be.Free(x.Buf)
	be.Free(y.Buf)
	if err := be.Close(); err != nil {
		t.Fatal(err)
	}
	if live := d.Live(); len(live) != 1 || live["function"] == 0 {
		t.Errorf("after Close: %v left, want only function handles (they die with their module)", live)
	}
	if err := be.Sync(); !errors.Is(err, ErrStopped) || err.Error() != "fake: the backend is closed" {
		t.Errorf("Sync after Close: %v", err)
	}
	if err := be.Launch(&device.KernelRef{Name: "a"}, device.Copy{X: x, Y: y}); err == nil {
		t.Errorf("Launch after Close succeeded")
	}
}

// TestLongRunIsFlushed: a run reaching its length (defaultRunLen, or TFC_GPU_GRAPH_RUN) goes to
// the driver without a Read, and not a launch before.
func TestLongRunIsFlushed(t *testing.T) {
	for _, c := range []struct {
		env    string
		runLen int
	}{{"", defaultRunLen}, {"5", 5}, {"100000", maxRun}} {
		t.Setenv("TFC_GPU_GRAPH_RUN", c.env)
		be, d := fakeBackend(t)
		x, y := alloc(t, be, device.F32, 1, 4), alloc(t, be, device.F32, 1, 4)
		launch := func(n int) {
			for range n {
				if err := be.Launch(&device.KernelRef{Name: "c"}, device.Copy{X: x, Y: y}); err != nil {
					t.Fatal(err)
				}
			}
			be.th.Do(func() error { return nil }) // wait for the thread without flushing
		}
		launch(c.runLen - 1)
		if n := d.Count("Launch"); n != 0 {
			t.Errorf("TFC_GPU_GRAPH_RUN=%q: %d launches reached the driver before the run was full", c.env, n)
		}
		launch(1)
		if n := d.Count("Launch"); n != c.runLen {
			t.Errorf("TFC_GPU_GRAPH_RUN=%q: %d launches reached the driver, want %d", c.env, n, c.runLen)
		}
	}
}

// TestGraphCacheEvictsLeastRecentlyUsed: the cache holds size graphs, lets the least recently
// used go first, and answers only for a signature equal byte for byte.
func TestGraphCacheEvictsLeastRecentlyUsed(t *testing.T) {
	c := newGraphCache(2)
	var evicted []uintptr
	evict := func(g *graph) error { evicted = append(evicted, g.exec); return nil }
	for k := uint64(1); k <= 2; k++ {
		c.add(k, &graph{sig: []byte{byte(k)}, exec: uintptr(k)}, evict)
	}
	if c.get(1, []byte{1}) == nil {
		t.Fatal("graph 1 not found")
	}
	if c.get(1, []byte{9}) != nil {
		t.Error("a signature that differs under the same key was answered")
	}
	c.add(3, &graph{sig: []byte{3}, exec: 3}, evict)
	if !slices.Equal(evicted, []uintptr{2}) || c.get(2, []byte{2}) != nil || c.get(1, []byte{1}) == nil {
		t.Errorf("evicted %v, want graph 2 (used least recently)", evicted)
	}
}

// TestConcurrentCallers: goroutines launching, writing and reading at once each see their own
// writes and launches in order (run with -race to check the backend's own state).
func TestConcurrentCallers(t *testing.T) {
	be, _ := fakeBackend(t)
	done := make(chan error, 4)
	for g := range 4 {
		go func() {
			x, err := be.Alloc(device.I32, 4)
			if err != nil {
				done <- err
				return
			}
			xt := device.Tensor{Buf: x, Rows: 1, Cols: 4}
			for i := range 50 {
				v := []int32{int32(g), int32(i), 0, 1}
				if err := be.Write(xt, v, 0); err != nil {
					done <- err
					return
				}
				if err := be.Launch(&device.KernelRef{Name: "a"}, device.Copy{X: xt, Y: xt}); err != nil {
					done <- err
					return
				}
				got := make([]int32, 4)
				if err := be.Read(xt, got); err != nil {
					done <- err
					return
				}
				if !slices.Equal(got, v) {
					done <- fmt.Errorf("goroutine %d, round %d: read %v, wrote %v", g, i, got, v)
					return
				}
			}
			be.Free(x)
			done <- nil
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestReadCountsItsWait: the time a read's copy takes (a copy into pageable memory waits for the
// launches before it) and the stream sync after it count as waiting for the device, and a write
// does not.
func TestReadCountsItsWait(t *testing.T) {
	be, d := fakeBackend(t)
	const slow = 20 * time.Millisecond
	d.Fail = func(op string) error {
		if op == "CopyToHost" {
			time.Sleep(slow)
		}
		return nil
	}
	x := alloc(t, be, device.F32, 1, 4)
	before := be.Waited()
	if err := be.Write(x, []float32{1, 2, 3, 4}, device.F32); err != nil {
		t.Fatal(err)
	}
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}
	if w := be.Waited() - before; w >= slow {
		t.Fatalf("a write and a sync waited %v", w)
	}
	before = be.Waited()
	if err := be.Read(x, make([]float32, 4)); err != nil {
		t.Fatal(err)
	}
	if w := be.Waited() - before; w < slow {
		t.Errorf("a read whose copy took %v counted %v of waiting", slow, w)
	}
}
