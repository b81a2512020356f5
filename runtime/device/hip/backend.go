// Package hip runs the generated kernels on an AMD GPU through the HIP runtime (libamdhip64),
// loaded with purego (no cgo). The card's gfx target is read from its properties; a family's HIP
// source (package kernels) is built into a code object for that target by hipcc, or by clang++
// with the HIP headers and device libraries it finds, on the first launch of one of its kernels,
// cached under the user cache folder by the hash of the compiler, target and sources, and loaded
// with hipModuleLoadData. Before that first launch the generated glue may replace the source with
// one specialised for the checkpoint it loads (SpecializeFamily), built and cached under its own
// hash.
//
// The package holds the runtime bindings, the hipError_t names, the code object build and device
// discovery; the backend itself is package gpu's, over this package's gpu.Driver. HIP's current
// device is per OS thread, so a Backend owns one goroutine locked to its thread and runs every HIP
// call there. Every launch and copy goes to one stream the backend creates (hipStreamNonBlocking):
// Read waits for the stream after its copy, Sync waits for it, and a Write returns once its copy
// is queued. Launches are held until a Write, Read or Sync needs them; a run of launches identical
// to one seen before is captured once as a HIP graph and replayed (Graphs(false) or
// TFC_GPU_GRAPHS=0 turns this off), and Profile times every launch with events. Parameters and
// grids follow the rule of compiler/emit/hip (package gpu), checked against each kernel's
// declaration before its first launch.
package hip

import (
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"unsafe"

	"tfc/kernels"
	"tfc/runtime/device"
	"tfc/runtime/device/gpu"
)

// Backend runs kernels on one AMD GPU: the shared GPU backend over the HIP runtime.
type Backend struct {
	*gpu.Backend
	api      *api
	dev      int32
	arch     string // gcnArchName, e.g. gfx90a:sramecc+:xnack-
	name     string
	srcs     fs.FS // the sources New reads; the library holds them, specialised, afterwards
	build    builder
	noGraphs bool
	prec     device.Precision
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

// Precision sets how activations are kept (default F32Precision); see gpu.Config.
func Precision(p device.Precision) Option { return func(b *Backend) { b.prec = p } }

// Graphs turns the replay of repeated launch runs as HIP graphs on (the default) or off;
// TFC_GPU_GRAPHS=0 in the environment turns it off too.
func Graphs(on bool) Option { return func(b *Backend) { b.noGraphs = !on } }

var (
	_ device.Backend     = (*Backend)(nil)
	_ device.Specializer = (*Backend)(nil)
	_ device.Profiler    = (*Backend)(nil)
)

// New opens the HIP runtime and the device, creates the backend's stream and reads the kernel
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
	lib, err := gpu.NewLibrary("hip", b.srcs)
	if err != nil {
		return nil, err
	}
	th := gpu.NewThread()
	if err := th.Do(b.open); err != nil {
		th.Stop()
		return nil, err
	}
	if b.build.target == "" {
		b.build.target = baseTarget(b.arch)
	}
	b.Backend, err = gpu.NewBackend(gpu.Config{Name: "hip", Driver: a, Thread: th, Library: lib,
		Build: b.buildModule, Image: b.build.target + " code object", NoGraphs: b.noGraphs, Precision: b.prec})
	if err != nil {
		th.Stop()
		return nil, err
	}
	return b, nil
}

// open finds the device, makes it current and reads its name and gfx target.
func (be *Backend) open() error {
	a := be.api
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
	if be.dev < 0 || be.dev >= n {
		return fmt.Errorf("hip: device %d asked for, %d present", be.dev, n)
	}
	if err := check("hipSetDevice", a.setDevice(be.dev)); err != nil {
		return err
	}
	props := make([]byte, propsSize)
	if err := check("hipGetDeviceProperties", a.getDeviceProperties(unsafe.Pointer(&props[0]), be.dev)); err != nil {
		return err
	}
	arch, err := archFromProps(props, a.propsR0600)
	if err != nil {
		return err
	}
	be.arch = arch
	be.name = cString(props[:256])
	return nil
}

// buildModule builds (or finds in the cache) the code object of a family, finding the compiler
// on first use.
func (be *Backend) buildModule(srcs fs.FS, family string) ([]byte, error) {
	if be.build.comp.path == "" {
		c, err := findCompiler()
		if err != nil {
			return nil, err
		}
		be.build.comp = c
	}
	return be.build.build(srcs, family)
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

// Describe names the device and the gfx target its kernels are built for.
func (be *Backend) Describe() string { return fmt.Sprintf("hip/%s/%s", be.name, be.arch) }

// Target is the gfx target code objects are built for, e.g. gfx90a.
func (be *Backend) Target() string { return be.build.target }

// Versions are the HIP driver and runtime versions (hipDriverGetVersion, hipRuntimeGetVersion).
func (be *Backend) Versions() (driver, rt int, err error) {
	var d, r int32
	err = be.Do(func() error {
		if err := check("hipDriverGetVersion", be.api.driverGetVersion(&d)); err != nil {
			return err
		}
		return check("hipRuntimeGetVersion", be.api.runtimeGetVersion(&r))
	})
	return int(d), int(r), err
}

// RuntimeErrorName asks the runtime for a hipError_t's name and description.
func (be *Backend) RuntimeErrorName(code int32) (name, text string, err error) {
	err = be.Do(func() error {
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
