package contracts

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing/fstest"

	"tfc/compiler"
	"tfc/compiler/emit/hip"
	"tfc/compiler/lower"
	"tfc/compiler/specialize"
	"tfc/kernels"
)

// Family is a generated family as the contract checks it: the kernels its schedule launches,
// each with the op chain it fuses at the shapes it was specialised for, and the HIP source the
// GPU backends build them from.
type Family struct {
	Name    string // family name as the .graph file declares it, e.g. qwen2_vl
	Source  string // base name of its generated source in package kernels, e.g. qwen2vl.hip
	Kernels []hip.Kernel
}

// Loader returns a family's kernels; dir is the repository root for loaders that read it.
type Loader func(dir string) (Family, error)

var families = map[string]Loader{}

// graphs holds each registered family's generated source and graph, for ForCheckpoint.
var graphs = map[string][2]string{}

// Register makes a family's kernel list known to the contract. A generated family package
// registers itself from an init function.
func Register(name string, load Loader) { families[name] = load }

// Families lists the registered family names.
func Families() []string {
	var names []string
	for n := range families {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// LoadFamily returns the registered family name, with dir as the repository root.
func LoadFamily(name, dir string) (Family, error) {
	load, ok := families[name]
	if !ok {
		return Family{}, fmt.Errorf("no family %q has a kernel list for the contract; use one of %s", name, strings.Join(Families(), ", "))
	}
	return load(dir)
}

// FromGraph is the Loader of a family whose kernel list is lowered again from its .graph file
// with the compile options of its go:generate line. It checks that the list renders to exactly
// the source the binary embeds, so the contract never checks kernels other than those served.
func FromGraph(name, source, graph, config string, pageSize int) Loader {
	graphs[name] = [2]string{source, graph}
	return func(dir string) (Family, error) {
		src, err := os.ReadFile(filepath.Join(dir, graph))
		if err != nil {
			return Family{}, fmt.Errorf("family %s: %w; run tfc contract from the repository root or pass --root", name, err)
		}
		cfg, err := os.ReadFile(filepath.Join(dir, config))
		if err != nil {
			return Family{}, fmt.Errorf("family %s: %w; run tfc contract from the repository root or pass --root", name, err)
		}
		ks, err := compiler.HIPKernels(graph, src, compiler.Options{Specialize: cfg, PageSize: pageSize, Root: dir})
		if err != nil {
			return Family{}, fmt.Errorf("family %s: lowering %s: %w", name, graph, err)
		}
		f := Family{Name: name, Source: source, Kernels: ks}
		rendered, err := specialize.Render(name, ks)
		if err != nil {
			return Family{}, err
		}
		files, err := rendered.Files(source)
		if err != nil {
			return Family{}, err
		}
		for file, data := range files {
			embedded, err := fs.ReadFile(kernels.Sources, file)
			if err != nil {
				return Family{}, fmt.Errorf("family %s: the binary embeds no kernels/gen/%s: %w", name, file, err)
			}
			if !bytes.Equal(data, embedded) {
				return Family{}, fmt.Errorf("family %s: kernels/gen/%s is not what %s lowers to with %s; run go generate ./graphs and rebuild tfc", name, file, graph, config)
			}
		}
		return f, nil
	}
}

// ForCheckpoint returns family name's kernels specialised for a checkpoint of config cfg, as a GPU
// backend serving it builds them (dir is the repository root holding the graph).
func ForCheckpoint(name, dir string, cfg lower.ConfigReader, pageSize int) (Family, error) {
	g, ok := graphs[name]
	if !ok {
		return Family{}, fmt.Errorf("no family %q has a kernel list for the contract; use one of %s", name, strings.Join(Families(), ", "))
	}
	src, err := os.ReadFile(filepath.Join(dir, g[1]))
	if err != nil {
		return Family{}, fmt.Errorf("family %s: %w; run tfc contract from the repository root or pass --root", name, err)
	}
	ks, err := compiler.HIPKernelsFrom(dir, g[1], src, cfg, pageSize)
	if err != nil {
		return Family{}, fmt.Errorf("family %s: %w", name, err)
	}
	return Family{Name: name, Source: g[0], Kernels: ks}, nil
}

// Sources returns f's kernels rendered beside the headers the binary embeds: what a GPU backend
// builds to run them.
func Sources(f Family) (fs.FS, error) { return renderSources(f, f.Kernels) }

// MutantSources returns a source holding kernel alone with mutation m planted, beside the
// headers the binary embeds, so that a control builds one kernel; Render's error says when m
// does not apply to that kernel.
func MutantSources(f Family, kernel string, m hip.Mutation) (fs.FS, error) {
	var ks []hip.Kernel
	for _, k := range f.Kernels {
		if k.Name == kernel {
			ks = append(ks, k)
		}
	}
	return renderSources(f, ks, hip.Mutate(kernel, m))
}

// renderSources renders ks as f's source and schedule beside the embedded headers.
func renderSources(f Family, ks []hip.Kernel, opts ...hip.Option) (fs.FS, error) {
	src, err := specialize.Render(f.Name, ks, opts...)
	if err != nil {
		return nil, err
	}
	files, err := src.Files(f.Source)
	if err != nil {
		return nil, err
	}
	out := fstest.MapFS{}
	for name, data := range files {
		out[name] = &fstest.MapFile{Data: data}
	}
	hs, err := fs.Glob(kernels.Sources, "*.h")
	if err != nil {
		return nil, err
	}
	for _, h := range hs {
		data, err := fs.ReadFile(kernels.Sources, h)
		if err != nil {
			return nil, err
		}
		out[h] = &fstest.MapFile{Data: data}
	}
	return out, nil
}
