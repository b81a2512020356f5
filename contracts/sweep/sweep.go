// Package sweep writes the config sweep's tiny random checkpoints, byte for byte the same on any
// machine: a family fixture's side files, its config.json with the sweep's values merged in,
// weights drawn from a seeded generator and synthetic pictures. The oracle
// (tools/oracle/sweep.py) runs the publisher's code on them; only its references are committed.
package sweep

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"image"
	"image/color"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"tfc/runtime/checkpoint"
	"tfc/runtime/engine"
	"tfc/runtime/model"
)

// File is the sweep's definition, testdata/sweep/sweep.json.
type File struct {
	Images  []Picture       `json:"images"`
	Cases   map[string]Case `json:"cases"`
	Configs []Config        `json:"configs"`
}

// Picture is a synthetic PNG: its size, colour model ("rgb", "gray" or "rgba") and pattern seed.
type Picture struct {
	Name  string `json:"name"`
	W     int    `json:"w"`
	H     int    `json:"h"`
	Model string `json:"model"`
	Seed  uint64 `json:"seed"`
}

// Case is one chat of the sweep, in Hugging Face message form; image parts name a picture.
type Case struct {
	Messages json.RawMessage `json:"messages"`
	Images   []string        `json:"images"` // the pictures in the order the chat shows them
}

// Config is one sweep checkpoint: a fixture's files with Set merged into its config.json.
type Config struct {
	Name    string         `json:"name"`
	Family  string         `json:"family"`
	Fixture string         `json:"fixture"` // folder under testdata holding the side files
	Seed    uint64         `json:"seed"`
	Set     map[string]any `json:"set"` // values merged into config.json (objects merge, others replace)
	Cases   []string       `json:"cases"`
	MaxNew  int            `json:"max_new_tokens"`
	Comment string         `json:"comment,omitempty"`
	DType   string         `json:"dtype,omitempty"` // weights' safetensors dtype: BF16 (default), F16 or F32
}

// sideFiles are copied from the fixture as they are; tokenizer.json is made by make testdata.
var sideFiles = []string{"generation_config.json", "preprocessor_config.json", "chat_template.json",
	"tokenizer_config.json", "special_tokens_map.json", "tokenizer.json"}

// Load reads the sweep's definition.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f File
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, c := range f.Configs {
		for _, name := range c.Cases {
			if _, ok := f.Cases[name]; !ok {
				return nil, fmt.Errorf("%s: config %s names case %q, which is not defined", path, c.Name, name)
			}
		}
	}
	return &f, nil
}

// Find returns the config of that name.
func (f *File) Find(name string) (Config, bool) {
	for _, c := range f.Configs {
		if c.Name == name {
			return c, true
		}
	}
	return Config{}, false
}

// ConfigJSON is the fixture's config.json with c.Set merged in.
func (c Config) ConfigJSON(testdata string) ([]byte, error) {
	base, err := os.ReadFile(filepath.Join(testdata, c.Fixture, "config.json"))
	if err != nil {
		return nil, err
	}
	var cfg map[string]any
	if err := json.Unmarshal(base, &cfg); err != nil {
		return nil, err
	}
	merge(cfg, c.Set)
	if c.DType != "" {
		name, ok := torchNames[c.DType]
		if !ok {
			return nil, fmt.Errorf("sweep config %s: dtype %q is not BF16, F16 or F32", c.Name, c.DType)
		}
		for _, k := range []string{"dtype", "torch_dtype"} {
			if _, ok := cfg[k]; ok {
				cfg[k] = name
			}
		}
	}
	return json.MarshalIndent(cfg, "", "  ")
}

// torchNames are the config.json names of the weight dtypes.
var torchNames = map[string]string{"BF16": "bfloat16", "F16": "float16", "F32": "float32"}

// merge writes src into dst: objects merge key by key, a null deletes, anything else replaces.
func merge(dst, src map[string]any) {
	for k, v := range src {
		if v == nil {
			delete(dst, k)
			continue
		}
		if sv, ok := v.(map[string]any); ok {
			if dv, ok := dst[k].(map[string]any); ok {
				merge(dv, sv)
				continue
			}
		}
		dst[k] = v
	}
}

