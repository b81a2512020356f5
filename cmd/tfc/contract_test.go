package main

import (
	"strings"
	"testing"
)

// TestContractCPU runs `tfc contract --backend cpu` from the repository root and checks its summary.
func TestContractCPU(t *testing.T) {
	out, err := runTFC(t, "contract", "--backend", "cpu", "--root", "../..")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "SUMMARY cpu 22 kernels: 22 pass gates 1-4, 0 fail; ") || !strings.HasSuffix(last, "red as planted") {
		t.Fatalf("last line %q", last)
	}
}
