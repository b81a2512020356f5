// Runs tfc_gemm_amd (kernels/tfc_amd_gemm.h, the AMD matrix-core GEMM) on the CPU through the
// emulated v_mfma_f32_16x16x16bf16_1k (built with EMU_MFMA: waves of 64) or v_wmma_f32_16x16x16_bf16
// (EMU_WMMA: waves of 32) of tfc_hip.h beside it, and checks what no AMD run here can show: that every product lands where it belongs (against a
// float64 reference, for the tile shapes the emitter uses, K with and without tails, aligned and
// strided rows), that a row's bits are the same in a full tile, a 16-row (mid) tile and the
// decode rows' 16×TFC_SMALL_BN tile (whose waves split K by chunks), that one BF16 term gives
// three terms' bits on BF16-exact rows, that ±Inf and NaN come out as the reference's, and that
// the off-by-one, wrong-stride and missing-barrier controls change the result. It prints
// "N passed, N failed".
#include <cstdio>
#include <random>
#include <vector>

#include "gemm_check.h"

// run launches the tile grid of a BM×BN tfc_gemm_amd over M rows into Y [M, N] (row stride N).
template <int BM, int BN, int N, int K, int MUT, int TERMS = 3>
static void run(const float* X, int ldx, const tfc_bf16* W, int ldw, int M, float* Y) {
  tiles<BM, BN, N>(tfc_amd_smem<BM, BN, TERMS>, M, Y, [=](float* smem, int m0, int n0) {
    tfc_gemm_amd<BM, BN, N, K, MUT, TERMS>(smem, X, ldx, W, ldw, M, m0, n0);
  });
  if (MUT == TFC_MUT_NONE && emu_unreplicated != 0)  // a planted control may read LDS lanes apart; the kernel must not
    check(false, "WMMA operands are the same in both halves of the wave");
  emu_unreplicated = 0;
}

