// Package checkpoint opens a Hugging Face checkpoint directory as published: config.json,
// generation_config.json, and model.safetensors or the shards that
// model.safetensors.index.json lists, memory-mapped and validated before anything is loaded.
package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

const (
	configFile  = "config.json"
	singleFile  = "model.safetensors"
	indexFile   = "model.safetensors.index.json"
	weightsHelp = "a Hugging Face checkpoint directory holds model.safetensors, or model.safetensors.index.json and the shards it lists"
)

// TensorSpec is one tensor a family's manifest expects; an empty DTypes allows BF16, F16 and F32.
type TensorSpec struct {
	Name   string
	Shape  []int
	DTypes []DType
}

// Tensor is one tensor of the checkpoint; Data points into the memory map and is valid until Close.
type Tensor struct {
	Name, File string
	DType      DType
	Shape      []int
	Data       []byte
}

// Elements is the number of elements, the product of the shape.
func (t Tensor) Elements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Checkpoint is an open checkpoint directory: its configs and the validated headers of its
// weight files, which stay memory-mapped until Close.
type Checkpoint struct {
	Dir        string
	Config     *Config
	Generation *Generation
	Index      string // indexFile when the weights are sharded, else empty

	shards  []*shard
	tensors map[string]located
	order   []string // tensor names by file, then by offset
}

type shard struct {
	header *shardHeader
	data   []byte // the whole file, memory-mapped
}

type located struct {
	shard *shard
	entry *entry
}

// Open reads the configs and every weight file's header and checks that the files agree
// with each other and with the index. Nothing is read from the tensors' data.
func Open(dir string) (*Checkpoint, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("checkpoint %s is not a directory; give the directory that holds config.json", dir)
	}
	cfgPath := filepath.Join(dir, configFile)
	if !fileExists(cfgPath) {
		return nil, fmt.Errorf("checkpoint %s has no %s; a Hugging Face checkpoint directory holds config.json beside its weights", dir, configFile)
	}
	cfg, err := ReadConfig(cfgPath)
	if err != nil {
		return nil, err
	}
	gen, err := readGeneration(dir, cfg)
	if err != nil {
		return nil, err
	}
	c := &Checkpoint{Dir: dir, Config: cfg, Generation: gen, tensors: map[string]located{}}

	var weightMap map[string]string
	var files []string
	switch {
	case fileExists(filepath.Join(dir, indexFile)):
		c.Index = indexFile
		weightMap, files, err = readIndex(dir)
		if err != nil {
			return nil, &OpenError{Dir: dir, Errs: []error{err}}
		}
	case fileExists(filepath.Join(dir, singleFile)):
		files = []string{singleFile}
	default:
		return nil, noWeights(dir)
	}

	var errs []error
	for _, name := range files {
		s, err := openShard(dir, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.shards = append(c.shards, s)
	}
	if len(errs) == 0 {
		errs = c.collect(weightMap)
	}
	if len(errs) > 0 {
		c.Close()
		return nil, &OpenError{Dir: dir, Errs: errs}
	}
	return c, nil
}

// OpenError lists every refused file of a checkpoint directory.
type OpenError struct {
	Dir  string
	Errs []error // each a *FileError or a *ConfigError
}

func (e *OpenError) Error() string {
	var lines []string
	for _, err := range e.Errs {
		lines = append(lines, strings.Split(err.Error(), "\n")...)
	}
	if len(lines) == 1 {
		return fmt.Sprintf("checkpoint %s: %s", e.Dir, lines[0])
	}
	return fmt.Sprintf("checkpoint %s:\n  %s", e.Dir, strings.Join(lines, "\n  "))
}

func (e *OpenError) Unwrap() []error { return e.Errs }

// noWeights explains what the directory holds instead of safetensors weights.
func noWeights(dir string) error {
	ents, _ := os.ReadDir(dir)
	var st, other []string
	for _, e := range ents {
		switch ext := filepath.Ext(e.Name()); ext {
		case ".safetensors":
			st = append(st, e.Name())
		case ".bin", ".pt", ".pth", ".ckpt", ".gguf":
			other = append(other, e.Name())
		}
	}
	switch {
	case len(st) > 0:
		return fmt.Errorf("checkpoint %s has %s but neither %s nor %s; %s", dir, strings.Join(st, ", "), singleFile, indexFile, weightsHelp)
	case len(other) > 0:
		return fmt.Errorf("checkpoint %s has %s; tfc reads safetensors weights only, convert them or download the safetensors files", dir, strings.Join(other, ", "))
	}
	return fmt.Errorf("checkpoint %s has no weights; %s", dir, weightsHelp)
}

// readIndex reads the index's weight_map and the shard files it names, in first-use order.
func readIndex(dir string) (map[string]string, []string, error) {
	idx, err := ReadConfig(filepath.Join(dir, indexFile))
	if err != nil {
		return nil, nil, err
	}
	raw, ok := idx.root["weight_map"].(map[string]any)
	if !ok {
		return nil, nil, &ConfigError{File: indexFile, Key: "weight_map", Msg: "is missing or not an object of tensor name to file; download the index again"}
	}
	names := make([]string, 0, len(raw))
	for name := range raw {
		names = append(names, name)
	}
	sort.Strings(names)
	weightMap := make(map[string]string, len(raw))
	var files []string
	seen := map[string]bool{}
	for _, name := range names {
		file, ok := raw[name].(string)
		if !ok || !filepath.IsLocal(file) || filepath.Ext(file) != ".safetensors" {
			return nil, nil, &ConfigError{File: indexFile, Key: "weight_map." + name, Msg: fmt.Sprintf("is %s, want the name of a .safetensors file in the checkpoint directory", describe(raw[name]))}
		}
		weightMap[name] = file
		if !seen[file] {
			seen[file] = true
			files = append(files, file)
		}
	}
	sort.Strings(files)
	var missing []error
	for _, file := range files {
		if !fileExists(filepath.Join(dir, file)) {
			first, count := "", 0
			for _, name := range names {
				if weightMap[name] == file {
					if first == "" {
						first = name
					}
					count++
				}
			}
			missing = append(missing, &FileError{File: file, Msg: fmt.Sprintf("%s places %d tensors (%s first) in this file but the directory does not have it; download it", indexFile, count, first)})
		}
	}
	if len(missing) > 0 {
		return nil, nil, errors.Join(missing...)
	}
	return weightMap, files, nil
}

