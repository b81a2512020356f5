package image

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// reference is testdata/images/reference.json, written by tools/oracle/image_reference.py.
type reference struct {
	Versions   map[string]string              `json:"versions"`
	Processors map[string]map[string]any      `json:"processors"`
	Configs    map[string]map[string]refEntry `json:"configs"`
}

type refEntry struct {
	PILMode   string `json:"pil_mode"`
	RGBSha256 string `json:"rgb_sha256"`
	GridTHW   []int  `json:"grid_thw"`
	Shape     []int  `json:"shape"`
	Sha256    string `json:"sha256"`
	Error     string `json:"error"`
}

var configDirs = map[string]string{"default": testdataDir, "small_max": filepath.Join(testdataDir, "small_max")}

func loadReference(t testing.TB) (*reference, map[string]tensor) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testdataDir, "reference.json"))
	if err != nil {
		t.Fatalf("%v; run tools/oracle/image_reference.py and copy its outputs to testdata/images", err)
	}
	var ref reference
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	tensors, err := readSafetensors(filepath.Join(testdataDir, "reference.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	return &ref, tensors
}

// tensor is one entry of a safetensors file.
type tensor struct {
	Dtype string `json:"dtype"`
	Shape []int  `json:"shape"`
	Data  []byte
}

func (x tensor) float32s() []float32 {
	out := make([]float32, len(x.Data)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(x.Data[4*i:]))
	}
	return out
}

func readSafetensors(path string) (map[string]tensor, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint64(data)
	var header map[string]json.RawMessage
	if err := json.Unmarshal(data[8:8+n], &header); err != nil {
		return nil, err
	}
	body := data[8+n:]
	out := map[string]tensor{}
	for name, raw := range header {
		if name == "__metadata__" {
			continue
		}
		var x struct {
			tensor
			Offsets [2]int `json:"data_offsets"`
		}
		if err := json.Unmarshal(raw, &x); err != nil {
			return nil, err
		}
		x.Data = body[x.Offsets[0]:x.Offsets[1]]
		out[name] = x.tensor
	}
	return out, nil
}

