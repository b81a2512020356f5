package cuda

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"tfc/runtime/device/gpu"
)

// nvccBuild builds a family's cubin with nvcc and caches it by the hash of everything that
// goes into it.
type nvccBuild struct {
	nvcc  string // path of nvcc
	arch  string // e.g. sm_90
	cache gpu.Cache
}

// nvccArgs is the command line that builds a family's source into a cubin; extra comes from
// $TFC_NVCC_FLAGS, for kernel experiments (e.g. --maxrregcount=96, or -D of a macro a header
// leaves open). Hopper (sm_90) builds for sm_90a, whose cubins load on sm_90 alone and may use
// its warpgroup MMA (CUDA 12 or later).
func nvccArgs(arch, src, out string, extra []string) []string {
	if arch == "sm_90" {
		arch = "sm_90a"
	}
	return append([]string{"-arch=" + arch, "-cubin", "-O3", "-std=c++17", "-o", out}, append(extra, "-x", "cu", src)...)
}

// extraFlags are the flags $TFC_NVCC_FLAGS adds to every build.
func extraFlags() []string { return strings.Fields(os.Getenv("TFC_NVCC_FLAGS")) }

// findNVCC looks for nvcc on PATH, then under $CUDA_HOME, $CUDA_PATH and /usr/local/cuda.
func findNVCC() (string, error) {
	if p, err := exec.LookPath("nvcc"); err == nil {
		return p, nil
	}
	for _, dir := range []string{os.Getenv("CUDA_HOME"), os.Getenv("CUDA_PATH"), "/usr/local/cuda"} {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, "bin", "nvcc")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("cuda: nvcc not found on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin; install the CUDA toolkit or set CUDA_HOME")
}

// build returns the cubin of family, from the cache when its key is there.
func (c *nvccBuild) build(srcs fs.FS, family string) ([]byte, error) {
	version, err := exec.Command(c.nvcc, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("cuda: %s --version: %v", c.nvcc, err)
	}
	extra := extraFlags()
	key, err := gpu.CacheKey(string(version)+strings.Join(extra, " "), c.arch, srcs, family)
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	if data, ok := c.cache.Load(key); ok {
		return data, nil
	}
	dir, err := os.MkdirTemp("", "tfc-nvcc-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	src, err := gpu.Stage(srcs, family, dir)
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	out := filepath.Join(dir, "kernels.cubin")
	cmd := exec.Command(c.nvcc, nvccArgs(c.arch, src, out, extra)...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("cuda: nvcc could not build %s for %s: %v\n%s", family, c.arch, err, msg)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		return nil, err
	}
	c.cache.Store(key, data)
	return data, nil
}

// Prebuild builds the cubin of family from srcs for arch into the cache at dir (the one
// CacheDir(dir) gives a backend), so that a backend opened later finds it there. It needs nvcc,
// not a GPU, and may run concurrently.
func Prebuild(srcs fs.FS, family, arch, dir string) error {
	nvcc, err := findNVCC()
	if err != nil {
		return err
	}
	c := nvccBuild{nvcc: nvcc, arch: arch, cache: gpu.Cache{Dir: dir, Ext: ".cubin"}}
	_, err = c.build(srcs, family)
	return err
}
