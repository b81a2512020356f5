//go:build gpu

package cuda

import (
	"io/fs"
	"math"
	"math/rand"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"tfc/compiler/emit/hip"
	"tfc/contracts"
	"tfc/kernels"
	"tfc/runtime/device"
)

var (
	shared     *Backend
	sharedErr  error
	sharedOnce sync.Once
)

func gpu(t *testing.T) *Backend {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = New() })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

func TestGPUDevice(t *testing.T) {
	be := gpu(t)
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
	be := gpu(t)
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
	be := gpu(t)
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

// TestGPUKernelContracts runs every kernel of kernels/qwen2vl.hip at the tiny checkpoint's shapes
// on random operands and checks each output against the float64 references of the ops it fuses
// (every element written; within four times the summed bounds), then that five more runs give
// the same bits, and times a launch.
func TestGPUKernelContracts(t *testing.T) {
	be := gpu(t)
	ks := familyKernels(t)
	pass := 0
	for i, k := range ks {
		ok := t.Run(k.Name, func(t *testing.T) {
			b := &contracts.Builder{Backend: be, Rng: rand.New(rand.NewSource(int64(i + 1)))}
			defer b.Free()
			ops, err := chain(b, k, rowsFor(k))
			if err != nil {
				t.Fatal(err)
			}
			first, worst, err := checkChain(be, k, ops)
			if err != nil {
				t.Fatal(err)
			}
			for run := 0; run < 5; run++ {
				if err := be.Launch(&device.Kernel{Name: k.Name}, ops...); err != nil {
					t.Fatal(err)
				}
				again, err := readAll(be, first)
				if err != nil {
					t.Fatal(err)
				}
				for name, v := range again {
					if !slices.Equal(bitsOf(v), bitsOf(first[name].got)) {
						t.Fatalf("run %d: %s differs from the first run's bits", run+2, name)
					}
				}
			}
			const reps = 50
			if err := be.Sync(); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			for r := 0; r < reps; r++ {
				if err := be.Launch(&device.Kernel{Name: k.Name}, ops...); err != nil {
					t.Fatal(err)
				}
			}
			if err := be.Sync(); err != nil {
				t.Fatal(err)
			}
			t.Logf("PASS %s M=%d worst %.3g, 5 reruns bit-identical, %.1f µs a launch", k.Name, rowsFor(k), worst, float64(time.Since(start).Microseconds())/reps)
		})
		if ok {
			pass++
		}
	}
	t.Logf("SUMMARY %s %d kernels: %d pass (reference, all written, 5 reruns identical), %d fail", be.Arch(), len(ks), pass, len(ks)-pass)
}

// TestGPUPlantedControls renders mutants of real kernels, builds them with nvcc in parallel, and
// checks that each one's contract goes red.
func TestGPUPlantedControls(t *testing.T) {
	gpu(t)
	ks := familyKernels(t)
	byName := map[string]hip.Kernel{}
	for _, k := range ks {
		byName[k.Name] = k
	}
	controls := []struct {
		kernel string
		mut    hip.Mutation
	}{
		{"qwen2vl_decode_linear_silu_mul", hip.WrongStride},
		{"qwen2vl_vision_linear_bias_rope_rope", hip.OffByOneBound},
		{"qwen2vl_decode_rmsnorm", hip.DroppedScale},
		{"qwen2vl_vision_attention", hip.DroppedScale},
		{"qwen2vl_decode_attention", hip.OffByOneBound},
		{"qwen2vl_decode_embed", hip.WrongStride},
	}
	cache := t.TempDir()
	srcs := make([]fs.FS, len(controls))
	errs := make([]error, len(controls))
	var wg sync.WaitGroup
	for i, c := range controls {
		if _, ok := byName[c.kernel]; !ok {
			t.Fatalf("no kernel %s", c.kernel)
		}
		text, err := hip.Render("qwen2_vl", ks, hip.Mutate(c.kernel, c.mut))
		if err != nil {
			t.Fatal(err)
		}
		m := fstest.MapFS{"qwen2vl.hip": {Data: text}}
		hs, _ := fs.Glob(kernels.Sources, "*.h")
		for _, h := range hs {
			data, _ := fs.ReadFile(kernels.Sources, h)
			m[h] = &fstest.MapFile{Data: data}
		}
		srcs[i] = m
		wg.Add(1)
		go func() {
			defer wg.Done()
			nvcc, err := findNVCC()
			if err == nil {
				_, err = (&nvccBuild{nvcc: nvcc, arch: shared.Arch(), cache: cache}).build(m, "qwen2vl.hip")
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	red := 0
	for i, c := range controls {
		if errs[i] != nil {
			t.Errorf("%s/%s: %v", c.kernel, c.mut, errs[i])
			continue
		}
		be, err := New(Sources(srcs[i]), CacheDir(cache))
		if err != nil {
			t.Fatal(err)
		}
		b := &contracts.Builder{Backend: be, Rng: rand.New(rand.NewSource(int64(i + 100)))}
		k := byName[c.kernel]
		ops, err := chain(b, k, rowsFor(k))
		if err == nil {
			_, _, err = checkChain(be, k, ops)
		}
		if err == nil {
			t.Errorf("planted %s in %s: the contract passed it", c.mut, c.kernel)
		} else {
			red++
			t.Logf("RED %s in %s: %v", c.mut, c.kernel, err)
		}
		b.Free()
		be.Close()
	}
	t.Logf("SUMMARY %d controls: %d red as planted", len(controls), red)
}

func bitsOf(v []float64) []uint64 {
	out := make([]uint64, len(v))
	for i, x := range v {
		out[i] = math.Float64bits(x)
	}
	return out
}
