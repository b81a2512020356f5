package lanes

import (
	"context"
	"slices"
	"sync"
	"testing"

	"tfc/runtime/lanes/lanestest"
)

// counting is the fake model with a count of the images its tower saw.
type counting struct {
	*lanestest.Fake
	mu     sync.Mutex
	images []int // images a tower run saw, in order
}

func (c *counting) Vision(pixels []float32, grids [][3]int) ([]float32, error) {
	c.mu.Lock()
	c.images = append(c.images, len(grids))
	c.mu.Unlock()
	return c.Fake.Vision(pixels, grids)
}

// TestVisionCache: a page sent again behind another prompt (the prompt cache off) takes its rows
// from the vision cache; a request with a cached and a new image runs the tower on the new one
// alone; the ids are the reference's either way; without the cache every request runs the tower.
func TestVisionCache(t *testing.T) {
	for _, cached := range []bool{true, false} {
		cfg := testConfig()
		if cached {
			cfg.VisionCache = 1 << 20
		}
		m := &counting{Fake: newFake(cfg, 0)}
		s := start(t, m, cfg)
		a := imagePrompt(1, 0.5)                      // text, image 0.5, text
		b := imagePrompt(7, 0.5)                      // other text, the same image
		c := imagePrompt(3, 0.5)                      // the same image, then a new one
		c.Prompt = append(c.Prompt, a.Prompt[5:9]...) // four more placeholders
		c.Pixels = append(c.Pixels, imagePrompt(3, 9.25).Pixels...)
		c.Grids = append(c.Grids, [3]int{1, 4, 4})
		c.ImageKeys = append(c.ImageKeys, "img9.25")
		for _, r := range []*Request{a, b, c} {
			r.MaxTokens = 6
			st, err := s.Submit(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := collect(t, st)
			if want := reference(t, 0, r, false); !slices.Equal(out, want) {
				t.Errorf("cache %v: ids %v, want %v", cached, out, want)
			}
		}
		want := []int{1, 1, 2}
		if cached {
			want = []int{1, 1} // a's image; c's new image alone
		}
		if !slices.Equal(m.images, want) {
			t.Errorf("cache %v: tower runs saw %v images, want %v", cached, m.images, want)
		}
	}
}
