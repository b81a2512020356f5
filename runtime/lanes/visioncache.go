package lanes

import "container/list"

// visionCache keeps the vision tower's rows of recent images by their key (a hash of the decoded
// pixels), least recently used first out, within a budget of float32 values: the same page sent
// again, after another prompt or after its KV pages left the prompt cache, skips the tower. A
// tower computes each image's rows alike whatever else it runs beside, so cached rows are the
// rows it would give.
type visionCache struct {
	budget, used int
	order        *list.List // of *visionEntry, most recent first
	items        map[string]*list.Element
}

type visionEntry struct {
	key  string
	rows []float32
}

func newVisionCache(floats int) *visionCache {
	if floats <= 0 {
		return nil
	}
	return &visionCache{budget: floats, order: list.New(), items: map[string]*list.Element{}}
}

// get returns the rows of key, marking them recently used.
func (c *visionCache) get(key string) ([]float32, bool) {
	if c == nil || key == "" {
		return nil, false
	}
	e, ok := c.items[key]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*visionEntry).rows, true
}

// put keeps rows under key, dropping the least recently used beyond the budget.
func (c *visionCache) put(key string, rows []float32) {
	if c == nil || key == "" || len(rows) > c.budget {
		return
	}
	if _, ok := c.items[key]; ok {
		return
	}
	c.items[key] = c.order.PushFront(&visionEntry{key, rows})
	c.used += len(rows)
	for c.used > c.budget {
		last := c.order.Back()
		e := last.Value.(*visionEntry)
		c.order.Remove(last)
		delete(c.items, e.key)
		c.used -= len(e.rows)
	}
}
