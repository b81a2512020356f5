package contracts_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"tfc/contracts"
	_ "tfc/contracts/registered" // the families the contract knows
	"tfc/runtime/device"
	"tfc/runtime/device/cpu"
)

// TestFamilyContractOnCPU runs what `tfc contract --backend cpu` runs: every kernel of the
// qwen2_vl family through gates 1 to 4 on the CPU backend, then every host control, which must
// each go red; and writes a receipt.
func TestFamilyContractOnCPU(t *testing.T) {
	s := seed(t)
	f, err := contracts.LoadFamily("qwen2_vl", "..")
	if err != nil {
		t.Fatal(err)
	}
	target := contracts.CPUTarget(f)
	be := target.Backend.(*cpu.Backend)
	var log strings.Builder
	r := contracts.Run(target, f, s, &log)
	t.Log("\n" + log.String())
	if len(r.Kernels) != len(f.Kernels) || len(r.Kernels) < 15 {
		t.Errorf("checked %d kernels of %d", len(r.Kernels), len(f.Kernels))
	}
	if !r.OK() {
		t.Errorf("%s", r.Summary())
	}
	muts := map[string]bool{}
	for _, c := range r.Controls {
		muts[c.Mutation] = true
	}
	for _, m := range []string{"off-by-one-bound", "dropped-scale", "wrong-stride", contracts.BatchDependent, contracts.NaNFlush} {
		if !muts[m] {
			t.Errorf("no %s control was planted", m)
		}
	}
	want := regexp.MustCompile(`^SUMMARY cpu (\d+) kernels: (\d+) pass gates 1-4, 0 fail; (\d+) controls: (\d+) red as planted$`)
	if m := want.FindStringSubmatch(r.Summary()); m == nil || m[1] != m[2] || m[3] != m[4] {
		t.Errorf("summary %q", r.Summary())
	}
	dir := t.TempDir()
	path, err := contracts.WriteReceipt(dir, r, contracts.Machine{Device: contracts.CPUModel(), Backend: be.Describe(), Compiler: "test"}, time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path) != "2026-12-02-cpu-qwen2_vl-contract.md" {
		t.Errorf("receipt named %s", path)
	}
	// a BF16 run's receipt names its precision, beside the F32 one
	bf, err := contracts.WriteReceipt(dir, r, contracts.Machine{Device: contracts.CPUModel(), Backend: be.Describe(), Compiler: "test", Precision: "bf16"}, time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(bf) != "2026-12-02-cpu-qwen2_vl-bf16-contract.md" {
		t.Errorf("BF16 receipt named %s", bf)
	}
	if text, _ := os.ReadFile(bf); !strings.Contains(string(text), "| precision | bf16 |") {
		t.Errorf("BF16 receipt does not name its precision:\n%s", text)
	}
	text, _ := os.ReadFile(path)
	if !strings.Contains(string(text), r.Summary()) || !strings.Contains(string(text), "`qwen2vl_decode_linear_silu_glu`") {
		t.Errorf("receipt lacks the summary or a kernel row:\n%s", text)
	}
}

// skipLaunch is a broken backend: it runs nothing.
type skipLaunch struct{ device.Backend }

func (skipLaunch) Launch(*device.KernelRef, ...device.Op) error { return nil }

// TestFamilyContractFailsBrokenBackend requires a backend that runs nothing to fail every
// kernel, a control whose mutant is in fact sound to count as not red, and the summary to say so.
func TestFamilyContractFailsBrokenBackend(t *testing.T) {
	f, err := contracts.LoadFamily("qwen2_vl", "..")
	if err != nil {
		t.Fatal(err)
	}
	be := skipLaunch{cpu.New()}
	r := contracts.Run(contracts.Target{Name: "broken", Backend: be, Controls: []contracts.Control{{Kernel: f.Kernels[0].Name, Mutation: "none"}},
		Plant: func(contracts.Control) (device.Backend, func(), error) { return cpu.New(), func() {}, nil }}, f, seed(t), &strings.Builder{})
	if r.OK() || r.Passed() != 0 || r.Red() != 0 {
		t.Errorf("a backend that runs nothing: %s", r.Summary())
	}
	for _, k := range r.Kernels {
		if k.Gate != 2 && k.Kernel != "qwen2vl_decode_scatter" {
			t.Errorf("%s failed gate %d, want 2 (nothing written): %v", k.Kernel, k.Gate, k.Err)
		}
	}
}

func TestLoadFamilyUnknown(t *testing.T) {
	_, err := contracts.LoadFamily("no_such_family", "..")
	if err == nil || !strings.Contains(err.Error(), "qwen2_vl") {
		t.Errorf("err = %v, want one naming the known families", err)
	}
}

// TestFamilyContractOnCPUBF16 is TestFamilyContractOnCPU in BF16 precision: every kernel of
// each family through gates 1 to 4 against the reference that rounds at the catalog's points,
// and every host control red.
func TestFamilyContractOnCPUBF16(t *testing.T) {
	s := seed(t)
	for _, name := range contracts.Families() {
		t.Run(name, func(t *testing.T) {
			f, err := contracts.LoadFamily(name, "..")
			if err != nil {
				t.Fatal(err)
			}
			var log strings.Builder
			r := contracts.Run(contracts.CPUTarget(f, cpu.Precision(device.BF16Precision)), f, s, &log)
			if !r.OK() {
				t.Errorf("%s\n%s", r.Summary(), log.String())
			}
		})
	}
}
