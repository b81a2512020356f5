// gemm_check.h: what the GEMM drivers (main.cpp, amd.cpp) share: BF16 rounding, the tile grid a
// launch runs, random cases and the error of an output against its float64 reference.
#pragma once
#include <cstring>
#include <random>
#include <vector>

#include "check.h"
#include "tfc_kernels.h"

static tfc_bf16 to_bf16(float x) {
  unsigned u = __float_as_uint(x);
  u += 0x7fffu + ((u >> 16) & 1u);
  return tfc_bf16{(unsigned short)(u >> 16)};
}

// tiles runs tile(smem, m0, n0) as block (bx, by) of the grid of BM×BN tiles over M rows and N
// columns, in floats of stale (NaN) LDS, and copies each tile's C (row stride BN + 1) into Y [M, N].
template <int BM, int BN, int N, typename F>
static void tiles(int floats, int M, float* Y, F tile) {
  std::vector<float4> store((floats + 3) / 4 + 1);
  float* smem = reinterpret_cast<float*>(store.data());
  for (int by = 0; by < (N + BN - 1) / BN; ++by)
    for (int bx = 0; bx < (M + BM - 1) / BM; ++bx) {
      std::memset(smem, 0xff, floats * 4);
      const int m0 = bx * BM, n0 = by * BN;
      emu_run(reinterpret_cast<unsigned char*>(smem), bx, by, [=] { tile(smem, m0, n0); });
      for (int r = 0; r < BM && m0 + r < M; ++r)
        for (int c = 0; c < BN && n0 + c < N; ++c) Y[(size_t)(m0 + r) * N + n0 + c] = smem[r * (BN + 1) + c];
    }
}

struct Case {
  std::vector<float> x;
  std::vector<tfc_bf16> w;
  int ldx, ldw;
};

template <int N, int K>
static Case make(int M, int ldx, int ldw, unsigned seed, bool specials) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  Case c{std::vector<float>((size_t)M * ldx + 4), std::vector<tfc_bf16>((size_t)N * ldw + 8), ldx, ldw};
  for (auto& v : c.x) v = nd(rng);
  for (auto& v : c.w) v = to_bf16(nd(rng) * 0.05f);
  if (specials)
    for (int m = 0; m < M; m += 3) c.x[(size_t)m * ldx + (m * 7) % K] = m % 9 == 0 ? NAN : (m % 2 ? INFINITY : -INFINITY);
  return c;
}

// worst is the largest error of Y against the float64 reference, relative to each row's largest
// reference magnitude; -1 when a NaN or infinity is not the reference's.
template <int N, int K>
static double worst(const Case& c, int M, const float* Y, int kend = K) {
  double w = 0;
  for (int m = 0; m < M; ++m) {
    std::vector<double> ref(N);
    double scale = 0;
    for (int n = 0; n < N; ++n) {
      double s = 0;
      for (int k = 0; k < kend; ++k) s += (double)c.x[(size_t)m * c.ldx + k] * tfc_ld(&c.w[(size_t)n * c.ldw + k]);
      ref[n] = s;
      if (std::isfinite(s)) scale = std::max(scale, std::fabs(s));
    }
    for (int n = 0; n < N; ++n) {
      const double got = Y[(size_t)m * N + n], want = ref[n];
      if (std::isnan(want) || std::isnan(got) || std::isinf(want) || std::isinf(got)) {
        if (std::isnan(want) != std::isnan(got) || (std::isinf(want) && got != want)) return -1;
        continue;
      }
      w = std::max(w, std::fabs(got - want) / std::max(scale, 1e-30));
    }
  }
  return w;
}
