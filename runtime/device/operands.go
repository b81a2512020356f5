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

// Field is one tensor field of a catalog op: its path in the op's struct, whether the op reads
// it, writes it (both: rope's X, scatter's Y, the KV cache), and whether it holds I32 indices.
type Field struct {
	Path      string
	In, Out   bool
	Index     bool
	WithCache int8 // attention: 1 only with a KV cache, -1 only without, 0 either way
}

var (
	in    = func(p string) Field { return Field{Path: p, In: true} }
	out   = func(p string) Field { return Field{Path: p, Out: true} }
	inout = func(p string) Field { return Field{Path: p, In: true, Out: true} }
	index = func(p string) Field { return Field{Path: p, In: true, Index: true} }
)

// Fields lists each catalog op's tensor fields in the order of its struct, by OpName: the one
// list of an op's tensors and their roles, which Operands, the GPU marshal, the contract and the
// HIP emitter read.
var Fields = map[string][]Field{
	"linear":    {in("X"), in("W"), in("B"), in("Res"), out("Y")},
	"rmsnorm":   {in("X"), in("Res"), out("Sum"), in("W"), out("Y")},
	"layernorm": {in("X"), in("W"), in("B"), out("Y")},
	"rope":      {inout("X"), index("Pos")},
	"attention": {in("Q"), in("K"), in("V"), out("Y"), {Path: "Spans", In: true, Index: true, WithCache: -1},
		{Path: "Cache.K", In: true, Out: true, WithCache: 1}, {Path: "Cache.V", In: true, Out: true, WithCache: 1},
		{Path: "Rows.RowSeq", In: true, Index: true, WithCache: 1}, {Path: "Rows.RowPos", In: true, Index: true, WithCache: 1},
		{Path: "Rows.PageTable", In: true, Index: true, WithCache: 1}},
	"add":      {in("A"), in("B"), out("Y")},
	"mul":      {in("A"), in("B"), out("Y")},
	"activate": {in("X"), out("Y")},
	"glu":      {in("Gate"), in("Up"), out("Y")},
	"embed":    {index("Ids"), in("Table"), out("Y")},
	"scatter":  {in("Src"), index("Index"), inout("Y")},
	"gather":   {in("X"), index("Index"), out("Y")},
	"copy":     {in("X"), out("Y")},
}

// Operands lists an op's present tensors in the field order of its struct (Fields), the one list
// every backend and the contract read: attention without a cache reads Spans; with one it reads
// and writes Cache.K and Cache.V and reads Rows.RowSeq, Rows.RowPos and Rows.PageTable.
func Operands(op Op) ([]Operand, error) {
	var ts []Tensor // one a field of Fields, in its order
	cached := false
	switch o := Deref(op).(type) {
	case Linear:
		ts = []Tensor{o.X, o.W, o.B, o.Res, o.Y}
	case RMSNorm:
		ts = []Tensor{o.X, o.Res, o.Sum, o.W, o.Y}
	case LayerNorm:
		ts = []Tensor{o.X, o.W, o.B, o.Y}
	case Rope:
		ts = []Tensor{o.X, o.Pos}
	case Attention:
		ts = []Tensor{o.Q, o.K, o.V, o.Y, o.Spans, {}, {}, {}, {}, {}}
		if o.Cache != nil {
			if o.Rows == nil {
				return nil, fmt.Errorf("attention with a cache needs Rows")
			}
			cached = true
			ts = []Tensor{o.Q, o.K, o.V, o.Y, {}, o.Cache.K, o.Cache.V, o.Rows.RowSeq, o.Rows.RowPos, o.Rows.PageTable}
		}
	case Add:
		ts = []Tensor{o.A, o.B, o.Y}
	case Mul:
		ts = []Tensor{o.A, o.B, o.Y}
	case Activate:
		ts = []Tensor{o.X, o.Y}
	case GLU:
		ts = []Tensor{o.Gate, o.Up, o.Y}
	case Embed:
		ts = []Tensor{o.Ids, o.Table, o.Y}
	case Scatter:
		ts = []Tensor{o.Src, o.Index, o.Y}
	case Gather:
		ts = []Tensor{o.X, o.Index, o.Y}
	case Copy:
		ts = []Tensor{o.X, o.Y}
	default:
		return nil, fmt.Errorf("op %T is not in the device catalog", op)
	}
	fs := Fields[Deref(op).OpName()]
	ns := make([]Operand, 0, len(ts))
	for i, t := range ts {
		f := fs[i]
		if t.Present() && (f.WithCache == 0 || (f.WithCache > 0) == cached) {
			ns = append(ns, Operand{f.Path, t, f.In, f.Out})
		}
	}
	return ns, nil
}
