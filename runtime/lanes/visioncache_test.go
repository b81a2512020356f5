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

// TestVisionBatched: prompts waiting for their vision rows together get them from one tower run
// over all their images, each prompt's ids still the reference's; a patch limit that holds one
// prompt's image runs each alone, and an image two of them share by key runs once.
func TestVisionBatched(t *testing.T) {
	for _, tc := range []struct {
		limit int
		same  bool
		want  []int
	}{{0, false, []int{2}}, {16, false, []int{1, 1}}, {0, true, []int{1}}} {
		cfg := testConfig()
		cfg.MaxPatches = tc.limit
		m := &counting{Fake: newFake(cfg, 0)}
		release := m.Hold()
		s := start(t, m, cfg)
		busy := must(s.Submit(context.Background(), &Request{Prompt: textPrompt(1, 5), MaxTokens: 3}))
		a, b := imagePrompt(2, 0.5), imagePrompt(3, 7.5)
		if tc.same {
			b = imagePrompt(3, 0.5)
		}
		var streams []*Stream
		for _, r := range []*Request{a, b} {
			r.MaxTokens = 5
			streams = append(streams, must(s.Submit(context.Background(), r)))
		}
		release()
		collect(t, busy)
		for i, r := range []*Request{a, b} {
			if out, _ := collect(t, streams[i]); !slices.Equal(out, reference(t, 0, r, false)) {
				t.Errorf("limit %d: request %d: ids %v, want the reference's", tc.limit, i, out)
			}
		}
		if !slices.Equal(m.images, tc.want) {
			t.Errorf("limit %d, same image %v: tower runs saw %v images, want %v", tc.limit, tc.same, m.images, tc.want)
		}
	}
}
