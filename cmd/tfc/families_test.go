package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"tfc/gen/registry"
)

// imageRules are names of the graph language's image rules, which share a family's name by
// descent (the Qwen2-VL processor), not families; the checker and the image processor name them.
var imageRules = map[string]bool{"qwen2_vl": true}

// namesImageRules reports whether the Go file at rel (from the repository root) may name image rules.
func namesImageRules(rel string) bool {
	return strings.HasPrefix(rel, filepath.Join("compiler", "check")) || strings.HasPrefix(rel, filepath.Join("runtime", "image"))
}

// TestNoHandWrittenFamilyNames: a family is its .graph file, so no hand-written Go outside tests
// names one in a string (the generated gen/ packages and test helpers may).
func TestNoHandWrittenFamilyNames(t *testing.T) {
	names := map[string]bool{}
	for _, f := range registry.Families {
		names[f.Name] = true
	}
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == "gen" || rel != "." && strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || strings.HasSuffix(d.Name(), "test") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err == nil && names[s] && !(imageRules[s] && namesImageRules(rel)) {
				t.Errorf("%s names family %q: a family should be named only by its .graph file", rel, s)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
