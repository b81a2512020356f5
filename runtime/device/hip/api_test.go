package hip

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// runtimeHeader returns the text of hip_runtime_api.h, or skips saying where it was looked for.
func runtimeHeader(t *testing.T) string {
	t.Helper()
	var tried []string
	for _, r := range rocmRoots() {
		p := filepath.Join(r, "include", "hip", "hip_runtime_api.h")
		if data, err := os.ReadFile(p); err == nil {
			return string(data)
		}
		tried = append(tried, p)
	}
	t.Skipf("no HIP headers (%s); install libamdhip64-dev (.ci/hip-deps.sh) to check against them", strings.Join(tried, ", "))
	return ""
}

// declaration finds name's declaration in the header: its return type and parameter list.
func declaration(header, name string) (ret string, params []string, ok bool) {
	re := regexp.MustCompile(`(hipError_t|const char\s*\*)\s+` + name + `\s*\(`)
	loc := re.FindStringSubmatchIndex(header)
	if loc == nil {
		return "", nil, false
	}
	ret = strings.Join(strings.Fields(header[loc[2]:loc[3]]), "")
	depth, start := 1, loc[1]
	var list string
	for i := start; i < len(header); i++ {
		switch header[i] {
		case '(':
			depth++
		case ')':
			depth--
		}
		if depth == 0 {
			list = header[start:i]
			break
		}
	}
	list = strings.TrimSpace(list)
	if list == "" || list == "void" {
		return ret, nil, true
	}
	return ret, strings.Split(list, ","), true
}

// TestSymbolsAreTheHeadersAPI: every bound export is declared in hip_runtime_api.h with the
// return type and parameter count of the Go function it is bound to.
func TestSymbolsAreTheHeadersAPI(t *testing.T) {
	header := runtimeHeader(t)
	a := &api{}
	check := func(name string, fn any) {
		ret, params, ok := declaration(header, name)
		if !ok {
			t.Errorf("%s is not declared in hip_runtime_api.h", name)
			return
		}
		ft := reflect.TypeOf(fn).Elem()
		if ft.NumIn() != len(params) {
			t.Errorf("%s: the header declares %d parameters (%s), the binding takes %d", name, len(params), strings.Join(params, ","), ft.NumIn())
		}
		wantRet := "hipError_t"
		if ft.NumOut() == 1 && ft.Out(0).Kind() == reflect.Pointer {
			wantRet = "constchar*"
		}
		if ret != wantRet {
			t.Errorf("%s returns %s in the header, the binding expects %s", name, ret, wantRet)
		}
	}
	for _, s := range a.symbols() {
		check(s.name, s.fn)
	}
	found := 0
	for _, name := range propsSymbols {
		if _, _, ok := declaration(header, name); ok {
			check(name, &a.getDeviceProperties)
			found++
		}
	}
	if found == 0 {
		t.Errorf("the header declares none of %v", propsSymbols)
	}
}

// TestSymbolTableIsComplete: every function variable is bound once, and the entry points
// are among them.
func TestSymbolTableIsComplete(t *testing.T) {
	a := &api{}
	seen := map[string]bool{}
	vars := map[uintptr]bool{}
	for _, s := range a.symbols() {
		if seen[s.name] || !strings.HasPrefix(s.name, "hip") {
			t.Errorf("symbol %q repeated or not a HIP export", s.name)
		}
		seen[s.name] = true
		vars[reflect.ValueOf(s.fn).Pointer()] = true
	}
	if len(vars) != len(seen) {
		t.Errorf("%d symbols bind %d function variables", len(seen), len(vars))
	}
	// every func field but getDeviceProperties (bound by propsSymbols) is in the table
	v := reflect.ValueOf(a).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if f.Kind() != reflect.Func || v.Type().Field(i).Name == "getDeviceProperties" {
			continue
		}
		if !vars[f.UnsafeAddr()] {
			t.Errorf("api.%s is bound to no symbol", v.Type().Field(i).Name)
		}
	}
	for _, want := range []string{"hipInit", "hipGetDeviceCount", "hipSetDevice", "hipMalloc", "hipFree", "hipMemsetAsync",
		"hipMemcpyHtoDAsync", "hipMemcpyDtoHAsync", "hipModuleLoadData", "hipModuleGetFunction", "hipModuleLaunchKernel",
		"hipStreamCreateWithFlags", "hipStreamSynchronize", "hipEventCreate", "hipEventRecord", "hipEventElapsedTime",
		"hipStreamBeginCapture", "hipStreamEndCapture", "hipGraphInstantiate", "hipGraphLaunch", "hipGraphExecDestroy",
		"hipGraphDestroy", "hipGetErrorName", "hipGetErrorString"} {
		if !seen[want] {
			t.Errorf("%s is not bound", want)
		}
	}
}

