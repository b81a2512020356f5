package hip

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// api holds the entry points of libamdhip64 that the backend calls. HIP's current device is per
// OS thread, so every call comes from the backend's locked thread.
type api struct {
	init                func(flags uint32) int32
	driverGetVersion    func(v *int32) int32
	runtimeGetVersion   func(v *int32) int32
	getDeviceCount      func(n *int32) int32
	setDevice           func(dev int32) int32
	getDeviceProperties func(props unsafe.Pointer, dev int32) int32
	deviceGetName       func(name *byte, n int32, dev int32) int32
	deviceTotalMem      func(bytes *uint64, dev int32) int32
	deviceSynchronize   func() int32
	malloc              func(ptr *uint64, bytes uint64) int32
	free                func(ptr uint64) int32
	memsetAsync         func(ptr uint64, v int32, bytes uint64, stream uintptr) int32
	memcpyHtoDAsync     func(dst uint64, src unsafe.Pointer, bytes uint64, stream uintptr) int32
	memcpyDtoHAsync     func(dst unsafe.Pointer, src uint64, bytes uint64, stream uintptr) int32
	moduleLoadData      func(mod *uintptr, image unsafe.Pointer) int32
	moduleUnload        func(mod uintptr) int32
	moduleGetFunction   func(fn *uintptr, mod uintptr, name string) int32
	moduleLaunchKernel  func(fn uintptr, gx, gy, gz, bx, by, bz, shared uint32, stream uintptr, params unsafe.Pointer, extra uintptr) int32
	streamCreate        func(stream *uintptr, flags uint32) int32
	streamDestroy       func(stream uintptr) int32
	streamSynchronize   func(stream uintptr) int32
	eventCreate         func(ev *uintptr) int32
	eventDestroy        func(ev uintptr) int32
	eventRecord         func(ev, stream uintptr) int32
	eventElapsedTime    func(ms *float32, start, stop uintptr) int32
	streamBeginCapture  func(stream uintptr, mode int32) int32
	streamEndCapture    func(stream uintptr, graph *uintptr) int32
	graphInstantiate    func(exec *uintptr, graph uintptr, errNode *uintptr, log *byte, logSize uint64) int32
	graphLaunch         func(exec, stream uintptr) int32
	graphExecDestroy    func(exec uintptr) int32
	graphDestroy        func(graph uintptr) int32
	getErrorName        func(code int32) *byte
	getErrorString      func(code int32) *byte
	propsR0600          bool // getDeviceProperties is hipGetDevicePropertiesR0600 (HIP 6 and later)
}

// symbol pairs a libamdhip64 export with the function variable bound to it.
type symbol struct {
	name string
	fn   any
}

// symbols lists the exports the backend binds, by the names hip_runtime_api.h declares.
// hipGetDeviceProperties is bound separately (propsSymbols): HIP 6 renamed it.
func (a *api) symbols() []symbol {
	return []symbol{
		{"hipInit", &a.init},
		{"hipDriverGetVersion", &a.driverGetVersion},
		{"hipRuntimeGetVersion", &a.runtimeGetVersion},
		{"hipGetDeviceCount", &a.getDeviceCount},
		{"hipSetDevice", &a.setDevice},
		{"hipDeviceGetName", &a.deviceGetName},
		{"hipDeviceTotalMem", &a.deviceTotalMem},
		{"hipDeviceSynchronize", &a.deviceSynchronize},
		{"hipMalloc", &a.malloc},
		{"hipFree", &a.free},
		{"hipMemsetAsync", &a.memsetAsync},
		{"hipMemcpyHtoDAsync", &a.memcpyHtoDAsync},
		{"hipMemcpyDtoHAsync", &a.memcpyDtoHAsync},
		{"hipModuleLoadData", &a.moduleLoadData},
		{"hipModuleUnload", &a.moduleUnload},
		{"hipModuleGetFunction", &a.moduleGetFunction},
		{"hipModuleLaunchKernel", &a.moduleLaunchKernel},
		{"hipStreamCreateWithFlags", &a.streamCreate},
		{"hipStreamDestroy", &a.streamDestroy},
		{"hipStreamSynchronize", &a.streamSynchronize},
		{"hipEventCreate", &a.eventCreate},
		{"hipEventDestroy", &a.eventDestroy},
		{"hipEventRecord", &a.eventRecord},
		{"hipEventElapsedTime", &a.eventElapsedTime},
		{"hipStreamBeginCapture", &a.streamBeginCapture},
		{"hipStreamEndCapture", &a.streamEndCapture},
		{"hipGraphInstantiate", &a.graphInstantiate},
		{"hipGraphLaunch", &a.graphLaunch},
		{"hipGraphExecDestroy", &a.graphExecDestroy},
		{"hipGraphDestroy", &a.graphDestroy},
		{"hipGetErrorName", &a.getErrorName},
		{"hipGetErrorString", &a.getErrorString},
	}
}

