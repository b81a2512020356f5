// Package cuda runs the generated kernels on an NVIDIA GPU through the CUDA driver API, loaded
// with purego (no cgo). A family's HIP source (package kernels) is built by nvcc into a cubin
// for the card's architecture on the first launch of one of its kernels, cached under the user
// cache folder by the hash of the sources and the nvcc version, and loaded with cuModuleLoadData.
// Before that first launch the generated glue may replace the source with one specialised for the
// checkpoint it loads (SpecializeFamily), which is then built and cached under its own hash.
//
// The CUDA context is current per OS thread, so a Backend owns one goroutine locked to its
// thread and runs every driver call there. Launches are asynchronous on the context's default
// stream; Read, Write and Sync wait for the work before them.
//
// A launch's parameters follow the rule of compiler/emit/hip: each op's present operands in
// struct order as (address of the first element, row stride), then M, and S for an uncached
// attention. The names this rule gives are checked against the kernel's declaration in its
// source before the first launch of each kernel.
package cuda

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"unsafe"

	"tfc/kernels"
	"tfc/runtime/device"
	"tfc/runtime/device/gpu"
)

// Backend runs kernels on one CUDA device.
type Backend struct {
	drv  *driver
	th   *gpu.Thread
	dev  int32
	ctx  uintptr
	arch string
	name string
	srcs fs.FS // the sources New reads; lib holds them, specialised, afterwards
	lib  *gpu.Library
	comp nvccBuild

	mu     sync.Mutex
	closed bool
}

// Option configures a Backend.
type Option func(*Backend)

// Device picks the device by ordinal (default 0).
func Device(ordinal int) Option { return func(b *Backend) { b.dev = int32(ordinal) } }

// Sources replaces the embedded kernel sources (*.hip and *.h at the root of fsys).
func Sources(fsys fs.FS) Option { return func(b *Backend) { b.srcs = fsys } }

// CacheDir sets the cubin cache folder; "" turns caching off.
func CacheDir(dir string) Option {
	return func(b *Backend) { b.comp.cache = gpu.Cache{Dir: dir, Ext: ".cubin"} }
}

var (
	_ device.Backend     = (*Backend)(nil)
	_ device.Specializer = (*Backend)(nil)
)

// New opens the device, makes its primary context current on the backend's thread and reads the
// symbol table of the kernel sources. nvcc runs later, on a family's first launch.
func New(opts ...Option) (*Backend, error) {
	b := &Backend{srcs: kernels.Sources}
	b.comp.cache = gpu.UserCache("cubin", ".cubin")
	for _, o := range opts {
		o(b)
	}
	drv, err := libcuda()
	if err != nil {
		return nil, err
	}
	b.drv = drv
	if b.lib, err = gpu.NewLibrary("cuda", b.srcs); err != nil {
		return nil, err
	}
	b.th = gpu.NewThread()
	err = b.do(func() error {
		if err := check("cuInit", drv.init(0)); err != nil {
			return err
		}
		var n int32
		if err := check("cuDeviceGetCount", drv.deviceGetCount(&n)); err != nil {
			return err
		}
		if b.dev < 0 || b.dev >= n {
			return fmt.Errorf("cuda: device %d asked for, %d present", b.dev, n)
		}
		var dev int32
		if err := check("cuDeviceGet", drv.deviceGet(&dev, b.dev)); err != nil {
			return err
		}
		b.dev = dev
		if err := check("cuDevicePrimaryCtxRetain", drv.primaryCtxRetain(&b.ctx, dev)); err != nil {
			return err
		}
		if err := check("cuCtxSetCurrent", drv.ctxSetCurrent(b.ctx)); err != nil {
			return err
		}
		var major, minor int32
		if err := check("cuDeviceGetAttribute", drv.deviceGetAttribute(&major, attrComputeMajor, dev)); err != nil {
			return err
		}
		if err := check("cuDeviceGetAttribute", drv.deviceGetAttribute(&minor, attrComputeMinor, dev)); err != nil {
			return err
		}
		b.arch = fmt.Sprintf("sm_%d%d", major, minor)
		name := make([]byte, 256)
		if err := check("cuDeviceGetName", drv.deviceGetName(&name[0], int32(len(name)), dev)); err != nil {
			return err
		}
		b.name = cString(name)
		return nil
	})
	if err != nil {
		b.th.Stop()
		return nil, err
	}
	b.comp.arch = b.arch
	return b, nil
}