// Write writes checkpoint c into out (created) and its pictures into out/images, and returns the
// sha256 of each file it wrote from the seed (weights, config.json, pictures) by name.
func (f *File) Write(c Config, testdata, out string) (map[string]string, error) {
	cfgJSON, err := c.ConfigJSON(testdata)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(out, "images"), 0o755); err != nil {
		return nil, err
	}
	sums := map[string]string{}
	put := func(name string, data []byte) error {
		sum := sha256.Sum256(data)
		sums[name] = hex.EncodeToString(sum[:])
		return os.WriteFile(filepath.Join(out, name), data, 0o644)
	}
	for _, name := range sideFiles {
		data, err := os.ReadFile(filepath.Join(testdata, c.Fixture, name))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(out, name), data, 0o644); err != nil {
			return nil, err
		}
	}
	if err := put("config.json", cfgJSON); err != nil {
		return nil, err
	}
	weights, err := Weights(cfgJSON, filepath.Join(testdata, c.Fixture, "generation_config.json"), c.Seed, c.DType)
	if err != nil {
		return nil, fmt.Errorf("sweep config %s: %w", c.Name, err)
	}
	if err := put("model.safetensors", weights); err != nil {
		return nil, err
	}
	for _, p := range f.pictures(c) {
		data, err := p.PNG()
		if err != nil {
			return nil, err
		}
		if err := put(filepath.Join("images", p.Name), data); err != nil {
			return nil, err
		}
	}
	return sums, nil
}

// pictures lists the pictures c's cases show.
func (f *File) pictures(c Config) []Picture {
	want := map[string]bool{}
	for _, name := range c.Cases {
		for _, p := range f.Cases[name].Images {
			want[p] = true
		}
	}
	var out []Picture
	for _, p := range f.Images {
		if want[p.Name] {
			out = append(out, p)
		}
	}
	return out
}

// Weights draws every tensor the family's manifest lists for cfgJSON and returns them as one
// safetensors file of dtype (BF16 when empty). Each tensor has its own generator seeded by (seed,
// name), so the draw does not depend on the manifest's order; every value comes from integer
// arithmetic and one correctly rounded multiply, so the bytes are the same on every machine.
func Weights(cfgJSON []byte, generationConfig string, seed uint64, dtype string) ([]byte, error) {
	if dtype == "" {
		dtype = "BF16"
	}
	if _, ok := torchNames[dtype]; !ok {
		return nil, fmt.Errorf("dtype %q is not BF16, F16 or F32", dtype)
	}
	cfg, err := checkpoint.ParseConfig("config.json", cfgJSON)
	if err != nil {
		return nil, err
	}
	_, bound, err := engine.Bind(cfg)
	if err != nil {
		return nil, err
	}
	if err := bound.Resolve(func(string) bool { return true }); err != nil {
		return nil, err
	}
	eos, err := loudRow(generationConfig)
	if err != nil {
		return nil, err
	}
	specs := bound.Manifest()
	sort.Slice(specs, func(i, j int) bool { return specs[i].Name < specs[j].Name })
	stored := make([]checkpoint.Stored, len(specs))
	for i, s := range specs {
		stored[i] = checkpoint.Stored{Name: s.Name, DType: dtype, Shape: s.Shape, Data: draw(s, seed, eos, dtype)}
	}
	return checkpoint.Encode(stored, map[string]string{"format": "pt"}), nil
}

