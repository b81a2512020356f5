package contracts

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Machine describes where a contract run happened, for its receipt.
type Machine struct {
	Device   string // the card and its driver, or the CPU model
	Backend  string // the backend's own description
	Compiler string // what built the kernels: nvcc's version, or Go's for the CPU backend
	Binary   string // sha256 of the tfc binary
	Command  string // the command line that ran
	// Precision is the run's precision ("f32" or "bf16"); a receipt of a precision other than
	// F32 names it in its file name, so both precisions' receipts of a family can share a folder.
	Precision string
}

// WriteReceipt writes <dir>/<date>-<target>-<family>-contract.md for r (…-<family>-bf16-… in BF16
// precision) and returns its path.
func WriteReceipt(dir string, r *Report, m Machine, when time.Time) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "# Kernel contract: %s on %s\n\n", r.Family, r.Target)
	fmt.Fprintf(&b, "Date: %s. Written by `tfc contract --receipt`.\n\n", when.UTC().Format("2006-01-02 15:04 MST"))
	b.WriteString("## Machine\n\n| | |\n| --- | --- |\n")
	fmt.Fprintf(&b, "| device | %s |\n| backend | %s |\n| compiler | %s |\n| tfc binary sha256 | `%s` |\n", m.Device, m.Backend, m.Compiler, m.Binary)
	if m.Precision != "" {
		fmt.Fprintf(&b, "| precision | %s |\n", m.Precision)
	}
	fmt.Fprintf(&b, "| seed | %d |\n\n", r.Seed)
	fmt.Fprintf(&b, "## Command\n\n    %s\n\n", m.Command)
	fmt.Fprintf(&b, "## Result\n\n    %s\n\n", r.Summary())
	b.WriteString("Gates: 1 every stored element within the kernel's bound of the float64 reference (relative to\n" +
		"the row's largest magnitude); 2 every output element written (outputs poisoned with NaN first);\n" +
		"3 five more launches bit-identical, and the kernel's rows launched alone bit-identical to the same\n" +
		"rows at another offset of the full launch; 4 NaN, +Inf and -Inf inputs give the reference's classes.\n" +
		"Bounds: exact kernels bit for bit; others four times the sum of their ops' class bounds\n" +
		"(elementwise 2e-6, reductions 1e-5·max(1, √(K/1024)); BF16 weights are exact inputs).\n" +
		"Time: wall time of one launch and a sync, mean of the five reruns.\n\n")
	b.WriteString("| kernel | M | class | bound | worst error | µs a launch | gates |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, k := range r.Kernels {
		gates := "pass"
		if k.Gate != 0 {
			gates = fmt.Sprintf("FAIL gate %d: %s", k.Gate, strings.ReplaceAll(firstLine(k.Err), "|", "/"))
		}
		fmt.Fprintf(&b, "| `%s` | %d | %s | %.3g | %.3g | %.1f | %s |\n", k.Kernel, k.Rows, k.Class, k.Bound, k.Worst,
			float64(k.PerLaunch.Nanoseconds())/1e3, gates)
	}
	b.WriteString("\n## Planted controls\n\n| mutation | kernel | result |\n| --- | --- | --- |\n")
	for _, c := range r.Controls {
		res := "MISSED: every gate passed the mutant"
		switch {
		case c.Red:
			res = fmt.Sprintf("red at gate %d: %s", c.Gate, strings.ReplaceAll(firstLine(c.Err), "|", "/"))
		case c.Err != nil:
			res = "did not run: " + strings.ReplaceAll(firstLine(c.Err), "|", "/")
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s |\n", c.Mutation, c.Kernel, res)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	name := r.Family
	if m.Precision != "" && m.Precision != "f32" {
		name += "-" + m.Precision
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-%s-%s-contract.md", when.UTC().Format("2006-01-02"), r.Target, name))
	return path, os.WriteFile(path, []byte(b.String()), 0o644)
}

// CPUModel is the first model name /proc/cpuinfo gives, with the logical CPU count.
func CPUModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	name := "unknown CPU"
	if err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				name = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d logical CPUs", name, runtime.NumCPU())
}

// BinarySHA256 is the sha256 of the running executable.
func BinarySHA256() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	f, err := os.Open(exe)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