// propsSymbols are the names of hipGetDeviceProperties, newest first: HIP 6 exports the
// hipDeviceProp_tR0600 layout as hipGetDevicePropertiesR0600, HIP 5 the older one under the plain name.
var propsSymbols = []string{"hipGetDevicePropertiesR0600", "hipGetDeviceProperties"}

// libraryNames are tried in order by dlopen: the development link, then the sonames of HIP 6 and
// 5, then ROCm's default install folder.
var libraryNames = []string{"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5", "/opt/rocm/lib/libamdhip64.so"}

// errNoRuntime is returned when no libamdhip64 can be opened.
var errNoRuntime = errors.New("hip: no AMD GPU runtime: libamdhip64.so not found; install ROCm or use --backend cpu")

var (
	loadOnce  sync.Once
	loaded    *api
	loadError error
)

// libamdhip64 opens the HIP runtime once and binds its entry points.
func libamdhip64() (*api, error) {
	loadOnce.Do(func() { loaded, loadError = open(libraryNames) })
	return loaded, loadError
}

// open dlopens the first library of names that opens and binds every symbol.
func open(names []string) (*api, error) {
	if runtime.GOOS != "linux" {
		return nil, fmt.Errorf("hip: the HIP backend runs on Linux; this is %s", runtime.GOOS)
	}
	var lib uintptr
	var tried []string
	for _, n := range names {
		l, err := purego.Dlopen(n, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err == nil {
			lib = l
			break
		}
		tried = append(tried, err.Error())
	}
	if lib == 0 {
		return nil, fmt.Errorf("%w (tried %v)", errNoRuntime, tried)
	}
	a := &api{}
	for _, s := range a.symbols() {
		fn, err := purego.Dlsym(lib, s.name)
		if err != nil {
			return nil, fmt.Errorf("hip: libamdhip64 has no %s (%v); install ROCm 5.2 or later", s.name, err)
		}
		purego.RegisterFunc(s.fn, fn)
	}
	for _, name := range propsSymbols {
		if fn, err := purego.Dlsym(lib, name); err == nil {
			purego.RegisterFunc(&a.getDeviceProperties, fn)
			a.propsR0600 = name == propsSymbols[0]
			break
		}
	}
	if a.getDeviceProperties == nil {
		return nil, fmt.Errorf("hip: libamdhip64 has neither %v; install ROCm 5.2 or later", propsSymbols)
	}
	return a, nil
}

// goString copies a NUL-terminated C string.
func goString(p *byte) string {
	if p == nil {
		return ""
	}
	var b []byte
	for q := p; *q != 0; q = (*byte)(unsafe.Add(unsafe.Pointer(q), 1)) {
		b = append(b, *q)
	}
	return string(b)
}

// Flags and modes of hip_runtime_api.h.
const (
	streamNonBlocking      = 0x1 // hipStreamNonBlocking
	captureModeThreadLocal = 1   // hipStreamCaptureModeThreadLocal
)

// The gpu.Driver methods: each calls one HIP entry point and names it in its error.

func (a *api) Alloc(bytes uint64) (uint64, error) {
	var p uint64
	return p, check("hipMalloc", a.malloc(&p, bytes))
}

func (a *api) Free(ptr uint64) error { return check("hipFree", a.free(ptr)) }

func (a *api) MemsetAsync(ptr, bytes uint64, stream uintptr) error {
	return check("hipMemsetAsync", a.memsetAsync(ptr, 0, bytes, stream))
}

func (a *api) CopyToDevice(dst uint64, host []byte, stream uintptr) error {
	return check("hipMemcpyHtoDAsync", a.memcpyHtoDAsync(dst, unsafe.Pointer(&host[0]), uint64(len(host)), stream))
}

func (a *api) CopyToHost(host []byte, src uint64, stream uintptr) error {
	return check("hipMemcpyDtoHAsync", a.memcpyDtoHAsync(unsafe.Pointer(&host[0]), src, uint64(len(host)), stream))
}

func (a *api) NewStream() (uintptr, error) {
	var s uintptr
	return s, check("hipStreamCreateWithFlags", a.streamCreate(&s, streamNonBlocking))
}

func (a *api) SyncStream(stream uintptr) error {
	return check("hipStreamSynchronize", a.streamSynchronize(stream))
}

func (a *api) DestroyStream(stream uintptr) error {
	return check("hipStreamDestroy", a.streamDestroy(stream))
}

func (a *api) LoadModule(image []byte) (uintptr, error) {
	var m uintptr
	return m, check("hipModuleLoadData", a.moduleLoadData(&m, unsafe.Pointer(&image[0])))
}

func (a *api) UnloadModule(module uintptr) error {
	return check("hipModuleUnload", a.moduleUnload(module))
}

func (a *api) Function(module uintptr, symbol string) (uintptr, error) {
	var f uintptr
	return f, check("hipModuleGetFunction", a.moduleGetFunction(&f, module, symbol))
}

func (a *api) Launch(fn uintptr, gridX, gridY, block, lds uint32, params unsafe.Pointer, stream uintptr) error {
	return check("hipModuleLaunchKernel", a.moduleLaunchKernel(fn, gridX, gridY, 1, block, 1, 1, lds, stream, params, 0))
}

func (a *api) NewEvent() (uintptr, error) {
	var e uintptr
	return e, check("hipEventCreate", a.eventCreate(&e))
}

func (a *api) RecordEvent(event, stream uintptr) error {
	return check("hipEventRecord", a.eventRecord(event, stream))
}

func (a *api) ElapsedMs(start, stop uintptr) (float32, error) {
	var ms float32
	return ms, check("hipEventElapsedTime", a.eventElapsedTime(&ms, start, stop))
}

func (a *api) DestroyEvent(event uintptr) error {
	return check("hipEventDestroy", a.eventDestroy(event))
}

func (a *api) BeginCapture(stream uintptr) error {
	return check("hipStreamBeginCapture", a.streamBeginCapture(stream, captureModeThreadLocal))
}

func (a *api) EndCapture(stream uintptr) (uintptr, error) {
	var g uintptr
	return g, check("hipStreamEndCapture", a.streamEndCapture(stream, &g))
}

func (a *api) Instantiate(graph uintptr) (uintptr, error) {
	var e uintptr
	return e, check("hipGraphInstantiate", a.graphInstantiate(&e, graph, nil, nil, 0))
}

func (a *api) LaunchGraph(exec, stream uintptr) error {
	return check("hipGraphLaunch", a.graphLaunch(exec, stream))
}

func (a *api) DestroyGraphExec(exec uintptr) error {
	return check("hipGraphExecDestroy", a.graphExecDestroy(exec))
}

func (a *api) DestroyGraph(graph uintptr) error {
	return check("hipGraphDestroy", a.graphDestroy(graph))
}
