// tfc_reduce.h: block reductions in a fixed order (the same bits for wave32 and wave64).
#pragma once
#include "tfc_mutations.h"

// tfc_block_sum adds v over the block's THREADS threads (a multiple of 32) in one fixed order, the
// same for waves of 32 and 64: each group of 32 lanes by a tree of shuffles (lane l takes l ^ 16,
// then l ^ 8, ... l ^ 1: every lane of the group holds the group's sum in one order, as a + b is
// b + a), then the groups' sums through LDS red[THREADS/32] in group order; every thread gets the
// sum. One barrier where a tree through LDS took one a level.
// The missing-barrier control fills red with NaN first and holds back every wave but the first,
// so the race it plants reads NaN on every launch.
template <int THREADS, int MUT>
__device__ __forceinline__ float tfc_block_sum(float v, float* red) {
  static_assert(THREADS % 32 == 0, "THREADS must be whole groups of 32");
  constexpr int G = THREADS / 32;
  if (MUT == TFC_MUT_BARRIER) {
    if ((int)threadIdx.x < G) red[threadIdx.x] = __uint_as_float(0x7fc00000u);
    __syncthreads();
  }
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) v += tfc_shfl_xor(v, d);
  tfc_fill_skew<MUT>();
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  tfc_fill_barrier<MUT>();
  float s = red[0];
#pragma unroll
  for (int g = 1; g < G; ++g) s += red[g];
  __syncthreads();  // red is free for the next sum
  return s;
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