template <int BM, int BN, int N, int K>
static void suite(const char* name) {
  char what[160];
  const int M = 40;
  for (int strided = 0; strided < 2; ++strided) {
    const int ldx = strided ? K + 1 : K, ldw = strided ? K + 3 : K;
    Case c = make<N, K>(M, ldx, ldw, 1 + strided + 7 * K + BN, false);
    std::vector<float> y((size_t)M * N, NAN);
    run<BM, BN, N, K, TFC_MUT_NONE>(c.x.data(), ldx, c.w.data(), ldw, M, y.data());
    const double e = worst<N, K>(c, M, y.data());
    std::snprintf(what, sizeof what, "%s strided=%d: worst %.3g", name, strided, e);
    check(e >= 0 && e < 1e-6, what);
    // rows [20, 25) alone, as a decode round and a mid-size launch run them
    std::vector<float> small((size_t)5 * N, NAN), mid((size_t)5 * N, NAN);
    run<16, TFC_SMALL_BN, N, K, TFC_MUT_NONE>(c.x.data() + (size_t)20 * ldx, ldx, c.w.data(), ldw, 5, small.data());
    run<16, BN, N, K, TFC_MUT_NONE>(c.x.data() + (size_t)20 * ldx, ldx, c.w.data(), ldw, 5, mid.data());
    std::snprintf(what, sizeof what, "%s strided=%d: rows alone keep their bits in the small and mid tiles", name, strided);
    check(std::memcmp(small.data(), y.data() + (size_t)20 * N, small.size() * 4) == 0 &&
              std::memcmp(mid.data(), y.data() + (size_t)20 * N, mid.size() * 4) == 0,
          what);
    {  // BF16 precision: on BF16-exact activations one product a step keeps the bits of three
      Case b = c;
      for (auto& v : b.x) {
        const tfc_bf16 h = to_bf16(v);
        v = tfc_ld(&h);
      }
      std::vector<float> three((size_t)M * N, NAN), one((size_t)M * N, NAN), rone((size_t)5 * N, NAN);
      run<BM, BN, N, K, TFC_MUT_NONE, 3>(b.x.data(), ldx, b.w.data(), ldw, M, three.data());
      run<BM, BN, N, K, TFC_MUT_NONE, 1>(b.x.data(), ldx, b.w.data(), ldw, M, one.data());
      run<16, TFC_SMALL_BN, N, K, TFC_MUT_NONE, 1>(b.x.data() + (size_t)20 * ldx, ldx, b.w.data(), ldw, 5, rone.data());
      std::snprintf(what, sizeof what, "%s strided=%d: one BF16 term gives three terms' bits on BF16-exact rows, small tile too", name, strided);
      check(std::memcmp(three.data(), one.data(), three.size() * 4) == 0 &&
                std::memcmp(rone.data(), three.data() + (size_t)20 * N, rone.size() * 4) == 0,
            what);
      if (!strided) {
        run<BM, BN, N, K, TFC_MUT_NONE, 1>(c.x.data(), ldx, c.w.data(), ldw, M, one.data());
        std::snprintf(what, sizeof what, "%s: one term on F32 rows drops their low bits", name);
        check(std::memcmp(y.data(), one.data(), y.size() * 4) != 0, what);
      }
    }
    if (strided) continue;
    Case s = make<N, K>(M, ldx, ldw, 99, true);
    run<BM, BN, N, K, TFC_MUT_NONE>(s.x.data(), ldx, s.w.data(), ldw, M, y.data());
    std::snprintf(what, sizeof what, "%s: NaN and ±Inf as the reference's", name);
    check(worst<N, K>(s, M, y.data()) >= 0, what);
    run<BM, BN, N, K, TFC_MUT_BOUND>(c.x.data(), ldx, c.w.data(), ldw, M, y.data());
    std::snprintf(what, sizeof what, "%s: off-by-one control differs (worst %.3g)", name, worst<N, K>(c, M, y.data()));
    check(worst<N, K>(c, M, y.data()) > 1e-4, what);
    std::snprintf(what, sizeof what, "%s: off-by-one control sums k < K-1", name);
    check(worst<N, K>(c, M, y.data(), K - 1) < 1e-6, what);
    run<BM, BN, N, K, TFC_MUT_STRIDE>(c.x.data(), ldx, c.w.data(), ldw, M, y.data());
    std::snprintf(what, sizeof what, "%s: wrong-stride control differs", name);
    check(worst<N, K>(c, M, y.data()) > 1e-4, what);
    run<BM, BN, N, K, TFC_MUT_BARRIER>(c.x.data(), ldx, c.w.data(), ldw, M, y.data());
    const double b = worst<N, K>(c, M, y.data());
    std::snprintf(what, sizeof what, "%s: missing-barrier control differs", name);
    check(b < 0 || b > 1e-4, what);
    std::vector<float> r((size_t)5 * N, NAN);
    Case five{std::vector<float>(c.x.begin(), c.x.begin() + (size_t)5 * ldx + 4), c.w, ldx, ldw};
    run<16, TFC_SMALL_BN, N, K, TFC_MUT_BARRIER>(five.x.data(), ldx, five.w.data(), ldw, 5, r.data());
    const double sb = worst<N, K>(five, 5, r.data());
    std::snprintf(what, sizeof what, "%s: the small tile's missing-barrier control differs", name);
    check(sb < 0 || sb > 1e-4, what);
  }
}

int main() {
  suite<32, 64, 136, 296>("32x64 K=296");
  suite<64, 64, 96, 100>("64x64 K=100");
  suite<64, 80, 176, 200>("64x80 K=200");
  suite<32, 48, 100, 64>("32x48 K=64");
  suite<16, 48, 100, 330>("16x48 K=330");  // three blocks: waves idle
  suite<16, 32, 40, 1630>("16x32 K=1630");  // two blocks, waves sharing each
  suite<32, 128, 264, 96>("32x128 K=96");
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
