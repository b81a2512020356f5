// Package gpu holds what the GPU backends share: the Backend itself, over a vendor Driver (one
// stream for every launch and copy; launch runs, writes and tape plays held until a Read or Sync
// hands them over; runs replayed as graphs when they repeat byte for byte; tapes of prepared
// launches; per-kernel profiles from events); launches made by each kernel's schedule
// (device.Schedule, written by the compiler beside the source: parameters and grids); the kernel
// sources with their schedules, specialisation, build cache and loaded modules (Library); device
// buffers and row copies; host-side element conversion; and the locked OS thread a driver
// context needs. Packages cuda and hip bind their runtime to Driver, build modules and find the
// device.
package gpu

import (
	"fmt"
	"strings"

	"tfc/runtime/device"
)

// Grid is one launch ready to go: its symbol, grid, block size and dynamic LDS in bytes.
type Grid struct {
	Symbol  string
	X, Y    int
	Threads int
	LDS     int
	// Flops and Bytes are the launch's work at its M, for profiles (Launch.Work).
	Flops, Bytes float64
}

// Marshal lays out a launch's parameter values as the kernel's schedule lists them, each passed
// in the low bytes of an 8-byte slot: an operand's first element's address (addr gives a buffer's
// device base) or its row stride, the launch's rows M, an attention's span count S. It returns
// the grid of each of the schedule's launches on a backend running layouts on
// (device.Launch.GridFor).
func Marshal(ops []device.Op, s *device.Schedule, addr func(device.Buffer) (uint64, error), on device.Layouts) ([]uint64, []Grid, error) {
	ns, err := operandLists(ops)
	if err != nil {
		return nil, nil, err
	}
	vals := make([]uint64, len(s.Params))
	m, spans := 0, 0
	for i, p := range s.Params {
		if p.Op >= len(ns) {
			return nil, nil, fmt.Errorf("parameter %s reads op %d of a launch of %d ops", p.Name, p.Op, len(ops))
		}
		t, ok := find(ns[p.Op], p.Field)
		if !ok {
			return nil, nil, fmt.Errorf("parameter %s reads %s.%s, which op %d lacks", p.Name, device.Deref(ops[p.Op]).OpName(), p.Field, p.Op)
		}
		switch p.Kind {
		case device.ParamPointer:
			base, err := addr(t.Buf)
			if err != nil {
				return nil, nil, fmt.Errorf("op %d (%s) %s: %w", p.Op, device.Deref(ops[p.Op]).OpName(), p.Field, err)
			}
			vals[i] = base + uint64(t.Off)*uint64(t.Buf.DType().Size())
		case device.ParamStride:
			vals[i] = uint64(uint32(int32(t.RowStride())))
		case device.ParamRows:
			m = t.Rows
			vals[i] = uint64(uint32(int32(m)))
		case device.ParamSpans:
			spans = t.Cols - 1
			vals[i] = uint64(uint32(int32(spans)))
		}
	}
	grids := make([]Grid, len(s.Launches))
	for i, l := range s.Launches {
		x, y := l.GridFor(m, spans, on)
		flops, bytes := l.Work(m)
		grids[i] = Grid{Symbol: l.FunctionFor(m, on), X: x, Y: y, Threads: l.Threads, LDS: l.LDSFor(m, on), Flops: flops, Bytes: bytes}
	}
	return vals, grids, nil
}

// SameOperands checks that the ops of a launch carry exactly the operands the kernel's schedule
// passes: a present operand the kernel does not read, or one it reads that is absent, means the
// glue and kernels/ are out of step.
func SameOperands(ops []device.Op, s *device.Schedule) error {
	ns, err := operandLists(ops)
	if err != nil {
		return err
	}
	var got, want []string
	for i := range ns {
		for _, n := range ns[i] {
			got = append(got, fmt.Sprintf("op%d.%s", i, n.Field))
		}
	}
	for _, p := range s.Params {
		if p.Kind == device.ParamPointer {
			want = append(want, fmt.Sprintf("op%d.%s", p.Op, p.Field))
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		return fmt.Errorf("kernel %s takes operands (%s) but the ops give (%s); the glue and kernels/ are out of step: regenerate both with tfc compile",
			s.Kernel, strings.Join(want, ", "), strings.Join(got, ", "))
	}
	return nil
}

// operandLists is each op's present operands.
func operandLists(ops []device.Op) ([][]device.Operand, error) {
	if len(ops) == 0 {
		return nil, fmt.Errorf("a launch needs at least one op")
	}
	ns := make([][]device.Operand, len(ops))
	for i, op := range ops {
		var err error
		if ns[i], err = device.Operands(op); err != nil {
			return nil, fmt.Errorf("op %d: %w", i, err)
		}
	}
	return ns, nil
}

// find is the tensor of the operand at field.
func find(ns []device.Operand, field string) (device.Tensor, bool) {
	for _, n := range ns {
		if n.Field == field {
			return n.T, true
		}
	}
	return device.Tensor{}, false
}
