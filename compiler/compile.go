// Package compiler is the core of tfc compile: a .graph file in, the family's generated files
// out as data (Go glue, HIP kernels, contract tests), never touching the disk.
package compiler

import (
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
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
	homes, err := Homes(p, opts.Root)
	if err != nil {
		return nil, err
	}
	goFiles, err := glue.Files(p, homes)
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
	}
	return files, nil
}

// Homes lowers the files of the families whose graphs p reuses (beside p's file, under root) and
// checks that each reused graph lowers in p to the launches it has in its home: the home's
// runner, emitted once, launches p's kernels by the same names.
func Homes(p *lower.Program, root string) (map[string]*lower.Program, error) {
	homes := map[string]*lower.Program{}
	for _, g := range p.Graphs {
		if g.Home == "" {
			continue
		}
		hp := homes[g.Home]
		if hp == nil {
			name := path.Join(path.Dir(p.Source), g.Home+".graph")
			src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
			if err != nil {
				return nil, err
			}
			var diags check.Diagnostics
			hp, diags, err = LowerWith(name, src, check.Beside(root, name))
			if err == nil && len(diags) > 0 {
				err = fmt.Errorf("%s", diags.Format(string(src)))
			}
			if err != nil {
				return nil, err
			}
			homes[g.Home] = hp
		}
		var hg *lower.Graph
		for _, x := range hp.Graphs {
			if x.Name == g.Name {
				hg = x
			}
		}
		if hg == nil {
			return nil, fmt.Errorf("%s: family %s has no graph %s", p.Source, g.Home, g.Name)
		}
		here, there := launchList(p, g), launchList(hp, hg)
		for i := 0; i < max(len(here), len(there)); i++ {
			a, b := "none", "none"
			if i < len(here) {
				a = here[i]
			}
			if i < len(there) {
				b = there[i]
			}
			if a != b {
				return nil, fmt.Errorf("%s: graph %s = %s.%s lowers here to other launches than in %s, whose runner runs it: launch %d is %s here, %s there; declare the values and weights it reads as %s does",
					p.Source, g.Name, g.Home, g.Name, hp.Source, i+1, a, b, hp.Source)
			}
		}
	}
	return homes, nil
}

// launchList is each launch of graph g: its kernel's name after the family's prefix and its ops.
func launchList(p *lower.Program, g *lower.Graph) []string {
	var out []string
	g.Walk(func(l *lower.Launch, _ []*lower.Loop) {
		var ops []string
		for _, op := range l.Ops {
			ops = append(ops, op.Kind)
		}
		out = append(out, strings.TrimPrefix(l.Kernel.Name, p.Package+"_")+"("+strings.Join(ops, ", ")+")")
	})
	return out
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
