package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"tfc/compiler"
)

func init() {
	var (
		explain    bool
		all        bool
		outDir     string
		specialize string
		pageSize   int
	)
	c := &cobra.Command{
		Use:   "compile [-C DIR] [-explain] [-o DIR] [-specialize CONFIG] FILE... | compile [-C DIR] -all",
		Short: "Lower .graph families to Go glue (gen/<family>), HIP kernels (kernels/gen/<family>.hip) and contract tests",
		Long: `compile checks and lowers each .graph file and writes its family's generated files under the
repository root (the folder holding go.mod, found from the current directory), or under -o DIR.
With -specialize, the HIP kernels and the kernel contract tests are built for the values of that
checkpoint config.json; without it only the Go glue is written. -explain prints the lowered
schedule (each kernel, the graph ops it fuses and their lines, its buffers) and the memory plan
instead of writing files; with -specialize, also each kernel's schedule at that config (tile,
parameters, grids), as kernels/gen/<family>.schedule.json hands it to the GPU backends. -all compiles every graphs/*.graph, each specialised for its tiny
checkpoint testdata/NAME-tiny (underscores as dashes, between digits as points), and writes gen/registry, which links them
all into a binary: what go generate runs.`,
		// Go-style flags (-explain as well as --explain): parsed by package flag.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			fs := flag.NewFlagSet("compile", flag.ContinueOnError)
			fs.SetOutput(cmd.ErrOrStderr())
			fs.BoolVar(&explain, "explain", false, "print the lowered schedule and memory plan instead of writing files")
			fs.StringVar(&outDir, "o", "", "write under `DIR` instead of the repository root")
			fs.StringVar(&specialize, "specialize", "", "specialise the HIP kernels and contract tests for this checkpoint `config.json`")
			fs.IntVar(&pageSize, "page-size", 16, "KV cache page rows the HIP attention kernels are built for")
			fs.BoolVar(&all, "all", false, "compile every graphs/*.graph for its fixture and write gen/registry")
			chdir := fs.String("C", "", "change to `DIR` before reading files (as go -C does)")
			fs.Usage = func() {
				fmt.Fprintf(fs.Output(), "usage: tfc %s\n\n%s\n\nflags:\n", cmd.Use, cmd.Long)
				fs.PrintDefaults()
			}
			if err := fs.Parse(args); err != nil {
				if errors.Is(err, flag.ErrHelp) {
					return nil
				}
				return exitCode(2)
			}
			args = fs.Args()
			switch {
			case all && (len(args) > 0 || explain || specialize != ""):
				return fmt.Errorf("-all takes no files, -explain or -specialize: it compiles every graphs/*.graph for its fixture")
			case !all && len(args) == 0:
				fs.Usage()
				return exitCode(2)
			}
			if *chdir != "" {
				if err := os.Chdir(*chdir); err != nil {
					return fmt.Errorf("-C: %w", err)
				}
			}
			root := outDir
			if root == "" && !explain {
				r, err := repoRoot()
				if err != nil {
					return err
				}
				root = r
			}
			if all {
				files, err := compiler.CompileAll(".", pageSize)
				if err != nil {
					return err
				}
				return compiler.WriteAll(root, files)
			}
			opts := compiler.Options{PageSize: pageSize}
			if specialize != "" {
				data, err := os.ReadFile(specialize)
				if err != nil {
					return fmt.Errorf("-specialize: %w", err)
				}
				opts.Specialize = data
			}
			failed := false
			for _, file := range args {
				src, err := os.ReadFile(file)
				if err != nil {
					return err
				}
				name := sourceName(file)
				if explain {
					diags, err := compiler.Explain(cmd.OutOrStdout(), name, src, opts)
					if len(diags) > 0 {
						fmt.Fprint(cmd.ErrOrStderr(), diags.Format(string(src)))
						failed = true
					}
					if err != nil {
						return err
					}
					continue
				}
				files, diags, err := compiler.Compile(name, src, opts)
				if len(diags) > 0 {
					fmt.Fprint(cmd.ErrOrStderr(), diags.Format(string(src)))
					failed = true
					continue
				}
				if err != nil {
					return err
				}
				if err := compiler.WriteFiles(root, files); err != nil {
					return err
				}
			}
			if failed {
				return exitCode(1)
			}
			return nil
		},
	}
	addCommand(c)
}

// sourceName is the graph file's path relative to the repository root when it lies inside it,
// so that generated headers and positions do not depend on the working directory.
func sourceName(file string) string {
	abs, err := filepath.Abs(file)
	if err != nil {
		return file
	}
	root, err := repoRoot()
	if err != nil {
		return file
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil || rel == ".." || filepath.IsAbs(rel) || len(rel) > 2 && rel[:3] == "../" {
		return file
	}
	return filepath.ToSlash(rel)
}

// repoRoot walks up from the working directory to the folder holding go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the current directory; run tfc compile inside the repository or pass -o DIR")
		}
		dir = parent
	}
}
