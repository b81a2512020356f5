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

// tfc_block_argmax writes to *y the first column of x[0, n) holding its largest value, as a
// greedy pick takes it: NaN never wins and a row of NaN gives 0. Each thread keeps the first
// largest of its columns (c = threadIdx.x + k·THREADS), then a fixed tree through LDS bv and bi
// [THREADS] keeps the larger, or on a tie the lower column.
template <int THREADS, int MUT>
__device__ __forceinline__ void tfc_block_argmax(const float* x, int n, int* y, float* bv, int* bi) {
  static_assert((THREADS & (THREADS - 1)) == 0, "THREADS must be a power of two");
  float best = 0.f;
  int at = -1;
#pragma unroll 4
  for (int c = threadIdx.x; c < tfc_bound<MUT>(n); c += THREADS) {
    const float v = x[c];
    if (v == v && (at < 0 || v > best)) {
      best = v;
      at = c;
    }
  }
  tfc_fill_skew<MUT>();
  bv[threadIdx.x] = best;
  bi[threadIdx.x] = at;
  tfc_fill_barrier<MUT>();
  for (int s = THREADS / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) {
      const float v = bv[threadIdx.x + s];
      const int c = bi[threadIdx.x + s], a = bi[threadIdx.x];
      if (c >= 0 && (a < 0 || v > bv[threadIdx.x] || (v == bv[threadIdx.x] && c < a))) {
        bv[threadIdx.x] = v;
        bi[threadIdx.x] = c;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) *y = bi[0] < 0 ? 0 : bi[0];
}
