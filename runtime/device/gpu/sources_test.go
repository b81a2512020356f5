package gpu

import (
	"errors"
	"io/fs"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"tfc/compiler/emit/hip"
	"tfc/kernels"
	"tfc/runtime/device"
)

// kernelDecl matches an extern "C" kernel and its parameter list in generated HIP.
var kernelDecl = regexp.MustCompile(`extern "C" __global__ (?:TFC_CLUSTER_Y\(\d+\) )?(?:__launch_bounds__\((\d+)\) )?void (\w+)\(([^)]*)\)`)

// TestKernelTable: every kernel of the families is in the kernel table with the schedule the
// compiler makes for it, and its source declares each launch symbol with the schedule's
// parameter names and block size: the runtime reads the schedule, never the text.
func TestKernelTable(t *testing.T) {
	table, err := KernelTable(kernels.Sources)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, k := range allKernels(t) {
		want, err := hip.ScheduleOf(k)
		if err != nil {
			t.Fatal(err)
		}
		e, ok := table[k.Name]
		if !ok {
			t.Errorf("%s: not in the kernel table", k.Name)
			continue
		}
		if !reflect.DeepEqual(e.Schedule, want) {
			t.Errorf("%s: scheduled %+v, the compiler makes %+v", k.Name, e.Schedule, want)
		}
		text, err := fs.ReadFile(kernels.Sources, e.Family)
		if err != nil {
			t.Fatal(err)
		}
		declared := map[string][]string{}
		threads := map[string]string{}
		for _, m := range kernelDecl.FindAllStringSubmatch(string(text), -1) {
			threads[m[2]] = m[1]
			for _, p := range strings.Split(m[3], ",") {
				if w := strings.Fields(p); len(w) > 0 {
					declared[m[2]] = append(declared[m[2]], strings.TrimLeft(w[len(w)-1], "*"))
				}
			}
		}
		var names []string
		for _, p := range want.Params {
			names = append(names, p.Name)
		}
		for _, l := range want.Launches {
			n++
			if !slices.Equal(declared[l.Symbol], names) || threads[l.Symbol] != strconv.Itoa(l.Threads) {
				t.Errorf("%s: %s declares (%s) with %s threads, the schedule passes (%s) to %d",
					l.Symbol, e.Family, strings.Join(declared[l.Symbol], ", "), threads[l.Symbol], strings.Join(names, ", "), l.Threads)
			}
		}
	}
	if n < 40 {
		t.Fatalf("only %d launches checked", n)
	}
}

// TestCacheKey: the key changes with a header, the family's source, the target and nvcc, and
// not with another family's source.
func TestCacheKey(t *testing.T) {
	fsys := func(h, a, b string) fstest.MapFS {
		return fstest.MapFS{"tfc_hip.h": {Data: []byte(h)}, "a.hip": {Data: []byte(a)}, "b.hip": {Data: []byte(b)}}
	}
	key := func(version, arch string, f fstest.MapFS) string {
		k, err := CacheKey(version, arch, f, "a.hip")
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	base := key("13.0", "sm_90", fsys("h", "a", "b"))
	if key("13.0", "sm_90", fsys("h", "a", "other")) != base {
		t.Error("another family's source changed the key")
	}
	for name, k := range map[string]string{
		"header": key("13.0", "sm_90", fsys("h2", "a", "b")),
		"source": key("13.0", "sm_90", fsys("h", "a2", "b")),
		"arch":   key("13.0", "sm_100", fsys("h", "a", "b")),
		"nvcc":   key("13.1", "sm_90", fsys("h", "a", "b")),
	} {
		if k == base {
			t.Errorf("a changed %s kept the key", name)
		}
	}
}

// TestWithPrecision: BF16 precision starts the family's file with its macro, which changes the
// cache key; the headers stay as they are.
func TestWithPrecision(t *testing.T) {
	src := fstest.MapFS{"tfc_hip.h": {Data: []byte("h")}, "a.hip": {Data: []byte("a")}}
	bf, err := WithPrecision(src, "a.hip", device.BF16Precision, false)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := fs.ReadFile(bf, "a.hip"); string(got) != "#define TFC_BF16 1\na" {
		t.Errorf("a.hip in BF16 precision is %q", got)
	}
	if got, _ := fs.ReadFile(bf, "tfc_hip.h"); string(got) != "h" {
		t.Errorf("tfc_hip.h in BF16 precision is %q", got)
	}
	k0, _ := CacheKey("v", "sm_90", src, "a.hip")
	k1, _ := CacheKey("v", "sm_90", bf, "a.hip")
	if k0 == k1 {
		t.Error("BF16 precision kept the cache key")
	}
	mma, err := WithPrecision(src, "a.hip", device.BF16Precision, true)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := fs.ReadFile(mma, "a.hip"); string(got) != "#define TFC_BF16 1\n#define TFC_PAGED_MMA 2\na" {
		t.Errorf("a.hip in BF16 precision with the tensor-core cached attention's grid is %q", got)
	}
	if k2, _ := CacheKey("v", "sm_90", mma, "a.hip"); k2 == k1 {
		t.Error("the tensor-core cached attention's grid kept the cache key")
	}
	host := []byte{0x00, 0x10, 0x81, 0x3f} // 1.0078125 + 2^-12: rounds down to 1.0078125
	RoundF32ToBF16(host)
	if host[0] != 0 || host[1] != 0 || host[2] != 0x81 || host[3] != 0x3f {
		t.Errorf("rounded to % x", host)
	}
}

// TestThread: calls run in order on one locked thread; after stop they are refused, not lost.
func TestThread(t *testing.T) {
	th := NewThread()
	var got []int
	for i := 0; i < 3; i++ {
		if err := th.Do(func() error { got = append(got, i); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("ran %v", got)
	}
	want := errors.New("x")
	if err := th.Do(func() error { return want }); err != want {
		t.Fatalf("do returned %v", err)
	}
	th.Stop()
	th.Stop()
	if err := th.Do(func() error { return nil }); err != ErrStopped {
		t.Fatalf("after stop: %v", err)
	}
}