// TestLibraryBinds: where a libamdhip64 is installed, every symbol resolves in it.
func TestLibraryBinds(t *testing.T) {
	a, err := open(libraryNames)
	if errors.Is(err, errNoRuntime) {
		t.Skipf("no libamdhip64 here (%v); the symbols are checked against the header only", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bound %d symbols, device properties as %s", len(a.symbols())+1, map[bool]string{true: "R0600", false: "HIP 5"}[a.propsR0600])
}

// TestNoRuntimeSaysSo: without libamdhip64 the error names the library and the fix.
func TestNoRuntimeSaysSo(t *testing.T) {
	_, err := open([]string{"libamdhip64-absent.so"})
	want := "hip: no AMD GPU runtime: libamdhip64.so not found; install ROCm or use --backend cpu"
	if err == nil || !strings.HasPrefix(err.Error(), want) || !errors.Is(err, errNoRuntime) {
		t.Fatalf("got %v, want %q", err, want)
	}
}

// TestNewWithoutGPU: on a machine without an AMD GPU, New fails naming the runtime or the device.
func TestNewWithoutGPU(t *testing.T) {
	be, err := New(CacheDir(""))
	if err == nil {
		defer be.Close()
		t.Skipf("this machine has an AMD GPU: %s", be.Describe())
	}
	msg := err.Error()
	var he *Error
	if errors.As(err, &he) && (he.Call == "hipInit" || he.Call == "hipGetDeviceCount") && strings.HasPrefix(msg, "hip: ") {
		t.Logf("New: %v (a code other than hipErrorNoDevice or hipErrorInvalidDevice from this runtime)", err)
		return
	}
	if !strings.HasPrefix(msg, "hip: ") || !(strings.Contains(msg, "libamdhip64.so not found") || strings.Contains(msg, "no AMD GPU found")) || !strings.Contains(msg, "--backend cpu") {
		t.Fatalf("New: %v", err)
	}
	t.Logf("New: %v", err)
}

// TestErrorNamesMatchHeader: the table holds every hipError_t of the header under one of the
// header's names for its value, and nothing the header lacks.
func TestErrorNamesMatchHeader(t *testing.T) {
	header := runtimeHeader(t)
	start := strings.Index(header, "typedef enum __HIP_NODISCARD hipError_t")
	if start < 0 {
		start = strings.Index(header, "typedef enum hipError_t")
	}
	end := strings.Index(header[max(start, 0):], "} hipError_t;")
	if start < 0 || end < 0 {
		t.Fatal("hip_runtime_api.h has no hipError_t enum")
	}
	body := regexp.MustCompile(`//[^\n]*`).ReplaceAllString(header[start:start+end], "")
	names := map[int32][]string{}
	for _, m := range regexp.MustCompile(`(hip\w+)\s*=\s*(\d+)`).FindAllStringSubmatch(body, -1) {
		v, _ := strconv.Atoi(m[2])
		names[int32(v)] = append(names[int32(v)], m[1])
	}
	if len(names) < 50 {
		t.Fatalf("parsed only %d codes from the header", len(names))
	}
	for code, ns := range names {
		got, ok := errorNames[code]
		if !ok {
			t.Errorf("code %d (%s) is missing from the table", code, strings.Join(ns, ", "))
		} else if got != ns[0] {
			t.Errorf("code %d is %s in the table, the header's first name is %s", code, got, ns[0])
		}
	}
	for code, n := range errorNames {
		if _, ok := names[code]; !ok {
			t.Errorf("code %d (%s) is not in the header", code, n)
		}
	}
}

func TestErrorNames(t *testing.T) {
	for code, want := range map[int32]string{0: "hipSuccess", 1: "hipErrorInvalidValue", 2: "hipErrorOutOfMemory", 100: "hipErrorNoDevice",
		101: "hipErrorInvalidDevice", 209: "hipErrorNoBinaryForGpu", 218: "hipErrorInvalidKernelFile", 700: "hipErrorIllegalAddress",
		719: "hipErrorLaunchFailure", 999: "hipErrorUnknown"} {
		if got := ErrorName(code); got != want {
			t.Errorf("ErrorName(%d) = %s, want %s", code, got, want)
		}
	}
	if got := ErrorName(4242); got != "hipErrorUnknownCode4242" {
		t.Errorf("ErrorName(4242) = %s", got)
	}
	if check("hipInit", 0) != nil {
		t.Error("hipSuccess is an error")
	}
	err := check("hipMalloc", 2)
	var he *Error
	if !errors.As(err, &he) || he.Code != 2 || err.Error() != "hip: hipMalloc: hipErrorOutOfMemory (2)" {
		t.Fatalf("got %v", err)
	}
	nd := noDevice(check("hipInit", 101))
	if !errors.As(nd, &he) || !strings.Contains(nd.Error(), "no AMD GPU found") || !strings.Contains(nd.Error(), "--backend cpu") {
		t.Fatalf("noDevice: %v", nd)
	}
	if oom := noDevice(check("hipInit", 2)); strings.Contains(oom.Error(), "no AMD GPU") {
		t.Fatalf("noDevice turned %v into a missing GPU", oom)
	}
}

// TestErrorNamesMatchRuntime: where a libamdhip64 is installed, its hipGetErrorName gives the
// table's name for every code (the call needs no GPU).
func TestErrorNamesMatchRuntime(t *testing.T) {
	a, err := open(libraryNames)
	if errors.Is(err, errNoRuntime) {
		t.Skipf("no libamdhip64 here (%v); the names are checked against the header only", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	var v int32
	if a.runtimeGetVersion(&v) == 0 {
		t.Logf("HIP runtime %d", v)
	}
	for code, want := range errorNames {
		if got := goString(a.getErrorName(code)); got != want {
			t.Errorf("code %d: table %s, runtime %s", code, want, got)
		}
	}
}
