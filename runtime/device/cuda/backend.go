// Package cuda runs the generated kernels on an NVIDIA GPU through the CUDA driver API, loaded
// with purego (no cgo). A family's HIP source (package kernels) is built by nvcc into a cubin
// for the card's architecture on the first launch of one of its kernels, cached under the user
// cache folder by the hash of the sources and the nvcc version, and loaded with cuModuleLoadData.
// Before that first launch the generated glue may replace the source with one specialised for the
// checkpoint it loads (SpecializeFamily), which is then built and cached under its own hash.
//
// The package holds the driver bindings, the CUresult names, the nvcc build and device discovery;
// the backend itself is package gpu's, over this package's gpu.Driver. The CUDA context is
// current per OS thread, so a Backend owns one goroutine locked to its thread and runs every
// driver call there. Every launch and copy goes to one stream the backend creates
// (CU_STREAM_NON_BLOCKING): Read waits for the stream after its copy, Sync waits for it, and a
// Write returns once its copy is queued. Launches are held until a Write, Read or Sync needs
// them; a run of launches identical to one seen before (same functions, grids and parameter
// bytes) is captured once as a CUDA graph and replayed (Graphs(false) or TFC_GPU_GRAPHS=0 turns
// this off), and Profile times every launch with events.
//
// A launch's parameters follow the rule of compiler/emit/hip: each op's present operands in
// struct order as (address of the first element, row stride), then M, and S for an uncached
// attention. The names this rule gives are checked against the kernel's declaration in its
// source before the first launch of each kernel.
package cuda

import (
	"fmt"
	"io/fs"
	"strings"
	"unsafe"

	"tfc/kernels"
	"tfc/runtime/device"
	"tfc/runtime/device/gpu"
)

// Backend runs kernels on one CUDA device: the shared GPU backend over the driver API.
type Backend struct {
	*gpu.Backend
	drv      *driver
	dev      int32
	ctx      uintptr
	arch     string
	name     string
	srcs     fs.FS // the sources New reads; the library holds them, specialised, afterwards
	comp     nvccBuild
	noGraphs bool
	prec     device.Precision
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

// Precision sets how activations are kept (default F32Precision); see gpu.Config.
func Precision(p device.Precision) Option { return func(b *Backend) { b.prec = p } }

// Graphs turns the replay of repeated launch runs as CUDA graphs on (the default) or off;
// TFC_GPU_GRAPHS=0 in the environment turns it off too.
func Graphs(on bool) Option { return func(b *Backend) { b.noGraphs = !on } }

var (
	_ device.Backend     = (*Backend)(nil)
	_ device.Specializer = (*Backend)(nil)
	_ device.Profiler    = (*Backend)(nil)
)

// New opens the device, makes its primary context current on the backend's thread, creates the
// backend's stream and reads the kernel table (each kernel's schedule) of the kernel sources. nvcc runs later, on a
// family's first launch.
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
	lib, err := gpu.NewLibrary("cuda", b.srcs)
	if err != nil {
		return nil, err
	}
	th := gpu.NewThread()
	if err := th.Do(b.open); err != nil {
		th.Stop()
		return nil, err
	}
	b.comp.arch = b.arch
	b.Backend, err = gpu.NewBackend(gpu.Config{Name: "cuda", Driver: drv, Thread: th, Library: lib,
		Build: b.build, Image: "cubin", Release: b.release, NoGraphs: b.noGraphs, Precision: b.prec})
	if err != nil {
		th.Do(b.release)
		th.Stop()
		return nil, err
	}
	return b, nil
}

// open finds the device, makes its primary context current and reads its name and architecture.
func (be *Backend) open() error {
	drv := be.drv
	if err := check("cuInit", drv.init(0)); err != nil {
		return err
	}
	var n int32
	if err := check("cuDeviceGetCount", drv.deviceGetCount(&n)); err != nil {
		return err
	}
	if be.dev < 0 || be.dev >= n {
		return fmt.Errorf("cuda: device %d asked for, %d present", be.dev, n)
	}
	var dev int32
	if err := check("cuDeviceGet", drv.deviceGet(&dev, be.dev)); err != nil {
		return err
	}
	be.dev = dev
	if err := check("cuDevicePrimaryCtxRetain", drv.primaryCtxRetain(&be.ctx, dev)); err != nil {
		return err
	}
	if err := check("cuCtxSetCurrent", drv.ctxSetCurrent(be.ctx)); err != nil {
		return err
	}
	var major, minor int32
	if err := check("cuDeviceGetAttribute", drv.deviceGetAttribute(&major, attrComputeMajor, dev)); err != nil {
		return err
	}
	if err := check("cuDeviceGetAttribute", drv.deviceGetAttribute(&minor, attrComputeMinor, dev)); err != nil {
		return err
	}
	be.arch = fmt.Sprintf("sm_%d%d", major, minor)
	name := make([]byte, 256)
	if err := check("cuDeviceGetName", drv.deviceGetName(&name[0], int32(len(name)), dev)); err != nil {
		return err
	}
	be.name = cString(name)
	return nil
}

// release lets go of the primary context; it runs last at Close.
func (be *Backend) release() error {
	return check("cuDevicePrimaryCtxRelease_v2", be.drv.primaryCtxRelease(be.dev))
}

// build builds (or finds in the cache) the cubin of a family, finding nvcc on first use.
func (be *Backend) build(srcs fs.FS, family string) ([]byte, error) {
	if be.comp.nvcc == "" {
		p, err := findNVCC()
		if err != nil {
			return nil, err
		}
		be.comp.nvcc = p
	}
	return be.comp.build(srcs, family)
}

// Describe names the device and the architecture its kernels are built for.
func (be *Backend) Describe() string { return fmt.Sprintf("cuda/%s/%s", be.name, be.arch) }

// Arch is the nvcc target of the device, e.g. sm_90.
func (be *Backend) Arch() string { return be.arch }

// DriverVersion is the CUDA version the driver supports, as cuDriverGetVersion gives it
// (13000 for 13.0).
func (be *Backend) DriverVersion() (int, error) {
	var v int32
	err := be.Do(func() error { return check("cuDriverGetVersion", be.drv.driverGetVersion(&v)) })
	return int(v), err
}

// DriverErrorName asks the driver for a CUresult's name (cuGetErrorName).
func (be *Backend) DriverErrorName(code int32) (string, error) {
	var s string
	err := be.Do(func() error {
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
