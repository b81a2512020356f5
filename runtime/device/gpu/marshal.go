// Package gpu holds what the GPU backends share: the Backend itself, over a vendor Driver (one
// stream for every launch and copy, launch runs held until a Write, Read or Sync and replayed as
// graphs when they repeat byte for byte, per-kernel profiles from events); the launch rule of the
// generated kernels (parameters and grids, as compiler/emit/hip documents them); the kernel
// sources with their symbol table, specialisation, build cache and loaded modules (Library);
// device buffers and row copies; host-side element conversion; and the locked OS thread a driver
// context needs. Packages cuda and hip bind their runtime to Driver, build modules and find the
// device.
package gpu

import (
	"fmt"

	"tfc/runtime/device"
)

// Threads is the block size of every generated kernel.
const Threads = 256

// Arg is one kernel parameter: its C name and its value. Pointers and ints are passed in the
// low bytes of an 8-byte slot; the driver reads the parameter's own size from the slot.
type Arg struct {
	Name  string
	Value uint64
}

// Rows is M of a launch: the rows of the first op's X (linear, norms, rope), Q (attention),
// Src (scatter), Y otherwise.
func Rows(first device.Op) int {
	switch o := device.Deref(first).(type) {
	case device.Linear:
		return o.X.Rows
	case device.RMSNorm:
		return o.X.Rows
	case device.LayerNorm:
		return o.X.Rows
	case device.Rope:
		return o.X.Rows
	case device.Attention:
		return o.Q.Rows
	case device.Scatter:
		return o.Src.Rows
	case device.Add:
		return o.Y.Rows
	case device.Mul:
		return o.Y.Rows
	case device.Activate:
		return o.Y.Rows
	case device.GLU:
		return o.Y.Rows
	case device.Embed:
		return o.Y.Rows
	case device.Gather:
		return o.Y.Rows
	case device.Copy:
		return o.Y.Rows
	}
	return 0
}

// Spans is S, the span count of an uncached attention, and whether the kernel takes it.
func Spans(first device.Op) (int, bool) {
	if a, ok := device.Deref(first).(device.Attention); ok && a.Cache == nil {
		return a.Spans.Cols - 1, true
	}
	return 0, false
}

// Marshal lays out a launch's parameters by the rule of the generated kernels: for each op, for
// each present operand in struct order, its first element's address and its row stride; then M,
// and S for an uncached attention. addr returns a buffer's device base address.
func Marshal(ops []device.Op, addr func(device.Buffer) (uint64, error)) ([]Arg, error) {
	if len(ops) == 0 {
		return nil, fmt.Errorf("a launch needs at least one op")
	}
	var args []Arg
	for i, op := range ops {
		ns, err := device.Operands(op)
		if err != nil {
			return nil, fmt.Errorf("op %d: %w", i, err)
		}
		for _, n := range ns {
			base, err := addr(n.T.Buf)
			if err != nil {
				return nil, fmt.Errorf("op %d (%s) %s: %w", i, device.Deref(op).OpName(), n.Field, err)
			}
			name := paramName(i, n.Field)
			ptr := base + uint64(n.T.Off)*uint64(n.T.Buf.DType().Size())
			args = append(args, Arg{name, ptr}, Arg{name + "_ld", uint64(uint32(int32(n.T.RowStride())))})
		}
	}
	args = append(args, Arg{"M", uint64(uint32(int32(Rows(ops[0]))))})
	if s, ok := Spans(ops[0]); ok {
		args = append(args, Arg{"S", uint64(uint32(int32(s)))})
	}
	return args, nil
}

// paramName is the C name of op i's operand: op<i>_<field with dots as underscores>.
func paramName(i int, field string) string {
	b := []byte(fmt.Sprintf("op%d_%s", i, field))
	for j, c := range b {
		if c == '.' {
			b[j] = '_'
		}
	}
	return string(b)
}

// Launch is one kernel launch: its symbol suffix ("" or "_kvstore") and grid.
type Launch struct {
	Suffix string
	GridX  int
	GridY  int
}

