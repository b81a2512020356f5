package device

import (
	"fmt"

	"tfc/runtime/device/catalog"
)

// Operand is one present tensor of an op: its field path in the op's struct, and whether the op
// reads it, writes it, or both (rope's X, scatter's Y, the KV cache).
type Operand struct {
	Field   string
	T       Tensor
	In, Out bool
}

// Spec is op's catalog entry; an op outside the catalog is an error.
func Spec(op Op) (*catalog.Op, error) {
	s := catalog.Find(op.OpName())
	if s == nil {
		return nil, fmt.Errorf("op %s is not in the device catalog", op.OpName())
	}
	return s, nil
}

// Operands lists an op's present tensors in the catalog's order, the one list every backend and
// the contract read: attention without a cache reads Spans; with one it reads and writes Cache.K
// and Cache.V and reads Rows.RowSeq, Rows.RowPos and Rows.PageTable.
func Operands(op Op) ([]Operand, error) {
	s, ts, err := specTensors(op)
	if err != nil {
		return nil, err
	}
	cached := false
	for i, f := range s.Tensors {
		if f.WithCache > 0 && ts[i].Present() {
			cached = true
		}
	}
	ns := make([]Operand, 0, len(ts))
	for i, f := range s.Tensors {
		if f.WithCache != 0 && (f.WithCache > 0) != cached {
			continue
		}
		if cached && f.WithCache > 0 && !ts[i].Present() {
			return nil, fmt.Errorf("%s with a cache needs %s", s.Name, f.Path)
		}
		if ts[i].Present() {
			ns = append(ns, Operand{f.Path, ts[i], f.In, f.Out})
		}
	}
	return ns, nil
}

// MapTensors is op (as a value) with each tensor field replaced by f's answer, in catalog
// order; fields under a nil parent (attention's cache without one) are not visited.
func MapTensors(op Op, f func(catalog.Tensor, Tensor) Tensor) (Op, error) {
	s, ts, err := specTensors(op)
	if err != nil {
		return nil, err
	}
	for i := range ts {
		ts[i] = f(s.Tensors[i], ts[i])
	}
	return withTensors(op, ts), nil
}

// specTensors is op's catalog entry and its tensor fields in catalog order.
func specTensors(op Op) (*catalog.Op, []Tensor, error) {
	s, err := Spec(op)
	if err != nil {
		return nil, nil, err
	}
	ts, ok := tensorsOf(op)
	if !ok {
		return nil, nil, fmt.Errorf("op %T is not in the device catalog", op)
	}
	return s, ts, nil
}
