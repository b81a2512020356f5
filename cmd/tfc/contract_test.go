package main

import (
	"regexp"
	"strings"
	"testing"

	"tfc/gen/registry"
)

// TestContractCPU runs `tfc contract --backend cpu` for every family from the repository root and
// checks its summary: every kernel passes and every planted control goes red.
func TestContractCPU(t *testing.T) {
	summary := regexp.MustCompile(`^SUMMARY cpu (\d+) kernels: (\d+) pass gates 1-4, 0 fail; (\d+) controls: (\d+) red as planted$`)
	for _, f := range registry.Families {
		t.Run(f.Name, func(t *testing.T) {
			out, err := runTFC(t, "contract", "--backend", "cpu", "--family", f.Name, "--root", "../..")
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			last := lines[len(lines)-1]
			m := summary.FindStringSubmatch(last)
			if m == nil || m[1] == "0" || m[2] != m[1] || m[3] == "0" || m[3] != m[4] {
				t.Fatalf("last line %q, want every kernel passing and every control red", last)
			}
			t.Log(last)
		})
	}
}
