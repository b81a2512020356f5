package contracts

import (
	"fmt"
	"slices"

	"tfc/runtime/device"
)

// CheckWriteRead round-trips every dtype through a strided view of a backend's buffer: values
// exact in every format come back unchanged, and the columns outside the view keep their zeros.
func CheckWriteRead(be device.Backend) error {
	quarter := func(i int) float32 { return float32(i) * 0.25 } // exact in every float format
	for _, dt := range []device.DType{device.F32, device.BF16, device.F16} {
		if err := roundTrip(be, dt, device.F32, quarter); err != nil {
			return err
		}
	}
	return roundTrip(be, device.I32, device.I32, func(i int) int32 { return int32(i*7919 - 1000) })
}

// roundTrip writes value(i) into columns 2..6 of a zeroed 7×9 buffer of dt and reads it back.
func roundTrip[T int32 | float32](be device.Backend, dt, src device.DType, value func(i int) T) error {
	buf, err := be.Alloc(dt, 7*9)
	if err != nil {
		return fmt.Errorf("%v: %w", dt, err)
	}
	defer be.Free(buf)
	whole := device.Tensor{Buf: buf, Rows: 7, Cols: 9}
	view := whole.ColSlice(2, 7)
	if err := be.Write(whole, make([]T, 7*9), src); err != nil {
		return err
	}
	want := make([]T, view.Rows*view.Cols)
	for i := range want {
		want[i] = value(i)
	}
	if err := be.Write(view, want, src); err != nil {
		return err
	}
	got := make([]T, len(want))
	if err := be.Read(view, got); err != nil {
		return err
	}
	if !slices.Equal(want, got) {
		return fmt.Errorf("%v round trip gave %v, want %v", dt, got, want)
	}
	all := make([]T, 7*9)
	if err := be.Read(whole, all); err != nil {
		return err
	}
	if all[0] != 0 || all[8] != 0 || all[9+1] != 0 {
		return fmt.Errorf("%v: a strided write touched the gap: %v", dt, all)
	}
	return nil
}