func mustConfig(t testing.TB, name string) Config {
	t.Helper()
	cfg, err := LoadConfig(configDirs[name])
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func decodeFile(t testing.TB, name string) *RGB {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testdataDir, name))
	if err != nil {
		t.Fatal(err)
	}
	img, err := Decode(0, data, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func sortedNames(m map[string]refEntry) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// firstMismatch names where got first differs from the oracle's pixel_values, when the oracle kept them.
func firstMismatch(tensors map[string]tensor, key string, got *Patches) string {
	x, ok := tensors[key]
	if !ok {
		return "(pixel_values too large to keep; see debug.safetensors from the oracle run)"
	}
	want := x.float32s()
	if len(want) != len(got.Pixels) {
		return fmt.Sprintf("length %d, want %d", len(got.Pixels), len(want))
	}
	for i := range want {
		if math.Float32bits(want[i]) != math.Float32bits(got.Pixels[i]) {
			return fmt.Sprintf("first at row %d col %d: got %v want %v", i/got.Cols, i%got.Cols, got.Pixels[i], want[i])
		}
	}
	return "no element differs"
}

// TestExactAgainstTransformers: PNG and WebP (lossless and lossy) give the oracle's pixel_values bit for bit.
func TestExactAgainstTransformers(t *testing.T) {
	ref, tensors := loadReference(t)
	for _, g := range testImages() {
		for cname, entries := range ref.Configs {
			if _, ok := entries[g.name]; !ok {
				t.Errorf("reference.json has no %s entry for %s; rerun tools/oracle/image_reference.py", cname, g.name)
			}
		}
	}
	for cname, entries := range ref.Configs {
		cfg := mustConfig(t, cname)
		identical, total := 0, 0
		for _, name := range sortedNames(entries) {
			e := entries[name]
			if lossy(name) {
				continue
			}
			total++
			t.Run(cname+"/"+name, func(t *testing.T) {
				img := decodeFile(t, name)
				if img.rgbSha256() != e.RGBSha256 {
					t.Errorf("decoded RGB differs from PIL's convert(\"RGB\") of mode %s", e.PILMode)
				}
				p, err := Preprocess(img, cfg)
				if e.Error != "" {
					if err == nil {
						t.Errorf("transformers refused this image (%s) but Preprocess accepted it", e.Error)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if p.GridTHW[0] != e.GridTHW[0] || p.GridTHW[1] != e.GridTHW[1] || p.GridTHW[2] != e.GridTHW[2] {
					t.Fatalf("grid_thw %v, want %v", p.GridTHW, e.GridTHW)
				}
				if p.Rows != e.Shape[0] || p.Cols != e.Shape[1] {
					t.Fatalf("shape [%d %d], want %v", p.Rows, p.Cols, e.Shape)
				}
				if got := p.Sha256(); got != e.Sha256 {
					t.Fatalf("pixel_values sha256 %s, want %s: %s", got, e.Sha256, firstMismatch(tensors, cname+"/"+name, p))
				}
				identical++
			})
		}
		t.Logf("%s: %d of %d PNG and WebP images bit-identical to transformers %s", cname, identical, total, ref.Versions["transformers"])
	}
}

// jpegBound is the largest |pixel_values| difference accepted on JPEG, about 7 levels of 255 over CLIP's std.
const jpegBound = 0.1

// lossy names the files whose decoded pixels may differ from PIL's: JPEG, whose IDCT differs between Go and libjpeg-turbo.
func lossy(name string) bool { return strings.HasSuffix(name, ".jpg") }

// TestLossyAgainstTransformers: the pipeline on PIL's own decoded pixels is exact, so what remains is the
// decoder (Go's integer IDCT against libjpeg-turbo's islow; chroma upsampling and colour tables are libjpeg's).
func TestLossyAgainstTransformers(t *testing.T) {
	ref, tensors := loadReference(t)
	cfg := mustConfig(t, "default")
	entries := ref.Configs["default"]
	for _, name := range sortedNames(entries) {
		if !lossy(name) {
			continue
		}
		e := entries[name]
		t.Run(name, func(t *testing.T) {
			x, ok := tensors["rgb/"+name]
			if !ok {
				t.Fatalf("reference.safetensors lacks rgb/%s; rerun the oracle", name)
			}
			pilRGB := &RGB{Width: x.Shape[1], Height: x.Shape[0], Pix: x.Data}
			fromPIL, err := Preprocess(pilRGB, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if fromPIL.Sha256() != e.Sha256 {
				t.Fatalf("on PIL's decoded pixels pixel_values differ from transformers; the resize or normalise is off")
			}
			img := decodeFile(t, name)
			levels, differing := 0, 0
			for i := range img.Pix {
				d := int(img.Pix[i]) - int(pilRGB.Pix[i])
				levels = max(levels, d, -d)
				if d != 0 {
					differing++
				}
			}
			got, err := Preprocess(img, cfg)
			if err != nil {
				t.Fatal(err)
			}
			diff := 0.0
			for i := range got.Pixels {
				diff = math.Max(diff, math.Abs(float64(got.Pixels[i])-float64(fromPIL.Pixels[i])))
			}
			t.Logf("%s: decoded RGB differs from PIL's in %.2f%% of samples, by up to %d levels; pixel_values by up to %.4f",
				name, 100*float64(differing)/float64(len(img.Pix)), levels, diff)
			if diff > jpegBound {
				t.Errorf("pixel_values differ by %.4f, over the %.2f bound", diff, jpegBound)
			}
		})
	}
}

func (m *RGB) rgbSha256() string {
	return sha256Hex(m.Pix)
}

func TestBadInputs(t *testing.T) {
	for i, b := range badImages() {
		data, err := os.ReadFile(filepath.Join(testdataDir, b.name))
		if err != nil {
			t.Fatal(err)
		}
		_, err = Decode(i+1, data, DefaultLimits())
		if err == nil {
			t.Errorf("%s: decoded without error", b.name)
			continue
		}
		prefix := fmt.Sprintf("image %d ", i+1)
		if !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: error %q, want %q...%q", b.name, err, prefix, b.want)
		}
	}
}

// TestTruncatedNamesTruncation cuts every lossless test image short at several points.
func TestTruncatedNamesTruncation(t *testing.T) {
	for _, name := range []string{"odd_rgb_333x257.png", "photo_q90_640x480.jpg", "gray_q85_300x200.jpg", "lossless_rgba_250x170.webp", "palette_320x240.png"} {
		data, err := os.ReadFile(filepath.Join(testdataDir, name))
		if err != nil {
			t.Fatal(err)
		}
		format := Sniff(data)
		for _, frac := range []float64{0.3, 0.6, 0.9, 0.99} {
			_, err := Decode(1, data[:int(float64(len(data))*frac)], DefaultLimits())
			want := fmt.Sprintf("image 1 could not be decoded: truncated %s", format)
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("%s cut at %.0f%%: %v, want %q", name, 100*frac, err, want)
			}
		}
	}
}

func TestBombRefusedBeforeDecoding(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(testdataDir, "bad_bomb_100000x100000.png"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Decode(3, data, Limits{MaxPixels: 1 << 20})
	want := "image 3 is 100000x100000, over the 1048576-pixel limit; send a smaller image"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}

func TestSmartResize(t *testing.T) {
	cases := []struct{ h, w, minP, maxP, wantH, wantW int }{
		{20, 30, 3136, 12845056, 56, 84},
		{56, 56, 3136, 12845056, 56, 56},
		{130, 112, 3136, 12845056, 140, 112},
		{70, 42, 3136, 12845056, 56, 56}, // round half to even: 2.5 -> 2, 1.5 -> 2
		{3500, 3700, 3136, 12845056, 3472, 3668},
		{389, 517, 3136, 200704, 392, 504},
	}
	for _, c := range cases {
		h, w, err := SmartResize(c.h, c.w, 28, c.minP, c.maxP)
		if err != nil || h != c.wantH || w != c.wantW {
			t.Errorf("SmartResize(%d, %d) = %d, %d, %v; want %d, %d", c.h, c.w, h, w, err, c.wantH, c.wantW)
		}
	}
	if _, _, err := SmartResize(10, 2010, 28, 3136, 12845056); err == nil {
		t.Error("aspect ratio 201 accepted")
	}
}

func TestLoadConfigForms(t *testing.T) {
	def := mustConfig(t, "default")
	if def.MinPixels != 3136 || def.MaxPixels != 12845056 {
		t.Errorf("default: min/max %d/%d, want 3136/12845056 from min_pixels/max_pixels", def.MinPixels, def.MaxPixels)
	}
	small := mustConfig(t, "small_max")
	if small.MinPixels != 3136 || small.MaxPixels != 200704 {
		t.Errorf("small_max: min/max %d/%d, want 3136/200704 from size", small.MinPixels, small.MaxPixels)
	}
	both, err := ParseConfig("x", []byte(`{"size":{"shortest_edge":100,"longest_edge":200},"max_pixels":5000}`))
	if err != nil || both.MinPixels != 100 || both.MaxPixels != 5000 {
		t.Errorf("max_pixels must override size.longest_edge: %+v %v", both, err)
	}
	if _, err := LoadConfig(t.TempDir()); err == nil || !strings.Contains(err.Error(), "preprocessor_config.json is missing") {
		t.Errorf("missing file: %v", err)
	}
	if got := def.WithPixels(0, 1000000); got.MaxPixels != 1000000 || got.MinPixels != 3136 {
		t.Errorf("WithPixels: %+v", got)
	}
}

func TestHashIsPixelIdentity(t *testing.T) {
	a := decodeFile(t, "odd_rgb_333x257.png")
	b := decodeFile(t, "odd_rgb_333x257.png")
	if a.Hash() != b.Hash() {
		t.Fatal("same image, different hashes")
	}
	b.Pix[100]++
	if a.Hash() == b.Hash() {
		t.Fatal("different pixels, same hash")
	}
	p, err := Preprocess(a, mustConfig(t, "small_max"))
	if err != nil || p.Hash != a.Hash() {
		t.Fatalf("Patches.Hash %q, want the decoded image's %q (%v)", p.Hash, a.Hash(), err)
	}
	// a page, whose leaves are hashed in parallel: a byte anywhere, two leaves swapped, or the same
	// pixels at another size each change it
	page := &RGB{Width: 1000, Height: 1400, Pix: make([]uint8, 1000*1400*3)}
	for i := range page.Pix {
		page.Pix[i] = uint8(i * 7 % 251)
	}
	want := page.Hash()
	if page.Hash() != want {
		t.Fatal("the page's hash differs between two calls")
	}
	for _, at := range []int{0, hashChunk - 1, hashChunk, len(page.Pix) / 2, len(page.Pix) - 1} {
		page.Pix[at]++
		if page.Hash() == want {
			t.Errorf("byte %d changed, same hash", at)
		}
		page.Pix[at]--
	}
	swapped := &RGB{Width: 1000, Height: 1400, Pix: slices.Concat(page.Pix[hashChunk:2*hashChunk], page.Pix[:hashChunk], page.Pix[2*hashChunk:])}
	if swapped.Hash() == want {
		t.Error("two leaves swapped, same hash")
	}
	if (&RGB{Width: 1400, Height: 1000, Pix: page.Pix}).Hash() == want {
		t.Error("the same pixels at another size, same hash")
	}
}

// FuzzDecode feeds arbitrary bytes through Decode and Preprocess: errors are fine, panics are not.
func FuzzDecode(f *testing.F) {
	entries, err := os.ReadDir(testdataDir)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || !(strings.HasSuffix(e.Name(), ".png") || strings.HasSuffix(e.Name(), ".jpg") || strings.HasSuffix(e.Name(), ".webp")) {
			continue
		}
		if info, err := e.Info(); err == nil && info.Size() < 64<<10 {
			data, _ := os.ReadFile(filepath.Join(testdataDir, e.Name()))
			f.Add(data)
		}
	}
	cfg := DefaultConfig().WithPixels(0, 28*28*16)
	f.Fuzz(func(t *testing.T, data []byte) {
		start := time.Now()
		defer func() {
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("%d-byte input took %v", len(data), d)
			}
		}()
		img, err := Decode(0, data, Limits{MaxBytes: 1 << 20, MaxPixels: 1 << 20})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "image 0 ") {
				t.Fatalf("error does not name the image: %v", err)
			}
			return
		}
		if len(img.Pix) != img.Width*img.Height*3 {
			t.Fatalf("%dx%d image with %d bytes", img.Width, img.Height, len(img.Pix))
		}
		if _, err := Preprocess(img, cfg); err != nil && !strings.Contains(err.Error(), "aspect ratio") {
			t.Fatal(err)
		}
	})
}

