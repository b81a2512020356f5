package lanes

import "tfc/runtime/internal/lru"

// visionCache keeps the vision tower's rows of recent images by their key (a hash of the decoded
// pixels), least recently used first out, within a budget of float32 values: the same page sent
// again, after another prompt or after its KV pages left the prompt cache, skips the tower. A
// tower computes each image's rows alike whatever else it runs beside, so cached rows are the
// rows it would give.
type visionCache struct {
	budget int
	rows   *lru.Map[string, []float32]
}

func newVisionCache(floats int) *visionCache {
	if floats <= 0 {
		return nil
	}
	return &visionCache{budget: floats, rows: lru.New[string, []float32](floats)}
}

// get returns the rows of key, marking them recently used.
func (c *visionCache) get(key string) ([]float32, bool) {
	if c == nil || key == "" {
		return nil, false
	}
	return c.rows.Get(key)
}

// put keeps rows under key, dropping the least recently used beyond the budget.
func (c *visionCache) put(key string, rows []float32) {
	if c == nil || key == "" || len(rows) > c.budget {
		return
	}
	if _, ok := c.rows.Peek(key); ok {
		return
	}
	c.rows.Put(key, rows, len(rows))
}
