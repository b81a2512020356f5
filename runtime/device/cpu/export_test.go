package cpu

// PeakLoop exposes the host kernel's FMA peak loop to the benchmarks.
func PeakLoop() (name string, run func(n int), flopsPerIter int) {
	ks := hostKernels()
	if len(ks) == 0 {
		return "", nil, 0
	}
	k := ks[0]
	return k.name, k.peak, k.peakFlops
}

// SkipRound leaves out one rounding point ("op.point") in BF16 precision: a planted control.
func SkipRound(point string) Option { return func(b *Backend) { b.skip = point } }
