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
