// Package audit compiles HIP kernel sources for AMD targets without a GPU and checks each
// kernel's resource use, read from the code object's metadata notes, against the target's limits.
//
// For every file and target it runs
//
//	clang++-19 -x hip --cuda-device-only --no-gpu-bundle-output --offload-arch=<target> -O3 <file>
//	    -o <obj> --rocm-path=/usr --rocm-device-lib-path=<bitcode dir>
//
// then `llvm-readelf-19 --notes <obj>`, and reports per kernel VGPRs, AGPRs, SGPRs, LDS, scratch
// and wave size. A finding is a kernel that cannot launch as declared (more than 1024 threads, no
// __launch_bounds__, more LDS than a workgroup may use, more VGPRs or SGPRs than its waves can
// hold) or that touches scratch (spills, private arrays, a dynamic stack).
package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Target holds the limits of one AMD GPU architecture that a kernel must respect.
type Target struct {
	Name     string
	Wave     int // default wave size
	SIMDs    int // SIMDs that share a workgroup's waves (a CU, or a WGP on RDNA)
	VGPRFile int // VGPRs per lane of one SIMD at the default wave size
	MaxVGPRs int // VGPRs one wave may use (arch and accumulation VGPRs together where unified)
	Granule  int // VGPR allocation granule
	MaxSGPRs int // SGPRs one wave may use
	LDS      int // bytes of LDS one workgroup may use
}

// Targets are the architectures the audit knows the limits of.
var Targets = map[string]Target{
	"gfx908":  {Name: "gfx908", Wave: 64, SIMDs: 4, VGPRFile: 256, MaxVGPRs: 256, Granule: 4, MaxSGPRs: 102, LDS: 65536},
	"gfx90a":  {Name: "gfx90a", Wave: 64, SIMDs: 4, VGPRFile: 512, MaxVGPRs: 512, Granule: 8, MaxSGPRs: 102, LDS: 65536},
	"gfx942":  {Name: "gfx942", Wave: 64, SIMDs: 4, VGPRFile: 512, MaxVGPRs: 512, Granule: 8, MaxSGPRs: 102, LDS: 65536},
	"gfx1030": {Name: "gfx1030", Wave: 32, SIMDs: 4, VGPRFile: 1024, MaxVGPRs: 256, Granule: 8, MaxSGPRs: 106, LDS: 65536},
	"gfx1100": {Name: "gfx1100", Wave: 32, SIMDs: 4, VGPRFile: 1536, MaxVGPRs: 256, Granule: 24, MaxSGPRs: 106, LDS: 65536},
}

// DefaultTargets are audited when none are named: the first two must build (Debian 12's device
// libraries have them); the others are skipped with a note when no device library has them.
var DefaultTargets = []string{"gfx1030", "gfx90a", "gfx1100", "gfx942"}

// RequiredTargets must build even when they come from DefaultTargets.
var RequiredTargets = map[string]bool{"gfx1030": true, "gfx90a": true}

// DefaultDeviceLibs are the bitcode folders searched for a target's device library: Debian 12's
// rocm-device-libs, Debian 13's rocm-device-libs-17 installed, and the same unpacked by
// .ci/hip-deps.sh.
var DefaultDeviceLibs = []string{
	"/usr/lib/x86_64-linux-gnu/amdgcn/bitcode",
	"/usr/lib/llvm-17/lib/clang/17/amdgcn/bitcode",
	"/opt/rocm-device-libs-17/usr/lib/llvm-17/lib/clang/17/amdgcn/bitcode",
}

// Options configure an audit.
type Options struct {
	Targets    []string // target names; empty means DefaultTargets
	Clang      string   // clang++ with HIP support; empty means clang++-19 from PATH
	Readelf    string   // llvm-readelf; empty means llvm-readelf-19 from PATH
	DeviceLibs []string // bitcode folders searched first, then $TFC_DEVICE_LIBS (a path list), then DefaultDeviceLibs
	Include    []string // folders of the headers the files include, besides their own (kernels/ for kernels/gen/)
}

// Compiled is one kernel compiled for one target: its resources and what the audit found.
type Compiled struct {
	File, Name, Target  string
	VGPRs, AGPRs, SGPRs int
	LDS, Scratch        int // bytes
	Wave                int
	MaxThreads          int // the code object's max_flat_workgroup_size
	LaunchBounds        int // from the source's __launch_bounds__; 0 when absent
	VGPRSpills          int
	SGPRSpills          int
	DynamicStack        bool
	Findings            []string
}

// Report is the outcome of an audit.
type Report struct {
	Kernels []Compiled
	Notes   []string // targets skipped, and why
}

// Failed reports whether any kernel has a finding.
func (r *Report) Failed() bool {
	for _, k := range r.Kernels {
		if len(k.Findings) > 0 {
			return true
		}
	}
	return false
}