// loudRow is the end-of-turn id (the largest id of generation_config.json's eos_token_id),
// whose embedding and head rows are drawn loud so that some chats stop before the cap.
func loudRow(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var g struct {
		EOS any `json:"eos_token_id"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	best := -1
	switch v := g.EOS.(type) {
	case float64:
		best = int(v)
	case []any:
		for _, x := range v {
			if n, ok := x.(float64); ok && int(n) > best {
				best = int(n)
			}
		}
	}
	if best < 0 {
		return 0, fmt.Errorf("%s has no eos_token_id", path)
	}
	return best, nil
}

// firstAdded is the first added-token id of the Qwen vocabulary: rows from it on are drawn small.
const firstAdded = 151643

// draw returns a tensor's BF16 bytes. The scheme is the tiny fixtures': norm weights 1 ± 0.1,
// the decoder's final norm of random sign, biases of deviation 0.2, embedding and head rows of
// deviation 1 (added rows ×0.1, the end-of-turn row ×2.5), linear weights gain/√fan_in (gain
// 2.5 on o_proj, 5 on down_proj, 1.75 on the merger's last linear, else 1). The draw is
// uniform: a deviation σ is a half-width of σ√3.
func draw(s model.TensorSpec, seed uint64, loud int, dtype string) []byte {
	h := fnv.New64a()
	h.Write([]byte(s.Name))
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	n := model.Elements(s.Shape)
	name := s.Name
	var base, dev float64
	rowScale := func(int) float64 { return 1 }
	switch {
	case len(s.Shape) == 1 && strings.HasSuffix(name, ".bias"):
		dev = 0.2
	case len(s.Shape) == 1 && isFinalNorm(name):
		dev = 1
	case len(s.Shape) == 1:
		base, dev = 1, 0.1
	case strings.HasSuffix(name, "embed_tokens.weight") || strings.HasSuffix(name, "lm_head.weight"):
		dev = 1
		rowScale = func(r int) float64 {
			switch {
			case r == loud:
				return 2.5
			case r >= firstAdded:
				return 0.1
			}
			return 1
		}
	default:
		fanIn := n / s.Shape[0]
		gain := 1.0
		switch {
		case strings.HasSuffix(name, "o_proj.weight"):
			gain = 2.5
		case strings.HasSuffix(name, "down_proj.weight"):
			gain = 5
		case strings.Contains(name, "merger.mlp.2."):
			gain = 1.75
		}
		dev = gain / math.Sqrt(float64(fanIn))
	}
	cols := n / s.Shape[0]
	size := 2
	if dtype == "F32" {
		size = 4
	}
	out := make([]byte, size*n)
	for r := 0; r < s.Shape[0]; r++ {
		// half-width times 2^-52, so one multiply of the 53-bit integer gives the value
		step := dev * math.Sqrt(3) * rowScale(r) * 0x1p-52
		for c := 0; c < cols; c++ {
			i := int64(rng.Uint64()>>11) - 1<<52
			v := float64(float64(i) * step) // the conversion keeps the add below from fusing
			v = base + v
			at := size * (r*cols + c)
			switch dtype {
			case "F32":
				binary.LittleEndian.PutUint32(out[at:], math.Float32bits(float32(v)))
			case "F16":
				binary.LittleEndian.PutUint16(out[at:], f16(float32(v)))
			default:
				binary.LittleEndian.PutUint16(out[at:], bf16(float32(v)))
			}
		}
	}
	return out
}

// isFinalNorm tells the decoder's final norm weight: a 1-D norm outside the layers and the tower.
func isFinalNorm(name string) bool {
	return strings.HasSuffix(name, "norm.weight") && !strings.Contains(name, "layers.") &&
		!strings.Contains(name, "visual") && !strings.Contains(name, "vision")
}

// bf16 rounds to the nearest BF16, ties to even.
func bf16(f float32) uint16 {
	b := math.Float32bits(f)
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// f16 rounds to the nearest IEEE half, ties to even (subnormals kept, overflow to ±Inf).
func f16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23&0xff) - 127 + 15
	mant := b & 0x7fffff
	if exp >= 31 {
		return sign | 0x7c00
	}
	shift := uint(13)
	if exp <= 0 {
		if exp < -10 {
			return sign
		}
		mant |= 0x800000
		shift = uint(14 - exp)
		exp = 0
	}
	r := uint32(exp)<<10 | mant>>shift
	rem, half := mant&(1<<shift-1), uint32(1)<<(shift-1)
	if rem > half || rem == half && r&1 == 1 {
		r++
	}
	return sign | uint16(r)
}

// PNG draws the picture: smooth gradients, a disk and text-like bars, from integer arithmetic.
func (p Picture) PNG() ([]byte, error) {
	rng := rand.New(rand.NewPCG(p.Seed, 0x5eed))
	cx, cy, rad := rng.IntN(p.W), rng.IntN(p.H), 3+rng.IntN(1+min(p.W, p.H)/3)
	ink := [3]uint8{uint8(rng.IntN(256)), uint8(rng.IntN(256)), uint8(rng.IntN(256))}
	bars := 2 + rng.IntN(5)
	pix := func(x, y int) [4]uint8 {
		c := [4]uint8{uint8(255 * x / max(1, p.W-1)), uint8(255 * y / max(1, p.H-1)), uint8((x*7 + y*13) % 256), 255}
		if (x-cx)*(x-cx)+(y-cy)*(y-cy) < rad*rad {
			c = [4]uint8{ink[0], ink[1], ink[2], 255}
		}
		if b := y * bars / max(1, p.H); y%max(1, p.H/bars) < 3 && x > 2+b*5 && x < p.W-3 && (x/4)%3 != 0 {
			c = [4]uint8{20, 20, 30, 255}
		}
		c[3] = uint8(64 + (191*x)/max(1, p.W-1))
		return c
	}
	// one pass over the pixels; set stores a pixel in the picture's colour model
	r := image.Rect(0, 0, p.W, p.H)
	var img image.Image
	var set func(x, y int, c [4]uint8)
	switch p.Model {
	case "rgb":
		m := image.NewRGBA(r)
		img, set = m, func(x, y int, c [4]uint8) { m.SetRGBA(x, y, color.RGBA{c[0], c[1], c[2], 255}) }
	case "gray":
		m := image.NewGray(r)
		img, set = m, func(x, y int, c [4]uint8) {
			m.SetGray(x, y, color.Gray{uint8((int(c[0]) + 2*int(c[1]) + int(c[2])) / 4)})
		}
	case "rgba":
		m := image.NewNRGBA(r)
		img, set = m, func(x, y int, c [4]uint8) { m.SetNRGBA(x, y, color.NRGBA{c[0], c[1], c[2], c[3]}) }
	default:
		return nil, fmt.Errorf("picture %s: colour model %q is not rgb, gray or rgba", p.Name, p.Model)
	}
	for y := 0; y < p.H; y++ {
		for x := 0; x < p.W; x++ {
			set(x, y, pix(x, y))
		}
	}
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(&buf, img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
