package hip

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"tfc/kernels"
	"tfc/runtime/device/gpu"
)

// targets are the gfx targets the backend is checked to build for.
var targets = []string{"gfx1030", "gfx90a", "gfx1100", "gfx942"}

func TestBuildArgsPerTarget(t *testing.T) {
	clang := compiler{path: "/usr/bin/clang++-19", rocm: "/usr"}
	hipcc := compiler{path: "/opt/rocm/bin/hipcc", hipcc: true}
	for _, target := range targets {
		lib := "/libs/" + target
		got := strings.Join(buildArgs(clang, target, lib, "/tmp/b/qwen2vl.hip", "/tmp/b/kernels.hsaco"), " ")
		want := "-x hip --cuda-device-only --no-gpu-bundle-output --offload-arch=" + target +
			" -O3 /tmp/b/qwen2vl.hip -o /tmp/b/kernels.hsaco --rocm-path=/usr --rocm-device-lib-path=" + lib
		if got != want {
			t.Errorf("clang++ for %s:\n got %s\nwant %s", target, got, want)
		}
		got = strings.Join(buildArgs(hipcc, target, "", "/tmp/b/qwen2vl.hip", "/tmp/b/kernels.hsaco"), " ")
		want = "-x hip --cuda-device-only --no-gpu-bundle-output --offload-arch=" + target + " -O3 /tmp/b/qwen2vl.hip -o /tmp/b/kernels.hsaco"
		if got != want {
			t.Errorf("hipcc for %s:\n got %s\nwant %s", target, got, want)
		}
	}
}

