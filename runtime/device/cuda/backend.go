// Package cuda runs the generated kernels on an NVIDIA GPU through the CUDA driver API, loaded
// with purego (no cgo). A family's HIP source (package kernels) is built by nvcc into a cubin
// for the card's architecture on the first launch of one of its kernels, cached under the user
// cache folder by the hash of the sources and the nvcc version, and loaded with cuModuleLoadData.
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
	"encoding/binary"
	"fmt"
	"io/fs"
	"math"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"tfc/kernels"
	"tfc/runtime/device"
	"tfc/runtime/device/cpu"
)

// Backend runs kernels on one CUDA device.
type Backend struct {
	drv     *driver
	th      *thread
	dev     int32
	ctx     uintptr
	arch    string
	name    string
	srcs    fs.FS
	symbols map[string]entry
	comp    nvccBuild

	mu       sync.Mutex
	modules  map[string]uintptr // family → module
	funcs    map[string]uintptr // symbol → function
	verified map[string]bool    // kernels whose parameter names matched their declaration
	closed   bool
}

// Option configures a Backend.
type Option func(*Backend)

// Device picks the device by ordinal (default 0).
func Device(ordinal int) Option { return func(b *Backend) { b.dev = int32(ordinal) } }

// Sources replaces the embedded kernel sources (*.hip and *.h at the root of fsys).
func Sources(fsys fs.FS) Option { return func(b *Backend) { b.srcs = fsys } }

// CacheDir sets the cubin cache folder; "" turns caching off.
func CacheDir(dir string) Option { return func(b *Backend) { b.comp.cache = dir } }

var _ device.Backend = (*Backend)(nil)

