// Package emutest builds the C++ drivers of kernels/testdata/mmaemu, which run CUDA-path kernels
// on the CPU through an emulating tfc_hip.h (a fiber a GPU thread, ldmatrix and mma.sync from the
// PTX ISA's layouts).
package emutest

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Build writes files into a temporary folder, compiles the driver main among them as C++20 with
// flags added, and returns the binary's path; the test is skipped where no C++ compiler is found.
func Build(t testing.TB, files map[string][]byte, main string, flags ...string) string {
	t.Helper()
	var cxx string
	for _, c := range []string{"g++", "clang++-19", "clang++", "c++"} {
		if p, err := exec.LookPath(c); err == nil {
			cxx = p
			break
		}
	}
	if cxx == "" {
		t.Skip("no C++ compiler")
	}
	dir := t.TempDir()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "emu")
	args := append([]string{"-std=c++20", "-Wno-unknown-pragmas"}, flags...)
	args = append(args, "-o", bin, filepath.Join(dir, main))
	if out, err := exec.Command(cxx, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cxx, err, out)
	}
	return bin
}

// Read returns the named files of dir, by name.
func Read(t testing.TB, dir string, names ...string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = data
	}
	return files
}

// AddTemplates puts every device template header of srcs (package kernels' Sources: each *.h but
// the portability header tfc_hip.h, which the drivers bring in an emulating form) into files.
func AddTemplates(t testing.TB, files map[string][]byte, srcs fs.FS) {
	t.Helper()
	names, err := fs.Glob(srcs, "*.h")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if name == "tfc_hip.h" {
			continue
		}
		if files[name], err = fs.ReadFile(srcs, name); err != nil {
			t.Fatal(err)
		}
	}
}
