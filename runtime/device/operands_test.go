package device

import (
	"slices"
	"testing"

	"tfc/runtime/device/catalog"
)

// TestOperandsFollowFields: with every tensor present, each op's operands are its Fields in
// order (attention's with and without a cache), in and out as the table says.
func TestOperandsFollowFields(t *testing.T) {
	x := Tensor{Rows: 1, Cols: 1, Buf: fakeBuf{}}
	rows := &Rows{RowSeq: x, RowPos: x, PageTable: x}
	cache := &KVCache{K: x, V: x}
	for _, c := range []struct {
		op     Op
		cached bool
	}{
		{Linear{X: x, W: x, B: x, Res: x, Y: x}, false},
		{RMSNorm{X: x, Res: x, Sum: x, W: x, Y: x}, false},
		{LayerNorm{X: x, W: x, B: x, Y: x}, false},
		{Rope{X: x, Pos: x}, false},
		{Attention{Q: x, K: x, V: x, Y: x, Spans: x}, false},
		{&Attention{Q: x, K: x, V: x, Y: x, Spans: x, Cache: cache, Rows: rows}, true},
		{Add{A: x, B: x, Y: x}, false},
		{Mul{A: x, B: x, Y: x}, false},
		{Activate{X: x, Y: x}, false},
		{GLU{Gate: x, Up: x, Y: x}, false},
		{Embed{Ids: x, Table: x, Y: x}, false},
		{Scatter{Src: x, Index: x, Y: x}, false},
		{Gather{X: x, Index: x, Y: x}, false},
		{Copy{X: x, Y: x}, false},
		{Argmax{X: x, Y: x}, false},
	} {
		ns, err := Operands(c.op)
		if err != nil {
			t.Fatal(err)
		}
		var got, want []string
		for _, n := range ns {
			got = append(got, n.Field)
		}
		fs := catalog.Find(Deref(c.op).OpName()).Tensors
		for _, f := range fs {
			if f.WithCache == 0 || (f.WithCache > 0) == c.cached {
				want = append(want, f.Path)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s (cache %v): operands %v, Fields %v", Deref(c.op).OpName(), c.cached, got, want)
		}
		for i, n := range ns {
			for _, f := range fs {
				if f.Path == n.Field && (f.In != n.In || f.Out != n.Out) {
					t.Errorf("%s.%s: operand %d in %v out %v, Fields %+v", Deref(c.op).OpName(), n.Field, i, n.In, n.Out, f)
				}
			}
		}
	}
	if len(catalog.Ops) != 14 {
		t.Errorf("the test lists 14 ops; the catalog has %d", len(catalog.Ops))
	}
}

// TestMapTensors: MapTensors visits every present tensor in catalog order and sets what it
// returns, leaving a nil parent (attention without a cache) nil.
func TestMapTensors(t *testing.T) {
	x := Tensor{Rows: 4, Cols: 2, Buf: fakeBuf{}}
	y := Tensor{Rows: 2, Cols: 2, Buf: fakeBuf{}}
	rows := &Rows{RowSeq: x, RowPos: x, PageTable: x}
	op := &Attention{Q: x, K: x, V: x, Y: x, Cache: &KVCache{K: x, V: x}, Rows: rows, Heads: 3}
	var seen []string
	got, err := MapTensors(op, func(f catalog.Tensor, t Tensor) Tensor {
		seen = append(seen, f.Path)
		if f.Per == catalog.PerRow || f.Path == "Cache.V" {
			return y
		}
		return t
	})
	if err != nil {
		t.Fatal(err)
	}
	a := got.(Attention)
	if a.Q != y || a.Y != y || a.Cache.V != y || a.Cache.K != x || a.Rows.PageTable != x || a.Heads != 3 {
		t.Errorf("MapTensors gave %+v", a)
	}
	if op.Cache.V != x || rows.RowSeq != x {
		t.Errorf("MapTensors changed the op it was given")
	}
	if len(seen) != len(catalog.Find("attention").Tensors) {
		t.Errorf("visited %v", seen)
	}
	plain, _ := MapTensors(Attention{Q: x}, func(_ catalog.Tensor, t Tensor) Tensor { return t })
	if plain.(Attention).Cache != nil || plain.(Attention).Rows != nil {
		t.Errorf("a nil cache came back set")
	}
}

type fakeBuf struct{}

func (fakeBuf) Len() int     { return 1 }
func (fakeBuf) DType() DType { return F32 }
