package cuda

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// driver holds the entry points of libcuda that the backend calls. Every call must come from
// the backend's locked thread, where its context is current.
type driver struct {
	init               func(flags uint32) int32
	driverGetVersion   func(v *int32) int32
	deviceGetCount     func(n *int32) int32
	deviceGet          func(dev *int32, ordinal int32) int32
	deviceGetName      func(name *byte, n int32, dev int32) int32
	deviceGetAttribute func(v *int32, attr int32, dev int32) int32
	deviceTotalMem     func(bytes *uint64, dev int32) int32
	primaryCtxRetain   func(ctx *uintptr, dev int32) int32
	primaryCtxRelease  func(dev int32) int32
	ctxSetCurrent      func(ctx uintptr) int32
	ctxSynchronize     func() int32
	memAlloc           func(ptr *uint64, bytes uint64) int32
	memFree            func(ptr uint64) int32
	memsetD8           func(ptr uint64, v uint8, n uint64) int32
	memcpyHtoD         func(dst uint64, src unsafe.Pointer, n uint64) int32
	memcpyDtoH         func(dst unsafe.Pointer, src uint64, n uint64) int32
	moduleLoadData     func(mod *uintptr, image unsafe.Pointer) int32
	moduleUnload       func(mod uintptr) int32
	moduleGetFunction  func(fn *uintptr, mod uintptr, name string) int32
	launchKernel       func(fn uintptr, gx, gy, gz, bx, by, bz, shared uint32, stream uintptr, params unsafe.Pointer, extra uintptr) int32
	getErrorName       func(code int32, name **byte) int32
}

// Device attributes (CUdevice_attribute).
const (
	attrComputeMajor = 75
	attrComputeMinor = 76
	attrSMCount      = 16
)

var (
	loadOnce  sync.Once
	loaded    *driver
	loadError error
)

// libcuda opens libcuda.so.1 once and binds the driver entry points.
func libcuda() (*driver, error) {
	loadOnce.Do(func() {
		if runtime.GOOS != "linux" {
			loadError = fmt.Errorf("cuda: the CUDA backend runs on Linux; this is %s", runtime.GOOS)
			return
		}
		lib, err := purego.Dlopen("libcuda.so.1", purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			loadError = fmt.Errorf("cuda: cannot open libcuda.so.1 (%v); install the NVIDIA driver or use --backend cpu", err)
			return
		}
		d := &driver{}
		for _, s := range d.symbols() {
			fn, err := purego.Dlsym(lib, s.name)
			if err != nil {
				loadError = fmt.Errorf("cuda: libcuda.so.1 has no %s (%v); the driver is too old", s.name, err)
				return
			}
			purego.RegisterFunc(s.fn, fn)
		}
		loaded = d
	})
	return loaded, loadError
}

// symbol pairs a driver export with the function variable bound to it.
type symbol struct {
	name string
	fn   any
}

// symbols lists the exports the backend binds, by the versioned names cuda.h maps to.
func (d *driver) symbols() []symbol {
	return []symbol{
		{"cuInit", &d.init},
		{"cuDriverGetVersion", &d.driverGetVersion},
		{"cuDeviceGetCount", &d.deviceGetCount},
		{"cuDeviceGet", &d.deviceGet},
		{"cuDeviceGetName", &d.deviceGetName},
		{"cuDeviceGetAttribute", &d.deviceGetAttribute},
		{"cuDeviceTotalMem_v2", &d.deviceTotalMem},
		{"cuDevicePrimaryCtxRetain", &d.primaryCtxRetain},
		{"cuDevicePrimaryCtxRelease_v2", &d.primaryCtxRelease},
		{"cuCtxSetCurrent", &d.ctxSetCurrent},
		{"cuCtxSynchronize", &d.ctxSynchronize},
		{"cuMemAlloc_v2", &d.memAlloc},
		{"cuMemFree_v2", &d.memFree},
		{"cuMemsetD8_v2", &d.memsetD8},
		{"cuMemcpyHtoD_v2", &d.memcpyHtoD},
		{"cuMemcpyDtoH_v2", &d.memcpyDtoH},
		{"cuModuleLoadData", &d.moduleLoadData},
		{"cuModuleUnload", &d.moduleUnload},
		{"cuModuleGetFunction", &d.moduleGetFunction},
		{"cuLaunchKernel", &d.launchKernel},
		{"cuGetErrorName", &d.getErrorName},
	}
}
