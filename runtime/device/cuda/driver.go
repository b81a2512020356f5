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
	memAlloc           func(ptr *uint64, bytes uint64) int32
	memFree            func(ptr uint64) int32
	memsetD8Async      func(ptr uint64, v uint8, n uint64, stream uintptr) int32
	memcpyHtoDAsync    func(dst uint64, src unsafe.Pointer, n uint64, stream uintptr) int32
	memcpyDtoHAsync    func(dst unsafe.Pointer, src uint64, n uint64, stream uintptr) int32
	streamCreate       func(stream *uintptr, flags uint32) int32
	streamSynchronize  func(stream uintptr) int32
	streamDestroy      func(stream uintptr) int32
	moduleLoadData     func(mod *uintptr, image unsafe.Pointer) int32
	moduleUnload       func(mod uintptr) int32
	moduleGetFunction  func(fn *uintptr, mod uintptr, name string) int32
	launchKernel       func(fn uintptr, gx, gy, gz, bx, by, bz, shared uint32, stream uintptr, params unsafe.Pointer, extra uintptr) int32
	funcSetAttribute   func(fn uintptr, attr int32, v int32) int32
	eventCreate        func(ev *uintptr, flags uint32) int32
	eventRecord        func(ev, stream uintptr) int32
	eventElapsedTime   func(ms *float32, start, stop uintptr) int32
	eventDestroy       func(ev uintptr) int32
	streamBeginCapture func(stream uintptr, mode int32) int32
	streamEndCapture   func(stream uintptr, graph *uintptr) int32
	graphInstantiate   func(exec *uintptr, graph uintptr, flags uint64) int32
	graphLaunch        func(exec, stream uintptr) int32
	graphExecDestroy   func(exec uintptr) int32
	graphDestroy       func(graph uintptr) int32
	getErrorName       func(code int32, name **byte) int32

	lds map[uintptr]uint32 // the dynamic LDS each function is allowed past the default 48 KiB
}

// Flags and modes of cuda.h.
const (
	streamNonBlocking      = 0x1 // CU_STREAM_NON_BLOCKING
	captureModeThreadLocal = 1   // CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
	eventDefault           = 0x0 // CU_EVENT_DEFAULT: with timing
	attrMaxDynamicLDS      = 8   // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
	defaultLDS             = 48 << 10
)

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
			if err != nil && s.alt != "" {
				fn, err = purego.Dlsym(lib, s.alt)
			}
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
	alt  string // an export with the same signature, bound where the driver lacks name
}

// symbols lists the exports the backend binds, by the versioned names cuda.h maps to without
// per-thread default streams (cuMemcpyHtoDAsync is cuMemcpyHtoDAsync_v2, cuStreamBeginCapture is
// cuStreamBeginCapture_v2). cuEventElapsedTime is the first version; CUDA 12.8 added a _v2 with the
// same signature, bound where a driver drops the first.
func (d *driver) symbols() []symbol {
	return []symbol{
		{"cuInit", &d.init, ""},
		{"cuDriverGetVersion", &d.driverGetVersion, ""},
		{"cuDeviceGetCount", &d.deviceGetCount, ""},
		{"cuDeviceGet", &d.deviceGet, ""},
		{"cuDeviceGetName", &d.deviceGetName, ""},
		{"cuDeviceGetAttribute", &d.deviceGetAttribute, ""},
		{"cuDeviceTotalMem_v2", &d.deviceTotalMem, ""},
		{"cuDevicePrimaryCtxRetain", &d.primaryCtxRetain, ""},
		{"cuDevicePrimaryCtxRelease_v2", &d.primaryCtxRelease, ""},
		{"cuCtxSetCurrent", &d.ctxSetCurrent, ""},
		{"cuMemAlloc_v2", &d.memAlloc, ""},
		{"cuMemFree_v2", &d.memFree, ""},
		{"cuMemsetD8Async", &d.memsetD8Async, ""},
		{"cuMemcpyHtoDAsync_v2", &d.memcpyHtoDAsync, ""},
		{"cuMemcpyDtoHAsync_v2", &d.memcpyDtoHAsync, ""},
		{"cuStreamCreate", &d.streamCreate, ""},
		{"cuStreamSynchronize", &d.streamSynchronize, ""},
		{"cuStreamDestroy_v2", &d.streamDestroy, ""},
		{"cuModuleLoadData", &d.moduleLoadData, ""},
		{"cuModuleUnload", &d.moduleUnload, ""},
		{"cuModuleGetFunction", &d.moduleGetFunction, ""},
		{"cuLaunchKernel", &d.launchKernel, ""},
		{"cuFuncSetAttribute", &d.funcSetAttribute, ""},
		{"cuEventCreate", &d.eventCreate, ""},
		{"cuEventRecord", &d.eventRecord, ""},
		{"cuEventElapsedTime", &d.eventElapsedTime, "cuEventElapsedTime_v2"},
		{"cuEventDestroy_v2", &d.eventDestroy, ""},
		{"cuStreamBeginCapture_v2", &d.streamBeginCapture, ""},
		{"cuStreamEndCapture", &d.streamEndCapture, ""},
		{"cuGraphInstantiateWithFlags", &d.graphInstantiate, ""},
		{"cuGraphLaunch", &d.graphLaunch, ""},
		{"cuGraphExecDestroy", &d.graphExecDestroy, ""},
		{"cuGraphDestroy", &d.graphDestroy, ""},
		{"cuGetErrorName", &d.getErrorName, ""},
	}
}