// New opens the device, makes its primary context current on the backend's thread and reads the
// symbol table of the kernel sources. nvcc runs later, on a family's first launch.
func New(opts ...Option) (*Backend, error) {
	b := &Backend{srcs: kernels.Sources, modules: map[string]uintptr{}, funcs: map[string]uintptr{}, verified: map[string]bool{}}
	b.comp.cache = cacheDir()
	for _, o := range opts {
		o(b)
	}
	drv, err := libcuda()
	if err != nil {
		return nil, err
	}
	b.drv = drv
	if b.symbols, err = symbolTable(b.srcs); err != nil {
		return nil, err
	}
	b.th = newThread()
	err = b.th.do(func() error {
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
		b.th.stop()
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
	err := be.th.do(func() error {
		for _, m := range be.modules {
			be.drv.moduleUnload(m)
		}
		return check("cuDevicePrimaryCtxRelease_v2", be.drv.primaryCtxRelease(be.dev))
	})
	be.th.stop()
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
	err := be.th.do(func() error { return check("cuDriverGetVersion", be.drv.driverGetVersion(&v)) })
	return int(v), err
}

// DriverErrorName asks the driver for a CUresult's name (cuGetErrorName).
func (be *Backend) DriverErrorName(code int32) (string, error) {
	var s string
	err := be.th.do(func() error {
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

// buffer is a device allocation.
type buffer struct {
	dt    device.DType
	n     int
	ptr   uint64
	owner *Backend
	freed bool
}

func (b *buffer) Len() int            { return b.n }
func (b *buffer) DType() device.DType { return b.dt }

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
	b := &buffer{dt: dt, n: n, owner: be}
	if n == 0 {
		return b, nil
	}
	bytes := uint64(n) * uint64(dt.Size())
	err := be.th.do(func() error {
		if err := check("cuMemAlloc_v2", be.drv.memAlloc(&b.ptr, bytes)); err != nil {
			return fmt.Errorf("%w: allocating %d %v elements (%d bytes)", err, n, dt, bytes)
		}
		return check("cuMemsetD8_v2", be.drv.memsetD8(b.ptr, 0, bytes))
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Free releases b.
func (be *Backend) Free(buf device.Buffer) {
	b, ok := buf.(*buffer)
	if !ok || b.owner != be || b.freed {
		return
	}
	b.freed = true
	if b.ptr != 0 {
		ptr := b.ptr
		be.th.do(func() error { return check("cuMemFree_v2", be.drv.memFree(ptr)) })
	}
}

// view checks that t lies inside a live buffer of this backend.
func (be *Backend) view(what string, t device.Tensor) (*buffer, error) {
	b, ok := t.Buf.(*buffer)
	if !ok || b.owner != be {
		return nil, fmt.Errorf("cuda: %s of a tensor whose buffer %T is not this backend's", what, t.Buf)
	}
	if b.freed {
		return nil, fmt.Errorf("cuda: %s of a freed buffer", what)
	}
	if t.Rows < 0 || t.Cols < 0 || t.Off < 0 || t.RowStride() < t.Cols {
		return nil, fmt.Errorf("cuda: %s of a malformed tensor [%d,%d] at %d stride %d", what, t.Rows, t.Cols, t.Off, t.RowStride())
	}
	if t.Rows > 0 && t.Cols > 0 && t.Off+(t.Rows-1)*t.RowStride()+t.Cols > b.n {
		return nil, fmt.Errorf("cuda: %s of [%d,%d] at %d stride %d runs past a %d-element buffer", what, t.Rows, t.Cols, t.Off, t.RowStride(), b.n)
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
	host, err := encode(b.dt, n, src, srcType)
	if err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	size := b.dt.Size()
	return be.th.do(func() error {
		if t.Contiguous() || t.Rows == 1 {
			return check("cuMemcpyHtoD_v2", be.drv.memcpyHtoD(b.ptr+uint64(t.Off*size), unsafe.Pointer(&host[0]), uint64(len(host))))
		}
		row := t.Cols * size
		for r := 0; r < t.Rows; r++ {
			dst := b.ptr + uint64((t.Off+r*t.RowStride())*size)
			if err := check("cuMemcpyHtoD_v2", be.drv.memcpyHtoD(dst, unsafe.Pointer(&host[r*row]), uint64(row))); err != nil {
				return err
			}
		}
		return nil
	})
}

// encode converts n source values to little-endian elements of dt.
func encode(dt device.DType, n int, src any, srcType device.DType) ([]byte, error) {
	out := make([]byte, n*dt.Size())
	putF := func(i int, v float32) {
		switch dt {
		case device.F32:
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
		case device.BF16:
			binary.LittleEndian.PutUint16(out[2*i:], cpu.F32ToBF16(v))
		case device.F16:
			binary.LittleEndian.PutUint16(out[2*i:], cpu.F32ToF16(v))
		}
	}
	switch s := src.(type) {
	case []int32:
		if dt != device.I32 {
			return nil, fmt.Errorf("cuda: write of []int32 into a %v tensor; write int32 only into I32 buffers", dt)
		}
		if len(s) != n {
			return nil, fmt.Errorf("cuda: write of %d int32 values into a tensor of %d elements", len(s), n)
		}
		for i, v := range s {
			binary.LittleEndian.PutUint32(out[4*i:], uint32(v))
		}
	case []float32:
		if dt == device.I32 {
			return nil, fmt.Errorf("cuda: write of []float32 into an I32 tensor; write []int32")
		}
		if len(s) != n {
			return nil, fmt.Errorf("cuda: write of %d float32 values into a tensor of %d elements", len(s), n)
		}
		for i, v := range s {
			putF(i, v)
		}
	case []byte:
		switch srcType {
		case device.F32, device.BF16, device.F16, device.I32:
		default:
			return nil, fmt.Errorf("cuda: write of raw bytes of unknown dtype %v", srcType)
		}
		if len(s) != n*srcType.Size() {
			return nil, fmt.Errorf("cuda: write of %d bytes of %v into a tensor of %d elements (want %d bytes)", len(s), srcType, n, n*srcType.Size())
		}
		if (srcType == device.I32) != (dt == device.I32) {
			return nil, fmt.Errorf("cuda: write of %v bytes into a %v tensor; integers and floats do not convert", srcType, dt)
		}
		if srcType == dt {
			copy(out, s)
			break
		}
		for i := 0; i < n; i++ {
			switch srcType {
			case device.F32:
				putF(i, math.Float32frombits(binary.LittleEndian.Uint32(s[4*i:])))
			case device.BF16:
				putF(i, cpu.BF16ToF32(binary.LittleEndian.Uint16(s[2*i:])))
			case device.F16:
				putF(i, cpu.F16ToF32(binary.LittleEndian.Uint16(s[2*i:])))
			}
		}
	default:
		return nil, fmt.Errorf("cuda: write of %T; pass []float32, []int32 or []byte", src)
	}
	return out, nil
}

// Read copies t to dst: []float32 for float tensors (BF16 and F16 widened exactly), []int32
// for I32 ones. It waits for the launches before it.
func (be *Backend) Read(t device.Tensor, dst any) error {
	b, err := be.view("read", t)
	if err != nil {
		return err
	}
	n := t.Rows * t.Cols
	size := b.dt.Size()
	switch d := dst.(type) {
	case []float32:
		if b.dt == device.I32 {
			return fmt.Errorf("cuda: read of an I32 tensor into []float32; read into []int32")
		}
		if len(d) != n {
			return fmt.Errorf("cuda: read of [%d,%d] into %d float32 values", t.Rows, t.Cols, len(d))
		}
	case []int32:
		if b.dt != device.I32 {
			return fmt.Errorf("cuda: read of a %v tensor into []int32; read into []float32", b.dt)
		}
		if len(d) != n {
			return fmt.Errorf("cuda: read of [%d,%d] into %d int32 values", t.Rows, t.Cols, len(d))
		}
	default:
		return fmt.Errorf("cuda: read into %T; pass []float32 or []int32", dst)
	}
	if n == 0 {
		return nil
	}
	host := make([]byte, n*size)
	err = be.th.do(func() error {
		if t.Contiguous() || t.Rows == 1 {
			return check("cuMemcpyDtoH_v2", be.drv.memcpyDtoH(unsafe.Pointer(&host[0]), b.ptr+uint64(t.Off*size), uint64(len(host))))
		}
		row := t.Cols * size
		for r := 0; r < t.Rows; r++ {
			src := b.ptr + uint64((t.Off+r*t.RowStride())*size)
			if err := check("cuMemcpyDtoH_v2", be.drv.memcpyDtoH(unsafe.Pointer(&host[r*row]), src, uint64(row))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	switch d := dst.(type) {
	case []int32:
		for i := range d {
			d[i] = int32(binary.LittleEndian.Uint32(host[4*i:]))
		}
	case []float32:
		for i := range d {
			switch b.dt {
			case device.F32:
				d[i] = math.Float32frombits(binary.LittleEndian.Uint32(host[4*i:]))
			case device.BF16:
				d[i] = cpu.BF16ToF32(binary.LittleEndian.Uint16(host[2*i:]))
			case device.F16:
				d[i] = cpu.F16ToF32(binary.LittleEndian.Uint16(host[2*i:]))
			}
		}
	}
	return nil
}

// Launch runs the ops of one generated kernel: its parameters marshalled by the rule of
// compiler/emit/hip, its grid by the same rule as the kernel's launches.
func (be *Backend) Launch(k *device.Kernel, ops ...device.Op) error {
	args, err := marshal(ops, func(buf device.Buffer) (uint64, error) {
		b, ok := buf.(*buffer)
		if !ok || b.owner != be {
			return 0, fmt.Errorf("buffer %T is not this backend's", buf)
		}
		if b.freed {
			return 0, fmt.Errorf("buffer was freed")
		}
		return b.ptr, nil
	})
	if err != nil {
		return fmt.Errorf("cuda: kernel %s: %w", k.Name, err)
	}
	ls, err := geometry(ops)
	if err != nil {
		return fmt.Errorf("cuda: kernel %s: %w", k.Name, err)
	}
	fns := make([]uintptr, len(ls))
	for i, l := range ls {
		if fns[i], err = be.function(k.Name+l.suffix, args); err != nil {
			return err
		}
	}
	vals := make([]uint64, len(args))
	ptrs := make([]uintptr, len(args))
	var pin runtime.Pinner
	defer pin.Unpin()
	for i, a := range args {
		vals[i] = a.value
		pin.Pin(&vals[i])
		ptrs[i] = uintptr(unsafe.Pointer(&vals[i]))
	}
	var params unsafe.Pointer
	if len(ptrs) > 0 {
		params = unsafe.Pointer(&ptrs[0])
	}
	return be.th.do(func() error {
		for i, l := range ls {
			if l.gridX <= 0 || l.gridY <= 0 {
				continue
			}
			code := be.drv.launchKernel(fns[i], uint32(l.gridX), uint32(l.gridY), 1, threads, 1, 1, 0, 0, params, 0)
			if err := check("cuLaunchKernel", code); err != nil {
				return fmt.Errorf("%w: kernel %s%s grid (%d,%d)", err, k.Name, l.suffix, l.gridX, l.gridY)
			}
		}
		return nil
	})
}

// function returns the loaded function of symbol, building and loading its family on first use,
// and checks once that args name the parameters the kernel declares.
func (be *Backend) function(symbol string, args []arg) (uintptr, error) {
	e, ok := be.symbols[symbol]
	if !ok {
		return 0, fmt.Errorf("cuda: no kernel %s in the kernel sources; regenerate kernels/ with tfc compile and rebuild", symbol)
	}
	be.mu.Lock()
	defer be.mu.Unlock()
	if !be.verified[symbol] {
		if err := sameParams(symbol, e.params, args); err != nil {
			return 0, err
		}
		be.verified[symbol] = true
	}
	if f, ok := be.funcs[symbol]; ok {
		return f, nil
	}
	mod, ok := be.modules[e.family]
	if !ok {
		if be.comp.nvcc == "" {
			p, err := findNVCC()
			if err != nil {
				return 0, err
			}
			be.comp.nvcc = p
		}
		image, err := be.comp.build(be.srcs, e.family)
		if err != nil {
			return 0, err
		}
		err = be.th.do(func() error {
			return check("cuModuleLoadData", be.drv.moduleLoadData(&mod, unsafe.Pointer(&image[0])))
		})
		if err != nil {
			return 0, fmt.Errorf("%w: loading the cubin of %s", err, e.family)
		}
		be.modules[e.family] = mod
	}
	var f uintptr
	err := be.th.do(func() error { return check("cuModuleGetFunction", be.drv.moduleGetFunction(&f, mod, symbol)) })
	if err != nil {
		return 0, fmt.Errorf("%w: kernel %s of %s", err, symbol, e.family)
	}
	be.funcs[symbol] = f
	return f, nil
}

// sameParams checks marshalled arguments against a kernel's declared parameter names.
func sameParams(symbol string, declared []string, args []arg) error {
	got := make([]string, len(args))
	for i, a := range args {
		got[i] = a.name
	}
	if strings.Join(got, ",") != strings.Join(declared, ",") {
		return fmt.Errorf("cuda: kernel %s declares parameters (%s) but the ops give (%s); the glue and kernels/ are out of step: regenerate both with tfc compile",
			symbol, strings.Join(declared, ", "), strings.Join(got, ", "))
	}
	return nil
}

// Sync waits for every launch and reports the first error the device raised.
func (be *Backend) Sync() error {
	return be.th.do(func() error { return check("cuCtxSynchronize", be.drv.ctxSynchronize()) })
}
