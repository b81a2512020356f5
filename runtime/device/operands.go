package device

import "fmt"

// Operand is one present tensor of an op: its field path in the op's struct, and whether the op
// reads it, writes it, or both (rope's X, scatter's Y, the KV cache).
type Operand struct {
	Field   string
	T       Tensor
	In, Out bool
}

// Deref accepts catalog ops by value or by pointer.
func Deref(op Op) Op {
	switch o := op.(type) {
	case *Linear:
		return *o
	case *RMSNorm:
		return *o
	case *LayerNorm:
		return *o
	case *Rope:
		return *o
	case *Attention:
		return *o
	case *Add:
		return *o
	case *Mul:
		return *o
	case *Activate:
		return *o
	case *GLU:
		return *o
	case *Embed:
		return *o
	case *Scatter:
		return *o
	case *Gather:
		return *o
	case *Copy:
		return *o
	}
	return op
}

// Operands lists an op's present tensors in the field order of its struct, the one list every
// backend and the contract read: attention without a cache reads Spans; with one it reads and
// writes Cache.K and Cache.V and reads Rows.RowSeq, Rows.RowPos and Rows.PageTable.
func Operands(op Op) ([]Operand, error) {
	var ns []Operand
	add := func(field string, t Tensor, in, out bool) {
		if t.Present() {
			ns = append(ns, Operand{field, t, in, out})
		}
	}
	in := func(field string, t Tensor) { add(field, t, true, false) }
	out := func(field string, t Tensor) { add(field, t, false, true) }
	inout := func(field string, t Tensor) { add(field, t, true, true) }
	switch o := Deref(op).(type) {
	case Linear:
		in("X", o.X)
		in("W", o.W)
		in("B", o.B)
		in("Res", o.Res)
		out("Y", o.Y)
	case RMSNorm:
		in("X", o.X)
		in("Res", o.Res)
		out("Sum", o.Sum)
		in("W", o.W)
		out("Y", o.Y)
	case LayerNorm:
		in("X", o.X)
		in("W", o.W)
		in("B", o.B)
		out("Y", o.Y)
	case Rope:
		inout("X", o.X)
		in("Pos", o.Pos)
	case Attention:
		in("Q", o.Q)
		in("K", o.K)
		in("V", o.V)
		out("Y", o.Y)
		if o.Cache == nil {
			in("Spans", o.Spans)
			break
		}
		if o.Rows == nil {
			return nil, fmt.Errorf("attention with a cache needs Rows")
		}
		inout("Cache.K", o.Cache.K)
		inout("Cache.V", o.Cache.V)
		in("Rows.RowSeq", o.Rows.RowSeq)
		in("Rows.RowPos", o.Rows.RowPos)
		in("Rows.PageTable", o.Rows.PageTable)
	case Add:
		in("A", o.A)
		in("B", o.B)
		out("Y", o.Y)
	case Mul:
		in("A", o.A)
		in("B", o.B)
		out("Y", o.Y)
	case Activate:
		in("X", o.X)
		out("Y", o.Y)
	case GLU:
		in("Gate", o.Gate)
		in("Up", o.Up)
		out("Y", o.Y)
	case Embed:
		in("Ids", o.Ids)
		in("Table", o.Table)
		out("Y", o.Y)
	case Scatter:
		in("Src", o.Src)
		in("Index", o.Index)
		inout("Y", o.Y)
	case Gather:
		in("X", o.X)
		in("Index", o.Index)
		out("Y", o.Y)
	case Copy:
		in("X", o.X)
		out("Y", o.Y)
	default:
		return nil, fmt.Errorf("op %T is not in the device catalog", op)
	}
	return ns, nil
}
