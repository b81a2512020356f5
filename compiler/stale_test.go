package compiler_test

import (
	"bufio"
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"tfc/compiler"
)

// TestGeneratedFilesUpToDate regenerates, in memory, what every `tfc compile` line of graphs/*.go
// writes and fails on "stale generated files" when the committed files differ or are missing.
func TestGeneratedFilesUpToDate(t *testing.T) {
	sources, _ := filepath.Glob("../graphs/*.go")
	var runs [][]string
	for _, s := range sources {
		f, err := os.Open(s)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := sc.Text()
			if i := strings.Index(line, "cmd/tfc compile "); strings.HasPrefix(line, "//go:generate ") && i >= 0 {
				runs = append(runs, strings.Fields(line[i+len("cmd/tfc compile "):]))
			}
			// compileall is tfc compile -all
			if i := strings.Index(line, "compiler/cmd/compileall"); strings.HasPrefix(line, "//go:generate ") && i >= 0 {
				runs = append(runs, append([]string{"-all"}, strings.Fields(line[i+len("compiler/cmd/compileall"):])...))
			}
		}
		f.Close()
	}
	if len(runs) == 0 {
		t.Skip("no //go:generate line runs tfc compile in graphs/")
	}
	var stale []string
	for _, args := range runs {
		fs := flag.NewFlagSet("compile", flag.ContinueOnError)
		dir := fs.String("C", "", "")
		spec := fs.String("specialize", "", "")
		pageSize := fs.Int("page-size", 16, "")
		all := fs.Bool("all", false, "")
		if err := fs.Parse(args); err != nil {
			t.Fatalf("go:generate arguments %v: %v", args, err)
		}
		// go generate runs in graphs/; -C is relative to it, the files to the folder -C names
		base := filepath.Join("../graphs", *dir)
		files := map[string][]byte{}
		if *all {
			var err error
			if files, err = compiler.CompileAll(base, *pageSize); err != nil {
				t.Fatal(err)
			}
		}
		opts := compiler.Options{PageSize: *pageSize}
		if *spec != "" {
			data, err := os.ReadFile(filepath.Join(base, *spec))
			if err != nil {
				t.Fatal(err)
			}
			opts.Specialize = data
		}
		for _, file := range fs.Args() {
			src, err := os.ReadFile(filepath.Join(base, file))
			if err != nil {
				t.Fatal(err)
			}
			name := filepath.ToSlash(file)
			if *dir == "" {
				name = "graphs/" + name
			}
			fs, diags, err := compiler.Compile(name, src, opts)
			if err != nil || len(diags) > 0 {
				t.Fatalf("%s: %v%v", file, err, diags)
			}
			for p, data := range fs {
				files[p] = data
			}
		}
		for p, want := range files {
			got, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(p)))
			if err != nil || !bytes.Equal(got, want) {
				stale = append(stale, p)
			}
		}
		// a generated package holds only what is generated now
		dirs := map[string]bool{}
		for p := range files {
			if strings.HasPrefix(p, "gen/") {
				dirs[filepath.Dir(p)] = true
			}
		}
		for d := range dirs {
			entries, _ := os.ReadDir(filepath.Join("..", d))
			for _, e := range entries {
				q := filepath.ToSlash(filepath.Join(d, e.Name()))
				if _, ok := files[q]; !ok && strings.HasSuffix(q, ".go") {
					stale = append(stale, q+" (not generated any more)")
				}
			}
		}
	}
	if len(stale) > 0 {
		sort.Strings(stale)
		t.Errorf("stale generated files: %s; run go generate ./graphs", strings.Join(stale, ", "))
	}
}
