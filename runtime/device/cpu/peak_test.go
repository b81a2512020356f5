package cpu_test

import (
	"runtime"
	"sync"
	"testing"

	"tfc/runtime/device/cpu"
)

// BenchmarkPeak measures the machine's float32 FMA peak: a loop of 12 independent FMA chains in
// the widest vector unit the host kernel uses (AVX-512 or AVX2), on one core and on every core at
// once, and the same for the Go scalar multiply-add the pure-Go kernels are built from.
func BenchmarkPeak(b *testing.B) {
	name, run, flops := cpu.PeakLoop()
	const iters = 1 << 20
	if run != nil {
		b.Run(name+"_1core", func(b *testing.B) {
			for b.Loop() {
				run(iters)
			}
			b.ReportMetric(float64(flops)*iters*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
		b.Run(name+"_allcores", func(b *testing.B) {
			p := runtime.GOMAXPROCS(0)
			for b.Loop() {
				var wg sync.WaitGroup
				for range p {
					wg.Go(func() { run(iters) })
				}
				wg.Wait()
			}
			b.ReportMetric(float64(p*flops)*iters*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
	b.Run("go_scalar_1core", func(b *testing.B) {
		var sink float32
		for b.Loop() {
			sink += scalarPeak(iters)
		}
		b.ReportMetric(16*iters*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		_ = sink
	})
}

// scalarPeak runs n iterations of 8 independent float32 multiply-add chains (16 flops each).
func scalarPeak(n int) float32 {
	a, m := float32(0.999), float32(1e-3)
	c0, c1, c2, c3, c4, c5, c6, c7 := float32(1), float32(2), float32(3), float32(4), float32(5), float32(6), float32(7), float32(8)
	for i := 0; i < n; i++ {
		c0 = c0*a + m
		c1 = c1*a + m
		c2 = c2*a + m
		c3 = c3*a + m
		c4 = c4*a + m
		c5 = c5*a + m
		c6 = c6*a + m
		c7 = c7*a + m
	}
	return c0 + c1 + c2 + c3 + c4 + c5 + c6 + c7
}
