package contracts

import (
	"fmt"

	"tfc/runtime/device"
)

// ReferenceBackend runs a whole graph with the float64 references: every launched op is
// computed by Expect from its operands as the inner backend holds them, and each output is
// stored back rounded to its tensor's dtype. The generated glue drives it as any backend, so a
// family's forward at any config's shapes has a float64 reference op by op, whatever kernels the
// inner backend would have run. Memory, copies and names are the inner backend's.
type ReferenceBackend struct{ device.Backend }

// Launch computes ops in order with the float64 references, ignoring k's kernel.
func (r ReferenceBackend) Launch(k *device.KernelRef, ops ...device.Op) error {
	read := HostRead(r.Backend)
	for _, op := range ops {
		want, err := Expect(op, read)
		if err != nil {
			return fmt.Errorf("%s: reference of %s: %w", k.Name, op.OpName(), err)
		}
		for _, w := range want {
			if w.T.Buf.DType() == device.I32 {
				v := make([]int32, len(w.Want))
				for i, x := range w.Want {
					v[i] = int32(x)
				}
				err = r.Backend.Write(w.T, v, device.I32)
			} else {
				v := make([]float32, len(w.Want))
				for i, x := range w.Want {
					v[i] = float32(Round(w.T.Buf.DType(), x))
				}
				err = r.Backend.Write(w.T, v, device.F32)
			}
			if err != nil {
				return fmt.Errorf("%s: storing %s of %s: %w", k.Name, w.Name, op.OpName(), err)
			}
		}
	}
	return nil
}
