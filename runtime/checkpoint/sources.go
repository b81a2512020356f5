package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// SourceFile is one non-weight file of a checkpoint directory and its sha256.
type SourceFile struct {
	Name   string // slash-separated path inside the directory
	Size   int64
	SHA256 string // lower-case hex
}

// weightExts are the extensions of weight files, which SourceFiles leaves out.
var weightExts = map[string]bool{".safetensors": true, ".bin": true, ".pt": true, ".pth": true, ".ckpt": true, ".gguf": true, ".h5": true, ".msgpack": true, ".onnx": true}

// SourceFiles lists every regular file under dir that is not a weight file, sorted by name,
// with its sha256. Links are followed; hidden folders (.git, .cache) are skipped.
func SourceFiles(dir string) ([]SourceFile, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint directory: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory; give a checkpoint directory", dir)
	}
	var out []SourceFile
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != dir && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if weightExts[strings.ToLower(filepath.Ext(path))] {
			return nil
		}
		info, err := os.Stat(path) // follows links, as the Hugging Face cache uses them
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		sum, n, err := hashFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		out = append(out, SourceFile{Name: filepath.ToSlash(rel), Size: n, SHA256: sum})
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func hashFile(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("reading %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}
