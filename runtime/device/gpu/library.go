package gpu

import (
	"fmt"
	"io/fs"
	"sort"
	"sync"
)

// Library is a GPU backend's kernel sources and what it loaded from them: the symbol table, each
// family's module and each kernel's function. The backend says how a family's source becomes a
// module and how a module gives a function.
type Library struct {
	name string // backend name, the prefix of every error the library makes

	mu       sync.Mutex
	srcs     fs.FS
	symbols  map[string]Entry
	modules  map[string]uintptr // family file → module
	funcs    map[string]uintptr // symbol → function
	verified map[string]bool    // kernels whose parameter names matched their declaration
}

// Loader builds and loads a family's module from the sources, and finds a kernel in a module.
type Loader interface {
	LoadModule(srcs fs.FS, family string) (uintptr, error)
	Function(module uintptr, family, symbol string) (uintptr, error)
}

// NewLibrary reads the symbol table of srcs for the backend called name.
func NewLibrary(name string, srcs fs.FS) (*Library, error) {
	symbols, err := SymbolTable(srcs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &Library{name: name, srcs: srcs, symbols: symbols, modules: map[string]uintptr{}, funcs: map[string]uintptr{}, verified: map[string]bool{}}, nil
}

// Function returns the loaded function of symbol, building and loading its family through ld on
// first use, and checks once that args name the parameters the kernel declares.
func (l *Library) Function(symbol string, args []Arg, ld Loader) (uintptr, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.symbols[symbol]
	if !ok {
		return 0, fmt.Errorf("%s: no kernel %s in the kernel sources; regenerate kernels/ with tfc compile and rebuild", l.name, symbol)
	}
	if !l.verified[symbol] {
		if err := SameParams(symbol, e.Params, args); err != nil {
			return 0, fmt.Errorf("%s: %w", l.name, err)
		}
		l.verified[symbol] = true
	}
	if f, ok := l.funcs[symbol]; ok {
		return f, nil
	}
	mod, ok := l.modules[e.Family]
	if !ok {
		var err error
		if mod, err = ld.LoadModule(l.srcs, e.Family); err != nil {
			return 0, err
		}
		l.modules[e.Family] = mod
	}
	f, err := ld.Function(mod, e.Family, symbol)
	if err != nil {
		return 0, err
	}
	l.funcs[symbol] = f
	return f, nil
}

// Specialize makes text the source of kernels/<family>.hip: the symbol table is read again and
// the family builds from text on its next first launch, so the build cache keys it by text. Once
// the family's module is loaded its source is fixed: the same text is accepted, other text is
// refused, since the kernels running for a loaded model must not change under it.
func (l *Library) Specialize(family string, text []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	file := family + ".hip"
	if SameSource(l.srcs, file, text) {
		return nil
	}
	if _, loaded := l.modules[file]; loaded {
		return fmt.Errorf("%s: kernels/%s is loaded on this backend already, specialised for other values; load this checkpoint on a backend of its own", l.name, file)
	}
	srcs, symbols, err := Replace(l.srcs, file, text)
	if err != nil {
		return fmt.Errorf("%s: specialising %s: %w", l.name, family, err)
	}
	for sym := range l.verified {
		if e, ok := symbols[sym]; !ok || e.Family == file {
			delete(l.verified, sym)
		}
	}
	l.srcs, l.symbols = srcs, symbols
	return nil
}

// Sources are the kernel sources the library builds from now.
func (l *Library) Sources() fs.FS {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.srcs
}

// Symbols is the symbol table of the current sources.
func (l *Library) Symbols() map[string]Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.symbols
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
