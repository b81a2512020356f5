// Package cpu is the host backend: every op of the device catalog in float32 arithmetic,
// parallel over rows and columns (never over a reduction), so a row's result does not depend on
// how many rows share the launch or how they are split across cores.
//
// Linear runs a blocked GEMM. On amd64 with FMA it uses assembly micro-kernels (AVX-512 or AVX2,
// which give identical bits: one fused multiply-add chain per output element in k order); the
// Go kernels elsewhere multiply and add separately. Weights are packed into column panels on
// first use and the packing is kept until the buffer is written or freed, so a BF16 weight
// costs its size once more (F32 and F16 weights are kept as F32 panels).
//
// A Backend is driven by one goroutine at a time; launches run to completion before Launch
// returns.
package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"

	"tfc/runtime/device"
)

// Backend runs kernels on the host.
type Backend struct {
	workers  int
	firstErr error
	kern     *microKernel // nil: the Go kernels
	packs    packCache
	prec     device.Precision
	skip     string // a rounding point ("op.point") left out, for the tests' controls
}

// Option configures a Backend.
type Option func(*Backend)

// Workers sets how many goroutines an op may use (default GOMAXPROCS).
func Workers(n int) Option { return func(b *Backend) { b.workers = max(n, 1) } }

// Precision sets how activations are kept (default F32Precision). In BF16Precision every F32
// value written is rounded to BF16 and every op rounds at its catalog rounding points.
func Precision(p device.Precision) Option { return func(b *Backend) { b.prec = p } }

// Precision is the backend's precision.
func (be *Backend) Precision() device.Precision { return be.prec }

// PureGo makes Linear use the Go kernels even where an assembly FMA kernel exists.
func PureGo() Option { return func(b *Backend) { b.kern = nil } }

// Kernel picks Linear's kernel by name, one of Kernels(); an unknown name keeps the default.
func Kernel(name string) Option {
	return func(b *Backend) {
		if name == "go" {
			b.kern = nil
		}
		for _, k := range hostKernels() {
			if k.name == name {
				b.kern = k
			}
		}
	}
}

// Kernels names the Linear kernels this CPU can run, the default first: "avx512" and "avx2"
// (FMA assembly; the two give identical bits) where the CPU has them, and "go".
func Kernels() []string {
	var names []string
	for _, k := range hostKernels() {
		names = append(names, k.name)
	}
	return append(names, "go")
}

// New returns a CPU backend.
func New(opts ...Option) *Backend {
	b := &Backend{workers: runtime.GOMAXPROCS(0)}
	if ks := hostKernels(); len(ks) > 0 {
		b.kern = ks[0]
	}
	for _, o := range opts {
		o(b)
	}
	return b
}

var (
	_ device.Backend     = (*Backend)(nil)
	_ device.Precisioned = (*Backend)(nil)
)

// buffer holds its elements in the slice of its dtype: f32, u16 (BF16/F16 bits) or i32.
type buffer struct {
	dt      device.DType
	n       int
	version uint64 // bumped by every write, so cached packings of it go stale
	f32     []float32
	u16     []uint16
	i32     []int32
	owner   *Backend
	freed   bool
	temp    bool // a copy made inside one op; never cached
}

func (b *buffer) Len() int            { return b.n }
func (b *buffer) DType() device.DType { return b.dt }

func (be *Backend) Name() string { return "cpu" }

// Describe names the backend's GEMM kernel and worker count, e.g. "cpu/avx512/2".
func (be *Backend) Describe() string {
	k := "go"
	if be.kern != nil {
		k = be.kern.name
	}
	if be.prec != device.F32Precision {
		return fmt.Sprintf("cpu/%s/%d/%s", k, be.workers, be.prec)
	}
	return fmt.Sprintf("cpu/%s/%d", k, be.workers)
}

// Alloc returns a zeroed buffer.
func (be *Backend) Alloc(dt device.DType, n int) (device.Buffer, error) {
	if n < 0 {
		return nil, fmt.Errorf("cpu: alloc of %d elements", n)
	}
	b := &buffer{dt: dt, n: n, owner: be}
	switch dt {
	case device.F32:
		b.f32 = make([]float32, n)
	case device.BF16, device.F16:
		b.u16 = make([]uint16, n)
	case device.I32:
		b.i32 = make([]int32, n)
	default:
		return nil, fmt.Errorf("cpu: alloc of unknown dtype %v", dt)
	}
	return b, nil
}

// Free releases b; later use of it is an error.
func (be *Backend) Free(buf device.Buffer) {
	if b, ok := buf.(*buffer); ok && b.owner == be {
		b.freed = true
		be.forget(b)
		b.f32, b.u16, b.i32 = nil, nil, nil
	}
}

