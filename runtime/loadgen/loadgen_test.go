package loadgen

import (
	"testing"
	"time"
)

// TestStats: nearest-rank percentiles and the mean, in milliseconds.
func TestStats(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	s := stats(ds)
	if s.P50 != 50 || s.P90 != 90 || s.P99 != 99 || s.Mean != 50.5 || s.N != 100 {
		t.Errorf("stats of 1..100 ms = %+v", s)
	}
	if s := stats([]time.Duration{7 * time.Millisecond}); s.P50 != 7 || s.P99 != 7 || s.N != 1 {
		t.Errorf("stats of one = %+v", s)
	}
	if s := stats(nil); s != (Stats{}) {
		t.Errorf("stats of none = %+v", s)
	}
}

// TestSynthetic: a page decodes as a PNG of the asked size; a bad size is refused.
func TestSynthetic(t *testing.T) {
	b, err := Synthetic(200, 300)
	if err != nil || len(b) < 8 || string(b[1:4]) != "PNG" {
		t.Fatalf("Synthetic: %d bytes, %v", len(b), err)
	}
	if _, err := Synthetic(0, 10); err == nil {
		t.Error("a 0-wide page was accepted")
	}
}
