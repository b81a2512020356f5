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

	failedMu sync.Mutex
	failed   error // the first error of a call queued by Go, not yet reported
}

// queued is how many calls Go may queue before it waits for the thread.
const queued = 4096

// NewThread starts the locked goroutine.
func NewThread() *Thread {
	t := &Thread{calls: make(chan func(), queued)}
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

// Do runs f on the thread after every call queued before it and returns f's error, or first the
// error of an earlier call queued by Go.
func (t *Thread) Do(f func() error) error {
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return ErrStopped
	}
	done := make(chan error, 1)
	t.calls <- func() { done <- f() }
	t.mu.Unlock()
	err := <-done // every call queued before f has run too
	if queuedErr := t.takeFailed(); queuedErr != nil {
		return queuedErr
	}
	return err
}

func (t *Thread) takeFailed() error {
	t.failedMu.Lock()
	defer t.failedMu.Unlock()
	err := t.failed
	t.failed = nil
	return err
}

// Go queues f to run on the thread without waiting for it, as GPU launches are asynchronous
// anyway: an error of f is returned by the next Do or Go.
func (t *Thread) Go(f func() error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return ErrStopped
	}
	if err := t.takeFailed(); err != nil {
		return err
	}
	t.calls <- func() {
		if err := f(); err != nil {
			t.keep(err)
		}
	}
	return nil
}

// queue queues f like Go but leaves an earlier call's error for the next Do or Go to report.
func (t *Thread) queue(f func() error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return ErrStopped
	}
	t.calls <- func() {
		if err := f(); err != nil {
			t.keep(err)
		}
	}
	return nil
}

// keep holds err for the next Do or Go to report, unless an earlier error is held.
func (t *Thread) keep(err error) {
	t.failedMu.Lock()
	defer t.failedMu.Unlock()
	if t.failed == nil {
		t.failed = err
	}
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
