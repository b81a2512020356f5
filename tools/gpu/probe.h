// probe.h: what the GPU probes of tools/gpu share: CHECK on CUDA calls, a median, a timer, and the
// random operands of a linear (X normal, BF16-exact when asked; W normal × 0.05 as BF16).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "tfc_kernels.h"

#define CHECK(x)                                                                 \
  do {                                                                           \
    cudaError_t e = (x);                                                         \
    if (e != cudaSuccess) {                                                      \
      std::printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      std::exit(1);                                                              \
    }                                                                            \
  } while (0)

static float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// timed runs f n times a sample, 7 samples: the median µs of one.
template <class F>
static float timed(F f, int n = 10) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<float> us;
  for (int rep = 0; rep < 7; ++rep) {
    CHECK(cudaEventRecord(a));
    for (int i = 0; i < n; ++i) f();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    us.push_back(ms * 1000.f / n);
  }
  CHECK(cudaGetLastError());
  return median(us);
}

// operands fills X [rows, K] and W [N, K] from a generator seeded by N and K; bf16x keeps X's high halves alone.
static void operands(int N, int K, size_t rows, bool bf16x, std::vector<float>& x, std::vector<tfc_bf16>& w) {
  std::mt19937 rng(N * 7 + K);
  std::normal_distribution<float> nd;
  x.resize(rows * K);
  w.resize((size_t)N * K);
  for (auto& v : x) {
    const float f = nd(rng);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if (bf16x) u &= 0xffff0000u;
    std::memcpy(&v, &u, 4);
  }
  for (auto& v : w) {
    const float f = nd(rng) * 0.05f;
    uint32_t u;
    std::memcpy(&u, &f, 4);
    v = tfc_bf16{(unsigned short)(u >> 16)};
  }
}
