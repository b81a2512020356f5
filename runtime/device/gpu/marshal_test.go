package gpu

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"tfc/compiler/emit/hip"
	"tfc/contracts"
	_ "tfc/gen/registry" // the families the contract knows
	"tfc/kernels"
	"tfc/runtime/device"
	"tfc/runtime/device/cpu"
)

// TestMarshalMatchesEmitter checks, for every kernel of both families' kernels, that the
// parameters marshalled from device ops are the ones compiler/emit/hip's Params lists (names,
// addresses, strides, M and S), that they name the parameters the source declares, and that
// the grid equals its Launches.
func TestMarshalMatchesEmitter(t *testing.T) {
	table, err := SymbolTable(kernels.Sources)
	if err != nil {
		t.Fatal(err)
	}
	ks := familyKernels(t)
	dots, err := contracts.LoadFamily("dots_ocr", root)
	if err != nil {
		t.Fatal(err)
	}
	ks = append(ks, dots.Kernels...) // head_dim 8: a rope tile holds two heads
	if len(ks) == 0 {
		t.Fatal("no kernels")
	}
	for i, k := range ks {
		for _, m := range []int{rowsFor(k), 5} { // a contract's rows, and a decode round's
			t.Run(fmt.Sprintf("%s/M=%d", k.Name, m), func(t *testing.T) {
				b := &contracts.Builder{Backend: cpu.New(), Rng: rand.New(rand.NewSource(int64(i + 1))), Strided: i%2 == 1}
				defer b.Free()
				ops, err := chain(b, k, m)
				if err != nil {
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
				args, err := Marshal(ops, addr)
				if err != nil {
					t.Fatal(err)
				}
				params, err := hip.Params(k)
				if err != nil {
					t.Fatal(err)
				}
				if len(args) != len(params) {
					t.Fatalf("%d arguments marshalled, Params lists %d", len(args), len(params))
				}
				for j, p := range params {
					a := args[j]
					if a.Name != p.Name {
						t.Fatalf("argument %d is %s, Params says %s", j, a.Name, p.Name)
					}
					var want uint64
					switch p.Kind {
					case hip.Pointer, hip.Stride:
						tt := operand(t, ops[p.Op], p.Field)
						if p.Kind == hip.Pointer {
							base, _ := addr(tt.Buf)
							want = base + uint64(tt.Off*tt.Buf.DType().Size())
						} else {
							want = uint64(tt.RowStride())
						}
					case hip.Rows:
						want = uint64(operand(t, ops[0], p.Field).Rows)
					case hip.SpanCount:
						want = uint64(operand(t, ops[0], p.Field).Cols - 1)
					}
					if a.Value != want {
						t.Errorf("%s = %#x, want %#x", p.Name, a.Value, want)
					}
				}
				launches, err := hip.Launches(k)
				if err != nil {
					t.Fatal(err)
				}
				ls, err := Geometry(ops)
				if err != nil {
					t.Fatal(err)
				}
				if len(ls) != len(launches) {
					t.Fatalf("%d launches, Launches gives %d", len(ls), len(launches))
				}
				// tfc_attention_paged reads blockIdx.y as the query head
				if a, ok := device.Deref(ops[0]).(device.Attention); ok && a.Cache != nil && ls[len(ls)-1].GridY != a.Heads {
					t.Errorf("a cached attention launches %d blocks a row, want one a query head (%d)", ls[len(ls)-1].GridY, a.Heads)
				}
				s, _ := Spans(ops[0])
				for j, l := range launches {
					gx := (m + l.RowsPerBlock - 1) / l.RowsPerBlock
					if l.PlusSpans {
						gx += s
					}
					if got := k.Name + ls[j].Suffix; got != l.Symbol {
						t.Errorf("launch %d is %s, Launches says %s", j, got, l.Symbol)
					}
					gy := l.GridY
					if l.SmallRowsGridY > 0 && m <= smallRows {
						gy = l.SmallRowsGridY
					}
					if ls[j].GridX != gx || ls[j].GridY != gy || l.Threads != Threads {
						t.Errorf("launch %s: grid (%d,%d)×%d, Launches gives (%d,%d)×%d", l.Symbol, ls[j].GridX, ls[j].GridY, Threads, gx, gy, l.Threads)
					}
					e, ok := table[l.Symbol]
					if !ok {
						t.Fatalf("%s is not declared in kernels/", l.Symbol)
					}
					if err := SameParams(l.Symbol, e.Params, args); err != nil {
						t.Error(err)
					}
				}
			})
		}
	}
}

// operand finds the Tensor at a field path of an op.
func operand(t *testing.T, op device.Op, field string) device.Tensor {
	t.Helper()
	ns, err := device.Operands(op)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		if n.Field == field {
			return n.T
		}
	}
	// M's operand may be absent from the marshalled list only if the op lacks it
	t.Fatalf("%s has no operand %s", op.OpName(), field)
	return device.Tensor{}
}

