package gpu

import (
	"errors"
	"runtime"
	"sync"
)

// Thread runs closures on one goroutine locked to its OS thread: a GPU context (CUDA's, and
// HIP's current device) is per thread, so every driver call of a backend goes through its Thread.
type Thread struct {
	mu      sync.Mutex
	calls   chan func()
	stopped bool
}

// NewThread starts the locked goroutine.
func NewThread() *Thread {
	t := &Thread{calls: make(chan func())}
	go func() {
		runtime.LockOSThread()
		for f := range t.calls {
			f()
		}
	}()
	return t
}

// ErrStopped is returned by calls made after the thread was stopped (the backend closed).
var ErrStopped = errors.New("the backend is closed")

// Do runs f on the thread and returns its error.
func (t *Thread) Do(f func() error) error {
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return ErrStopped
	}
	done := make(chan error, 1)
	t.calls <- func() { done <- f() }
	t.mu.Unlock()
	return <-done
}

// Stop ends the thread after the calls already queued; later calls return ErrStopped.
func (t *Thread) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stopped {
		t.stopped = true
		close(t.calls)
	}
}
