// Package kernels carries the HIP sources into the binary: the hand-written headers of this folder
// (the portability header tfc_hip.h, the device templates tfc_kernels.h and the headers it
// includes), and under gen/ what go generate writes: each family's <family>.hip with the schedule
// its kernels are launched by (<family>.schedule.json), so that a GPU backend can build code
// objects (or cubins) at run time from what it was compiled with.
package kernels

import (
	"embed"
	"io/fs"
	"path"
	"sort"
	"strings"
)

//go:embed *.h gen/*.hip gen/*.schedule.json
var files embed.FS

// Sources holds every header, .hip and .schedule.json file by base name, the generated ones
// included, as a build stages them side by side.
var Sources fs.FS = flat{}

// flat is files with gen/ folded into the root.
type flat struct{}

// embedded is the embedded path of a base name: headers at the root, the rest under gen/.
func embedded(name string) string {
	if name == "." || strings.HasSuffix(name, ".h") || strings.Contains(name, "/") {
		return name
	}
	return path.Join("gen", name)
}

func (flat) Open(name string) (fs.File, error) { return files.Open(embedded(name)) }

// ReadDir lists the root as a build sees it: the headers and the generated files, by name.
func (flat) ReadDir(name string) ([]fs.DirEntry, error) {
	if name != "." {
		return files.ReadDir(embedded(name))
	}
	root, err := files.ReadDir(".")
	if err != nil {
		return nil, err
	}
	gen, err := files.ReadDir("gen")
	if err != nil {
		return nil, err
	}
	var out []fs.DirEntry
	for _, e := range root {
		if !e.IsDir() {
			out = append(out, e)
		}
	}
	out = append(out, gen...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}
