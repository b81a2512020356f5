//go:build gpu

package hip

import (
	"strings"
	"sync"
	"testing"
	"time"

	emit "tfc/compiler/emit/hip"
	"tfc/contracts"
	_ "tfc/contracts/registered" // the families the contract knows
	"tfc/runtime/device"
	"tfc/runtime/device/gpu/gputest"
)

var (
	shared     *Backend
	sharedErr  error
	sharedOnce sync.Once
)

func card(t *testing.T) *Backend {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = New() })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

func TestGPUDevice(t *testing.T) {
	be := card(t)
	d, r, err := be.Versions()
	if err != nil {
		t.Fatal(err)
	}
	comp, err := findCompiler()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("device %s, target %s, HIP driver %d runtime %d, compiler %s", be.Describe(), be.Target(), d, r, comp.path)
}

// TestGPUWriteRead round-trips every dtype through a strided tensor (contracts.CheckWriteRead).
func TestGPUWriteRead(t *testing.T) {
	be := card(t)
	if err := contracts.CheckWriteRead(be); err != nil {
		t.Fatal(err)
	}
}

// TestGPUKernelContracts runs the kernel contract over kernels/gen/qwen2vl.hip on the card: every
// kernel through gates 1 to 4, then the planted controls, which must each go red.
func TestGPUKernelContracts(t *testing.T) {
	be := card(t)
	f, err := contracts.LoadFamily("qwen2_vl", "../../..")
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	target := contracts.Target{Name: "hip-" + be.Target(), Backend: be,
		Controls: contracts.PlantedControls(f, []emit.Mutation{emit.OffByOneBound, emit.DroppedScale, emit.WrongStride, emit.MissingBarrier}),
		Plant: func(c contracts.Control) (device.Backend, func(), error) {
			mut, err := emit.ParseMutation(c.Mutation)
			if err != nil {
				return nil, nil, err
			}
			srcs, err := contracts.MutantSources(f, c.Kernel, mut)
			if err != nil {
				return nil, nil, err
			}
			mb, err := New(Sources(srcs), CacheDir(cache))
			if err != nil {
				return nil, nil, err
			}
			return mb, func() { mb.Close() }, nil
		}}
	var log strings.Builder
	r := contracts.Run(target, f, time.Now().UnixNano()%1e9, &log)
	t.Log("\n" + log.String())
	if !r.OK() {
		t.Error(r.Summary())
	} else {
		t.Log(r.Summary())
	}
}

// TestGPUTime: events recorded around work on the stream give a device time.
func TestGPUTime(t *testing.T) {
	be := card(t)
	ms, err := be.Time(be.Sync)
	if err != nil || ms < 0 {
		t.Fatalf("%g ms, %v", ms, err)
	}
}

// TestGPUGraphReplayIsExact runs every kernel of kernels/gen/qwen2vl.hip as one run of launches,
// three times, with HIP graphs and without: the same bits (gputest.CheckReplay), one graph
// captured, and a profile naming each launch.
func TestGPUGraphReplayIsExact(t *testing.T) {
	t.Setenv("TFC_GPU_GRAPHS", "")
	plain, err := New(Graphs(false))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	graphs, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer graphs.Close()
	f, err := contracts.LoadFamily("qwen2_vl", "../../..")
	if err != nil {
		t.Fatal(err)
	}
	gputest.CheckReplay(t, plain, graphs, f)
	c := graphs.Launches()
	t.Logf("launches with graphs: %+v", c)
	if c.Graphs != 1 || c.Failed != 0 || c.Replayed <= c.Plain {
		t.Errorf("launch counts %+v: want the run captured once and replayed from its second time on (the profiled run is plain)", c)
	}
}
