package main

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"tfc/compiler/emit/hip"
	"tfc/contracts"
	"tfc/runtime/checkpoint"
	"tfc/runtime/device"
	"tfc/runtime/device/cpu"
	"tfc/runtime/device/cuda"
	"tfc/runtime/device/gpu"
	hipdev "tfc/runtime/device/hip"
	"tfc/runtime/engine"
)

func init() {
	var backend, precision, family, root, receipt, ckpt string
	var seed int64
	c := &cobra.Command{
		Use:   "contract [--model DIR | --family F]",
		Short: "Check every kernel of a family on a backend against the float64 reference, with planted controls",
		Long: `Check every kernel a family's schedule launches on a backend, at the shapes it was specialised
for, on fresh random inputs: gate 1 error within the kernel's precision class, gate 2 every output
element written, gate 3 bit-identical reruns and batch positions, gate 4 NaN/±Inf classes. Then
planted controls (mutants of real kernels) must each go red. The last line is the SUMMARY; the exit
status is 1 when a kernel fails or a control stays green. --model checks the kernels specialised
for that checkpoint's config, at its real shapes, as serving it would build them; without
--model or --family every generated family is checked, one after another.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if seed == 0 {
				seed = time.Now().UnixNano() % 1e9
			}
			names := []string{family}
			if family == "" && ckpt == "" {
				names = contracts.Families() // every generated family, one after another
			}
			failed := false
			for _, name := range names {
				ok, err := runContract(cmd, backend, precision, name, ckpt, root, receipt, seed)
				if err != nil {
					return err
				}
				failed = failed || !ok
			}
			if failed {
				return exitCode(1)
			}
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVar(&backend, "backend", "cpu", "backend under contract: cpu, cuda or hip")
	fl.StringVar(&precision, "precision", "f32", "the backend's precision: f32, or bf16, where the float64 reference rounds at the catalog's rounding points and gate 1 allows one BF16 ulp of the value at each (gates 2-4 stay exact)")
	fl.StringVar(&family, "family", "", "generated family whose kernels are checked, specialised as kernels/ embeds them (default: every family)")
	fl.StringVar(&ckpt, "model", "", "checkpoint folder: check its family's kernels specialised for its config.json")
	fl.Int64Var(&seed, "seed", 0, "seed of the random inputs (0: from the clock)")
	fl.StringVar(&root, "root", ".", "repository root, where the family's graph and specialising config are read")
	fl.StringVar(&receipt, "receipt", "", "write <date>-<target>-<family>-contract.md (-<family>-bf16- in BF16) into this folder")
	addCommand(c)
}

// runContract checks one family (or the family of the checkpoint in ckpt) on a backend, prints
// its report and SUMMARY line and writes its receipt when asked; ok is false when a kernel fails
// or a control stays green.
func runContract(cmd *cobra.Command, backend, precision, family, ckpt, root, receipt string, seed int64) (ok bool, err error) {
	f, err := contractFamily(family, ckpt, root)
	if err != nil {
		return false, err
	}
	prec, err := device.ParsePrecision(precision)
	if err != nil {
		return false, err
	}
	t, m, closeAll, err := contractTarget(backend, prec, f)
	if err != nil {
		return false, err
	}
	defer closeAll()
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "contract %s on %s (%s), precision %s, seed %d\n", f.Name, t.Name, m.Backend, prec, seed)
	r := contracts.Run(t, f, seed, out)
	if receipt != "" {
		if m.Binary, err = contracts.BinarySHA256(); err != nil {
			return false, err
		}
		// the command that reproduces the run, the receipt placed where the repository keeps them
		what := "--family " + f.Name
		if ckpt != "" {
			what = "--model " + ckpt
		}
		m.Command = fmt.Sprintf("tfc contract --backend %s --precision %s %s --seed %d --receipt docs/receipts", backend, prec, what, seed)
		m.Precision = prec.String()
		path, err := contracts.WriteReceipt(receipt, r, m, time.Now())
		if err != nil {
			return false, fmt.Errorf("writing the receipt: %w", err)
		}
		fmt.Fprintf(out, "receipt %s\n", path)
	}
	fmt.Fprintln(out, r.Summary())
	return r.OK(), nil
}

// contractFamily is the family under contract: the one serving the checkpoint in dir, its kernels
// specialised for its config, or else the named family as the binary embeds it.
func contractFamily(name, dir, root string) (contracts.Family, error) {
	if dir == "" {
		return contracts.LoadFamily(name, root)
	}
	data, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return contracts.Family{}, err
	}
	cfg, err := checkpoint.ParseConfig(filepath.Join(dir, "config.json"), data)
	if err != nil {
		return contracts.Family{}, err
	}
	fam, _, err := engine.Bind(cfg)
	if err != nil {
		return contracts.Family{}, err
	}
	return contracts.ForCheckpoint(fam.Name, root, cfg, 16)
}

// contractTarget opens the backend under contract and says how to plant its controls.
func contractTarget(name string, prec device.Precision, f contracts.Family) (contracts.Target, contracts.Machine, func(), error) {
	srcs, err := contracts.Sources(f)
	if err != nil {
		return contracts.Target{}, contracts.Machine{}, nil, err
	}
	switch name {
	case "cpu":
		t := contracts.CPUTarget(f, cpu.Precision(prec))
		m := contracts.Machine{Device: contracts.CPUModel(), Backend: t.Backend.(*cpu.Backend).Describe(), Compiler: runtime.Version() + " (the CPU backend runs no generated source)"}
		return t, m, func() {}, nil
	case "cuda":
		be, err := cuda.New(cuda.Sources(srcs), cuda.Precision(prec))
		if err != nil {
			return contracts.Target{}, contracts.Machine{}, nil, err
		}
		t, done, err := mutantTarget("cuda-"+be.Arch(), be, f, func(srcs fs.FS, cache string) (gpuBackend, error) {
			return cuda.New(cuda.Sources(srcs), cuda.CacheDir(cache), cuda.Precision(prec))
		}, func(srcs fs.FS, cache string) error {
			if prec != device.F32Precision { // the build a backend in prec makes, so that it finds it cached
				var err error
				if srcs, err = gpu.WithPrecision(srcs, f.Source, prec, be.PagedMMA()); err != nil {
					return err
				}
			}
			return cuda.Prebuild(srcs, f.Source, be.Arch(), cache)
		})

		m := contracts.Machine{Device: be.Describe() + ", " + cudaDriver(be), Backend: be.Describe(), Compiler: nvccVersion() + ", -arch=" + be.Arch()}
		return t, m, done, err
	case "hip":
		be, err := hipdev.New(hipdev.Sources(srcs), hipdev.Precision(prec))
		if err != nil {
			return contracts.Target{}, contracts.Machine{}, nil, err
		}
		t, done, err := mutantTarget("hip-"+be.Target(), be, f, func(srcs fs.FS, cache string) (gpuBackend, error) {
			return hipdev.New(hipdev.Sources(srcs), hipdev.CacheDir(cache), hipdev.Target(be.Target()), hipdev.Precision(prec))
		}, nil)
		m := contracts.Machine{Device: be.Describe(), Backend: be.Describe(), Compiler: "clang/hipcc for " + be.Target()}
		return t, m, done, err
	}
	return contracts.Target{}, contracts.Machine{}, nil, fmt.Errorf("unknown backend %q; use --backend cpu, cuda or hip", name)
}

// gpuBackend is a backend that builds generated sources and must be closed.
type gpuBackend interface {
	device.Backend
	Close() error
}

// mutantTarget is the contract target of a GPU backend: its controls are HIP-source mutants of
// the family's kernels, each built by build into a backend of the same kind, sharing one cache.
// prebuild, when given, fills that cache with every control's build at once, on all cores. On
// error be is closed.
func mutantTarget(name string, be gpuBackend, f contracts.Family, build func(srcs fs.FS, cache string) (gpuBackend, error), prebuild func(srcs fs.FS, cache string) error) (contracts.Target, func(), error) {
	cache, err := os.MkdirTemp("", "tfc-contract-")
	if err != nil {
		be.Close()
		return contracts.Target{}, nil, err
	}
	t := contracts.Target{Name: name, Backend: be,
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
			mb, err := build(srcs, cache)
			if err != nil {
				return nil, nil, err
			}
			return mb, func() { mb.Close() }, nil
		}}
	if prebuild != nil {
		if err := prebuildControls(f, t.Controls, cache, prebuild); err != nil {
			be.Close()
			os.RemoveAll(cache)
			return contracts.Target{}, nil, err
		}
	}
	return t, func() { be.Close(); os.RemoveAll(cache) }, nil
}

// prebuildControls runs prebuild on every control's mutant source, as many at once as there are cores.
func prebuildControls(f contracts.Family, controls []contracts.Control, cache string, prebuild func(srcs fs.FS, cache string) error) error {
	var g errgroup.Group
	g.SetLimit(runtime.NumCPU())
	for _, c := range controls {
		g.Go(func() error {
			mut, err := hip.ParseMutation(c.Mutation)
			if err != nil {
				return err
			}
			srcs, err := contracts.MutantSources(f, c.Kernel, mut)
			if err != nil {
				return err
			}
			return prebuild(srcs, cache)
		})
	}
	return g.Wait()
}

func cudaDriver(be *cuda.Backend) string {
	s := "driver CUDA unknown"
	if v, err := be.DriverVersion(); err == nil {
		s = fmt.Sprintf("driver CUDA %d.%d", v/1000, v%1000/10)
	}
	if out, err := exec.Command("nvidia-smi", "--query-gpu=driver_version,memory.total", "--format=csv,noheader").Output(); err == nil {
		s += ", nvidia-smi " + strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	}
	return s
}

func nvccVersion() string {
	out, err := exec.Command("nvcc", "--version").Output()
	if err != nil {
		return "nvcc not on PATH"
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return "nvcc: " + strings.Join(lines[max(0, len(lines)-2):], "; ")
}
