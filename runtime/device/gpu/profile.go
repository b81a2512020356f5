package gpu

import (
	"errors"
	"fmt"
	"time"

	"tfc/runtime/device"
)

// timedLaunch is a launch between two recorded events, not yet read.
type timedLaunch struct {
	name         string
	start, stop  uintptr
	flops, bytes float64
}

// Profile turns per-launch timing on, starting a fresh profile, or off, keeping the profile.
// While it is on, every launch is bracketed by two events on the stream and runs are not
// replayed by graphs; the times are read at the next stream synchronisation.
func (be *Backend) Profile(on bool) {
	be.mu.Lock()
	be.timing = on
	be.mu.Unlock()
	err := be.Do(func() error {
		err := be.syncStream()
		if on {
			clear(be.profile)
			be.order = nil
		}
		be.profiling = on
		return err
	})
	if err != nil && !isStopped(err) {
		be.th.keep(err)
	}
}

// Profiled waits for the launches before it and returns the profile gathered since profiling
// was last turned on, by kernel in the order of their first launch. An error is reported by the
// next call.
func (be *Backend) Profiled() []device.KernelTime {
	var out []device.KernelTime
	err := be.Do(func() error {
		err := be.syncStream()
		for _, name := range be.order {
			out = append(out, *be.profile[name])
		}
		return err
	})
	if err != nil && !isStopped(err) {
		be.th.keep(err)
	}
	return out
}

func isStopped(err error) bool { return errors.Is(err, ErrStopped) }

// event takes an event from the pool, or creates one.
func (be *Backend) event() (uintptr, error) {
	if n := len(be.events); n > 0 {
		e := be.events[n-1]
		be.events = be.events[:n-1]
		return e, nil
	}
	return be.drv.NewEvent()
}

// launchTimed launches the run kernel by kernel, each between two events.
func (be *Backend) launchTimed(r *run, ptrs []uintptr) error {
	for _, l := range r.launches {
		start, err := be.event()
		if err != nil {
			return err
		}
		stop, err := be.event()
		if err != nil {
			be.events = append(be.events, start)
			return err
		}
		be.timed = append(be.timed, timedLaunch{l.name, start, stop, l.flops, l.bytes})
		if err := be.drv.RecordEvent(start, be.stream); err != nil {
			return err
		}
		if err := be.launchOne(l, ptrs); err != nil {
			return err
		}
		if err := be.drv.RecordEvent(stop, be.stream); err != nil {
			return err
		}
	}
	return nil
}

// collect reads the events of the timed launches, after a stream synchronisation, into the
// profile and returns them to the pool.
func (be *Backend) collect() error {
	var first error
	for _, t := range be.timed {
		ms, err := be.drv.ElapsedMs(t.start, t.stop)
		be.events = append(be.events, t.start, t.stop)
		if err != nil {
			if first == nil {
				first = fmt.Errorf("%w: timing kernel %s", err, t.name)
			}
			continue
		}
		k := be.profile[t.name]
		if k == nil {
			k = &device.KernelTime{Name: t.name}
			be.profile[t.name] = k
			be.order = append(be.order, t.name)
		}
		k.Launches++
		k.Total += time.Duration(float64(ms) * 1e6)
		k.Flops += t.flops
		k.Bytes += t.bytes
	}
	be.timed = be.timed[:0]
	return first
}
