// Runs tfc_block_sum (kernels/tfc_reduce.h), the row sums of the RMSNorm and LayerNorm kernels,
// on the CPU through tfc_hip.h beside it, a block of 256 threads: every thread must get the same
// bits, those of the documented order (each 32 lanes by the xor tree, then the groups' sums in
// group order), whatever the wave (EMU_WAVE 32 or 64), twice in a row on the same LDS (as
// LayerNorm sums the mean, then the variance), and the missing-barrier control must differ. It
// prints "N passed, N failed".
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "check.h"
#include "tfc_kernels.h"

static float red[256];

// sums runs two sums in one block: of v[t] and of v[t]·v[t], thread t's values; each thread's results.
template <int MUT>
static std::vector<float> sums(const std::vector<float>& v) {
  std::vector<float> got(512, -7.f);
  static unsigned char lds[16];
  for (auto& r : red) r = 1.f;  // stale LDS of a launch before
  const float* V = v.data();
  float* G = got.data();
  emu_run(lds, 0, 0, [=] {
    const float x = V[threadIdx.x];
    G[threadIdx.x] = tfc_block_sum<256, MUT>(x, red);
    G[256 + threadIdx.x] = tfc_block_sum<256, MUT>(x * x, red);
  });
  return got;
}

// reference is the documented order: a group's 32 values by the xor tree, groups in order.
static float reference(const std::vector<float>& v, bool square) {
  float total = 0.f;
  for (int g = 0; g < 8; ++g) {
    float a[32];
    for (int l = 0; l < 32; ++l) a[l] = square ? v[32 * g + l] * v[32 * g + l] : v[32 * g + l];
    for (int d = 16; d > 0; d >>= 1) {
      float b[32];
      for (int l = 0; l < 32; ++l) b[l] = a[l] + a[l ^ d];
      std::memcpy(a, b, sizeof a);
    }
    total = g == 0 ? a[0] : total + a[0];
  }
  return total;
}

int main() {
  std::mt19937 rng(7);
  char what[160];
  for (int c = 0; c < 6; ++c) {
    std::vector<float> v(256);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (auto& x : v) x = std::ldexp(u(rng), c * 7 % 20 - 10 + (int)(rng() % 9));  // spread exponents: the order shows
    const auto got = sums<TFC_MUT_NONE>(v);
    const float want[2] = {reference(v, false), reference(v, true)};
    for (int k = 0; k < 2; ++k) {
      bool same = true;
      for (int t = 0; t < 256; ++t) same = same && std::memcmp(&got[256 * k + t], &want[k], 4) == 0;
      std::snprintf(what, sizeof what, "case %d sum %d: every thread has the documented order's bits (wave %d)", c, k, EMU_WAVE);
      check(same, what);
    }
    const auto bar = sums<TFC_MUT_BARRIER>(v);
    std::snprintf(what, sizeof what, "case %d: missing-barrier control differs", c);
    check(std::memcmp(bar.data(), got.data(), 4 * got.size()) != 0, what);
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
