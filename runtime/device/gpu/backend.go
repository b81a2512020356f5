package gpu

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"tfc/runtime/device"
)

// Config is what a vendor package gives NewBackend.
type Config struct {
	Name    string   // "cuda" or "hip": the backend's name and the prefix of its errors
	Driver  Driver   // the vendor runtime's calls
	Thread  *Thread  // the locked thread where the driver's context is current
	Library *Library // the kernel sources and what is loaded from them
	// Build turns a family's source into the image LoadModule takes (nvcc's cubin, a code
	// object); Image names that image in errors, e.g. "cubin".
	Build func(srcs fs.FS, family string) ([]byte, error)
	Image string
	// Release, when given, runs on the thread last at Close (e.g. to release the context).
	Release func() error
	// Precision is how activations are kept: in BF16Precision every family's source is built
	// with TFC_BF16 defined to 1 (the kernels' rounding points and one-term tensor-core
	// products) and every F32 value written is rounded to BF16.
	Precision device.Precision
	// NoPagedMMA keeps the cached attention off the tensor cores. Otherwise CUDA in BF16Precision
	// builds every family's source with TFC_PAGED_MMA 2 (the cached attention on tensor cores, with
	// its own grid) and launches the cached attentions on that grid; TFC_PAGED_MMA=0 in the
	// environment sets it.
	NoPagedMMA bool
	// Fill launches the linears of many rows on their fill functions (tiles streamed through
	// dynamic LDS by cp.async, kernels/tfc_mma_gemm.h's tfc_gemm_mma_fill); CUDA alone.
	// TFC_GPU_FILL=1 in the environment turns it on there.
	Fill bool
	// NoBands keeps launches of SmallRows to BandRows rows off their band functions (the small-row
	// layout on each band of 32 rows, kernels/tfc_mma_gemm.h's tfc_gemm_mma_rows), which CUDA runs
	// otherwise; TFC_GPU_BANDS=0 in the environment sets it.
	NoBands bool
	// NoGraphs turns graph replay of repeated launch runs off (as TFC_GPU_GRAPHS=0 does).
	NoGraphs bool
	// NoTapes turns tapes off (as TFC_GPU_TAPES=0 does): every call's launches are prepared anew.
	NoTapes bool
	// RunLen is how many launches a run holds before it goes to the driver (TFC_GPU_GRAPH_RUN
	// sets it; 0 means defaultRunLen, at most maxRun): short runs let the device start a
	// round's first kernels while the host still prepares the rest.
	RunLen int
}

// Backend runs the generated kernels on one GPU through a Driver. Launches are held in a
// pending run, and writes and tape plays behind it; a Read, Sync, Close, a profile switch or a
// long run hands all of it to the driver's thread at once, for the backend's stream: a run whose
// bytes (functions, grids, every parameter byte) match a run seen before is replayed as a graph,
// other runs are launched kernel by kernel. With graphs off, or while profiling, each launch
// goes to the driver at once.
type Backend struct {
	cfg      Config
	pagedMMA bool // the cached attention on tensor cores (Config.NoPagedMMA)
	drv      Driver
	th       *Thread
	lib      *Library
	stream   uintptr

	mu      sync.Mutex // guards pending, held and closed, and orders what is queued on th
	pending run
	held    []func() error // writes and tape plays, with the runs before them, not yet handed over
	closed  bool
	timing  bool // profiling is on: launches go to the thread at once

	// Owned by the thread: only closures running on th touch these.
	graphs    graphCache
	profiling bool
	timed     []timedLaunch
	events    []uintptr // event pool
	profile   map[string]*device.KernelTime
	order     []string // profile names in first-launch order
	inflight  hostCopies
	counts    LaunchCounts
	waited    atomic.Int64 // nanoseconds blocked in SyncStream and in reads' copies, read without the thread
}

