package gpu

import (
	"io/fs"
	"reflect"
	"strings"
	"testing"

	"tfc/compiler/emit/hip"
	"tfc/contracts"
	_ "tfc/contracts/registered" // the families the contract knows
	"tfc/kernels"
	"tfc/runtime/device"
	"tfc/runtime/device/cpu"
)

const root = "../../.."

// familyKernels returns the kernels of kernels/gen/qwen2vl.hip with their specialised op chains,
// as the contract loads them.
func familyKernels(t *testing.T) []hip.Kernel {
	t.Helper()
	return family(t).Kernels
}

func family(t *testing.T) contracts.Family {
	t.Helper()
	f, err := contracts.LoadFamily("qwen2_vl", root)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// chain and rowsFor are the contract's op chain of a kernel and the rows it is checked at.
func chain(b *contracts.Builder, k hip.Kernel, m int) ([]device.Op, error) {
	return contracts.Chain(b, k, m)
}

func rowsFor(k hip.Kernel) int { return contracts.RowsFor(k) }

// TestChainHarnessOnCPU runs the contract's gates on the CPU backend, which computes every op
// of a launch: every kernel passes, and a backend that skips a launch's last op fails each one.
func TestChainHarnessOnCPU(t *testing.T) {
	for i, k := range familyKernels(t) {
		for _, broken := range []bool{false, true} {
			var be device.Backend = cpu.New()
			if broken {
				be = dropLast{be}
			}
			res := contracts.CheckKernel(be, k, int64(i+1))
			switch {
			case !broken && res.Gate != 0:
				t.Errorf("%s on the CPU: gate %d: %v", k.Name, res.Gate, res.Err)
			case broken && res.Gate == 0:
				t.Errorf("%s: the harness passed a backend that skips the last op", k.Name)
			}
		}
	}
}

// dropLast is a broken backend: it skips the last op of every launch.
type dropLast struct{ device.Backend }

func (d dropLast) Launch(k *device.KernelRef, ops ...device.Op) error {
	return d.Backend.Launch(k, ops[:len(ops)-1]...)
}

// TestControlSourcesDeclareTheirKernel checks, without a GPU, that every planted control's source
// schedules its kernel as the served source does, and plants the control in its text.
func TestControlSourcesDeclareTheirKernel(t *testing.T) {
	f := family(t)
	served, err := KernelTable(kernels.Sources)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range contracts.PlantedControls(f, []hip.Mutation{hip.OffByOneBound, hip.DroppedScale, hip.WrongStride, hip.MissingBarrier}) {
		mut, err := hip.ParseMutation(c.Mutation)
		if err != nil {
			t.Fatal(err)
		}
		srcs, err := contracts.MutantSources(f, c.Kernel, mut)
		if err != nil {
			t.Fatalf("%s in %s: %v", c.Mutation, c.Kernel, err)
		}
		table, err := KernelTable(srcs)
		if err != nil {
			t.Fatal(err)
		}
		e, ok := table[c.Kernel]
		if !ok || !reflect.DeepEqual(e.Schedule, served[c.Kernel].Schedule) {
			t.Errorf("%s in %s: schedules %+v, served %+v", c.Mutation, c.Kernel, e.Schedule, served[c.Kernel].Schedule)
		}
		text, _ := fs.ReadFile(srcs, f.Source)
		if !strings.Contains(string(text), "planted control: "+c.Mutation) {
			t.Errorf("%s in %s: the source does not plant it", c.Mutation, c.Kernel)
		}
	}
}
