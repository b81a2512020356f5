package hip

import (
	"testing"

	"tfc/runtime/device/gpu/gputest"
)

// TestBindingsRegister: purego accepts every binding's Go signature, and passes each argument as
// a C scalar or pointer (gputest.CheckBinding).
func TestBindingsRegister(t *testing.T) {
	d := &api{}
	for _, s := range d.symbols() {
		gputest.CheckBinding(t, s.name, s.fn)
	}
}
