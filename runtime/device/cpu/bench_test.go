package cpu_test

import (
	"fmt"
	"math/rand"
	"testing"

	"tfc/runtime/device"
	"tfc/runtime/device/cpu"
)

// BenchmarkLinear runs Y = X·Wᵀ with BF16 weights, reporting GFLOP/s (2·M·N·K per op), at the
// FFN shape of a 1.5B Qwen2 decoder (K=1536, N=8960) and the tiny test model's shapes: its MLP
// (K=64, N=128), its lm_head (K=64, N=151936) and its vision patch embedding (K=1176, N=32).
func BenchmarkLinear(b *testing.B) {
	shapes := []struct{ m, k, n int }{
		{1, 1536, 8960}, {8, 1536, 8960}, {128, 1536, 8960},
		{1, 64, 128}, {8, 64, 128}, {128, 64, 128},
		{1, 64, 151936}, {256, 1176, 32},
	}
	for _, s := range shapes {
		b.Run(fmt.Sprintf("M%d_K%d_N%d", s.m, s.k, s.n), func(b *testing.B) { benchLinear(b, cpu.New(), s.m, s.k, s.n) })
	}
}

// BenchmarkLinearKernels compares every kernel this CPU can run at the decoder FFN shape.
func BenchmarkLinearKernels(b *testing.B) {
	for _, k := range cpu.Kernels() {
		for _, m := range []int{1, 128} {
			b.Run(fmt.Sprintf("%s/M%d_K1536_N8960", k, m), func(b *testing.B) { benchLinear(b, cpu.New(cpu.Kernel(k)), m, 1536, 8960) })
		}
	}
}

func benchLinear(b *testing.B, be *cpu.Backend, m, k, n int) {
	r := rand.New(rand.NewSource(1))
	x := benchTensor(b, be, device.F32, m, k, r)
	w := benchTensor(b, be, device.BF16, n, k, r)
	y := benchTensor(b, be, device.F32, m, n, nil)
	op := device.Linear{X: x, W: w, Y: y}
	if err := be.Launch(nil, op); err != nil { // packs W once, as the first launch of a model does
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if err := be.Launch(nil, op); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(2*float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

func benchTensor(b *testing.B, be device.Backend, dt device.DType, rows, cols int, r *rand.Rand) device.Tensor {
	buf, err := be.Alloc(dt, rows*cols)
	if err != nil {
		b.Fatal(err)
	}
	t := device.Tensor{Buf: buf, Rows: rows, Cols: cols}
	if r != nil {
		v := make([]float32, rows*cols)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		if err := be.Write(t, v, device.F32); err != nil {
			b.Fatal(err)
		}
	}
	return t
}

// BenchmarkAttentionSpans runs the vision tower's attention (one span, full, 12 heads of 128: the
// dots.ocr tower) on the Go loops and on the FMA kernel, reporting GFLOP/s (4·N²·heads·head_dim).
func BenchmarkAttentionSpans(b *testing.B) {
	const heads, hd = 12, 128
	for _, k := range cpu.Kernels() {
		for _, n := range []int{256, 1024} {
			b.Run(fmt.Sprintf("%s/N%d", k, n), func(b *testing.B) {
				be := cpu.New(cpu.Kernel(k))
				r := rand.New(rand.NewSource(1))
				q := benchTensor(b, be, device.F32, n, heads*hd, r)
				kv := benchTensor(b, be, device.F32, n, heads*hd, r)
				y := benchTensor(b, be, device.F32, n, heads*hd, nil)
				spans := benchInts(b, be, 1, 2, []int32{0, int32(n)})
				op := device.Attention{Q: q, K: kv, V: kv, Y: y, Heads: heads, KVHeads: heads, HeadDim: hd, Scale: 0.088, Spans: spans}
				for b.Loop() {
					if err := be.Launch(nil, op); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(4*float64(n*n*heads*hd)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkAttentionCache runs decoder attention over the KV cache at dots.ocr's decoder heads (12
// query heads, 2 KV heads of 128): one decode row after 1,024 cached keys, and a 256-row prompt
// chunk at positions 768-1,023, on the Go loops and on the FMA kernel. GFLOP/s counts
// 4·heads·head_dim per (row, key) pair attended.
func BenchmarkAttentionCache(b *testing.B) {
	const heads, kvHeads, hd, ps, ctx = 12, 2, 128, 16, 1024
	for _, k := range cpu.Kernels() {
		for _, rows := range []int{1, 256} {
			b.Run(fmt.Sprintf("%s/R%d", k, rows), func(b *testing.B) {
				be := cpu.New(cpu.Kernel(k))
				r := rand.New(rand.NewSource(1))
				q := benchTensor(b, be, device.F32, rows, heads*hd, r)
				kv := benchTensor(b, be, device.F32, rows, kvHeads*hd, r)
				y := benchTensor(b, be, device.F32, rows, heads*hd, nil)
				cache := &device.KVCache{K: benchTensor(b, be, device.F32, ctx, kvHeads*hd, r), V: benchTensor(b, be, device.F32, ctx, kvHeads*hd, r)}
				seq, pos, table := make([]int32, rows), make([]int32, rows), make([]int32, ctx/ps)
				pairs := 0
				for i := range pos {
					pos[i] = int32(ctx - rows + i)
					pairs += int(pos[i]) + 1
				}
				for i := range table {
					table[i] = int32(i)
				}
				op := device.Attention{Q: q, K: kv, V: kv, Y: y, Heads: heads, KVHeads: kvHeads, HeadDim: hd, Scale: 0.088, Cache: cache,
					Rows: &device.Rows{RowSeq: benchInts(b, be, 1, rows, seq), RowPos: benchInts(b, be, 1, rows, pos), PageTable: benchInts(b, be, 1, ctx/ps, table), PageSize: ps}}
				for b.Loop() {
					if err := be.Launch(nil, op); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(4*float64(pairs*heads*hd)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

func benchInts(b *testing.B, be device.Backend, rows, cols int, v []int32) device.Tensor {
	b.Helper()
	buf, err := be.Alloc(device.I32, rows*cols)
	if err != nil {
		b.Fatal(err)
	}
	t := device.Tensor{Buf: buf, Rows: rows, Cols: cols}
	if err := be.Write(t, v, device.I32); err != nil {
		b.Fatal(err)
	}
	return t
}