// Close unloads the modules, releases the context and ends the backend's thread. Buffers must
// not be used afterwards.
func (be *Backend) Close() error {
	be.mu.Lock()
	defer be.mu.Unlock()
	if be.closed {
		return nil
	}
	be.closed = true
	err := be.do(func() error {
		for _, m := range be.lib.Unload() {
			be.drv.moduleUnload(m)
		}
		return check("cuDevicePrimaryCtxRelease_v2", be.drv.primaryCtxRelease(be.dev))
	})
	be.th.Stop()
	return err
}

// goAsync queues f on the backend's thread (gpu.Thread.Go).
func (be *Backend) goAsync(f func() error) error {
	err := be.th.Go(f)
	if errors.Is(err, gpu.ErrStopped) {
		return fmt.Errorf("cuda: %w", err)
	}
	return err
}

// do runs f on the backend's thread, where its context is current.
func (be *Backend) do(f func() error) error {
	err := be.th.Do(f)
	if errors.Is(err, gpu.ErrStopped) {
		return fmt.Errorf("cuda: %w", err)
	}
	return err
}

func (be *Backend) Name() string { return "cuda" }

// Describe names the device and the architecture its kernels are built for.
func (be *Backend) Describe() string { return fmt.Sprintf("cuda/%s/%s", be.name, be.arch) }

// Arch is the nvcc target of the device, e.g. sm_90.
func (be *Backend) Arch() string { return be.arch }

// DriverVersion is the CUDA version the driver supports, as cuDriverGetVersion gives it
// (13000 for 13.0).
func (be *Backend) DriverVersion() (int, error) {
	var v int32
	err := be.do(func() error { return check("cuDriverGetVersion", be.drv.driverGetVersion(&v)) })
	return int(v), err
}

// DriverErrorName asks the driver for a CUresult's name (cuGetErrorName).
func (be *Backend) DriverErrorName(code int32) (string, error) {
	var s string
	err := be.do(func() error {
		var p *byte
		if err := check("cuGetErrorName", be.drv.getErrorName(code, &p)); err != nil {
			return err
		}
		var sb strings.Builder
		for q := p; *q != 0; q = (*byte)(unsafe.Add(unsafe.Pointer(q), 1)) {
			sb.WriteByte(*q)
		}
		s = sb.String()
		return nil
	})
	return s, err
}

