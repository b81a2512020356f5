package hip

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"tfc/runtime/device/gpu"
)

// compiler is the tool that builds code objects: hipcc, which knows its ROCm install, or a
// clang++ with HIP support, told where the HIP headers and the device libraries are.
type compiler struct {
	path  string
	hipcc bool
	rocm  string   // --rocm-path for clang++: the folder holding include/hip
	libs  []string // folders searched for a target's device libraries, for clang++
}

// buildArgs is the command line that builds the family source src into the code object out for
// target; lib is the device library folder, which clang++ needs and hipcc finds itself.
func buildArgs(c compiler, target, lib, src, out string) []string {
	args := []string{"-x", "hip", "--cuda-device-only", "--no-gpu-bundle-output", "--offload-arch=" + target, "-O3", src, "-o", out}
	if c.hipcc {
		return args
	}
	args = append(args, "--rocm-path="+c.rocm)
	if lib != "" {
		args = append(args, "--rocm-device-lib-path="+lib)
	}
	return args
}

// rocmRoots are the install roots tried in order: $ROCM_PATH, ROCm's default folder, and /usr
// where Debian's libamdhip64-dev puts the headers.
func rocmRoots() []string {
	var roots []string
	if r := os.Getenv("ROCM_PATH"); r != "" {
		roots = append(roots, r)
	}
	return append(roots, "/opt/rocm", "/usr")
}

// debianDeviceLibs are the bitcode folders of Debian's rocm-device-libs (12) and
// rocm-device-libs-17 (13, installed or unpacked by .ci/hip-deps.sh), as compiler/audit searches.
var debianDeviceLibs = []string{
	"/usr/lib/x86_64-linux-gnu/amdgcn/bitcode",
	"/usr/lib/llvm-17/lib/clang/17/amdgcn/bitcode",
	"/opt/rocm-device-libs-17/usr/lib/llvm-17/lib/clang/17/amdgcn/bitcode",
}

// findCompiler looks for hipcc ($HIPCC, PATH, <root>/bin), then ROCm's clang++
// (<root>/llvm/bin), then clang++-19 and clang++ on PATH with a root that has the HIP headers.
func findCompiler() (compiler, error) {
	roots := rocmRoots()
	var hipccs []string
	if p := os.Getenv("HIPCC"); p != "" {
		hipccs = append(hipccs, p)
	}
	hipccs = append(hipccs, "hipcc")
	for _, r := range roots {
		hipccs = append(hipccs, filepath.Join(r, "bin", "hipcc"))
	}
	for _, h := range hipccs {
		if p, err := exec.LookPath(h); err == nil {
			return compiler{path: p, hipcc: true}, nil
		}
	}
	var rocm string
	for _, r := range roots {
		if _, err := os.Stat(filepath.Join(r, "include", "hip", "hip_runtime.h")); err == nil {
			rocm = r
			break
		}
	}
	if rocm == "" {
		return compiler{}, fmt.Errorf("hip: no HIP headers in $ROCM_PATH, /opt/rocm or /usr (include/hip/hip_runtime.h); install ROCm, or libamdhip64-dev and rocm-device-libs, or set ROCM_PATH")
	}
	var clangs []string
	for _, r := range roots {
		clangs = append(clangs, filepath.Join(r, "llvm", "bin", "clang++"))
	}
	clangs = append(clangs, "clang++-19", "clang++")
	for _, c := range clangs {
		if p, err := exec.LookPath(c); err == nil {
			return compiler{path: p, rocm: rocm, libs: deviceLibDirs(rocm)}, nil
		}
	}
	return compiler{}, fmt.Errorf("hip: no HIP compiler: hipcc, ROCm's llvm/bin/clang++, clang++-19 and clang++ are not found; install ROCm or clang-19 and lld-19 (.ci/hip-deps.sh does), or set HIPCC")
}

// deviceLibDirs are the folders searched for device libraries: $TFC_DEVICE_LIBS (a path list),
// the ROCm root's amdgcn/bitcode and its clang's, then Debian's.
func deviceLibDirs(rocm string) []string {
	var dirs []string
	if v := os.Getenv("TFC_DEVICE_LIBS"); v != "" {
		dirs = append(dirs, filepath.SplitList(v)...)
	}
	dirs = append(dirs, filepath.Join(rocm, "amdgcn", "bitcode"))
	if m, err := filepath.Glob(filepath.Join(rocm, "lib", "llvm", "lib", "clang", "*", "lib", "amdgcn", "bitcode")); err == nil {
		dirs = append(dirs, m...)
	}
	return append(dirs, debianDeviceLibs...)
}

// deviceLib is the first of dirs that has target's ISA library (oclc_isa_version_<n>.bc).
func deviceLib(dirs []string, target string) string {
	name := "oclc_isa_version_" + strings.TrimPrefix(target, "gfx") + ".bc"
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, name)); err == nil {
			return d
		}
	}
	return ""
}

// baseTarget is the processor of a gcnArchName: "gfx90a:sramecc+:xnack-" builds as gfx90a,
// whose code object loads in either xnack and sramecc mode.
func baseTarget(arch string) string {
	t, _, _ := strings.Cut(arch, ":")
	return t
}

// builder builds a family's code object for one target and caches it by the hash of the
// compiler's version, the device library folder, the target and the sources.
type builder struct {
	comp   compiler
	target string
	cache  gpu.Cache
}

// build returns the code object of family, from the cache when its key is there.
func (b *builder) build(srcs fs.FS, family string) ([]byte, error) {
	lib := ""
	if !b.comp.hipcc {
		if lib = deviceLib(b.comp.libs, b.target); lib == "" {
			return nil, fmt.Errorf("hip: no device library folder has oclc_isa_version_%s.bc for %s (searched %s); install rocm-device-libs for this target or set TFC_DEVICE_LIBS",
				strings.TrimPrefix(b.target, "gfx"), b.target, strings.Join(b.comp.libs, ", "))
		}
	}
	version, err := exec.Command(b.comp.path, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("hip: %s --version: %v", b.comp.path, err)
	}
	key, err := gpu.CacheKey(fmt.Sprintf("%s\nrocm %s\ndevice-libs %s", version, b.comp.rocm, lib), b.target, srcs, family)
	if err != nil {
		return nil, err
	}
	if data, ok := b.cache.Load(key); ok {
		return data, nil
	}
	dir, err := os.MkdirTemp("", "tfc-hip-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	src, err := gpu.Stage(srcs, family, dir)
	if err != nil {
		return nil, err
	}
	out := filepath.Join(dir, "kernels.hsaco")
	cmd := exec.Command(b.comp.path, buildArgs(b.comp, b.target, lib, src, out)...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("hip: %s could not build %s for %s: %v\n%s", filepath.Base(b.comp.path), family, b.target, err, msg)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		return nil, err
	}
	if err := isCodeObject(data); err != nil {
		return nil, fmt.Errorf("hip: %s built for %s: %w", family, b.target, err)
	}
	b.cache.Store(key, data)
	return data, nil
}

// isCodeObject checks that data is an AMDGPU ELF (a code object hipModuleLoadData takes).
func isCodeObject(data []byte) error {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("not an ELF code object: %v", err)
	}
	defer f.Close()
	if f.Machine != elf.EM_AMDGPU {
		return fmt.Errorf("an ELF for %v, not AMDGPU", f.Machine)
	}
	return nil
}
