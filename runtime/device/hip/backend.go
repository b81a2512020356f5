// Package hip runs the generated kernels on an AMD GPU through the HIP runtime (libamdhip64),
// loaded with purego (no cgo). The card's gfx target is read from its properties; a family's HIP
// source (package kernels) is built into a code object for that target by hipcc, or by clang++
// with the HIP headers and device libraries it finds, on the first launch of one of its kernels,
// cached under the user cache folder by the hash of the compiler, target and sources, and loaded
// with hipModuleLoadData. Before that first launch the generated glue may replace the source with
// one specialised for the checkpoint it loads (SpecializeFamily), built and cached under its own
// hash.
//
// HIP's current device is per OS thread, so a Backend owns one goroutine locked to its thread and
// runs every HIP call there. Launches are asynchronous on the backend's stream; Read, Write and
// Sync wait for the work before them. Parameters and grids follow the rule of compiler/emit/hip
// (package gpu), checked against each kernel's declaration before its first launch.
package hip

import (
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sync"
	"unsafe"

	"tfc/kernels"
	"tfc/runtime/device"
	"tfc/runtime/device/gpu"
)

// Backend runs kernels on one AMD GPU.
type Backend struct {
	api    *api
	th     *gpu.Thread
	dev    int32
	stream uintptr
	arch   string // gcnArchName, e.g. gfx90a:sramecc+:xnack-
	name   string
	srcs   fs.FS // the sources New reads; lib holds them, specialised, afterwards
	lib    *gpu.Library
	build  builder

	mu     sync.Mutex
	closed bool
}

// Option configures a Backend.
type Option func(*Backend)

// Device picks the device by ordinal (default 0).
func Device(ordinal int) Option { return func(b *Backend) { b.dev = int32(ordinal) } }

// Sources replaces the embedded kernel sources (*.hip and *.h at the root of fsys).
func Sources(fsys fs.FS) Option { return func(b *Backend) { b.srcs = fsys } }

// CacheDir sets the code object cache folder; "" turns caching off.
func CacheDir(dir string) Option {
	return func(b *Backend) { b.build.cache = gpu.Cache{Dir: dir, Ext: ".hsaco"} }
}

// Target builds for the given gfx target instead of the one the card reports.
func Target(gfx string) Option { return func(b *Backend) { b.build.target = gfx } }

var (
	_ device.Backend     = (*Backend)(nil)
	_ device.Specializer = (*Backend)(nil)
)

// New opens the HIP runtime and the device, creates the backend's stream and reads the symbol
// table of the kernel sources. The compiler runs later, on a family's first launch.
func New(opts ...Option) (*Backend, error) {
	b := &Backend{srcs: kernels.Sources}
	b.build.cache = gpu.UserCache("hsaco", ".hsaco")
	for _, o := range opts {
		o(b)
	}
	a, err := libamdhip64()
	if err != nil {
		return nil, err
	}
	b.api = a
	if b.lib, err = gpu.NewLibrary("hip", b.srcs); err != nil {
		return nil, err
	}
	b.th = gpu.NewThread()
	err = b.do(func() error {
		if err := check("hipInit", a.init(0)); err != nil {
			return noDevice(err)
		}
		var n int32
		if err := check("hipGetDeviceCount", a.getDeviceCount(&n)); err != nil {
			return noDevice(err)
		}
		if n == 0 {
			return fmt.Errorf("hip: no AMD GPU found: hipGetDeviceCount gives 0; use --backend cpu")
		}
		if b.dev < 0 || b.dev >= n {
			return fmt.Errorf("hip: device %d asked for, %d present", b.dev, n)
		}
		if err := check("hipSetDevice", a.setDevice(b.dev)); err != nil {
			return err
		}
		props := make([]byte, propsSize)
		if err := check("hipGetDeviceProperties", a.getDeviceProperties(unsafe.Pointer(&props[0]), b.dev)); err != nil {
			return err
		}
		arch, err := archFromProps(props, a.propsR0600)
		if err != nil {
			return err
		}
		b.arch = arch
		b.name = cString(props[:256])
		return check("hipStreamCreate", a.streamCreate(&b.stream))
	})
	if err != nil {
		b.th.Stop()
		return nil, err
	}
	if b.build.target == "" {
		b.build.target = baseTarget(b.arch)
	}
	return b, nil
}

// noDevice explains the codes HIP gives on a machine without an AMD GPU.
func noDevice(err error) error {
	var he *Error
	if errors.As(err, &he) && (he.Code == errNoDevice || he.Code == errInvalidDevice) {
		return fmt.Errorf("hip: no AMD GPU found (%w); use --backend cpu", err)
	}
	return err
}

// propsSize is room for any hipDeviceProp_t layout (792 bytes in HIP 5, about 1.5 KiB in HIP 6).
const propsSize = 8192

