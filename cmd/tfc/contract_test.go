package main

import (
	"regexp"
	"strings"
	"testing"
)

// TestContractCPU runs `tfc contract --backend cpu` for every family from the repository root and
// checks its summary: every kernel passes and every planted control goes red.
func TestContractCPU(t *testing.T) {
	summary := regexp.MustCompile(`^SUMMARY cpu (\d+) kernels: (\d+) pass gates 1-4, 0 fail; (\d+) controls: (\d+) red as planted$`)
	for family, kernels := range map[string]string{"qwen2_vl": "22", "dots_ocr": "24"} {
		t.Run(family, func(t *testing.T) {
			out, err := runTFC(t, "contract", "--backend", "cpu", "--family", family, "--root", "../..")
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			last := lines[len(lines)-1]
			m := summary.FindStringSubmatch(last)
			if m == nil || m[1] != kernels || m[2] != m[1] || m[3] != m[4] {
				t.Fatalf("last line %q, want %s kernels passing and every control red", last, kernels)
			}
			t.Log(last)
		})
	}
}