// Tools finds the compiler and readelf, or says how to install them.
func (o Options) tools() (clang, readelf string, err error) {
	clang, readelf = o.Clang, o.Readelf
	if clang == "" {
		clang = "clang++-19"
	}
	if readelf == "" {
		readelf = "llvm-readelf-19"
	}
	if clang, err = exec.LookPath(clang); err != nil {
		return "", "", fmt.Errorf("%w; install clang-19, lld-19, llvm-19, libamdhip64-dev and rocm-device-libs (.ci/hip-deps.sh does) or pass --clang", err)
	}
	if readelf, err = exec.LookPath(readelf); err != nil {
		return "", "", fmt.Errorf("%w; install llvm-19 (.ci/hip-deps.sh does) or pass --readelf", err)
	}
	return clang, readelf, nil
}

// Available reports whether the default tools are installed, for tests that need them.
func Available() error {
	_, _, err := Options{}.tools()
	return err
}

// deviceLib returns the first bitcode folder that has the target's ISA library.
func (o Options) deviceLib(target string) string {
	isa := "oclc_isa_version_" + strings.TrimPrefix(target, "gfx") + ".bc"
	dirs := append(append([]string{}, o.DeviceLibs...), filepath.SplitList(os.Getenv("TFC_DEVICE_LIBS"))...)
	for _, dir := range append(dirs, DefaultDeviceLibs...) {
		if _, err := os.Stat(filepath.Join(dir, isa)); err == nil {
			return dir
		}
	}
	return ""
}

