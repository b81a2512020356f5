package device

import (
	"slices"
	"testing"
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
	} {
		ns, err := Operands(c.op)
		if err != nil {
			t.Fatal(err)
		}
		var got, want []string
		for _, n := range ns {
			got = append(got, n.Field)
		}
		fs := Fields[Deref(c.op).OpName()]
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
	if len(Fields) != 13 {
		t.Errorf("Fields lists %d ops; the catalog has 13", len(Fields))
	}
}

type fakeBuf struct{}

func (fakeBuf) Len() int     { return 1 }
func (fakeBuf) DType() DType { return F32 }
