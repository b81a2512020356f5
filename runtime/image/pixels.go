package image

import "sync"

// pixels keeps released pixel_values buffers for the next Preprocess: a page's buffer is tens of
// megabytes, and writing fresh memory costs its page faults (milliseconds a page).
var pixels sync.Pool // of *[]float32

// newPixels is a buffer of n floats, a released one when one is large enough; its user writes
// every element.
func newPixels(n int) []float32 {
	if b, ok := pixels.Get().(*[]float32); ok && cap(*b) >= n {
		return (*b)[:n]
	}
	return make([]float32, n)
}

// Release gives pixel_values back for a later Preprocess to reuse; nothing may read or write
// them afterwards.
func Release(p []float32) {
	if cap(p) > 0 {
		pixels.Put(&p)
	}
}