// Run compiles every file for every target and checks each kernel.
func Run(ctx context.Context, files []string, o Options) (*Report, error) {
	clang, readelf, err := o.tools()
	if err != nil {
		return nil, err
	}
	targets, explicit := o.Targets, true
	if len(targets) == 0 {
		targets, explicit = DefaultTargets, false
	}
	rep := &Report{}
	type job struct{ file, target, lib string }
	var jobs []job
	for _, t := range targets {
		if _, ok := Targets[t]; !ok {
			return nil, fmt.Errorf("unknown target %q; the audit knows %s", t, strings.Join(known(), ", "))
		}
		lib := o.deviceLib(t)
		if lib == "" {
			msg := fmt.Sprintf("%s: no device library folder has oclc_isa_version_%s.bc; run .ci/hip-deps.sh (Debian 13's rocm-device-libs-17 has gfx11 and gfx94x) or pass --device-libs DIR", t, strings.TrimPrefix(t, "gfx"))
			if explicit || RequiredTargets[t] {
				return nil, errors.New(msg)
			}
			rep.Notes = append(rep.Notes, "skipped "+msg)
			continue
		}
		for _, f := range files {
			jobs = append(jobs, job{f, t, lib})
		}
	}
	tmp, err := os.MkdirTemp("", "tfc-audit-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	results := make([][]Compiled, len(jobs))
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			obj := filepath.Join(tmp, fmt.Sprintf("%d-%s.hsaco", i, j.target))
			results[i], errs[i] = compile(ctx, clang, readelf, j.file, j.target, j.lib, obj, o.Include)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for i, j := range jobs {
		src, err := os.ReadFile(j.file)
		if err != nil {
			return nil, err
		}
		bounds := LaunchBounds(src)
		for _, k := range results[i] {
			k.LaunchBounds = bounds[k.Name]
			k.Findings = Check(k, Targets[j.target])
			rep.Kernels = append(rep.Kernels, k)
		}
	}
	return rep, nil
}

func known() []string {
	var ns []string
	for n := range Targets {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

func compile(ctx context.Context, clang, readelf, file, target, lib, obj string, include []string) ([]Compiled, error) {
	args := []string{"-x", "hip", "--cuda-device-only", "--no-gpu-bundle-output",
		"--offload-arch=" + target, "-O3", file, "-o", obj, "--rocm-path=/usr", "--rocm-device-lib-path=" + lib}
	for _, dir := range include {
		args = append(args, "-I", dir)
	}
	cmd := exec.CommandContext(ctx, clang, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s does not compile for %s: %v\n%s", file, target, err, stderr.String())
	}
	out, err := exec.CommandContext(ctx, readelf, "--notes", obj).Output()
	if err != nil {
		return nil, fmt.Errorf("%s notes of %s for %s: %v", readelf, file, target, err)
	}
	ks, err := ParseNotes(out)
	if err != nil {
		return nil, fmt.Errorf("%s for %s: %w", file, target, err)
	}
	for i := range ks {
		ks[i].File, ks[i].Target = file, target
	}
	return ks, nil
}

// ParseNotes reads the kernels of an AMDGPU code object from `llvm-readelf --notes` output: the
// amdhsa.kernels list of its metadata YAML, keys at the list item's level only.
func ParseNotes(notes []byte) ([]Compiled, error) {
	var ks []Compiled
	var cur map[string]string
	flush := func() error {
		if cur == nil {
			return nil
		}
		k, err := kernelOf(cur)
		if err != nil {
			return err
		}
		ks = append(ks, k)
		cur = nil
		return nil
	}
	in := false
	for _, line := range strings.Split(string(notes), "\n") {
		trimmed := strings.TrimLeft(line, " ")
		indent := len(line) - len(trimmed)
		switch {
		case trimmed == "amdhsa.kernels:":
			in = true
			continue
		case !in:
			continue
		case trimmed == "":
			continue
		case indent == 0 || trimmed == "...":
			if err := flush(); err != nil {
				return nil, err
			}
			in = false
			continue
		}
		key := ""
		if strings.HasPrefix(trimmed, "- .") && indent == 2 {
			if err := flush(); err != nil {
				return nil, err
			}
			cur = map[string]string{}
			key = trimmed[2:]
		} else if indent == 4 && strings.HasPrefix(trimmed, ".") && cur != nil {
			key = trimmed
		}
		if k, v, ok := strings.Cut(key, ":"); ok {
			cur[k] = strings.TrimSpace(v)
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if len(ks) == 0 {
		return nil, errors.New("the code object has no amdhsa.kernels metadata")
	}
	return ks, nil
}

func kernelOf(m map[string]string) (Compiled, error) {
	k := Compiled{Name: m[".name"], DynamicStack: m[".uses_dynamic_stack"] == "true"}
	if k.Name == "" {
		return k, errors.New("a kernel in the metadata has no .name")
	}
	for key, dst := range map[string]*int{
		".vgpr_count": &k.VGPRs, ".agpr_count": &k.AGPRs, ".sgpr_count": &k.SGPRs,
		".group_segment_fixed_size": &k.LDS, ".private_segment_fixed_size": &k.Scratch,
		".wavefront_size": &k.Wave, ".max_flat_workgroup_size": &k.MaxThreads,
		".vgpr_spill_count": &k.VGPRSpills, ".sgpr_spill_count": &k.SGPRSpills,
	} {
		v, ok := m[key]
		if !ok {
			if key == ".agpr_count" || strings.HasSuffix(key, "_spill_count") {
				continue
			}
			return k, fmt.Errorf("kernel %s: metadata lacks %s", k.Name, key)
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return k, fmt.Errorf("kernel %s: %s is %q, not a number", k.Name, key, v)
		}
		*dst = n
	}
	return k, nil
}

var launchBounds = regexp.MustCompile(`__launch_bounds__\(\s*(\d+)\s*(?:,[^)]*)?\)\s*void\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(`)

// LaunchBounds maps each kernel of a source that declares __launch_bounds__ to its thread count.
func LaunchBounds(src []byte) map[string]int {
	m := map[string]int{}
	for _, s := range launchBounds.FindAllSubmatch(src, -1) {
		n, _ := strconv.Atoi(string(s[1]))
		m[string(s[2])] = n
	}
	return m
}

// Check returns what in k breaks t's limits.
func Check(k Compiled, t Target) []string {
	var fs []string
	threads := k.MaxThreads
	switch {
	case k.LaunchBounds == 0:
		fs = append(fs, "no __launch_bounds__: it is compiled for 1024 threads; declare the block size it launches with")
	case k.LaunchBounds > 1024:
		fs = append(fs, fmt.Sprintf("__launch_bounds__(%d) exceeds the 1024 threads of a workgroup", k.LaunchBounds))
	case k.MaxThreads != k.LaunchBounds:
		fs = append(fs, fmt.Sprintf("compiled for %d threads but declares __launch_bounds__(%d)", k.MaxThreads, k.LaunchBounds))
	}
	if threads > 1024 {
		fs = append(fs, fmt.Sprintf("max workgroup size %d exceeds 1024", threads))
	}
	if k.LDS > t.LDS {
		fs = append(fs, fmt.Sprintf("uses %d bytes of LDS; a workgroup on %s may use %d", k.LDS, t.Name, t.LDS))
	}
	if k.Scratch > 0 || k.VGPRSpills > 0 || k.SGPRSpills > 0 {
		fs = append(fs, fmt.Sprintf("uses scratch: %d bytes a lane, %d VGPRs and %d SGPRs spilled", k.Scratch, k.VGPRSpills, k.SGPRSpills))
	}
	if k.DynamicStack {
		fs = append(fs, "uses a dynamic stack (scratch of unknown size)")
	}
	if k.VGPRs > t.MaxVGPRs {
		fs = append(fs, fmt.Sprintf("uses %d VGPRs; a wave on %s may use %d", k.VGPRs, t.Name, t.MaxVGPRs))
	}
	if k.SGPRs > t.MaxSGPRs {
		fs = append(fs, fmt.Sprintf("uses %d SGPRs; a wave on %s may use %d", k.SGPRs, t.Name, t.MaxSGPRs))
	}
	if wave := k.Wave; wave > 0 && threads > 0 && k.VGPRs > 0 {
		wavesPerSIMD := ceilDiv(ceilDiv(threads, wave), t.SIMDs)
		fileWave := t.VGPRFile
		if wave != t.Wave {
			fileWave = t.VGPRFile * t.Wave / wave
		}
		need := ceilDiv(k.VGPRs, t.Granule) * t.Granule * wavesPerSIMD
		if need > fileWave {
			fs = append(fs, fmt.Sprintf("a %d-thread workgroup needs %d VGPRs a SIMD lane (%d waves of %d); %s has %d",
				threads, need, wavesPerSIMD, k.VGPRs, t.Name, fileWave))
		}
	}
	return fs
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
