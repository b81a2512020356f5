// Package device is the interface between generated family glue and the backends that run it.
//
// A backend owns memory (Buffers) and runs kernels. A kernel is one launch: a short, ordered list
// of catalog ops (the compiler's fusion groups), named by the HIP symbol the compiler emitted for
// it. The CPU backend runs the ops of a launch one after another; a GPU backend launches the named
// kernel with the ops' operands. The float64 meaning of every op lives in package contracts.
package device

import (
	"fmt"
	"math"
	"time"
)

// DType is an element type of a buffer.
type DType uint8

const (
	F32 DType = iota + 1
	BF16
	F16
	I32
)

func (d DType) String() string {
	switch d {
	case F32:
		return "F32"
	case BF16:
		return "BF16"
	case F16:
		return "F16"
	case I32:
		return "I32"
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Size is the element size in bytes.
func (d DType) Size() int {
	switch d {
	case BF16, F16:
		return 2
	}
	return 4
}

// Precision is how a backend keeps activations: F32Precision (every activation F32, the
// exactness reference) or BF16Precision (activations BF16 exactly where the publisher's modeling
// code keeps them BF16 under torch, at the rounding points package catalog lists for each op,
// with F32 arithmetic between them). Memory layout is the same in both: F32 buffers, whose values
// are BF16-exact in BF16Precision.
type Precision uint8

const (
	F32Precision Precision = iota
	BF16Precision
)

func (p Precision) String() string {
	if p == BF16Precision {
		return "bf16"
	}
	return "f32"
}

// ParsePrecision reads a Precision by its String name.
func ParsePrecision(s string) (Precision, error) {
	switch s {
	case "f32":
		return F32Precision, nil
	case "bf16":
		return BF16Precision, nil
	}
	return 0, fmt.Errorf("unknown precision %q; use bf16 or f32", s)
}

// RoundBF16 rounds x to the nearest BF16 value (ties to even) and returns it as a float32; a NaN
// stays a quiet NaN of the same sign. It is a rounding point of BF16Precision.
func RoundBF16(x float32) float32 {
	u := math.Float32bits(x)
	if u&0x7fffffff > 0x7f800000 {
		return math.Float32frombits((u | 0x400000) & 0xffff0000)
	}
	u += 0x7fff + (u>>16)&1
	return math.Float32frombits(u & 0xffff0000)
}

// Precisioned is a backend that runs in a Precision other than F32Precision when asked.
type Precisioned interface {
	Precision() Precision
}

// PrecisionOf is b's precision: F32Precision unless b says otherwise.
func PrecisionOf(b Backend) Precision {
	if p, ok := b.(Precisioned); ok {
		return p.Precision()
	}
	return F32Precision
}

// Buffer is a backend allocation of Len elements of one DType.
type Buffer interface {
	Len() int
	DType() DType
}

// Tensor is a row-major 2-D view into a buffer: Rows rows of Cols elements, row r starting at
// element Off + r*RowStride(). The zero Tensor means "absent" for optional operands.
type Tensor struct {
	Buf    Buffer
	Off    int
	Rows   int
	Cols   int
	Stride int // elements between row starts; 0 means Cols
}

// RowStride is the distance in elements between the starts of consecutive rows.
func (t Tensor) RowStride() int {
	if t.Stride == 0 {
		return t.Cols
	}
	return t.Stride
}

// Present reports whether an optional operand was given.
func (t Tensor) Present() bool { return t.Buf != nil }

// Contiguous reports whether rows follow each other with no gap.
func (t Tensor) Contiguous() bool { return t.RowStride() == t.Cols }

// Slice returns rows [lo, hi).
func (t Tensor) Slice(lo, hi int) Tensor {
	s := t
	s.Off = t.Off + lo*t.RowStride()
	s.Rows = hi - lo
	return s
}

// ColSlice returns columns [lo, hi) of every row (a strided view).
func (t Tensor) ColSlice(lo, hi int) Tensor {
	s := t
	s.Off = t.Off + lo
	s.Cols = hi - lo
	s.Stride = t.RowStride()
	return s
}

// Reshape views a contiguous tensor as rows×cols of the same element count.
func (t Tensor) Reshape(rows, cols int) Tensor {
	if !t.Contiguous() || rows*cols != t.Rows*t.Cols {
		panic(fmt.Sprintf("device: reshape [%d,%d] as [%d,%d]", t.Rows, t.Cols, rows, cols))
	}
	return Tensor{Buf: t.Buf, Off: t.Off, Rows: rows, Cols: cols}
}

// KernelRef names a kernel of generated code at a launch: its symbol and graph lines (the kernel
// itself is lower.Kernel in the compiler, hip.Kernel as the emitter and specialiser take it).
type KernelRef struct {
	Name   string // symbol in kernels/gen/<family>.hip
	Source string // graph file:line the fused ops came from
}

// Backend runs kernels and owns their memory.
type Backend interface {
	Name() string
	// Alloc returns a buffer of n elements of dt; its contents are unspecified.
	Alloc(dt DType, n int) (Buffer, error)
	Free(b Buffer)
	// Write copies host data into t. src is []float32, []int32, or raw little-endian bytes whose
	// element type is srcType ([]byte with srcType BF16, F16 or F32); values convert to t's dtype.
	Write(t Tensor, src any, srcType DType) error
	// Read copies t into dst ([]float32 or []int32, len Rows*Cols).
	Read(t Tensor, dst any) error
	// Launch runs the ops of one kernel in order.
	Launch(k *KernelRef, ops ...Op) error
	// Sync waits for launched work to finish and reports its first error.
	Sync() error
}

// Specializer is a backend that builds its kernels at run time, so it can run a family's kernels
// specialised for the checkpoint being loaded instead of the committed kernels/gen/<family>.hip.
type Specializer interface {
	// SpecializeFamily makes src the source of family (kernels/gen/<family>.hip and its schedule, e.g.
	// "qwen2vl") for every later launch of its kernels. Giving the source it has again is a no-op.
	SpecializeFamily(family string, src Source) error
}

// Taper is a backend that can keep a call's launches as a tape and play it again: each kernel
// found and its parameters marshalled once, the launches cut into runs and keyed once, so a
// call repeated with the same launches costs the host one hand-over.
type Taper interface {
	// Taping reports whether tapes are on (TFC_GPU_TAPES=0 turns them off).
	Taping() bool
	// Prepare is Launch without the launching: ops as kernel k, made ready for a tape.
	Prepare(k *KernelRef, ops ...Op) (Prepared, error)
	// Tape is prepared launches, in order, ready to play.
	Tape(ps []Prepared) Tape
	// Play queues a tape's launches after the work queued before it, as the Launch calls that
	// made them would have. An error is returned here or by the next call.
	Play(t Tape) error
}

// Prepared is one launch a Taper prepared, and Tape launches it plays; both are the Taper's own.
type (
	Prepared any
	Tape     any
)

// Profiler is a backend that can time every kernel launch on the device.
type Profiler interface {
	// Profile turns per-launch timing on, starting a fresh profile, or off, keeping it.
	Profile(on bool)
	// Profiled waits for the launches before it and returns the profile, by kernel in the
	// order of their first launch.
	Profiled() []KernelTime
}

// KernelTime is the device time of one kernel's launches.
type KernelTime struct {
	Name     string // kernel symbol with the launch's suffix, e.g. k_attention_kvstore
	Launches int
	Total    time.Duration
	Flops    float64 // the launches' floating-point operations, where their schedule says
	Bytes    float64 // the bytes they read and wrote, where their schedule says
}
