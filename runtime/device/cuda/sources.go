package cuda

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// entry is one kernel symbol of a family's source: the family file and its parameter names.
type entry struct {
	family string // base name of the .hip file
	params []string
}

// kernelDecl matches an extern "C" kernel and its parameter list in generated HIP.
var kernelDecl = regexp.MustCompile(`extern "C" __global__ (?:__launch_bounds__\(\d+\) )?void (\w+)\(([^)]*)\)`)

// symbolTable reads every .hip file of srcs and maps each kernel symbol to its family and
// parameter names. A symbol defined in two families is an error.
func symbolTable(srcs fs.FS) (map[string]entry, error) {
	files, err := fs.Glob(srcs, "*.hip")
	if err != nil {
		return nil, err
	}
	table := map[string]entry{}
	for _, f := range files {
		text, err := fs.ReadFile(srcs, f)
		if err != nil {
			return nil, err
		}
		for _, m := range kernelDecl.FindAllStringSubmatch(string(text), -1) {
			name := m[1]
			if prev, ok := table[name]; ok {
				return nil, fmt.Errorf("cuda: kernel %s is defined in both %s and %s", name, prev.family, f)
			}
			var params []string
			for _, p := range strings.Split(m[2], ",") {
				words := strings.Fields(p)
				if len(words) == 0 {
					continue
				}
				params = append(params, strings.TrimLeft(words[len(words)-1], "*"))
			}
			table[name] = entry{family: f, params: params}
		}
	}
	return table, nil
}

// nvccBuild builds a family's cubin with nvcc and caches it by the hash of everything that
// goes into it.
type nvccBuild struct {
	nvcc  string // path of nvcc
	arch  string // e.g. sm_90
	cache string // folder of cached cubins; "" caches nothing
}

// nvccArgs is the command line that builds a family's source into a cubin.
func nvccArgs(arch, src, out string) []string {
	return []string{"-arch=" + arch, "-cubin", "-O3", "-std=c++17", "-o", out, "-x", "cu", src}
}

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

// cacheDir is where cubins are kept: the user cache folder's tfc/cubin, else none.
func cacheDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "tfc", "cubin")
}

// cacheKey hashes the nvcc version, the target and every source file the family includes.
func cacheKey(version, arch string, srcs fs.FS, family string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "nvcc %s\narch %s\nfamily %s\n", version, arch, family)
	names, err := sourceFiles(srcs, family)
	if err != nil {
		return "", err
	}
	for _, n := range names {
		data, err := fs.ReadFile(srcs, n)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", n, len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// sourceFiles are the files a family's build reads: its .hip and every header.
func sourceFiles(srcs fs.FS, family string) ([]string, error) {
	hs, err := fs.Glob(srcs, "*.h")
	if err != nil {
		return nil, err
	}
	sort.Strings(hs)
	return append(hs, family), nil
}

// build returns the cubin of family, from the cache when its key is there.
func (c *nvccBuild) build(srcs fs.FS, family string) ([]byte, error) {
	version, err := exec.Command(c.nvcc, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("cuda: %s --version: %v", c.nvcc, err)
	}
	key, err := cacheKey(string(version), c.arch, srcs, family)
	if err != nil {
		return nil, err
	}
	cached := ""
	if c.cache != "" {
		cached = filepath.Join(c.cache, key+".cubin")
		if data, err := os.ReadFile(cached); err == nil {
			return data, nil
		}
	}
	dir, err := os.MkdirTemp("", "tfc-nvcc-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	names, err := sourceFiles(srcs, family)
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		data, err := fs.ReadFile(srcs, n)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, path.Base(n)), data, 0o644); err != nil {
			return nil, err
		}
	}
	out := filepath.Join(dir, "kernels.cubin")
	cmd := exec.Command(c.nvcc, nvccArgs(c.arch, filepath.Join(dir, path.Base(family)), out)...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("cuda: nvcc could not build %s for %s: %v\n%s", family, c.arch, err, msg)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		return nil, err
	}
	if cached != "" {
		if err := os.MkdirAll(c.cache, 0o755); err == nil {
			tmp := cached + ".tmp"
			if os.WriteFile(tmp, data, 0o644) == nil {
				os.Rename(tmp, cached)
			}
		}
	}
	return data, nil
}