// openShard validates the header of one weight file and maps it.
func openShard(dir, name string) (*shard, error) {
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return nil, &FileError{File: name, Msg: err.Error()}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, &FileError{File: name, Msg: err.Error()}
	}
	h, err := readHeader(f, st.Size(), name)
	if err != nil {
		return nil, err
	}
	data, err := mapFile(f, st.Size())
	if err != nil {
		return nil, &FileError{File: name, Msg: fmt.Sprintf("memory-mapping: %v", err)}
	}
	return &shard{header: h, data: data}, nil
}

// collect builds the tensor table and checks that each tensor is in exactly one file, the one the index names.
func (c *Checkpoint) collect(weightMap map[string]string) []error {
	var errs []error
	firstFile := map[string]string{}
	for _, s := range c.shards {
		for _, e := range s.header.Entries {
			if prev, dup := firstFile[e.Name]; dup {
				errs = append(errs, &FileError{File: s.header.File, Tensor: e.Name, Msg: fmt.Sprintf("also in %s; a tensor belongs in one shard, download the checkpoint again", prev)})
				continue
			}
			firstFile[e.Name] = s.header.File
		}
	}
	if len(errs) > 0 {
		return errs
	}
	for _, s := range c.shards {
		for i := range s.header.Entries {
			e := &s.header.Entries[i]
			if weightMap != nil {
				want, listed := weightMap[e.Name]
				if !listed {
					errs = append(errs, &FileError{File: s.header.File, Tensor: e.Name, Msg: fmt.Sprintf("not listed in %s; the index and the shards disagree, download them again", indexFile)})
					continue
				}
				if want != s.header.File {
					errs = append(errs, &FileError{File: s.header.File, Tensor: e.Name, Msg: fmt.Sprintf("%s places it in %s; the index and the shards disagree, download them again", indexFile, want)})
					continue
				}
			}
			c.tensors[e.Name] = located{shard: s, entry: e}
			c.order = append(c.order, e.Name)
		}
	}
	if weightMap != nil {
		names := make([]string, 0, len(weightMap))
		for name := range weightMap {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			if _, ok := c.tensors[name]; !ok && !errorsNameTensor(errs, name) {
				errs = append(errs, &FileError{File: weightMap[name], Tensor: name, Msg: fmt.Sprintf("%s places it in this file but the file does not hold it; download the file again", indexFile)})
			}
		}
	}
	return errs
}

func errorsNameTensor(errs []error, name string) bool {
	for _, err := range errs {
		var fe *FileError
		if errors.As(err, &fe) && fe.Tensor == name {
			return true
		}
	}
	return false
}

// Close unmaps the weight files; tensors taken from the checkpoint are invalid afterwards.
func (c *Checkpoint) Close() error {
	var errs []error
	for _, s := range c.shards {
		errs = append(errs, unmapFile(s.data))
		s.data = nil
	}
	c.shards = nil
	return errors.Join(errs...)
}

// ModelType is config.json's model_type, empty when it has none.
func (c *Checkpoint) ModelType() string { return c.Config.ModelType() }

// Architectures is config.json's architectures list.
func (c *Checkpoint) Architectures() []string { return c.Config.Architectures() }

// Names lists every tensor, by file and then by offset.
func (c *Checkpoint) Names() []string { return append([]string(nil), c.order...) }

// WeightFiles lists the safetensors files that hold the weights.
func (c *Checkpoint) WeightFiles() []string {
	out := make([]string, len(c.shards))
	for i, s := range c.shards {
		out[i] = s.header.File
	}
	return out
}

// Metadata is the __metadata__ of each weight file, by file.
func (c *Checkpoint) Metadata() map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, s := range c.shards {
		out[s.header.File] = s.header.Metadata
	}
	return out
}

// TotalBytes is the size of every tensor's data together.
func (c *Checkpoint) TotalBytes() int64 {
	var n int64
	for _, l := range c.tensors {
		n += l.entry.End - l.entry.Begin
	}
	return n
}

// Tensor returns the named tensor, its data pointing into the memory map.
func (c *Checkpoint) Tensor(name string) (Tensor, error) {
	l, ok := c.tensors[name]
	if !ok {
		return Tensor{}, fmt.Errorf("checkpoint %s has no tensor %s", c.Dir, name)
	}
	if l.shard.data == nil && l.entry.End > l.entry.Begin {
		return Tensor{}, fmt.Errorf("checkpoint %s is closed; tensor %s can no longer be read", c.Dir, name)
	}
	e, base := l.entry, l.shard.header.DataStart
	return Tensor{
		Name:  name,
		File:  l.shard.header.File,
		DType: e.DType,
		Shape: append([]int(nil), e.Shape...),
		Data:  l.shard.data[base+e.Begin : base+e.End : base+e.End],
	}, nil
}

// Files lists every file of the checkpoint directory that is not a weight file, with its sha256.
func (c *Checkpoint) Files() ([]SourceFile, error) { return SourceFiles(c.Dir) }