// gcnArchNameOffset is where hipDeviceProp_t (before HIP 6) keeps gcnArchName.
const gcnArchNameOffset = 396

// gcnArch matches a gcnArchName: the processor and its target features.
var gcnArch = regexp.MustCompile(`^gfx[0-9a-f]+(:[a-z]+[+-])*$`)

// archFromProps reads gcnArchName from the bytes of a hipDeviceProp_t: at its place in the
// HIP 5 layout, else the first NUL-terminated string after the device name that reads as one.
func archFromProps(props []byte, r0600 bool) (string, error) {
	if !r0600 && len(props) > gcnArchNameOffset+256 {
		if s := cString(props[gcnArchNameOffset : gcnArchNameOffset+256]); gcnArch.MatchString(s) {
			return s, nil
		}
	}
	for i := 256; i+3 < len(props); i++ {
		if props[i-1] != 0 || props[i] != 'g' {
			continue
		}
		end := i
		for end < len(props) && props[end] != 0 && end-i < 256 {
			end++
		}
		if s := string(props[i:end]); gcnArch.MatchString(s) {
			return s, nil
		}
	}
	return "", fmt.Errorf("hip: the device properties carry no gcnArchName (gfx...); pass the target with hip.Target")
}

// Close unloads the modules, destroys the stream and ends the backend's thread. Buffers must not
// be used afterwards.
func (be *Backend) Close() error {
	be.mu.Lock()
	defer be.mu.Unlock()
	if be.closed {
		return nil
	}
	be.closed = true
	err := be.do(func() error {
		for _, m := range be.lib.Unload() {
			be.api.moduleUnload(m)
		}
		return check("hipStreamDestroy", be.api.streamDestroy(be.stream))
	})
	be.th.Stop()
	return err
}

// goAsync queues f on the backend's thread (gpu.Thread.Go).
func (be *Backend) goAsync(f func() error) error {
	err := be.th.Go(f)
	if errors.Is(err, gpu.ErrStopped) {
		return fmt.Errorf("hip: %w", err)
	}
	return err
}

// do runs f on the thread that owns the HIP context.
func (be *Backend) do(f func() error) error {
	err := be.th.Do(f)
	if errors.Is(err, gpu.ErrStopped) {
		return fmt.Errorf("hip: %w", err)
	}
	return err
}

func (be *Backend) Name() string { return "hip" }

// Describe names the device and the gfx target its kernels are built for.
func (be *Backend) Describe() string { return fmt.Sprintf("hip/%s/%s", be.name, be.arch) }

// Target is the gfx target code objects are built for, e.g. gfx90a.
func (be *Backend) Target() string { return be.build.target }

// Versions are the HIP driver and runtime versions (hipDriverGetVersion, hipRuntimeGetVersion).
func (be *Backend) Versions() (driver, rt int, err error) {
	var d, r int32
	err = be.do(func() error {
		if err := check("hipDriverGetVersion", be.api.driverGetVersion(&d)); err != nil {
			return err
		}
		return check("hipRuntimeGetVersion", be.api.runtimeGetVersion(&r))
	})
	return int(d), int(r), err
}

// RuntimeErrorName asks the runtime for a hipError_t's name and description.
func (be *Backend) RuntimeErrorName(code int32) (name, text string, err error) {
	err = be.do(func() error {
		name = goString(be.api.getErrorName(code))
		text = goString(be.api.getErrorString(code))
		return nil
	})
	return name, text, err
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
		return nil, fmt.Errorf("hip: alloc of unknown dtype %v", dt)
	}
	if n < 0 {
		return nil, fmt.Errorf("hip: alloc of %d elements", n)
	}
	b := &gpu.Buffer{DT: dt, N: n, Owner: be}
	if n == 0 {
		return b, nil
	}
	bytes := uint64(n) * uint64(dt.Size())
	err := be.do(func() error {
		if err := check("hipMalloc", be.api.malloc(&b.Ptr, bytes)); err != nil {
			return fmt.Errorf("%w: allocating %d %v elements (%d bytes)", err, n, dt, bytes)
		}
		return check("hipMemset", be.api.memset(b.Ptr, 0, bytes))
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
		be.do(func() error { return check("hipFree", be.api.free(ptr)) })
	}
}

// view checks that t lies inside a live buffer of this backend.
func (be *Backend) view(what string, t device.Tensor) (*gpu.Buffer, error) {
	b, err := gpu.ViewOf(what, t, be)
	if err != nil {
		return nil, fmt.Errorf("hip: %w", err)
	}
	return b, nil
}