// NewBackend creates the backend's stream on c.Thread.
func NewBackend(c Config) (*Backend, error) {
	if os.Getenv("TFC_GPU_GRAPHS") == "0" {
		c.NoGraphs = true
	}
	if os.Getenv("TFC_GPU_TAPES") == "0" {
		c.NoTapes = true
	}
	if n, err := strconv.Atoi(os.Getenv("TFC_GPU_GRAPH_RUN")); err == nil && n > 0 {
		c.RunLen = n
	}
	if c.RunLen <= 0 {
		c.RunLen = defaultRunLen
	}
	if os.Getenv("TFC_PAGED_MMA") == "0" {
		c.NoPagedMMA = true
	}
	pagedMMA := !c.NoPagedMMA && c.Name == "cuda" && c.Precision == device.BF16Precision
	if os.Getenv("TFC_GPU_FILL") == "1" {
		c.Fill = true
	}
	c.Fill = c.Fill && c.Name == "cuda"
	if os.Getenv("TFC_GPU_BANDS") == "0" {
		c.NoBands = true
	}
	if c.Library != nil {
		c.Library.layouts = device.Layouts{PagedMMA: pagedMMA, Fill: c.Fill, Bands: !c.NoBands && c.Name == "cuda"}
	}
	c.RunLen = min(c.RunLen, maxRun)
	be := &Backend{cfg: c, pagedMMA: pagedMMA, drv: c.Driver, th: c.Thread, lib: c.Library, graphs: newGraphCache(graphCacheSize), profile: map[string]*device.KernelTime{}}
	err := be.wrap(be.th.Do(func() error {
		s, err := be.drv.NewStream()
		be.stream = s
		return err
	}))
	if err != nil {
		return nil, err
	}
	return be, nil
}

// PagedMMA says whether the backend builds the tensor-core cached attention with its own grid
// (on unless Config.NoPagedMMA, on CUDA in BF16 precision).
func (be *Backend) PagedMMA() bool { return be.pagedMMA }

var (
	_ device.Backend     = (*Backend)(nil)
	_ device.Specializer = (*Backend)(nil)
	_ device.Profiler    = (*Backend)(nil)
)

func (be *Backend) Name() string { return be.cfg.Name }

// Library is the backend's kernel sources and loaded modules.
func (be *Backend) Library() *Library { return be.lib }

// wrap prefixes ErrStopped with the backend's name.
func (be *Backend) wrap(err error) error {
	if errors.Is(err, ErrStopped) {
		return fmt.Errorf("%s: %w", be.cfg.Name, err)
	}
	return err
}

// flushLocked hands the held work and the pending run to the thread in one closure; be.mu is held.
func (be *Backend) flushLocked() error {
	fs := be.takeLocked()
	if len(fs) == 0 {
		return nil
	}
	return be.th.queue(func() error { return be.runAll(fs) })
}

// takeLocked is the held work with the pending run after it, taken from the backend.
func (be *Backend) takeLocked() []func() error {
	be.closeRunLocked()
	fs := be.held
	be.held = nil
	return fs
}

// closeRunLocked moves the pending run, sealed, to the held work.
func (be *Backend) closeRunLocked() {
	if len(be.pending.launches) > 0 {
		r := be.pending
		r.seal()
		be.held = append(be.held, func() error { return be.submit(&r) })
	}
	be.pending = run{}
}

