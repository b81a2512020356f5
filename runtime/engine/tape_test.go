package engine

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"tfc/compiler"
	_ "tfc/gen/registry" // the families
	"tfc/kernels"
	"tfc/runtime/device/gpu"
	"tfc/runtime/device/gpu/gputest"
	"tfc/runtime/image"
	"tfc/runtime/model"
	"tfc/runtime/positions"
)

// TestTapesLaunchAsPrepared: every family's fixture generates from text and image prompts on the
// GPU backend over the fake driver, with tapes and without, graphs off so that every launch
// reaches the driver: the launches (kernel, grid, every parameter) are the same, and with tapes
// most of them were played from one (the repeated prompt's fill and the decode rounds).
func TestTapesLaunchAsPrepared(t *testing.T) {
	png, err := os.ReadFile("../../testdata/images/exact_rgb_56x56.png")
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range model.Families() {
		t.Run(fam.Name, func(t *testing.T) {
			dir := "../../" + compiler.Fixture(fam.Name)
			plain, _ := tapeLaunches(t, dir, png, true)
			taped, counts := tapeLaunches(t, dir, png, false)
			if len(plain) == 0 || len(plain) != len(taped) {
				t.Fatalf("%d launches without tapes, %d with", len(plain), len(taped))
			}
			for i := range plain {
				if plain[i] != taped[i] {
					t.Fatalf("launch %d of %d: %s without tapes, %s with", i, len(plain), plain[i], taped[i])
				}
			}
			if counts.Taped < int64(len(plain))/2 {
				t.Errorf("%d of %d launches played from a tape", counts.Taped, len(plain))
			}
		})
	}
}

// tapeLaunches generates from four prompts on a fake GPU and returns each launch as text, and
// the backend's counts.
func tapeLaunches(t *testing.T, dir string, png []byte, noTapes bool) ([]string, gpu.LaunchCounts) {
	lib, err := gpu.NewLibrary("fake", kernels.Sources)
	if err != nil {
		t.Fatal(err)
	}
	d := gputest.New()
	be, err := gpu.NewBackend(gpu.Config{Name: "fake", Driver: d, Thread: gpu.NewThread(), Library: lib, Image: "image",
		Build: func(fs.FS, string) ([]byte, error) { return []byte("image"), nil }, NoGraphs: true, NoTapes: noTapes})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	e, err := Open(dir, be, model.Limits{Parallel: 1, Context: 256, Rows: 64, Patches: 1024, PageSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, k := range be.Library().Kernels() { // after Open: the kernels specialised for the fixture
		for _, l := range k.Schedule.Launches {
			for _, sym := range l.Symbols() {
				d.ParamCount[sym] = len(k.Schedule.Params)
			}
		}
	}
	ic, err := image.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	imgs, err := (&Frontend{Image: ic, Limits: image.DefaultLimits()}).Images([][]byte{png})
	if err != nil {
		t.Fatal(err)
	}
	// rounds of one R that differ in I alone (a text prompt as long as the image prompt) and in
	// S alone (a text prompt of one chunk, whose fill returns logits)
	rng := rand.New(rand.NewPCG(1, 2))
	text := func(n int) Prompt {
		p := Prompt{}
		for range n {
			p.IDs = append(p.IDs, rng.Int32N(1000))
		}
		return p
	}
	rows := positions.MergedRows(imgs[0].GridTHW, e.Info.Merge)
	img := text(70)
	img.IDs = slices.Insert(img.IDs, 5, slices.Repeat([]int32{int32(e.Info.ImageToken)}, rows)...)
	img.Pixels, img.Grids = imgs[0].Pixels, []positions.Grid{imgs[0].GridTHW}
	d.Reset()
	for _, p := range []Prompt{text(64), text(70 + rows), img, img} {
		if _, err := e.Generate(p, Options{MaxTokens: 6}); err != nil {
			t.Fatal(err)
		}
	}
	var out []string
	for _, c := range d.Calls() {
		if c.Op == "Launch" {
			out = append(out, fmt.Sprintf("%s %v %v", c.Kernel, c.Grid, c.Params))
		}
	}
	return out, be.Launches()
}