// Write converts src to t's dtype on the host and copies it to the device row by row, or in one
// copy when t is contiguous. The copy waits for the stream's work before it.
func (be *Backend) Write(t device.Tensor, src any, srcType device.DType) error {
	b, err := be.view("write", t)
	if err != nil {
		return err
	}
	n := t.Rows * t.Cols
	host, err := gpu.Encode(b.DT, n, src, srcType)
	if err != nil {
		return fmt.Errorf("hip: %w", err)
	}
	if n == 0 {
		return nil
	}
	return be.do(func() error {
		if err := check("hipStreamSynchronize", be.api.streamSynchronize(be.stream)); err != nil {
			return err
		}
		return gpu.CopyRows(t, b, host, func(dev uint64, h []byte) error {
			return check("hipMemcpyHtoD", be.api.memcpyHtoD(dev, unsafe.Pointer(&h[0]), uint64(len(h))))
		})
	})
}

// Read copies t to dst: []float32 for float tensors (BF16 and F16 widened exactly), []int32 for
// I32 ones. It waits for the launches before it.
func (be *Backend) Read(t device.Tensor, dst any) error {
	b, err := be.view("read", t)
	if err != nil {
		return err
	}
	if err := gpu.CheckRead(b.DT, t.Rows, t.Cols, dst); err != nil {
		return fmt.Errorf("hip: %w", err)
	}
	n := t.Rows * t.Cols
	if n == 0 {
		return nil
	}
	host := make([]byte, n*b.DT.Size())
	err = be.do(func() error {
		if err := check("hipStreamSynchronize", be.api.streamSynchronize(be.stream)); err != nil {
			return err
		}
		return gpu.CopyRows(t, b, host, func(dev uint64, h []byte) error {
			return check("hipMemcpyDtoH", be.api.memcpyDtoH(unsafe.Pointer(&h[0]), dev, uint64(len(h))))
		})
	})
	if err != nil {
		return err
	}
	gpu.Decode(b.DT, host, dst)
	return nil
}

// Launch runs the ops of one generated kernel on the backend's stream: its parameters and grid
// by the rule of compiler/emit/hip.
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
			code := be.api.moduleLaunchKernel(c.Funcs[i], uint32(g.GridX), uint32(g.GridY), 1, gpu.Threads, 1, 1, 0, be.stream, c.Params, 0)
			if err := check("hipModuleLaunchKernel", code); err != nil {
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

// SpecializeFamily makes hip the source of kernels/<family>.hip on this backend, built for its
// target (cached by its hash) on the family's next first launch. Once the family's code object is
// loaded, other source is refused.
func (be *Backend) SpecializeFamily(family string, hip []byte) error {
	return be.lib.Specialize(family, hip)
}

// loader builds and loads code objects for the backend's library.
type loader Backend

func (l *loader) LoadModule(srcs fs.FS, family string) (uintptr, error) {
	be := (*Backend)(l)
	if be.build.comp.path == "" {
		c, err := findCompiler()
		if err != nil {
			return 0, err
		}
		be.build.comp = c
	}
	image, err := be.build.build(srcs, family)
	if err != nil {
		return 0, err
	}
	var mod uintptr
	err = be.do(func() error {
		return check("hipModuleLoadData", be.api.moduleLoadData(&mod, unsafe.Pointer(&image[0])))
	})
	if err != nil {
		return 0, fmt.Errorf("%w: loading the %s code object of %s", err, be.build.target, family)
	}
	return mod, nil
}

func (l *loader) Function(mod uintptr, family, symbol string) (uintptr, error) {
	be := (*Backend)(l)
	var f uintptr
	err := be.do(func() error { return check("hipModuleGetFunction", be.api.moduleGetFunction(&f, mod, symbol)) })
	if err != nil {
		return 0, fmt.Errorf("%w: kernel %s of %s", err, symbol, family)
	}
	return f, nil
}

// Sync waits for every launch and reports the first error the device raised.
func (be *Backend) Sync() error {
	return be.do(func() error { return check("hipStreamSynchronize", be.api.streamSynchronize(be.stream)) })
}

// Time runs f, which launches work, between two events on the backend's stream and returns the
// device time between them in milliseconds.
func (be *Backend) Time(f func() error) (float32, error) {
	var start, stop uintptr
	err := be.do(func() error {
		if err := check("hipEventCreate", be.api.eventCreate(&start)); err != nil {
			return err
		}
		if err := check("hipEventCreate", be.api.eventCreate(&stop)); err != nil {
			return err
		}
		return check("hipEventRecord", be.api.eventRecord(start, be.stream))
	})
	defer be.do(func() error {
		if start != 0 {
			be.api.eventDestroy(start)
		}
		if stop != 0 {
			be.api.eventDestroy(stop)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if err := f(); err != nil {
		return 0, err
	}
	var ms float32
	err = be.do(func() error {
		if err := check("hipEventRecord", be.api.eventRecord(stop, be.stream)); err != nil {
			return err
		}
		if err := check("hipEventSynchronize", be.api.eventSynchronize(stop)); err != nil {
			return err
		}
		return check("hipEventElapsedTime", be.api.eventElapsedTime(&ms, start, stop))
	})
	return ms, err
}
