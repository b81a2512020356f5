package cpu_test

import (
	"fmt"
	"testing"

	"tfc/runtime/device"
	"tfc/runtime/device/cpu"
)

// TestMalformedOpsDoNotPanic launches ops over random, mostly invalid tensors (offsets, shapes
// and strides that run out of their buffers, wrong dtypes, ids out of range, absent operands):
// each launch must return an error or succeed, never panic.
func TestMalformedOpsDoNotPanic(t *testing.T) {
	r := rng(t)
	be := cpu.New(cpu.Workers(2))
	var bufs []device.Buffer
	for _, dt := range []device.DType{device.F32, device.BF16, device.F16, device.I32} {
		for _, n := range []int{1, 24, 64} {
			b := alloc(t, be, dt, n)
			if dt == device.I32 {
				v := make([]int32, n)
				for i := range v {
					v[i] = int32(r.Intn(12) - 2)
				}
				if err := be.Write(device.Tensor{Buf: b, Rows: 1, Cols: n}, v, device.I32); err != nil {
					t.Fatal(err)
				}
			}
			bufs = append(bufs, b)
		}
	}
	ten := func() device.Tensor {
		if r.Intn(8) == 0 {
			return device.Tensor{}
		}
		if r.Intn(3) == 0 {
			return device.Tensor{Buf: bufs[r.Intn(len(bufs))], Off: r.Intn(12) - 1, Rows: r.Intn(7) - 1, Cols: r.Intn(10), Stride: r.Intn(12)}
		}
		// mostly plausible shapes, so launches get past validation into the kernels
		return device.Tensor{Buf: bufs[3*r.Intn(4)+2], Off: r.Intn(3), Rows: 1 + r.Intn(2), Cols: []int{2, 4, 8}[r.Intn(3)]}
	}
	acts := func() device.Act { return device.Act(r.Intn(6)) }
	ops := []func() device.Op{
		func() device.Op {
			return device.Linear{X: ten(), W: ten(), B: ten(), Res: ten(), Y: ten(), Act: acts()}
		},
		func() device.Op {
			return device.RMSNorm{X: ten(), Res: ten(), Sum: ten(), W: ten(), Y: ten(), Eps: 1e-6}
		},
		func() device.Op { return device.LayerNorm{X: ten(), W: ten(), B: ten(), Y: ten()} },
		func() device.Op {
			return device.Rope{X: ten(), Pos: ten(), Heads: r.Intn(3), HeadDim: []int{2, 4, 3}[r.Intn(3)], Theta: 1e4,
				Sections: [][]int{nil, {1}, {2}, {1, 1}, {0, 2}, {-1, 3}}[r.Intn(6)], Mode: device.RopeMode(r.Intn(4))}
		},
		func() device.Op {
			a := device.Attention{Q: ten(), K: ten(), V: ten(), Y: ten(), Heads: r.Intn(4), KVHeads: r.Intn(3), HeadDim: []int{2, 4, 1}[r.Intn(3)], Scale: 1, Spans: ten()}
			if r.Intn(2) == 0 {
				a.Cache = &device.KVCache{K: ten(), V: ten()}
				a.Rows = &device.Rows{RowSeq: ten(), RowPos: ten(), PageTable: ten(), PageSize: r.Intn(4)}
				if r.Intn(4) == 0 {
					a.Rows = nil
				}
			}
			return a
		},
		func() device.Op { return device.Add{A: ten(), B: ten(), Y: ten()} },
		func() device.Op { return device.Mul{A: ten(), B: ten(), Y: ten()} },
		func() device.Op { return device.Activate{X: ten(), Y: ten(), Act: acts()} },
		func() device.Op { return device.GLU{Gate: ten(), Up: ten(), Y: ten(), Act: acts()} },
		func() device.Op { return device.Embed{Ids: ten(), Table: ten(), Y: ten()} },
		func() device.Op { return device.Scatter{Src: ten(), Index: ten(), Y: ten()} },
		func() device.Op { return device.Gather{X: ten(), Index: ten(), Y: ten()} },
		func() device.Op { return device.Copy{X: ten(), Y: ten()} },
	}
	ok := make([]int, len(ops))
	for i := 0; i < 40000; i++ {
		k := i % len(ops)
		op := ops[k]()
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("launch of %#v panicked: %v", op, p)
				}
			}()
			if be.Launch(nil, op) == nil {
				ok[k]++
			}
		}()
	}
	be.Sync()
	t.Logf("launches that were valid, per op: %v", fmt.Sprint(ok))
}
