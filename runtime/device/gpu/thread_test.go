package gpu

import (
	"errors"
	"testing"
)

// TestThreadGoKeepsOrderAndReportsLater checks that queued calls run in order before a later Do,
// and that the first error of a queued call is returned once, by the next call.
func TestThreadGoKeepsOrderAndReportsLater(t *testing.T) {
	th := NewThread()
	defer th.Stop()
	var ran []int
	for i := 0; i < 100; i++ {
		if err := th.Go(func() error { ran = append(ran, i); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if err := th.Do(func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	for i, v := range ran {
		if v != i {
			t.Fatalf("queued call %d ran as %d", i, v)
		}
	}
	if len(ran) != 100 {
		t.Fatalf("%d of 100 queued calls ran before Do returned", len(ran))
	}
	first, second := errors.New("first"), errors.New("second")
	th.Go(func() error { return first })
	th.Go(func() error { return second })
	if err := th.Do(func() error { return nil }); err != first {
		t.Fatalf("Do after two failed calls = %v, want the first error", err)
	}
	if err := th.Do(func() error { return nil }); err != nil {
		t.Fatalf("the error was reported twice: %v", err)
	}
	th.Stop()
	if err := th.Go(func() error { return nil }); err != ErrStopped {
		t.Fatalf("Go after Stop = %v, want ErrStopped", err)
	}
}