// The gpu.Driver methods: each calls one driver entry point and names it in its error.

func (d *driver) Alloc(bytes uint64) (uint64, error) {
	var p uint64
	return p, check("cuMemAlloc_v2", d.memAlloc(&p, bytes))
}

func (d *driver) Free(ptr uint64) error { return check("cuMemFree_v2", d.memFree(ptr)) }

func (d *driver) MemsetAsync(ptr, bytes uint64, stream uintptr) error {
	return check("cuMemsetD8Async", d.memsetD8Async(ptr, 0, bytes, stream))
}

func (d *driver) CopyToDevice(dst uint64, host []byte, stream uintptr) error {
	return check("cuMemcpyHtoDAsync_v2", d.memcpyHtoDAsync(dst, unsafe.Pointer(&host[0]), uint64(len(host)), stream))
}

func (d *driver) CopyToHost(host []byte, src uint64, stream uintptr) error {
	return check("cuMemcpyDtoHAsync_v2", d.memcpyDtoHAsync(unsafe.Pointer(&host[0]), src, uint64(len(host)), stream))
}

func (d *driver) NewStream() (uintptr, error) {
	var s uintptr
	return s, check("cuStreamCreate", d.streamCreate(&s, streamNonBlocking))
}

func (d *driver) SyncStream(stream uintptr) error {
	return check("cuStreamSynchronize", d.streamSynchronize(stream))
}

func (d *driver) DestroyStream(stream uintptr) error {
	return check("cuStreamDestroy_v2", d.streamDestroy(stream))
}

func (d *driver) LoadModule(image []byte) (uintptr, error) {
	var m uintptr
	return m, check("cuModuleLoadData", d.moduleLoadData(&m, unsafe.Pointer(&image[0])))
}

func (d *driver) UnloadModule(module uintptr) error {
	return check("cuModuleUnload", d.moduleUnload(module))
}

func (d *driver) Function(module uintptr, symbol string) (uintptr, error) {
	var f uintptr
	return f, check("cuModuleGetFunction", d.moduleGetFunction(&f, module, symbol))
}

func (d *driver) Launch(fn uintptr, gridX, gridY, block, lds uint32, params unsafe.Pointer, stream uintptr) error {
	if lds > defaultLDS && d.lds[fn] < lds { // a function may take more dynamic LDS once allowed it
		if err := check("cuFuncSetAttribute", d.funcSetAttribute(fn, attrMaxDynamicLDS, int32(lds))); err != nil {
			return err
		}
		if d.lds == nil {
			d.lds = map[uintptr]uint32{}
		}
		d.lds[fn] = lds
	}
	return check("cuLaunchKernel", d.launchKernel(fn, gridX, gridY, 1, block, 1, 1, lds, stream, params, 0))
}

func (d *driver) NewEvent() (uintptr, error) {
	var e uintptr
	return e, check("cuEventCreate", d.eventCreate(&e, eventDefault))
}

func (d *driver) RecordEvent(event, stream uintptr) error {
	return check("cuEventRecord", d.eventRecord(event, stream))
}

func (d *driver) ElapsedMs(start, stop uintptr) (float32, error) {
	var ms float32
	return ms, check("cuEventElapsedTime", d.eventElapsedTime(&ms, start, stop))
}

func (d *driver) DestroyEvent(event uintptr) error {
	return check("cuEventDestroy_v2", d.eventDestroy(event))
}

func (d *driver) BeginCapture(stream uintptr) error {
	return check("cuStreamBeginCapture_v2", d.streamBeginCapture(stream, captureModeThreadLocal))
}

func (d *driver) EndCapture(stream uintptr) (uintptr, error) {
	var g uintptr
	return g, check("cuStreamEndCapture", d.streamEndCapture(stream, &g))
}

func (d *driver) Instantiate(graph uintptr) (uintptr, error) {
	var e uintptr
	return e, check("cuGraphInstantiateWithFlags", d.graphInstantiate(&e, graph, 0))
}

func (d *driver) LaunchGraph(exec, stream uintptr) error {
	return check("cuGraphLaunch", d.graphLaunch(exec, stream))
}

func (d *driver) DestroyGraphExec(exec uintptr) error {
	return check("cuGraphExecDestroy", d.graphExecDestroy(exec))
}

func (d *driver) DestroyGraph(graph uintptr) error {
	return check("cuGraphDestroy", d.graphDestroy(graph))
}