// Geometry gives the launches of a kernel by the rule of the generated kernels: a kernel with a
// norm runs a block a row; a linear runs 64×64 tiles (64×head_dim with a fused rope, 32 rows
// when head_dim > 80), or 16 columns wide on at most 8 rows (a rope's then hold 8 rotary pairs,
// where head_dim is a multiple of 16); a pointwise chain a row by 256-column blocks; rope, embed, gather,
// scatter a block a row; an uncached attention groups of 128 query rows of a span (plus one
// group per span) by heads; a cached attention stores K and V a block a row, then a row by query
// heads. The rule
// does not depend on how a tile is computed: under CUDA a vision kernel's linear computes these
// same tiles on tensor cores (tfc_gemm_mma) at every M, the 16-column tiles of at most 8 rows too.
func Geometry(ops []device.Op) ([]Launch, error) {
	if len(ops) == 0 {
		return nil, fmt.Errorf("a launch needs at least one op")
	}
	m := Rows(ops[0])
	for _, op := range ops {
		switch device.Deref(op).(type) {
		case device.RMSNorm, device.LayerNorm:
			return []Launch{{GridX: m, GridY: 1}}, nil
		}
	}
	switch o := device.Deref(ops[0]).(type) {
	case device.Linear:
		bm, bn, hd := 64, 64, 0
		for _, op := range ops[1:] {
			if r, ok := device.Deref(op).(device.Rope); ok {
				if r.HeadDim <= 0 {
					return nil, fmt.Errorf("linear with a rope of head_dim %d", r.HeadDim)
				}
				// a tile holds whole heads: one, or as many as make its width a multiple of 16
				bn, hd = r.HeadDim, r.HeadDim
				for bn%16 != 0 {
					bn += r.HeadDim
				}
				if r.HeadDim > 80 {
					bm = 32
				}
			}
		}
		if m <= smallRows {
			switch {
			case hd == 0:
				bn = smallBN
			case hd%smallBN == 0: // each head's columns in tiles of smallBN/2 rotary pairs
				return []Launch{{GridX: ceilDiv(m, bm), GridY: ceilDiv(o.Y.Cols, hd) * (hd / smallBN)}}, nil
			}
		}
		return []Launch{{GridX: ceilDiv(m, bm), GridY: ceilDiv(o.Y.Cols, bn)}}, nil
	case device.Attention:
		if o.Cache == nil {
			s, _ := Spans(o)
			return []Launch{{GridX: ceilDiv(m, spanRows) + s, GridY: o.Heads}}, nil
		}
		return []Launch{{Suffix: "_kvstore", GridX: m, GridY: 1}, {GridX: m, GridY: o.Heads}}, nil
	case device.Rope, device.Embed, device.Gather, device.Scatter:
		return []Launch{{GridX: m, GridY: 1}}, nil
	case device.Add:
		return []Launch{{GridX: m, GridY: ceilDiv(o.Y.Cols, Threads)}}, nil
	case device.Mul:
		return []Launch{{GridX: m, GridY: ceilDiv(o.Y.Cols, Threads)}}, nil
	case device.Activate:
		return []Launch{{GridX: m, GridY: ceilDiv(o.Y.Cols, Threads)}}, nil
	case device.GLU:
		return []Launch{{GridX: m, GridY: ceilDiv(o.Y.Cols, Threads)}}, nil
	case device.Copy:
		return []Launch{{GridX: m, GridY: ceilDiv(o.Y.Cols, Threads)}}, nil
	}
	return nil, fmt.Errorf("op %T is not in the device catalog", ops[0])
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// spanRows is the query rows a block of an uncached attention takes: under CUDA 8 warps of 16
// rows on tensor cores (tfc_attention_mma), elsewhere 16 sub-groups of 8 through tfc_attend.
const spanRows = 128

// smallRows and smallBN: a linear launched on at most smallRows rows takes column tiles smallBN
// wide, a rope linear's of smallBN/2 rotary pairs where a half head holds them whole
// (TFC_SMALL_ROWS and TFC_SMALL_BN in kernels/tfc_kernels.h).
const smallRows, smallBN = 8, 16
