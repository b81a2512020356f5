package gpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"tfc/runtime/device"
)

// littleEndian reports whether this host lays out values as the devices do (every host tfc runs
// on does), so that float32 and int32 slices move as their bytes instead of a value at a time.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// bytesOf is the memory of a []float32 or []int32 as bytes; nil for an empty or other slice.
func bytesOf(v any) []byte {
	switch s := v.(type) {
	case []float32:
		if len(s) > 0 {
			return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 4*len(s))
		}
	case []int32:
		if len(s) > 0 {
			return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 4*len(s))
		}
	}
	return nil
}

// sameLayout reports whether dst holds elements of dt as the device does (F32 in []float32, I32
// in []int32) on a host of the devices' byte order, so a copy of bytes moves them.
func sameLayout(dt device.DType, v any) bool {
	switch v.(type) {
	case []float32:
		return littleEndian && dt == device.F32
	case []int32:
		return littleEndian && dt == device.I32
	}
	return false
}

// Encode converts n source values to little-endian elements of dt.
func Encode(dt device.DType, n int, src any, srcType device.DType) ([]byte, error) {
	out := make([]byte, n*dt.Size())
	switch s := src.(type) {
	case []int32:
		if dt != device.I32 {
			return nil, fmt.Errorf("write of []int32 into a %v tensor; write int32 only into I32 buffers", dt)
		}
		if len(s) != n {
			return nil, fmt.Errorf("write of %d int32 values into a tensor of %d elements", len(s), n)
		}
		if sameLayout(dt, s) {
			copy(out, bytesOf(s))
			break
		}
		for i, v := range s {
			binary.LittleEndian.PutUint32(out[4*i:], uint32(v))
		}
	case []float32:
		if dt == device.I32 {
			return nil, fmt.Errorf("write of []float32 into an I32 tensor; write []int32")
		}
		if len(s) != n {
			return nil, fmt.Errorf("write of %d float32 values into a tensor of %d elements", len(s), n)
		}
		putFloats(dt, out, s)
	case []byte:
		switch srcType {
		case device.F32, device.BF16, device.F16, device.I32:
		default:
			return nil, fmt.Errorf("write of raw bytes of unknown dtype %v", srcType)
		}
		if len(s) != n*srcType.Size() {
			return nil, fmt.Errorf("write of %d bytes of %v into a tensor of %d elements (want %d bytes)", len(s), srcType, n, n*srcType.Size())
		}
		if (srcType == device.I32) != (dt == device.I32) {
			return nil, fmt.Errorf("write of %v bytes into a %v tensor; integers and floats do not convert", srcType, dt)
		}
		if srcType == dt {
			copy(out, s)
			break
		}
		v := make([]float32, n)
		decodeFloats(srcType, s, v)
		putFloats(dt, out, v)
	default:
		return nil, fmt.Errorf("write of %T; pass []float32, []int32 or []byte", src)
	}
	return out, nil
}

// CheckRead checks that dst can take n elements of dt: []float32 for float types, []int32 for I32.
func CheckRead(dt device.DType, rows, cols int, dst any) error {
	n := rows * cols
	switch d := dst.(type) {
	case []float32:
		if dt == device.I32 {
			return fmt.Errorf("read of an I32 tensor into []float32; read into []int32")
		}
		if len(d) != n {
			return fmt.Errorf("read of [%d,%d] into %d float32 values", rows, cols, len(d))
		}
	case []int32:
		if dt != device.I32 {
			return fmt.Errorf("read of a %v tensor into []int32; read into []float32", dt)
		}
		if len(d) != n {
			return fmt.Errorf("read of [%d,%d] into %d int32 values", rows, cols, len(d))
		}
	default:
		return fmt.Errorf("read into %T; pass []float32 or []int32", dst)
	}
	return nil
}

// Decode converts little-endian elements of dt into dst, which CheckRead accepted; BF16 and F16
// widen exactly.
func Decode(dt device.DType, host []byte, dst any) {
	switch d := dst.(type) {
	case []int32:
		if sameLayout(dt, d) {
			copy(bytesOf(d), host)
			return
		}
		for i := range d {
			d[i] = int32(binary.LittleEndian.Uint32(host[4*i:]))
		}
	case []float32:
		decodeFloats(dt, host, d)
	}
}

// decodeFloats widens little-endian elements of float type dt into d.
func decodeFloats(dt device.DType, host []byte, d []float32) {
	switch {
	case sameLayout(dt, d):
		copy(bytesOf(d), host)
	case dt == device.F32:
		for i := range d {
			d[i] = math.Float32frombits(binary.LittleEndian.Uint32(host[4*i:]))
		}
	case dt == device.BF16:
		for i := range d {
			d[i] = device.BF16ToF32(binary.LittleEndian.Uint16(host[2*i:]))
		}
	case dt == device.F16:
		for i := range d {
			d[i] = device.F16ToF32(binary.LittleEndian.Uint16(host[2*i:]))
		}
	}
}

// putFloats writes v into out as little-endian elements of float type dt (BF16 and F16 rounded
// to nearest even).
func putFloats(dt device.DType, out []byte, v []float32) {
	switch {
	case sameLayout(dt, v):
		copy(out, bytesOf(v))
	case dt == device.F32:
		for i, x := range v {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
		}
	case dt == device.BF16:
		for i, x := range v {
			binary.LittleEndian.PutUint16(out[2*i:], device.F32ToBF16(x))
		}
	case dt == device.F16:
		for i, x := range v {
			binary.LittleEndian.PutUint16(out[2*i:], device.F32ToF16(x))
		}
	}
}

// View checks that t lies inside a buffer of n elements.
func View(what string, t device.Tensor, n int) error {
	if t.Rows < 0 || t.Cols < 0 || t.Off < 0 || t.RowStride() < t.Cols {
		return fmt.Errorf("%s of a malformed tensor [%d,%d] at %d stride %d", what, t.Rows, t.Cols, t.Off, t.RowStride())
	}
	if t.Rows > 0 && t.Cols > 0 && t.Off+(t.Rows-1)*t.RowStride()+t.Cols > n {
		return fmt.Errorf("%s of [%d,%d] at %d stride %d runs past a %d-element buffer", what, t.Rows, t.Cols, t.Off, t.RowStride(), n)
	}
	return nil
}
