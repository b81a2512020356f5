// tfc_reduce.h: block reductions in a fixed tree order through LDS (the same code for wave32 and
// wave64).
#pragma once
#include "tfc_mutations.h"

// tfc_block_sum adds v over the block's THREADS threads (a power of two) through LDS red[THREADS]
// in a fixed tree order; every thread gets the sum.
template <int THREADS, int MUT>
__device__ __forceinline__ float tfc_block_sum(float v, float* red) {
  static_assert((THREADS & (THREADS - 1)) == 0, "THREADS must be a power of two");
  red[threadIdx.x] = v;
  tfc_fill_barrier<MUT>();
  for (int s = THREADS / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  const float r = red[0];
  __syncthreads();
  return r;
}

// tfc_argmax_see keeps column c of value v as the best so far where it is larger, or equal at a
// lower column; NaN never wins.
__device__ __forceinline__ void tfc_argmax_see(float v, int c, float& best, int& at) {
  if (v == v && (at < 0 || v > best || (v == best && c < at))) {
    best = v;
    at = c;
  }
}

// tfc_block_argmax writes to *y the first column of x[0, n) holding its largest value, as a
// greedy pick takes it: NaN never wins and a row of NaN gives 0. The threads read the row in
// float4 loads, sixteen in flight each (a lone block must keep a logits row of 600 KB streaming),
// each keeping its best, then a fixed tree through LDS bv and bi [THREADS] keeps the larger, or
// on a tie the lower column. The missing-barrier control first fills every slot with a pick no
// row has (+Inf past the row), so that the slots its race reads early give a wrong pick on every
// launch, not only where LDS holds no earlier launch's right ones (a dots.ocr contract run on an
// H100 saw that control pass).
template <int THREADS, int MUT>
__device__ __forceinline__ void tfc_block_argmax(const float* x, int n, int* y, float* bv, int* bi) {
  static_assert((THREADS & (THREADS - 1)) == 0, "THREADS must be a power of two");
  constexpr int U = 16;
  n = tfc_bound<MUT>(n);
  if (MUT == TFC_MUT_BARRIER) {  // the planted race reads a held-back wave's slot: make it a pick no row has
    bv[threadIdx.x] = __uint_as_float(0x7f800000u);
    bi[threadIdx.x] = n + (int)threadIdx.x;
    __syncthreads();
  }
  float best = 0.f;
  int at = -1;
  const int head = min(n, (int)((16 - ((size_t)x & 15)) & 15) / 4);  // scalars before a 16-byte boundary
  const int nv = (n - head) / 4;                                       // float4s after them
  if ((int)threadIdx.x < head) tfc_argmax_see(x[threadIdx.x], threadIdx.x, best, at);
  const float4* xv = reinterpret_cast<const float4*>(x + head);
  for (int j0 = threadIdx.x; j0 < nv; j0 += U * THREADS) {
    float4 r[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (j0 + u * THREADS < nv) r[u] = xv[j0 + u * THREADS];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int j = j0 + u * THREADS;
      if (j < nv) {
        const int c = head + 4 * j;
        tfc_argmax_see(r[u].x, c, best, at);
        tfc_argmax_see(r[u].y, c + 1, best, at);
        tfc_argmax_see(r[u].z, c + 2, best, at);
        tfc_argmax_see(r[u].w, c + 3, best, at);
      }
    }
  }
  for (int c = head + 4 * nv + threadIdx.x; c < n; c += THREADS) tfc_argmax_see(x[c], c, best, at);
  tfc_fill_skew<MUT>();
  bv[threadIdx.x] = best;
  bi[threadIdx.x] = at;
  tfc_fill_barrier<MUT>();
  for (int s = THREADS / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) {
      float v = bv[threadIdx.x];
      int a = bi[threadIdx.x];
      if (bi[threadIdx.x + s] >= 0) tfc_argmax_see(bv[threadIdx.x + s], bi[threadIdx.x + s], v, a);
      bv[threadIdx.x] = v;
      bi[threadIdx.x] = a;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) *y = bi[0] < 0 ? 0 : bi[0];
}