// TestSameParamsNamesTheMismatch: a glue/kernel mismatch is refused with both lists.
func TestSameParamsNamesTheMismatch(t *testing.T) {
	err := SameParams("k", []string{"op0_X", "op0_X_ld", "M"}, []Arg{{"op0_X", 0}, {"op0_X_ld", 0}, {"op0_B", 0}, {"op0_B_ld", 0}, {"M", 0}})
	if err == nil || !strings.Contains(err.Error(), "op0_B") || !strings.Contains(err.Error(), "tfc compile") {
		t.Fatalf("got %v", err)
	}
	if err := SameParams("k", []string{"op0_X", "op0_X_ld", "M"}, []Arg{{"op0_X", 1}, {"op0_X_ld", 2}, {"M", 3}}); err != nil {
		t.Fatal(err)
	}
}

// TestOpsByPointer: ops passed by pointer marshal as by value.
func TestOpsByPointer(t *testing.T) {
	be := cpu.New()
	x, _ := be.Alloc(device.F32, 12)
	y, _ := be.Alloc(device.F32, 12)
	op := device.Copy{X: device.Tensor{Buf: x, Rows: 3, Cols: 4}, Y: device.Tensor{Buf: y, Off: 1, Rows: 2, Cols: 4, Stride: 5}}
	addr := func(b device.Buffer) (uint64, error) {
		if b == x {
			return 0x1000, nil
		}
		return 0x2000, nil
	}
	a, err := Marshal([]device.Op{op}, addr)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Marshal([]device.Op{&op}, addr)
	if err != nil {
		t.Fatal(err)
	}
	want := []Arg{{"op0_X", 0x1000}, {"op0_X_ld", 4}, {"op0_Y", 0x2004}, {"op0_Y_ld", 5}, {"M", 2}}
	for i := range want {
		if a[i] != want[i] || p[i] != want[i] {
			t.Fatalf("argument %d: by value %v, by pointer %v, want %v", i, a[i], p[i], want[i])
		}
	}
}

// TestRopeGeometry: a linear fused with rope launched on at most 8 rows takes 16-column tiles of
// 8 rotary pairs where head_dim is a multiple of 16, and whole-head tiles otherwise; the emitter
// gives the same grids.
func TestRopeGeometry(t *testing.T) {
	for _, c := range []struct {
		name                 string
		n, headDim, heads    int
		bm, wideY, smallRowY int
	}{
		{"k_proj", 256, 128, 2, 32, 2, 16},
		{"q_proj", 1536, 128, 12, 32, 12, 96},
		{"vision_qkv", 3840, 80, 16, 64, 48, 240}, // rope on q only: v and k columns unrotated
		{"head_dim_16", 64, 16, 4, 64, 4, 4},
		{"head_dim_8", 32, 8, 4, 64, 2, 2},   // two heads a tile, at any M
		{"head_dim_24", 96, 24, 2, 64, 2, 2}, // 48-column tiles; the rope covers half of them
	} {
		k := hip.Kernel{Name: c.name, Ops: []hip.Op{
			{Kind: "linear", Ints: map[string]int{"N": c.n, "K": 64}},
			{Kind: "rope", Ints: map[string]int{"heads": c.heads, "head_dim": c.headDim, "sections": 1, "section0": c.headDim / 2},
				Floats: map[string]float64{"theta": 1e4}},
		}}
		launches, err := hip.Launches(k)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []int{5, 8, 9, 70} {
			ops := []device.Op{
				device.Linear{X: device.Tensor{Rows: m, Cols: 64}, Y: device.Tensor{Rows: m, Cols: c.n}},
				device.Rope{X: device.Tensor{Rows: m, Cols: c.heads * c.headDim}, Heads: c.heads, HeadDim: c.headDim},
			}
			ls, err := Geometry(ops)
			if err != nil {
				t.Fatal(err)
			}
			want := Launch{GridX: ceilDiv(m, c.bm), GridY: c.wideY}
			if m <= smallRows {
				want.GridY = c.smallRowY
			}
			if len(ls) != 1 || ls[0] != want {
				t.Errorf("%s at M=%d: launches %+v, want %+v", c.name, m, ls, want)
			}
			l := launches[0]
			gy := l.GridY
			if l.SmallRowsGridY > 0 && m <= smallRows {
				gy = l.SmallRowsGridY
			}
			if gx := ceilDiv(m, l.RowsPerBlock); gx != want.GridX || gy != want.GridY {
				t.Errorf("%s at M=%d: the emitter launches (%d,%d), want (%d,%d)", c.name, m, gx, gy, want.GridX, want.GridY)
			}
		}
	}
}
