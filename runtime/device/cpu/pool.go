package cpu

import (
	"sync"
	"sync/atomic"
)

// parallel runs fn(i) for i in [0, n) on up to the backend's worker count of goroutines. Work is
// handed out task by task; a task's result never depends on which worker runs it.
func (be *Backend) parallel(n int, fn func(i int)) { parallel(be.workers, n, fn) }

// parallel runs fn(i) for i in [0, n) on up to workers goroutines.
func parallel(workers, n int, fn func(i int)) {
	w := min(workers, n)
	if w <= 1 {
		for i := 0; i < n; i++ {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	wg.Add(w)
	for g := 0; g < w; g++ {
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// chunks splits [0, n) into tasks of about grain items and runs fn(lo, hi) for each in parallel.
func (be *Backend) chunks(n, grain int, fn func(lo, hi int)) {
	grain = max(grain, 1)
	tasks := (n + grain - 1) / grain
	be.parallel(tasks, func(t int) { fn(t*grain, min(n, (t+1)*grain)) })
}