// Write copies host values into t, converting them to t's dtype (rounding to nearest even).
func (be *Backend) Write(t device.Tensor, src any, srcType device.DType) error {
	v, err := be.view("write", "destination", t)
	if err != nil {
		return err
	}
	v.b.version++
	n := t.Rows * t.Cols
	at := func(i int) int { return v.off + (i/t.Cols)*v.stride + i%t.Cols }
	switch s := src.(type) {
	case []int32:
		if v.dt != device.I32 {
			return fmt.Errorf("write: []int32 into a %v tensor; write int32 only into I32 buffers", v.dt)
		}
		if len(s) != n {
			return fmt.Errorf("write: %d int32 values into a [%d,%d] tensor", len(s), t.Rows, t.Cols)
		}
		for i := range s {
			v.b.i32[at(i)] = s[i]
		}
		return nil
	case []float32:
		if len(s) != n {
			return fmt.Errorf("write: %d float32 values into a [%d,%d] tensor", len(s), t.Rows, t.Cols)
		}
		if v.dt == device.I32 {
			return fmt.Errorf("write: []float32 into an I32 tensor; write []int32")
		}
		for i := range s {
			v.set(at(i), be.input(v.dt, s[i]))
		}
		return nil
	case []byte:
		size := srcType.Size()
		if srcType != device.F32 && srcType != device.BF16 && srcType != device.F16 && srcType != device.I32 {
			return fmt.Errorf("write: raw bytes of unknown dtype %v", srcType)
		}
		if len(s) != n*size {
			return fmt.Errorf("write: %d bytes of %v into a [%d,%d] tensor (want %d bytes)", len(s), srcType, t.Rows, t.Cols, n*size)
		}
		if (srcType == device.I32) != (v.dt == device.I32) {
			return fmt.Errorf("write: %v bytes into a %v tensor; integers and floats do not convert", srcType, v.dt)
		}
		for i := 0; i < n; i++ {
			switch srcType {
			case device.I32:
				v.b.i32[at(i)] = int32(binary.LittleEndian.Uint32(s[4*i:]))
			case device.F32:
				v.set(at(i), be.input(v.dt, math.Float32frombits(binary.LittleEndian.Uint32(s[4*i:]))))
			case device.BF16, device.F16:
				h := binary.LittleEndian.Uint16(s[2*i:])
				if v.dt == srcType {
					v.b.u16[at(i)] = h // same format: bits copied as they are
				} else if srcType == device.BF16 {
					v.set(at(i), device.BF16ToF32(h))
				} else {
					v.set(at(i), device.F16ToF32(h))
				}
			}
		}
		return nil
	}
	return fmt.Errorf("write: source %T; pass []float32, []int32 or []byte", src)
}

// input is x as written into a buffer of dt: rounded to BF16 in BF16 precision (a NaN is kept
// as written, so that a poisoned output stays recognisable).
func (be *Backend) input(dt device.DType, x float32) float32 {
	return rnd(be.prec == device.BF16Precision && dt == device.F32 && x == x, x)
}

// Read copies t into dst: []float32 for float tensors, []int32 for I32 ones.
func (be *Backend) Read(t device.Tensor, dst any) error {
	v, err := be.view("read", "source", t)
	if err != nil {
		return err
	}
	n := t.Rows * t.Cols
	switch d := dst.(type) {
	case []float32:
		if v.dt == device.I32 {
			return fmt.Errorf("read: an I32 tensor into []float32; read it into []int32")
		}
		if len(d) != n {
			return fmt.Errorf("read: [%d,%d] tensor into %d float32 values", t.Rows, t.Cols, len(d))
		}
		for r := 0; r < t.Rows; r++ {
			v.loadRow(r, d[r*t.Cols:(r+1)*t.Cols])
		}
		return nil
	case []int32:
		if v.dt != device.I32 {
			return fmt.Errorf("read: a %v tensor into []int32; read it into []float32", v.dt)
		}
		if len(d) != n {
			return fmt.Errorf("read: [%d,%d] tensor into %d int32 values", t.Rows, t.Cols, len(d))
		}
		for r := 0; r < t.Rows; r++ {
			copy(d[r*t.Cols:(r+1)*t.Cols], v.ints(r))
		}
		return nil
	}
	return fmt.Errorf("read: destination %T; pass []float32 or []int32", dst)
}

// Launch runs the ops of k in order and stops at the first error.
func (be *Backend) Launch(k *device.KernelRef, ops ...device.Op) error {
	for i, op := range ops {
		if err := be.run(op); err != nil {
			name := "kernel"
			if k != nil {
				name = fmt.Sprintf("kernel %s (%s)", k.Name, k.Source)
			}
			err = fmt.Errorf("%s: op %d: %w", name, i, err)
			if be.firstErr == nil {
				be.firstErr = err
			}
			return err
		}
	}
	return nil
}

// Sync reports the first launch error since the last Sync; CPU launches finish before returning.
func (be *Backend) Sync() error {
	err := be.firstErr
	be.firstErr = nil
	return err
}
