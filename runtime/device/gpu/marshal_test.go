package gpu

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"tfc/compiler/emit/hip"
	"tfc/contracts"
	"tfc/gen/registry"
	"tfc/runtime/device"
	"tfc/runtime/device/cpu"
)

// allKernels is every generated family's kernels with their op chains, as the contract loads
// them (dots.ocr's head_dim 8: a rope tile holds two heads).
func allKernels(t *testing.T) []hip.Kernel {
	t.Helper()
	var ks []hip.Kernel
	for _, name := range registry.Families {
		f, err := contracts.LoadFamily(name.Name, root)
		if err != nil {
			t.Fatal(err)
		}
		ks = append(ks, f.Kernels...)
	}
	if len(ks) == 0 {
		t.Fatal("no kernels")
	}
	return ks
}

// TestMarshalFollowsSchedule checks, for every kernel of every family, at a contract's rows and a
// decode round's, that the values marshalled from device ops are the schedule's parameters
// (addresses, strides, M and S, in its order), that the ops carry exactly its operands, and that
// each grid is its launch's rule at M.
func TestMarshalFollowsSchedule(t *testing.T) {
	bands := 0 // launches taking a band function
	for i, k := range allKernels(t) {
		s, err := hip.ScheduleOf(k)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []int{rowsFor(k), 5, 20} {
			t.Run(fmt.Sprintf("%s/M=%d", k.Name, m), func(t *testing.T) {
				b := &contracts.Builder{Backend: cpu.New(), Rng: rand.New(rand.NewSource(int64(i + 1))), Strided: i%2 == 1}
				defer b.Free()
				ops, err := chain(b, k, m)
				if err != nil {
					t.Fatal(err)
				}
				if err := SameOperands(ops, &s); err != nil {
					t.Fatal(err)
				}
				// each buffer gets a distinct fake device address
				bases := map[device.Buffer]uint64{}
				addr := func(buf device.Buffer) (uint64, error) {
					if a, ok := bases[buf]; ok {
						return a, nil
					}
					a := uint64(1+len(bases)) << 32
					bases[buf] = a
					return a, nil
				}
				vals, grids, err := Marshal(ops, &s, addr, device.Layouts{})
				if err != nil {
					t.Fatal(err)
				}
				spans := 0
				for j, p := range s.Params {
					tt := operand(t, ops[p.Op], p.Field)
					var want uint64
					switch p.Kind {
					case device.ParamPointer:
						base, _ := addr(tt.Buf)
						want = base + uint64(tt.Off*tt.Buf.DType().Size())
					case device.ParamStride:
						want = uint64(tt.RowStride())
					case device.ParamRows:
						want = uint64(m)
						if tt.Rows != m {
							t.Errorf("M is read from %s.%s with %d rows, want %d", k.Ops[p.Op].Kind, p.Field, tt.Rows, m)
						}
					case device.ParamSpans:
						spans = tt.Cols - 1
						want = uint64(spans)
					}
					if vals[j] != want {
						t.Errorf("%s = %#x, want %#x", p.Name, vals[j], want)
					}
				}
				if len(grids) != len(s.Launches) {
					t.Fatalf("%d grids for %d launches", len(grids), len(s.Launches))
				}
				for j, l := range s.Launches {
					x, y := l.Grid(m, spans)
					sym := l.Symbol
					if l.SmallSymbol != "" && m <= l.SmallRows {
						sym = l.SmallSymbol
					} else if l.MidSymbol != "" && m <= l.MidRows {
						sym = l.MidSymbol
					}
					flops, bytes := l.Work(m)
					if g := grids[j]; g != (Grid{Symbol: sym, X: x, Y: y, Threads: l.Threads, Flops: flops, Bytes: bytes}) {
						t.Errorf("launch %d: %+v, want %s (%d,%d)×%d", j, g, sym, x, y, l.Threads)
					}
				}
				// the fill layout: above FillRows its function, tiles of FillRowsPerBlock rows by FillGridY
				// column blocks, its dynamic LDS; at or below, the same launches as without it
				_, fg, err := Marshal(ops, &s, addr, device.Layouts{Fill: true})
				if err != nil {
					t.Fatal(err)
				}
				for j, l := range s.Launches {
					want := grids[j]
					if l.FillSymbol != "" && m > l.FillRows {
						want = Grid{Symbol: l.FillSymbol, X: (m + l.FillRowsPerBlock - 1) / l.FillRowsPerBlock, Y: l.FillGridY, Threads: l.Threads, LDS: l.FillLDS, Flops: want.Flops, Bytes: want.Bytes}
					}
					if fg[j] != want {
						t.Errorf("launch %d in the fill layout: %+v, want %+v", j, fg[j], want)
					}
				}
				// the band layout: above SmallRows and at most BandRows its function on bands of
				// BandRowsPerBlock rows by the small layout's column blocks; elsewhere the same launches
				_, bg, err := Marshal(ops, &s, addr, device.Layouts{Bands: true})
				if err != nil {
					t.Fatal(err)
				}
				for j, l := range s.Launches {
					want := grids[j]
					if l.BandSymbol != "" && m > l.SmallRows && m <= l.BandRows {
						want = Grid{Symbol: l.BandSymbol, X: (m + l.BandRowsPerBlock - 1) / l.BandRowsPerBlock, Y: l.SmallRowsGridY, Threads: l.Threads, Flops: want.Flops, Bytes: want.Bytes}
						bands++
					}
					if bg[j] != want {
						t.Errorf("launch %d in the band layout: %+v, want %+v", j, bg[j], want)
					}
				}
				// tfc_attention_paged reads blockIdx.y as the query head, or at few rows blockIdx.y / SmallClusterY
				if a, ok := device.Deref(ops[0]).(device.Attention); ok && a.Cache != nil {
					l, want := s.Launches[len(s.Launches)-1], a.Heads
					if m <= l.SmallRows {
						want *= l.SmallClusterY
					}
					if g := grids[len(grids)-1].Y; l.SmallClusterY < 2 || g != want {
						t.Errorf("a cached attention launches %d blocks a row (clusters of %d at M ≤ %d), want %d", g, l.SmallClusterY, l.SmallRows, want)
					}
					// the tensor-core kernel's own grid (TFC_PAGED_MMA 2): above SmallRows a block a row and
					// tfc_paged_heads query heads (the largest divisor of a KV head's heads up to 8)
					qg := a.Heads / a.KVHeads
					hb := min(qg, 8)
					for qg%hb != 0 {
						hb--
					}
					if m > l.SmallRows {
						want = a.Heads / hb
					}
					_, mg, err := Marshal(ops, &s, addr, device.Layouts{PagedMMA: true})
					if err != nil {
						t.Fatal(err)
					}
					if g := mg[len(mg)-1]; g.Y != want || g.X != grids[len(grids)-1].X || g.Symbol != grids[len(grids)-1].Symbol {
						t.Errorf("on its own grid the tensor-core cached attention launches %+v, want y %d", g, want)
					}
				}
			})
		}
	}
	if bands == 0 {
		t.Error("no launch of 20 rows took a band function")
	}
}

