package contracts

import (
	"testing"

	"tfc/runtime/device/cpu"
)

func TestCheckWriteReadCPU(t *testing.T) {
	if err := CheckWriteRead(cpu.New()); err != nil {
		t.Fatal(err)
	}
}
