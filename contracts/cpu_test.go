package contracts_test

import (
	"flag"
	"math/rand"
	"testing"
	"time"

	"tfc/contracts"
	"tfc/runtime/device"
	"tfc/runtime/device/cpu"
)

var seedFlag = flag.Int64("seed", 0, "random seed for the contract inputs (0: from the clock)")

// seed returns the run's seed and logs it if the test fails.
func seed(t *testing.T) int64 {
	s := *seedFlag
	if s == 0 {
		s = time.Now().UnixNano()
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d; rerun with -seed=%d", s, s)
		}
	})
	return s
}

// TestCPUContract runs every contract case on the CPU backend with each Linear kernel the CPU
// has, contiguous and strided, with plain inputs and with NaN/±Inf planted in the activations.
func TestCPUContract(t *testing.T) {
	s := seed(t)
	for i, k := range cpu.Kernels() {
		be := cpu.New(cpu.Kernel(k), cpu.Workers(2+i))
		t.Run(be.Describe(), func(t *testing.T) { runCases(t, be, s) })
	}
}

func runCases(t *testing.T, be *cpu.Backend, s int64) {
	contracts.RunSuite(be, s, func(name string, res contracts.Result, err error) {
		t.Run(name, func(t *testing.T) {
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("max row error %v", res)
		})
	})
}

// dropLastRow is a broken backend: it runs each op with Y one row short.
type dropLastRow struct{ *cpu.Backend }

func (d dropLastRow) Launch(k *device.KernelRef, ops ...device.Op) error {
	for i, op := range ops {
		if l, ok := op.(device.Linear); ok {
			l.X, l.Y = l.X.Slice(0, l.X.Rows-1), l.Y.Slice(0, l.Y.Rows-1)
			if l.Res.Present() {
				l.Res = l.Res.Slice(0, l.Res.Rows-1)
			}
			ops[i] = l
		}
	}
	return d.Backend.Launch(k, ops...)
}

// wrongBias is a broken backend: it drops the bias.
type wrongBias struct{ *cpu.Backend }

func (d wrongBias) Launch(k *device.KernelRef, ops ...device.Op) error {
	for i, op := range ops {
		if l, ok := op.(device.Linear); ok {
			l.B = device.Tensor{}
			ops[i] = l
		}
	}
	return d.Backend.Launch(k, ops...)
}

// TestContractCatchesBrokenBackends plants faults and requires Check to see them.
func TestContractCatchesBrokenBackends(t *testing.T) {
	s := seed(t)
	be := cpu.New()
	build := func() (*contracts.Builder, device.Op) {
		b := &contracts.Builder{Backend: be, Rng: rand.New(rand.NewSource(s))}
		op := device.Linear{X: b.Act(device.F32, 4, 16), W: b.Normal(device.BF16, 8, 16, 0.3), B: b.Normal(device.F32, 1, 8, 1), Y: b.Out(device.F32, 4, 8)}
		if b.Err() != nil {
			t.Fatal(b.Err())
		}
		return b, op
	}
	b, op := build()
	defer b.Free()
	if _, err := contracts.Check(dropLastRow{be}, op); err == nil {
		t.Error("a backend that leaves a row unwritten passed the contract")
	} else {
		t.Logf("caught: %v", err)
	}
	b2, op2 := build()
	defer b2.Free()
	if _, err := contracts.Check(wrongBias{be}, op2); err == nil {
		t.Error("a backend that drops the bias passed the contract")
	} else {
		t.Logf("caught: %v", err)
	}
	b3, op3 := build()
	defer b3.Free()
	if _, err := contracts.Check(be, op3); err != nil {
		t.Errorf("the unbroken backend failed: %v", err)
	}
}

// TestCPUContractBF16 runs every contract case on the CPU backend in BF16 precision, against the
// reference that rounds where the catalog says, with each Linear kernel the CPU has.
func TestCPUContractBF16(t *testing.T) {
	s := seed(t)
	for _, k := range cpu.Kernels() {
		be := cpu.New(cpu.Kernel(k), cpu.Precision(device.BF16Precision))
		t.Run(be.Describe(), func(t *testing.T) { runCases(t, be, s) })
	}
}

// unrounded is a broken backend: it says BF16 precision but computes in F32.
type unrounded struct{ *cpu.Backend }

func (unrounded) Precision() device.Precision { return device.BF16Precision }

// TestContractCatchesMissingRounding requires a backend that skips the rounding points, and a
// BF16 one that drops a bias, to fail.
func TestContractCatchesMissingRounding(t *testing.T) {
	s := seed(t)
	be := unrounded{cpu.New()}
	b := &contracts.Builder{Backend: be, Rng: rand.New(rand.NewSource(s))}
	defer b.Free()
	x := b.Act(device.F32, 4, 16)
	op := device.Linear{X: x, W: b.Normal(device.BF16, 8, 16, 0.3), B: b.Normal(device.F32, 1, 8, 1), Y: b.Out(device.F32, 4, 8)}
	if b.Err() != nil {
		t.Fatal(b.Err())
	}
	if _, err := contracts.Check(be, op); err == nil {
		t.Error("a backend that skips the rounding points passed the BF16 contract")
	} else {
		t.Logf("caught: %v", err)
	}
	bf := cpu.New(cpu.Precision(device.BF16Precision))
	b2 := &contracts.Builder{Backend: bf, Rng: rand.New(rand.NewSource(s))}
	defer b2.Free()
	op2 := device.Linear{X: b2.Act(device.F32, 4, 16), W: b2.Normal(device.BF16, 8, 16, 0.3), B: b2.Normal(device.F32, 1, 8, 1), Y: b2.Out(device.F32, 4, 8)}
	if b2.Err() != nil {
		t.Fatal(b2.Err())
	}
	if _, err := contracts.Check(wrongBias{bf}, op2); err == nil {
		t.Error("a BF16 backend that drops the bias passed the contract")
	} else {
		t.Logf("caught: %v", err)
	}
}