// operand finds the Tensor at a field path of an op.
func operand(t *testing.T, op device.Op, field string) device.Tensor {
	t.Helper()
	ns, err := device.Operands(op)
	if err != nil {
		t.Fatal(err)
	}
	if tt, ok := find(ns, field); ok {
		return tt
	}
	t.Fatalf("%s has no operand %s", op.OpName(), field)
	return device.Tensor{}
}

// TestSameOperandsNamesTheMismatch: ops carrying an operand the schedule does not pass (a bias
// the kernel was not built with), or lacking one it does, are refused with both lists.
func TestSameOperandsNamesTheMismatch(t *testing.T) {
	op, _ := copyOp(t)
	s := copySchedule("k", "X")
	err := SameOperands([]device.Op{op}, &s)
	if err == nil || !strings.Contains(err.Error(), "takes operands (op0.X) but the ops give (op0.X, op0.Y)") || !strings.Contains(err.Error(), "tfc compile") {
		t.Fatalf("got %v", err)
	}
	s = copySchedule("k", "X", "Y", "B")
	if err := SameOperands([]device.Op{op}, &s); err == nil {
		t.Fatal("a schedule passing an absent operand was accepted")
	}
	if _, _, err := Marshal([]device.Op{op}, &s, func(device.Buffer) (uint64, error) { return 0, nil }, device.Layouts{}); err == nil || !strings.Contains(err.Error(), "copy.B, which op 0 lacks") {
		t.Fatalf("marshalling an absent operand: %v", err)
	}
}

// TestOpsByPointer: ops passed by pointer marshal as by value.
func TestOpsByPointer(t *testing.T) {
	op, addr := copyOp(t)
	c := op.(device.Copy)
	c.Y.Off, c.Y.Rows, c.Y.Stride = 1, 2, 5
	s := copySchedule("k", "X", "Y")
	a, _, err := Marshal([]device.Op{c}, &s, addr, device.Layouts{})
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := Marshal([]device.Op{&c}, &s, addr, device.Layouts{})
	if err != nil {
		t.Fatal(err)
	}
	want := []uint64{0x1000, 4, 0x2004, 5, 2}
	if !slices.Equal(a, want) || !slices.Equal(p, want) {
		t.Fatalf("by value %v, by pointer %v, want %v", a, p, want)
	}
}

// TestRopeGrids: a linear fused with rope launched on at most 8 rows takes 16-column tiles of 8
// rotary pairs where head_dim is a multiple of 16, and whole-head tiles otherwise; a decoder's
// takes 16-row tiles on at most 64 rows.
func TestRopeGrids(t *testing.T) {
	for _, c := range []struct {
		name                 string
		role                 string
		n, headDim, heads    int
		bm, wideY, smallRowY int
	}{
		{"k_proj", "decoder", 256, 128, 2, 32, 2, 16},
		{"q_proj", "decoder", 1536, 128, 12, 32, 12, 96},
		{"vision_qkv", "vision", 3840, 80, 16, 64, 48, 240}, // rope on q only: v and k columns unrotated
		{"head_dim_16", "decoder", 64, 16, 4, 32, 4, 4},
		{"head_dim_8", "decoder", 32, 8, 4, 32, 2, 2},   // two heads a tile, at any M
		{"head_dim_24", "decoder", 96, 24, 2, 32, 2, 2}, // 48-column tiles; the rope covers half of them
	} {
		k := hip.Kernel{Name: c.name, Role: c.role, Ops: []hip.Op{
			{Kind: "linear", Ints: map[string]int{"N": c.n, "K": 64}},
			{Kind: "rope", Ints: map[string]int{"heads": c.heads, "head_dim": c.headDim, "sections": 1, "section0": c.headDim / 2},
				Floats: map[string]float64{"theta": 1e4}},
		}}
		s, err := hip.ScheduleOf(k)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []int{5, 8, 9, 70} {
			wantY := c.wideY
			if m <= 8 {
				wantY = c.smallRowY
			}
			rows := c.bm
			if c.role == "decoder" && m <= 64 {
				rows = 16
			}
			if x, y := s.Launches[0].Grid(m, 0); len(s.Launches) != 1 || x != (m+rows-1)/rows || y != wantY {
				t.Errorf("%s at M=%d: launches %+v give (%d,%d), want (%d,%d)", c.name, m, s.Launches, x, y, (m+rows-1)/rows, wantY)
			}
		}
	}
}
