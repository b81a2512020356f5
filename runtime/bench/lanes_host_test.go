package bench

import (
	"fmt"
	"testing"
)

// BenchmarkHostRoundLanes measures the host's work a decode round as tfc bench takes it: B
// sequences through the lanes scheduler the server uses, on the 28-layer Qwen2-VL-shaped copy of
// the tiny checkpoint over the fake driver (kernels take no time), so a round's wall time is the
// host's alone: scheduling, inputs, the taped forward, the picks' read and each stream's token.
// go test ./runtime/bench -run '^$' -bench HostRoundLanes -benchtime 1x.
func BenchmarkHostRoundLanes(b *testing.B) {
	dir := deepCheckpoint(b, "../../testdata/qwen2-vl-tiny", hostLayers)
	for _, batch := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("batch%d", batch), func(b *testing.B) {
			be := fakeGPU(b, false)
			var us float64
			for b.Loop() {
				r, err := Run(Options{Dir: dir, Backend: be, Batches: []int{batch}, PromptTokens: 32, NewTokens: 200, Seed: 1})
				if err != nil {
					b.Fatal(err)
				}
				us = r.Decode[0].MsPerRound * 1000
			}
			b.ReportMetric(us, "µs/round")
		})
	}
}