func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// Alloc returns a zeroed device buffer.
func (be *Backend) Alloc(dt device.DType, n int) (device.Buffer, error) {
	switch dt {
	case device.F32, device.BF16, device.F16, device.I32:
	default:
		return nil, fmt.Errorf("cuda: alloc of unknown dtype %v", dt)
	}
	if n < 0 {
		return nil, fmt.Errorf("cuda: alloc of %d elements", n)
	}
	b := &gpu.Buffer{DT: dt, N: n, Owner: be}
	if n == 0 {
		return b, nil
	}
	bytes := uint64(n) * uint64(dt.Size())
	err := be.do(func() error {
		if err := check("cuMemAlloc_v2", be.drv.memAlloc(&b.Ptr, bytes)); err != nil {
			return fmt.Errorf("%w: allocating %d %v elements (%d bytes)", err, n, dt, bytes)
		}
		return check("cuMemsetD8_v2", be.drv.memsetD8(b.Ptr, 0, bytes))
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Free releases b.
func (be *Backend) Free(buf device.Buffer) {
	b, err := gpu.Owned(buf, be)
	if err != nil {
		return
	}
	b.Freed = true
	if b.Ptr != 0 {
		ptr := b.Ptr
		be.do(func() error { return check("cuMemFree_v2", be.drv.memFree(ptr)) })
	}
}

// view checks that t lies inside a live buffer of this backend.
func (be *Backend) view(what string, t device.Tensor) (*gpu.Buffer, error) {
	b, err := gpu.ViewOf(what, t, be)
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	return b, nil
}

// Write converts src to t's dtype on the host (BF16 and F16 bits of the same format are copied
// as stored) and copies it to the device row by row, or in one copy when t is contiguous.
func (be *Backend) Write(t device.Tensor, src any, srcType device.DType) error {
	b, err := be.view("write", t)
	if err != nil {
		return err
	}
	n := t.Rows * t.Cols
	host, err := gpu.Encode(b.DT, n, src, srcType)
	if err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	if n == 0 {
		return nil
	}
	return be.do(func() error {
		return gpu.CopyRows(t, b, host, func(dev uint64, h []byte) error {
			return check("cuMemcpyHtoD_v2", be.drv.memcpyHtoD(dev, unsafe.Pointer(&h[0]), uint64(len(h))))
		})
	})
}

// Read copies t to dst: []float32 for float tensors (BF16 and F16 widened exactly), []int32
// for I32 ones. It waits for the launches before it.
func (be *Backend) Read(t device.Tensor, dst any) error {
	b, err := be.view("read", t)
	if err != nil {
		return err
	}
	if err := gpu.CheckRead(b.DT, t.Rows, t.Cols, dst); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	n := t.Rows * t.Cols
	if n == 0 {
		return nil
	}
	host := make([]byte, n*b.DT.Size())
	err = be.do(func() error {
		return gpu.CopyRows(t, b, host, func(dev uint64, h []byte) error {
			return check("cuMemcpyDtoH_v2", be.drv.memcpyDtoH(unsafe.Pointer(&h[0]), dev, uint64(len(h))))
		})
	})
	if err != nil {
		return err
	}
	gpu.Decode(b.DT, host, dst)
	return nil
}

// Launch runs the ops of one generated kernel: its parameters marshalled by the rule of
// compiler/emit/hip, its grid by the same rule as the kernel's launches.
func (be *Backend) Launch(k *device.Kernel, ops ...device.Op) error {
	c, err := be.lib.Prepare(k, ops, be.address, (*loader)(be))
	if err != nil {
		return err
	}
	// Launches are queued: an error surfaces at the next Launch, Read, Write or Sync.
	return be.goAsync(func() error {
		defer c.Close()
		for i, g := range c.Grids {
			if g.GridX <= 0 || g.GridY <= 0 {
				continue
			}
			code := be.drv.launchKernel(c.Funcs[i], uint32(g.GridX), uint32(g.GridY), 1, gpu.Threads, 1, 1, 0, 0, c.Params, 0)
			if err := check("cuLaunchKernel", code); err != nil {
				return fmt.Errorf("%w: kernel %s%s grid (%d,%d)", err, k.Name, g.Suffix, g.GridX, g.GridY)
			}
		}
		return nil
	})
}

// address is a buffer's device base address, for gpu.Marshal.
func (be *Backend) address(buf device.Buffer) (uint64, error) {
	b, err := gpu.Owned(buf, be)
	if err != nil {
		return 0, err
	}
	return b.Ptr, nil
}

// SpecializeFamily makes hip the source of kernels/<family>.hip on this backend, built by nvcc
// (cached by its hash) on the family's next first launch. Once the family's cubin is loaded,
// other source is refused.
func (be *Backend) SpecializeFamily(family string, hip []byte) error {
	return be.lib.Specialize(family, hip)
}

// loader builds and loads cubins for the backend's library.
type loader Backend

func (l *loader) LoadModule(srcs fs.FS, family string) (uintptr, error) {
	be := (*Backend)(l)
	if be.comp.nvcc == "" {
		p, err := findNVCC()
		if err != nil {
			return 0, err
		}
		be.comp.nvcc = p
	}
	image, err := be.comp.build(srcs, family)
	if err != nil {
		return 0, err
	}
	var mod uintptr
	err = be.do(func() error {
		return check("cuModuleLoadData", be.drv.moduleLoadData(&mod, unsafe.Pointer(&image[0])))
	})
	if err != nil {
		return 0, fmt.Errorf("%w: loading the cubin of %s", err, family)
	}
	return mod, nil
}

func (l *loader) Function(mod uintptr, family, symbol string) (uintptr, error) {
	be := (*Backend)(l)
	var f uintptr
	err := be.do(func() error { return check("cuModuleGetFunction", be.drv.moduleGetFunction(&f, mod, symbol)) })
	if err != nil {
		return 0, fmt.Errorf("%w: kernel %s of %s", err, symbol, family)
	}
	return f, nil
}

// Sync waits for every launch and reports the first error the device raised.
func (be *Backend) Sync() error {
	return be.do(func() error { return check("cuCtxSynchronize", be.drv.ctxSynchronize()) })
}
