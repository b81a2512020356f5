package contracts

import (
	"fmt"

	"tfc/runtime/device"
)

// CheckLaunch launches ops as kernel k on be and verifies every tensor they write against the
// float64 references of the ops applied in order (expectOps, every output stored): the generated
// families' kernel tests run it on every kernel at its specialised shapes.
func CheckLaunch(be device.Backend, k *device.KernelRef, ops []device.Op) error {
	stored, err := expectOps(be, k.Name, ops, func(int) bool { return false })
	if err != nil {
		return err
	}
	if err := be.Launch(k, ops...); err != nil {
		return err
	}
	if err := be.Sync(); err != nil {
		return err
	}
	read := HostRead(be)
	for _, s := range stored {
		got, err := read(s.T)
		if err != nil {
			return err
		}
		if _, _, err := s.Verify(got); err != nil {
			return fmt.Errorf("%s: %w", k.Name, err)
		}
	}
	return nil
}

// DropLast is a broken backend for planted controls: it skips the last op of every launch.
type DropLast struct{ device.Backend }

// Launch runs every op but the last.
func (d DropLast) Launch(k *device.KernelRef, ops ...device.Op) error {
	return d.Backend.Launch(k, ops[:len(ops)-1]...)
}

// RandomInts returns n values in [0, limit).
func (b *Builder) RandomInts(n, limit int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(b.Rng.Intn(limit))
	}
	return out
}

// DistinctInts returns n distinct values in [0, limit).
func (b *Builder) DistinctInts(n, limit int) []int32 {
	perm := b.Rng.Perm(limit)
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(perm[i])
	}
	return out
}

// RoundRows describes r rows of two sequences (slots 0 and 1) over two pages each, at positions
// after a cached prefix: slot 0 holds the first half of the rows, slot 1 the rest.
func (b *Builder) RoundRows(r, pageSize int) *device.Rows {
	seq, pos := make([]int32, r), make([]int32, r)
	for i := range seq {
		if i >= r/2 {
			seq[i] = 1
		}
		pos[i] = int32(pageSize - 1 + i)
	}
	return &device.Rows{PageSize: pageSize, PageTable: b.Ints(2, 2, []int32{2, 0, 3, 1}), RowPos: b.Ints(1, r, pos), RowSeq: b.Ints(1, r, seq)}
}
