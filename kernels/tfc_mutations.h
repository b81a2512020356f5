// tfc_mutations.h: the planted controls. MUT selects a deliberately wrong kernel for the contract's gates
// and is TFC_MUT_NONE in every kernel that serves; these helpers apply it.
#pragma once
#include "tfc_hip.h"

#define TFC_MUT_NONE 0
#define TFC_MUT_BOUND 1    // a loop stops one element short
#define TFC_MUT_SCALE 2    // a scale factor is dropped
#define TFC_MUT_STRIDE 3   // the first input's row stride is read one short
#define TFC_MUT_BARRIER 4  // the barrier after an LDS fill is missing

template <int MUT>
__device__ constexpr int tfc_bound(int n) { return MUT == TFC_MUT_BOUND ? n - 1 : n; }
template <int MUT>
__device__ constexpr int tfc_stride(int ld) { return MUT == TFC_MUT_STRIDE ? ld - 1 : ld; }
template <int MUT>
__device__ constexpr float tfc_scale(float s) { return MUT == TFC_MUT_SCALE ? 1.f : s; }
template <int MUT>
__device__ __forceinline__ void tfc_fill_barrier() {
  if (MUT != TFC_MUT_BARRIER) __syncthreads();
}
// tfc_fill_skew, before an LDS fill, holds back every wave but the first in the missing-barrier
// mutant, as a busy multiprocessor may, so that the race the mutant plants shows on every launch
// instead of by chance. Kernels that serve compile it to nothing.
template <int MUT>
__device__ __forceinline__ void tfc_fill_skew() {
  if (MUT == TFC_MUT_BARRIER && (int)threadIdx.x >= TFC_WAVE) {
    const long long t0 = clock64();
    while (clock64() - t0 < 20000) {
    }
  }
}
