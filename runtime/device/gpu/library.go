package gpu

import (
	"fmt"
	"io/fs"
	"sort"
	"sync"

	"tfc/runtime/device"
)

// Library is a GPU backend's kernel sources and what it loaded from them: the kernel table (each
// kernel's family and schedule), each family's module and each launch's function. The backend
// says how a family's source becomes a module and how a module gives a function.
type Library struct {
	name string // backend name, the prefix of every error the library makes

	mu       sync.Mutex
	srcs     fs.FS
	kernels  map[string]Entry
	modules  map[string]uintptr // family file → module
	funcs    map[string]uintptr // launch symbol → function
	verified map[string]bool    // kernels whose ops carried the operands their schedule passes
	layouts  device.Layouts     // the optional layouts launches take (the sources are built with TFC_PAGED_MMA 2 for Layouts.PagedMMA)
}

// Loader builds and loads a family's module from the sources, and finds a kernel in a module.
type Loader interface {
	LoadModule(srcs fs.FS, family string) (uintptr, error)
	Function(module uintptr, family, symbol string) (uintptr, error)
}

// NewLibrary reads the kernel table of srcs for the backend called name.
func NewLibrary(name string, srcs fs.FS) (*Library, error) {
	kernels, err := KernelTable(srcs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &Library{name: name, srcs: srcs, kernels: kernels, modules: map[string]uintptr{}, funcs: map[string]uintptr{}, verified: map[string]bool{}}, nil
}

// Call is one kernel ready to launch: a function and a grid for each of its launches, and the
// parameter values they share, in the order of its schedule (each passed in an 8-byte slot).
type Call struct {
	Funcs  []uintptr
	Grids  []Grid
	Values []uint64
}

// Prepare marshals the ops of k by its schedule and finds the function of each of its launches,
// loading the kernel's family through ld on first use. The first launch of a kernel checks that
// the ops carry the operands its schedule passes.
func (l *Library) Prepare(k *device.KernelRef, ops []device.Op, address func(device.Buffer) (uint64, error), ld Loader) (*Call, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.kernels[k.Name]
	if !ok {
		return nil, fmt.Errorf("%s: no kernel %s in the kernel sources; regenerate kernels/ with tfc compile and rebuild", l.name, k.Name)
	}
	if !l.verified[k.Name] {
		if err := SameOperands(ops, &e.Schedule); err != nil {
			return nil, fmt.Errorf("%s: %w", l.name, err)
		}
		l.verified[k.Name] = true
	}
	vals, grids, err := Marshal(ops, &e.Schedule, address, l.layouts)
	if err != nil {
		return nil, fmt.Errorf("%s: kernel %s: %w", l.name, k.Name, err)
	}
	c := &Call{Funcs: make([]uintptr, len(grids)), Grids: grids, Values: vals}
	for i, g := range grids {
		if c.Funcs[i], err = l.function(e.Family, g.Symbol, ld); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// function returns the loaded function of symbol in family, building and loading the family
// through ld on first use. l.mu is held.
func (l *Library) function(family, symbol string, ld Loader) (uintptr, error) {
	if f, ok := l.funcs[symbol]; ok {
		return f, nil
	}
	mod, ok := l.modules[family]
	if !ok {
		var err error
		if mod, err = ld.LoadModule(l.srcs, family); err != nil {
			return 0, err
		}
		l.modules[family] = mod
	}
	f, err := ld.Function(mod, family, symbol)
	if err != nil {
		return 0, err
	}
	l.funcs[symbol] = f
	return f, nil
}

// Specialize makes src the source of kernels/gen/<family>.hip and its schedule: the kernel table is
// read again and the family builds from src on its next first launch, so the build cache keys it
// by its text. Once the family's module is loaded its source is fixed: the same source is
// accepted, another is refused, since the kernels running for a loaded model must not change.
func (l *Library) Specialize(family string, src device.Source) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	file := family + ".hip"
	if SameSource(l.srcs, file, src) {
		return nil
	}
	if _, loaded := l.modules[file]; loaded {
		return fmt.Errorf("%s: kernels/gen/%s is loaded on this backend already, specialised for other values; load this checkpoint on a backend of its own", l.name, file)
	}
	srcs, kernels, err := Replace(l.srcs, file, src)
	if err != nil {
		return fmt.Errorf("%s: specialising %s: %w", l.name, family, err)
	}
	for name := range l.verified {
		if e, ok := kernels[name]; !ok || e.Family == file {
			delete(l.verified, name)
		}
	}
	l.srcs, l.kernels = srcs, kernels
	return nil
}

// Sources are the kernel sources the library builds from now.
func (l *Library) Sources() fs.FS {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.srcs
}

// Kernels is the kernel table of the current sources.
func (l *Library) Kernels() map[string]Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.kernels
}

// Unload returns the loaded modules, by family name, and forgets them and their functions.
func (l *Library) Unload() []uintptr {
	l.mu.Lock()
	defer l.mu.Unlock()
	families := make([]string, 0, len(l.modules))
	for f := range l.modules {
		families = append(families, f)
	}
	sort.Strings(families)
	mods := make([]uintptr, len(families))
	for i, f := range families {
		mods[i] = l.modules[f]
	}
	l.modules, l.funcs = map[string]uintptr{}, map[string]uintptr{}
	return mods
}
