package gpu

import (
	"fmt"

	"tfc/runtime/device"
)

// tape is a call's launches cut into sealed runs as Launch would have flushed them (RunLen
// launches a run), so playing it queues the same runs, replayed by the same graphs.
type tape struct {
	runs     []*run
	launches int
}

var _ device.Taper = (*Backend)(nil)

// Taping reports whether tapes are on.
func (be *Backend) Taping() bool { return !be.cfg.NoTapes }

// Prepare finds k's functions and marshals ops by its schedule, as Launch does, without
// launching.
func (be *Backend) Prepare(k *device.KernelRef, ops ...device.Op) (device.Prepared, error) {
	return be.lib.Prepare(k, ops, be.address, (*loader)(be))
}

// Tape cuts prepared launches into sealed runs of RunLen launches.
func (be *Backend) Tape(ps []device.Prepared) device.Tape {
	t := &tape{}
	r := &run{}
	for _, p := range ps {
		r.add(p.(*Call))
		if len(r.launches) >= be.cfg.RunLen {
			t.add(r)
			r = &run{}
		}
	}
	t.add(r)
	return t
}

func (t *tape) add(r *run) {
	if len(r.launches) > 0 {
		r.seal()
		t.runs = append(t.runs, r)
		t.launches += len(r.launches)
	}
}

// Play holds the tape's runs for the thread, handed over with the next wait (Finish's read).
func (be *Backend) Play(tp device.Tape) error {
	t, ok := tp.(*tape)
	if !ok {
		return fmt.Errorf("%s: play of a tape it did not make (%T)", be.cfg.Name, tp)
	}
	return be.hold(func() error {
		be.counts.Taped += int64(t.launches)
		for _, r := range t.runs {
			if err := be.submit(r); err != nil {
				return err
			}
		}
		return nil
	})
}
