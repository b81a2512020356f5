//go:build gpu

package hip

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	emit "tfc/compiler/emit/hip"
	"tfc/contracts"
	"tfc/runtime/device"
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

// TestGPUWriteRead round-trips every dtype through a strided tensor and checks the gaps stay zero.
func TestGPUWriteRead(t *testing.T) {
	be := card(t)
	for _, dt := range []device.DType{device.F32, device.BF16, device.F16, device.I32} {
		buf, err := be.Alloc(dt, 7*9)
		if err != nil {
			t.Fatal(err)
		}
		tt := device.Tensor{Buf: buf, Rows: 7, Cols: 9}.ColSlice(2, 7)
		n := tt.Rows * tt.Cols
		if dt == device.I32 {
			src := make([]int32, n)
			for i := range src {
				src[i] = int32(i*7919 - 1000)
			}
			got := make([]int32, n)
			if err := be.Write(tt, src, dt); err != nil {
				t.Fatal(err)
			}
			if err := be.Read(tt, got); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(src, got) {
				t.Errorf("I32 round trip: %v, want %v", got, src)
			}
		} else {
			src := make([]float32, n)
			for i := range src {
				src[i] = float32(i) * 0.25 // exact in every format
			}
			got := make([]float32, n)
			if err := be.Write(tt, src, device.F32); err != nil {
				t.Fatal(err)
			}
			if err := be.Read(tt, got); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(src, got) {
				t.Errorf("%v round trip: %v, want %v", dt, got, src)
			}
			all := make([]float32, 7*9)
			if err := be.Read(device.Tensor{Buf: buf, Rows: 7, Cols: 9}, all); err != nil {
				t.Fatal(err)
			}
			if all[0] != 0 || all[8] != 0 || all[9+1] != 0 {
				t.Errorf("%v: a strided write touched the gap: %v", dt, all)
			}
		}
		be.Free(buf)
	}
}

// TestGPUKernelContracts runs the kernel contract over kernels/qwen2vl.hip on the card: every
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
