//go:build gpu

package cuda

import (
	"math"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"tfc/compiler/emit/hip"
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

func device0(t *testing.T) *Backend {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = New() })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

func family(t *testing.T) contracts.Family {
	t.Helper()
	f, err := contracts.LoadFamily("qwen2_vl", "../../..")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestGPUDevice(t *testing.T) {
	be := device0(t)
	v, err := be.DriverVersion()
	if err != nil {
		t.Fatal(err)
	}
	nvcc, err := findNVCC()
	if err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command(nvcc, "--version").Output()
	t.Logf("device %s, driver CUDA %d.%d, nvcc %s:\n%s", be.Describe(), v/1000, v%1000/10, nvcc, out)
}

// TestGPUErrorNamesMatchDriver checks the error table against the driver's cuGetErrorName.
func TestGPUErrorNamesMatchDriver(t *testing.T) {
	be := device0(t)
	for code, want := range errorNames {
		got, err := be.DriverErrorName(code)
		if err != nil {
			t.Errorf("code %d (%s): the driver does not know it: %v", code, want, err)
			continue
		}
		if got != want {
			t.Errorf("code %d: table %s, driver %s", code, want, got)
		}
	}
}

// TestGPUWriteRead round-trips every dtype through strided tensors; BF16 bytes of a BF16 buffer
// are stored as given.
func TestGPUWriteRead(t *testing.T) {
	be := device0(t)
	if err := contracts.CheckWriteRead(be); err != nil {
		t.Fatal(err)
	}
	buf, _ := be.Alloc(device.BF16, 2)
	defer be.Free(buf)
	tt := device.Tensor{Buf: buf, Rows: 1, Cols: 2}
	if err := be.Write(tt, []byte{0x80, 0x3f, 0x01, 0xc0}, device.BF16); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 2)
	if err := be.Read(tt, got); err != nil {
		t.Fatal(err)
	}
	if got[0] != 1 || got[1] != math.Float32frombits(0xc0010000) {
		t.Errorf("BF16 bytes read back as %v", got)
	}
}

// TestGPUKernelContracts runs the kernel contract over kernels/gen/qwen2vl.hip, as tfc contract
// --backend cuda does: every kernel through gates 1 to 4 at its specialised shapes, then planted
// controls (mutants rendered by compiler/emit/hip and built by nvcc), which must each go red.
func TestGPUKernelContracts(t *testing.T) {
	be := device0(t)
	f := family(t)
	cache := t.TempDir()
	target := contracts.Target{Name: "cuda-" + be.Arch(), Backend: be,
		Controls: contracts.PlantedControls(f, []hip.Mutation{hip.OffByOneBound, hip.DroppedScale, hip.WrongStride, hip.MissingBarrier}),
		Plant: func(c contracts.Control) (device.Backend, func(), error) {
			mut, err := hip.ParseMutation(c.Mutation)
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

// TestGPUGraphReplayIsExact runs every kernel of kernels/gen/qwen2vl.hip as one run of launches,
// three times, with CUDA graphs and without: the same bits (gputest.CheckReplay), one graph
// captured on the second run and replayed on the second and third, and a profile naming each
// launch.
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
	gputest.CheckReplay(t, plain, graphs, family(t))
	c := graphs.Launches()
	t.Logf("launches with graphs: %+v", c)
	if c.Graphs != 1 || c.Failed != 0 || c.Replayed <= c.Plain {
		t.Errorf("launch counts %+v: want the run captured once and replayed from its second time on (the profiled run is plain)", c)
	}
	if pc := plain.Launches(); pc.Replayed != 0 || pc.Graphs != 0 {
		t.Errorf("Graphs(false) replayed: %+v", pc)
	}
}