// runAll runs fs in order on the thread, stopping at the first error.
func (be *Backend) runAll(fs []func() error) error {
	for _, f := range fs {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// Do runs f on the backend's thread after the work before it, handed over with it, and returns
// f's error or first an earlier call's.
func (be *Backend) Do(f func() error) error {
	be.mu.Lock()
	fs := be.takeLocked()
	done := make(chan error, 1)
	err := be.th.queue(func() error {
		if err := be.runAll(fs); err != nil {
			be.th.keep(err)
		}
		done <- f()
		return nil
	})
	be.mu.Unlock()
	if err != nil {
		return be.wrap(err)
	}
	err = <-done
	if queued := be.th.takeFailed(); queued != nil {
		return be.wrap(queued)
	}
	return be.wrap(err)
}

// hold keeps f to run on the backend's thread after the launches before it, handed over with
// the next run, Do or Sync: f's error is returned by a later call, or first an earlier one's here.
func (be *Backend) hold(f func() error) error {
	if err := be.lock(); err != nil {
		return err
	}
	defer be.mu.Unlock()
	be.closeRunLocked()
	be.held = append(be.held, f)
	return nil
}

// lock reports an earlier call's error, else locks be.mu of a backend not closed; the caller
// unlocks it.
func (be *Backend) lock() error {
	if err := be.th.takeFailed(); err != nil {
		return err
	}
	be.mu.Lock()
	if be.closed {
		be.mu.Unlock()
		return be.wrap(ErrStopped)
	}
	return nil
}

// Close waits for the device, destroys the graphs, events and stream, unloads the modules, runs
// Config.Release and ends the thread. Buffers must not be used afterwards.
func (be *Backend) Close() error {
	be.mu.Lock()
	if be.closed {
		be.mu.Unlock()
		return nil
	}
	be.closed = true
	flushErr := be.flushLocked()
	be.mu.Unlock()
	err := be.wrap(be.th.Do(func() error {
		errs := []error{be.drv.SyncStream(be.stream)}
		be.graphs.clear(be.drv)
		for _, t := range be.timed {
			be.events = append(be.events, t.start, t.stop)
		}
		be.timed = nil
		for _, e := range be.events {
			be.drv.DestroyEvent(e)
		}
		be.events = nil
		be.inflight.release()
		for _, m := range be.lib.Unload() {
			be.drv.UnloadModule(m)
		}
		errs = append(errs, be.drv.DestroyStream(be.stream))
		if be.cfg.Release != nil {
			errs = append(errs, be.cfg.Release())
		}
		return errors.Join(errs...)
	}))
	be.th.Stop()
	return errors.Join(flushErr, err)
}

// syncStream waits for the stream, then lets go of the host copies and gathers the profile.
// It runs on the thread.
func (be *Backend) syncStream() error {
	t := time.Now()
	err := be.drv.SyncStream(be.stream)
	be.waited.Add(int64(time.Since(t)))
	if err != nil {
		return err
	}
	be.inflight.release()
	return be.collect()
}

// Alloc returns a zeroed device buffer.
func (be *Backend) Alloc(dt device.DType, n int) (device.Buffer, error) {
	switch dt {
	case device.F32, device.BF16, device.F16, device.I32:
	default:
		return nil, fmt.Errorf("%s: alloc of unknown dtype %v", be.cfg.Name, dt)
	}
	if n < 0 {
		return nil, fmt.Errorf("%s: alloc of %d elements", be.cfg.Name, n)
	}
	b := &Buffer{DT: dt, N: n, Owner: be}
	if n == 0 {
		return b, nil
	}
	bytes := uint64(n) * uint64(dt.Size())
	err := be.Do(func() error {
		p, err := be.drv.Alloc(bytes)
		if err != nil {
			return fmt.Errorf("%w: allocating %d %v elements (%d bytes)", err, n, dt, bytes)
		}
		b.Ptr = p
		return be.drv.MemsetAsync(p, bytes, be.stream)
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Free releases b once the work queued before it is done. An error is reported by the next call.
func (be *Backend) Free(buf device.Buffer) {
	b, err := Owned(buf, be)
	if err != nil {
		return
	}
	b.Freed = true
	if b.Ptr == 0 {
		return
	}
	ptr := b.Ptr
	err = be.Do(func() error {
		if err := be.syncStream(); err != nil {
			return err
		}
		return be.drv.Free(ptr)
	})
	if err != nil && !errors.Is(err, ErrStopped) {
		be.th.keep(err)
	}
}

// view checks that t lies inside a live buffer of this backend.
func (be *Backend) view(what string, t device.Tensor) (*Buffer, error) {
	b, err := ViewOf(what, t, be)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", be.cfg.Name, err)
	}
	return b, nil
}

// Write converts src to t's dtype on the host (BF16 and F16 bits of the same format are copied
// as stored) and queues its copy to the device on the stream, row by row or in one copy when t
// is contiguous, handed to the thread with the next run or wait: a failed copy is reported by a
// later call.
// The converted bytes are a fresh host slice that the backend holds, unchanged, until the
// stream is next synchronised, so returning before the copy is done is safe whether or not the
// driver stages pageable memory first.
func (be *Backend) Write(t device.Tensor, src any, srcType device.DType) error {
	b, err := be.view("write", t)
	if err != nil {
		return err
	}
	n := t.Rows * t.Cols
	host, err := Encode(b.DT, n, src, srcType)
	if err != nil {
		return fmt.Errorf("%s: %w", be.cfg.Name, err)
	}
	if be.cfg.Precision == device.BF16Precision && b.DT == device.F32 {
		RoundF32ToBF16(host)
	}
	if n == 0 {
		return nil
	}
	return be.hold(func() error {
		be.inflight.keep(host)
		err := CopyRows(t, b, host, func(dev uint64, h []byte) error {
			return be.drv.CopyToDevice(dev, h, be.stream)
		})
		if err != nil {
			return err
		}
		if be.inflight.bytes > maxInflight {
			return be.syncStream()
		}
		return nil
	})
}

// maxInflight bounds the host bytes of writes held for copies not yet waited for.
const maxInflight = 64 << 20

// hostCopies are the host slices of queued copies, held until the stream is synchronised (Go's
// heap does not move objects, so a held slice stays where the driver was told it is).
type hostCopies struct {
	held  [][]byte
	bytes int
}

func (h *hostCopies) keep(b []byte) {
	h.held = append(h.held, b)
	h.bytes += len(b)
}

func (h *hostCopies) release() { h.held, h.bytes = nil, 0 }

// Read copies t to dst: []float32 for float tensors (BF16 and F16 widened exactly), []int32 for
// I32 ones. It queues the copy after the launches before it and waits for the stream.
func (be *Backend) Read(t device.Tensor, dst any) error {
	b, err := be.view("read", t)
	if err != nil {
		return err
	}
	if err := CheckRead(b.DT, t.Rows, t.Cols, dst); err != nil {
		return fmt.Errorf("%s: %w", be.cfg.Name, err)
	}
	n := t.Rows * t.Cols
	if n == 0 {
		return nil
	}
	// the copy lands in dst itself where the layouts agree, else in bytes decoded after it
	host, direct := bytesOf(dst), sameLayout(b.DT, dst)
	if !direct {
		host = make([]byte, n*b.DT.Size())
	}
	err = be.Do(func() error {
		be.inflight.keep(host)
		start := time.Now()
		err := CopyRows(t, b, host, func(dev uint64, h []byte) error {
			return be.drv.CopyToHost(h, dev, be.stream)
		})
		be.waited.Add(int64(time.Since(start))) // a copy into pageable memory waits for the work before it
		if err != nil {
			return err
		}
		return be.syncStream()
	})
	if err != nil {
		return err
	}
	if !direct {
		Decode(b.DT, host, dst)
	}
	return nil
}

// Sync waits for every launch and reports the first error the device raised.
func (be *Backend) Sync() error {
	return be.Do(be.syncStream)
}

// address is a buffer's device base address, for Marshal.
func (be *Backend) address(buf device.Buffer) (uint64, error) {
	b, err := Owned(buf, be)
	if err != nil {
		return 0, err
	}
	return b.Ptr, nil
}

// Precision is the backend's precision.
func (be *Backend) Precision() device.Precision { return be.cfg.Precision }

// SpecializeFamily makes src the source of kernels/gen/<family>.hip on this backend, built (and
// cached by its hash) on the family's next first launch. Once the family's module is loaded,
// other source is refused.
func (be *Backend) SpecializeFamily(family string, src device.Source) error {
	return be.lib.Specialize(family, src)
}

// loader builds and loads modules for the backend's library.
type loader Backend

func (l *loader) LoadModule(srcs fs.FS, family string) (uintptr, error) {
	be := (*Backend)(l)
	if be.cfg.Build == nil {
		return 0, fmt.Errorf("%s: this backend cannot build %s", be.cfg.Name, family)
	}
	if be.cfg.Precision != device.F32Precision {
		var err error
		if srcs, err = WithPrecision(srcs, family, be.cfg.Precision, be.pagedMMA); err != nil {
			return 0, fmt.Errorf("%s: %w", be.cfg.Name, err)
		}
	}
	image, err := be.cfg.Build(srcs, family)
	if err != nil {
		return 0, err
	}
	if len(image) == 0 {
		return 0, fmt.Errorf("%s: the build of %s gave an empty %s", be.cfg.Name, family, be.cfg.Image)
	}
	var mod uintptr
	err = be.wrap(be.th.Do(func() error { // the pending run needs no flush for this
		var err error
		mod, err = be.drv.LoadModule(image)
		return err
	}))
	if err != nil {
		return 0, fmt.Errorf("%w: loading the %s of %s", err, be.cfg.Image, family)
	}
	return mod, nil
}

func (l *loader) Function(mod uintptr, family, symbol string) (uintptr, error) {
	be := (*Backend)(l)
	var f uintptr
	err := be.wrap(be.th.Do(func() error {
		var err error
		f, err = be.drv.Function(mod, symbol)
		return err
	}))
	if err != nil {
		return 0, fmt.Errorf("%w: kernel %s of %s", err, symbol, family)
	}
	return f, nil
}

// Time runs f, which launches work, between two events on the backend's stream and returns the
// device time between them in milliseconds.
func (be *Backend) Time(f func() error) (float32, error) {
	var start, stop uintptr
	defer be.Do(func() error {
		for _, e := range []uintptr{start, stop} {
			if e != 0 {
				be.drv.DestroyEvent(e)
			}
		}
		return nil
	})
	err := be.Do(func() error {
		var err error
		if start, err = be.drv.NewEvent(); err != nil {
			return err
		}
		if stop, err = be.drv.NewEvent(); err != nil {
			return err
		}
		return be.drv.RecordEvent(start, be.stream)
	})
	if err != nil {
		return 0, err
	}
	if err := f(); err != nil {
		return 0, err
	}
	var ms float32
	err = be.Do(func() error {
		if err := be.drv.RecordEvent(stop, be.stream); err != nil {
			return err
		}
		if err := be.syncStream(); err != nil {
			return err
		}
		var err error
		ms, err = be.drv.ElapsedMs(start, stop)
		return err
	})
	return ms, err
}