// benchmark sets: the document page alone, and every generated PNG but the huge one (as the oracle's bench).
func benchFiles(b *testing.B, set string) [][]byte {
	if set == "page" {
		data, err := os.ReadFile(filepath.Join(testdataDir, "page_rgb_1654x2339.png"))
		if err != nil {
			b.Fatal(err)
		}
		return [][]byte{data}
	}
	var out [][]byte
	names, _ := filepath.Glob(filepath.Join(testdataDir, "*.png"))
	sort.Strings(names)
	for _, n := range names {
		base := filepath.Base(n)
		if strings.HasPrefix(base, "bad_") || strings.Contains(base, "huge") {
			continue
		}
		data, err := os.ReadFile(n)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, data)
	}
	return out
}

func benchPages(b *testing.B, set string, withDecode bool) {
	cfg := mustConfig(b, "default")
	files := benchFiles(b, set)
	decoded := make([]*RGB, len(files))
	for i, f := range files {
		var err error
		if decoded[i], err = Decode(i, f, DefaultLimits()); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	pages := 0
	for i := 0; i < b.N; i++ {
		for j := range files {
			img := decoded[j]
			if withDecode {
				var err error
				if img, err = Decode(j, files[j], DefaultLimits()); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := Preprocess(img, cfg); err != nil {
				b.Fatal(err)
			}
			pages++
		}
	}
	b.ReportMetric(float64(pages)/b.Elapsed().Seconds(), "pages/s")
}

func BenchmarkPage(b *testing.B)           { benchPages(b, "page", false) }
func BenchmarkPageWithDecode(b *testing.B) { benchPages(b, "page", true) }
func BenchmarkSet(b *testing.B)            { benchPages(b, "set", false) }
func BenchmarkSetWithDecode(b *testing.B)  { benchPages(b, "set", true) }

// TestResizeMatchesPreprocess: the public two-pass Resize gives the pixels Preprocess's fused strips patchify.
func TestResizeMatchesPreprocess(t *testing.T) {
	cfg := mustConfig(t, "small_max")
	for _, name := range []string{"odd_rgb_517x389.png", "tiny_rgb_30x20.png", "vertical_only_rgb_112x130.png"} {
		img := decodeFile(t, name)
		want, err := Preprocess(img, cfg)
		if err != nil {
			t.Fatal(err)
		}
		h, w, _ := SmartResize(img.Height, img.Width, cfg.Factor(), cfg.MinPixels, cfg.MaxPixels)
		noResize := cfg
		noResize.DoResize = false
		got, err := Preprocess(Resize(img, w, h), noResize)
		if err != nil {
			t.Fatal(err)
		}
		if got.Sha256() != want.Sha256() {
			t.Errorf("%s: Resize then Preprocess without resizing differs from Preprocess", name)
		}
	}
}