func TestDeviceLibSearch(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for dir, names := range map[string][]string{a: {"oclc_isa_version_1030.bc"}, b: {"oclc_isa_version_1030.bc", "oclc_isa_version_942.bc"}} {
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	dirs := []string{filepath.Join(a, "absent"), a, b}
	for target, want := range map[string]string{"gfx1030": a, "gfx942": b, "gfx90a": ""} {
		if got := deviceLib(dirs, target); got != want {
			t.Errorf("%s: found %q, want %q", target, got, want)
		}
	}
	t.Setenv("TFC_DEVICE_LIBS", b+string(os.PathListSeparator)+a)
	if got := deviceLibDirs("/r"); got[0] != b || got[1] != a || got[2] != "/r/amdgcn/bitcode" {
		t.Errorf("search order %v", got)
	}
}

func TestBaseTarget(t *testing.T) {
	for arch, want := range map[string]string{"gfx90a:sramecc+:xnack-": "gfx90a", "gfx1100": "gfx1100", "gfx942:sramecc+:xnack-": "gfx942"} {
		if got := baseTarget(arch); got != want {
			t.Errorf("baseTarget(%s) = %s, want %s", arch, got, want)
		}
	}
}

// props lays out a fake hipDeviceProp_t: the device name at 0, arch at off, an int field with
// 'g' bytes before it so that a careless scan would misread it.
func props(name, arch string, off int) []byte {
	p := make([]byte, propsSize)
	copy(p, name)
	binary.LittleEndian.PutUint32(p[300:], 0x00786667) // "gfx\0"
	copy(p[off:], arch)
	return p
}

func TestArchFromProps(t *testing.T) {
	for _, c := range []struct {
		p     []byte
		r0600 bool
		want  string
	}{
		{props("AMD Radeon RX 6800 XT", "gfx1030", gcnArchNameOffset), false, "gfx1030"},
		{props("AMD Instinct MI210", "gfx90a:sramecc+:xnack-", gcnArchNameOffset), false, "gfx90a:sramecc+:xnack-"},
		{props("AMD Instinct MI300X", "gfx942:sramecc+:xnack-", 1160), true, "gfx942:sramecc+:xnack-"},
		{props("Radeon RX 7900 XTX", "gfx1100", 1160), false, "gfx1100"},
	} {
		got, err := archFromProps(c.p, c.r0600)
		if err != nil || got != c.want {
			t.Errorf("got %q, %v; want %q", got, err, c.want)
		}
	}
	if _, err := archFromProps(props("gfx1030", "", 0), false); err == nil || !strings.Contains(err.Error(), "hip.Target") {
		t.Errorf("a name alone read as an arch: %v", err)
	}
}

// TestGcnArchNameOffsetMatchesHeader: the HIP 5 offset of gcnArchName is the header's, where the
// header and a host clang++ are present.
func TestGcnArchNameOffsetMatchesHeader(t *testing.T) {
	runtimeHeader(t)
	var include string
	for _, r := range rocmRoots() {
		if _, err := os.Stat(filepath.Join(r, "include", "hip", "hip_runtime_api.h")); err == nil {
			include = filepath.Join(r, "include")
			break
		}
	}
	clang, err := exec.LookPath("clang++-19")
	if err != nil {
		t.Skip("clang++-19 is not installed; .ci/hip-deps.sh installs it")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "o.cpp")
	os.WriteFile(src, []byte("#include <hip/hip_runtime_api.h>\n#include <cstddef>\n#include <cstdio>\n"+
		"int main() { printf(\"%zu %d\", offsetof(hipDeviceProp_t, gcnArchName), HIP_VERSION_MAJOR); }\n"), 0o644)
	bin := filepath.Join(dir, "o")
	if out, err := exec.Command(clang, "-D__HIP_PLATFORM_AMD__", "-I"+include, src, "-o", bin).CombinedOutput(); err != nil {
		t.Skipf("cannot build a host program against the header: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(out))
	off, _ := strconv.Atoi(f[0])
	if f[1] != "5" {
		t.Skipf("HIP %s headers lay hipDeviceProp_t out as R0600; the offset applies to HIP 5", f[1])
	}
	if off != gcnArchNameOffset {
		t.Fatalf("gcnArchName at %d in hipDeviceProp_t, the backend reads %d", off, gcnArchNameOffset)
	}
}

func TestIsCodeObject(t *testing.T) {
	if err := isCodeObject([]byte("not elf")); err == nil {
		t.Error("accepted junk")
	}
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Skip(err)
	}
	if err := isCodeObject(self); err == nil || !strings.Contains(err.Error(), "not AMDGPU") {
		t.Errorf("accepted a host ELF: %v", err)
	}
}

// TestBuildsQwen2VL builds kernels/gen/qwen2vl.hip for each target whose device libraries are here
// with the compiler the backend finds, and checks that the code object is an AMDGPU ELF that
// defines every launch of the source's schedule, and that a second build is the cached one.
func TestBuildsQwen2VL(t *testing.T) {
	comp, err := findCompiler()
	if err != nil {
		t.Skipf("%v", err)
	}
	table, err := gpu.KernelTable(kernels.Sources)
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range targets {
		t.Run(target, func(t *testing.T) {
			t.Parallel()
			if !comp.hipcc && deviceLib(comp.libs, target) == "" {
				t.Skipf("no device library for %s in %s; .ci/hip-deps.sh fetches Debian 13's", target, strings.Join(comp.libs, ", "))
			}
			cache := t.TempDir()
			b := &builder{comp: comp, target: target, cache: gpu.Cache{Dir: cache, Ext: ".hsaco"}}
			obj, err := b.build(kernels.Sources, "qwen2vl.hip")
			if err != nil {
				t.Fatal(err)
			}
			f, err := elf.NewFile(bytes.NewReader(obj))
			if err != nil {
				t.Fatal(err)
			}
			syms, err := f.Symbols()
			if err != nil {
				t.Fatal(err)
			}
			defined := map[string]bool{}
			for _, s := range syms {
				if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Section != elf.SHN_UNDEF {
					defined[s.Name] = true
				}
			}
			n := 0
			for _, e := range table {
				if e.Family != "qwen2vl.hip" {
					continue
				}
				for _, l := range e.Schedule.Launches {
					n++
					if !defined[l.Symbol] {
						t.Errorf("%s is not defined in the %s code object", l.Symbol, target)
					}
				}
			}
			if n < 20 {
				t.Fatalf("only %d launches in the schedule", n)
			}
			files, _ := filepath.Glob(filepath.Join(cache, "*.hsaco"))
			if len(files) != 1 {
				t.Fatalf("cache holds %v", files)
			}
			os.WriteFile(files[0], []byte("cached"), 0o644)
			again, err := b.build(kernels.Sources, "qwen2vl.hip")
			if err != nil || string(again) != "cached" {
				t.Fatalf("second build did not come from the cache: %q, %v", again[:min(len(again), 8)], err)
			}
			t.Logf("%s: %d kernels, %d bytes, by %s", target, n, len(obj), comp.path)
		})
	}
}
