package cpu

import (
	"fmt"
	"strings"

	"tfc/runtime/device"
)

// run executes one op.
func (be *Backend) run(op device.Op) error {
	switch o := op.(type) {
	case device.Linear:
		return be.linear(o)
	case *device.Linear:
		return be.linear(*o)
	case device.RMSNorm:
		return be.rmsnorm(o)
	case *device.RMSNorm:
		return be.rmsnorm(*o)
	case device.LayerNorm:
		return be.layernorm(o)
	case *device.LayerNorm:
		return be.layernorm(*o)
	case device.Rope:
		return be.rope(o)
	case *device.Rope:
		return be.rope(*o)
	case device.Attention:
		return be.attention(o)
	case *device.Attention:
		return be.attention(*o)
	case device.Add:
		return be.binary("add", o.A, o.B, o.Y, func(a, b float32) float32 { return a + b })
	case *device.Add:
		return be.binary("add", o.A, o.B, o.Y, func(a, b float32) float32 { return a + b })
	case device.Mul:
		return be.binary("mul", o.A, o.B, o.Y, func(a, b float32) float32 { return a * b })
	case *device.Mul:
		return be.binary("mul", o.A, o.B, o.Y, func(a, b float32) float32 { return a * b })
	case device.Activate:
		return be.activate(o)
	case *device.Activate:
		return be.activate(*o)
	case device.GLU:
		return be.glu(o)
	case *device.GLU:
		return be.glu(*o)
	case device.Embed:
		return be.gather("embed", "Table", "Ids", o.Table, o.Ids, o.Y)
	case *device.Embed:
		return be.gather("embed", "Table", "Ids", o.Table, o.Ids, o.Y)
	case device.Gather:
		return be.gather("gather", "X", "Index", o.X, o.Index, o.Y)
	case *device.Gather:
		return be.gather("gather", "X", "Index", o.X, o.Index, o.Y)
	case device.Scatter:
		return be.scatter(o)
	case *device.Scatter:
		return be.scatter(*o)
	case device.Argmax:
		return be.argmax(o)
	case *device.Argmax:
		return be.argmax(*o)
	case device.Copy:
		return be.copyOp(o)
	case *device.Copy:
		return be.copyOp(*o)
	case nil:
		return fmt.Errorf("nil op")
	}
	return fmt.Errorf("%s: not an op of the catalog (%T)", op.OpName(), op)
}

// operand is a named view of an op.
type operand struct {
	name string
	v    *view
}

// resolve gives the op "reads before writes" semantics: an input that overlaps an output is
// copied first, unless the pair is an exact alias the op allows ("In>Out" in allow). Outputs
// that overlap each other are an error.
func (be *Backend) resolve(op string, ins, outs []operand, allow ...string) error {
	for i, a := range outs {
		for _, b := range outs[i+1:] {
			if a.v.overlaps(*b.v) {
				return fmt.Errorf("%s: outputs %s and %s overlap; give them separate memory", op, a.name, b.name)
			}
		}
	}
	for _, out := range outs {
		if out.v.present() {
			out.v.b.version++
		}
	}
	for _, in := range ins {
		for _, out := range outs {
			if !in.v.overlaps(*out.v) {
				continue
			}
			if in.v.same(*out.v) && allowed(allow, in.name+">"+out.name) {
				continue
			}
			*in.v = be.clone(*in.v)
		}
	}
	return nil
}

func allowed(list []string, pair string) bool {
	for _, p := range list {
		if strings.EqualFold(p, pair) {
			return true
		}
	}
	return false
}
