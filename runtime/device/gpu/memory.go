package gpu

import (
	"fmt"

	"tfc/runtime/device"
)

// Buffer is a device allocation of a GPU backend: N elements of DT at device address Ptr (0 when
// N is 0), made by Owner.
type Buffer struct {
	DT    device.DType
	N     int
	Ptr   uint64
	Owner any
	Freed bool
}

func (b *Buffer) Len() int            { return b.N }
func (b *Buffer) DType() device.DType { return b.DT }

// Owned returns buf as a live allocation of owner.
func Owned(buf device.Buffer, owner any) (*Buffer, error) {
	b, ok := buf.(*Buffer)
	if !ok || b.Owner != owner {
		return nil, fmt.Errorf("buffer %T is not this backend's", buf)
	}
	if b.Freed {
		return nil, fmt.Errorf("buffer was freed")
	}
	return b, nil
}

// ViewOf checks that t lies inside a live allocation of owner and returns the allocation.
func ViewOf(what string, t device.Tensor, owner any) (*Buffer, error) {
	b, ok := t.Buf.(*Buffer)
	if !ok || b.Owner != owner {
		return nil, fmt.Errorf("%s of a tensor whose buffer %T is not this backend's", what, t.Buf)
	}
	if b.Freed {
		return nil, fmt.Errorf("%s of a freed buffer", what)
	}
	if err := View(what, t, b.N); err != nil {
		return nil, err
	}
	return b, nil
}

// CopyRows calls copyRange with the device address and the host bytes of t's rows in b: once when
// the rows are contiguous (or there is one), else once a row. host holds the rows back to back.
func CopyRows(t device.Tensor, b *Buffer, host []byte, copyRange func(dev uint64, host []byte) error) error {
	size := b.DT.Size()
	if t.Contiguous() || t.Rows == 1 {
		return copyRange(b.Ptr+uint64(t.Off*size), host)
	}
	row := t.Cols * size
	for r := 0; r < t.Rows; r++ {
		if err := copyRange(b.Ptr+uint64((t.Off+r*t.RowStride())*size), host[r*row:(r+1)*row]); err != nil {
			return err
		}
	}
	return nil
}
