// Package compiler is the core of tfc compile: a .graph file in, the family's generated files
// out as data (Go glue, HIP kernels, contract tests), never touching the disk.
package compiler

import (
	"fmt"
	"io"
	"path"
	"strings"

	"tfc/compiler/check"
	"tfc/compiler/emit/glue"
	"tfc/compiler/emit/hip"
	"tfc/compiler/lower"
	"tfc/compiler/specialize"
	"tfc/runtime/device"
)

// Options steer a compilation.
type Options struct {
	// Specialize is a checkpoint's config.json whose values the HIP kernels and the contract
	// tests are specialised for; without it neither is written.
	Specialize []byte
	// PageSize is the KV cache page the HIP attention kernels are built for (default 16).
	PageSize int
	// Root is the folder file names are relative to, where a family whose graph the file reuses
	// is read from (default: the working directory).
	Root string
}

// Compile checks and lowers one .graph file and returns its generated files by path relative to
// the repository root: gen/<package>/*.go, the program gen/<package>/program.json that the glue
// specialises its kernels from at load and, when specialised, kernels/<package>.hip, its
// schedule kernels/<package>.schedule.json and the
// contract tests. Diagnostics are the file's problems; err is any other failure.
func Compile(filename string, src []byte, opts Options) (map[string][]byte, check.Diagnostics, error) {
	p, diags, err := LowerWith(filename, src, check.Beside(opts.Root, filename))
	if err != nil || len(diags) > 0 {
		return nil, diags, err
	}
	files, err := compileLowered(p, opts)
	return files, nil, err
}

// compileLowered is Compile after lowering.
func compileLowered(p *lower.Program, opts Options) (map[string][]byte, error) {
	var spec *lower.Spec
	var err error
	if opts.Specialize != nil {
		if spec, err = lower.Specialize(p, opts.Specialize, opts.PageSize); err != nil {
			return nil, fmt.Errorf("-specialize: %w", err)
		}
	}
	files := map[string][]byte{}
	goFiles, err := glue.Files(p)
	if err != nil {
		return nil, err
	}
	dir := path.Join("gen", p.Package)
	for name, data := range goFiles {
		files[path.Join(dir, name)] = data
	}
	prog, err := specialize.Encode(specialize.FromLowered(p))
	if err != nil {
		return nil, err
	}
	files[path.Join(dir, "program.json")] = prog
	if spec != nil {
		src, err := renderSource(p, spec)
		if err != nil {
			return nil, err
		}
		kfiles, err := src.Files(p.Package + ".hip")
		if err != nil {
			return nil, err
		}
		for name, data := range kfiles {
			files[path.Join("kernels", "gen", name)] = data
		}
		tests, err := glue.ContractTests(p)
		if err != nil {
			return nil, err
		}
		files[path.Join(dir, "kernels_test.go")] = tests
	}
	return files, nil
}

// Lower checks and lowers one .graph file, reading a family whose graph it reuses beside it.
func Lower(filename string, src []byte) (*lower.Program, check.Diagnostics, error) {
	return LowerWith(filename, src, check.Beside("", filename))
}

// LowerWith is Lower reading other families' files through load.
func LowerWith(filename string, src []byte, load check.Loader) (*lower.Program, check.Diagnostics, error) {
	m, diags := check.SourceWith(filename, string(src), load)
	if len(diags) > 0 {
		return nil, diags, nil
	}
	p, err := lower.Lower(m)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: lowering: %w", filename, err)
	}
	return p, nil, nil
}

// Explain prints the lowered schedule and memory plan of one .graph file.
func Explain(w io.Writer, filename string, src []byte, opts Options) (check.Diagnostics, error) {
	p, diags, err := LowerWith(filename, src, check.Beside(opts.Root, filename))
	if err != nil || len(diags) > 0 {
		return diags, err
	}
	lower.Explain(w, p)
	if opts.Specialize == nil {
		return nil, nil
	}
	spec, err := lower.Specialize(p, opts.Specialize, opts.PageSize)
	if err != nil {
		return nil, fmt.Errorf("-specialize: %w", err)
	}
	src2, err := renderSource(p, spec)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "\nschedules at this config (kernels/gen/%s): what a block computes, the parameters, the launches\n", device.ScheduleFile(p.Package+".hip"))
	for _, s := range src2.Schedules {
		var params []string
		for _, prm := range s.Params {
			params = append(params, prm.Name)
		}
		fmt.Fprintf(w, "  %s: %s\n    params %s\n", s.Kernel, s.Tile, strings.Join(params, " "))
		for _, l := range s.Launches {
			fmt.Fprintf(w, "    launch %s: %s\n", l.Symbol, hip.Describe(l))
		}
	}
	return nil, nil
}
