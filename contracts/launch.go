package contracts

import (
	"fmt"
	"math"
	"slices"

	"tfc/runtime/device"
)

// CheckLaunch launches ops as kernel k on be and compares every tensor they write with the
// float64 references of the ops applied in order, each op's outputs rounded to their dtype before
// the next op reads them; the bound is four times the sum of the ops' contract bounds. The
// generated families' kernel tests run it on every kernel at its specialised shapes.
func CheckLaunch(be device.Backend, k *device.Kernel, ops []device.Op) error {
	for _, op := range ops {
		if err := Poison(be, op); err != nil {
			return err
		}
	}
	read := HostRead(be)
	mirror, err := mirrorOf(read, ops)
	if err != nil {
		return err
	}
	fromMirror := mirror.read
	var finals []Output
	tol := 0.0
	for _, op := range ops {
		want, err := Expect(op, fromMirror)
		if err != nil {
			return fmt.Errorf("reference of %s: %w", op.OpName(), err)
		}
		for _, w := range want {
			tol += w.Tolerance()
			mirror.store(w)
			// a later op's output over the same tensor (a rope over a linear's columns) replaces it
			finals = slices.DeleteFunc(finals, func(f Output) bool { return f.T == w.T })
			finals = append(finals, w)
		}
	}
	if err := be.Launch(k, ops...); err != nil {
		return err
	}
	if err := be.Sync(); err != nil {
		return err
	}
	bound := 4 * tol
	for _, o := range finals {
		got, err := read(o.T)
		if err != nil {
			return err
		}
		// later ops may have rewritten part of the tensor: the mirror holds its final state
		o.Want, _ = fromMirror(o.T)
		dt := o.T.Buf.DType()
		for r := 0; r < o.T.Rows; r++ {
			row := o.Want[r*o.T.Cols : (r+1)*o.T.Cols]
			scale := 0x1p-126
			for _, w := range row {
				scale = math.Max(scale, math.Abs(w))
			}
			for j, w := range row {
				g := got[r*o.T.Cols+j]
				w = Round(dt, w)
				if e := math.Abs(g-w) / scale; math.IsNaN(g) || e > bound {
					return fmt.Errorf("%s: %s[%d,%d] = %.9g, want %.9g: error %.3g of the row's scale exceeds %.3g", k.Name, o.Name, r, j, g, w, e, bound)
				}
			}
		}
	}
	return nil
}

// DropLast is a broken backend for planted controls: it skips the last op of every launch.
type DropLast struct{ device.Backend }

// Launch runs every op but the last.
func (d DropLast) Launch(k *device.Kernel, ops ...device.Op) error {
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
