// Runs tfc_gemm_mma_rows (kernels/tfc_mma_gemm.h) with its K chunks split over a cluster of 2 and
// 4 blocks (CL), as CUDA launches the small-row and band functions of a linear with few column
// tiles, on the CPU through the emulated warp instructions and clusters of tfc_hip.h beside it. It
// checks what a GPU run cannot show without a GPU: that every output has the bits of the same
// tile without a cluster (CL = 1, which main.cpp checks against float64 and tfc_gemm_mma), in
// one term (BF16 precision) and three, on 1, 5 and 8 rows and on bands of 32, K with and without
// tails and of fewer chunks than the cluster's warps, aligned and strided rows, NaN and ±Inf;
// and that the missing-barrier control (the waves' cluster barriers dropped) changes the result.
// It prints "N passed, N failed".
#define EMU_CLUSTER 1  // the blocks of a cluster run at once, each on a thread of its own
#include <cstdio>
#include <vector>

#include "gemm_check.h"

constexpr int BM = 32, BN = TFC_SMALL_BN;

// run launches the small tiles of tfc_gemm_mma_rows over M <= ROWS rows (bands of ROWS rows past
// that) into Y [M, N], a cluster of CL blocks a tile, each block's LDS its own (thread_local, so
// that tfc_cluster_map finds the others').
template <int N, int K, int MUT, int TERMS, int ROWS, int CL>
static void run(const Case& c, int M, float* Y) {
  constexpr int floats = tfc_mma_floats<BM, BN>;
  const float* X = c.x.data();
  const tfc_bf16* W = c.w.data();
  const int ldx = c.ldx, ldw = c.ldw;
  std::vector<float> tile((size_t)ROWS * BN);
  for (int bx = 0; bx < (M + ROWS - 1) / ROWS; ++bx)
    for (int by = 0; by < (N + BN - 1) / BN; ++by) {
      const int m0 = bx * ROWS, n0 = by * BN;
      float* out = tile.data();
      auto body = [=] {
        static thread_local float4 store[(floats + 3) / 4 + 1];
        float* smem = reinterpret_cast<float*>(store);
        if (threadIdx.x == 0) std::memset(smem, 0xff, floats * 4);  // stale LDS: NaN
        __syncthreads();
        tfc_gemm_mma_rows<BM, BN, N, K, MUT, TERMS, ROWS, CL>(smem, X, ldx, W, ldw, M, m0, n0);
        if (CL == 1 || tfc_cluster_rank() == 0)
          for (int e = threadIdx.x; e < ROWS * BN; e += 256) out[e] = smem[e / BN * (BN + 1) + e % BN];
      };
      emu_run_cluster(CL, bx, by * CL, body);
      for (int r = 0; r < ROWS && m0 + r < M; ++r)
        for (int j = 0; j < BN && n0 + j < N; ++j) Y[(size_t)(m0 + r) * N + n0 + j] = tile[(size_t)r * BN + j];
    }
}

static bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

// cluster checks one shape: CL = 2 and 4 against CL = 1 on M rows (ROWS a block), and the
// missing-barrier control red at CL = 4.
template <int N, int K, int TERMS, int ROWS>
static void cluster(const char* name, int M) {
  char what[160];
  for (int strided = 0; strided < 2; ++strided) {
    Case c = make<N, K>(M, strided ? K + 1 : K, strided ? K + 3 : K, 11 + N + M, TERMS == 3);
    if (TERMS == 1)
      for (auto& v : c.x) v = tfc_ld(&(const tfc_bf16&)to_bf16(v));  // BF16-exact activations
    std::vector<float> one((size_t)M * N), two((size_t)M * N, NAN), four((size_t)M * N, NAN);
    run<N, K, TFC_MUT_NONE, TERMS, ROWS, 1>(c, M, one.data());
    run<N, K, TFC_MUT_NONE, TERMS, ROWS, 2>(c, M, two.data());
    run<N, K, TFC_MUT_NONE, TERMS, ROWS, 4>(c, M, four.data());
    const double w = worst<N, K>(c, M, one.data());
    std::snprintf(what, sizeof what, "%s M=%d strided=%d: the tile without a cluster is within 1e-5 (%g)", name, M, strided, w);
    check(w >= 0 && w < 1e-5, what);
    std::snprintf(what, sizeof what, "%s M=%d strided=%d: a cluster of 2 keeps the bits", name, M, strided);
    check(same_bits(one, two), what);
    std::snprintf(what, sizeof what, "%s M=%d strided=%d: a cluster of 4 keeps the bits", name, M, strided);
    check(same_bits(one, four), what);
  }
  Case c = make<N, K>(M, K, K, 5 + N, false);
  std::vector<float> y((size_t)M * N, NAN);
  run<N, K, TFC_MUT_BARRIER, TERMS, ROWS, 4>(c, M, y.data());
  const double b = worst<N, K>(c, M, y.data());
  std::snprintf(what, sizeof what, "%s M=%d: the missing-barrier control differs (%g)", name, M, b);
  check(b < 0 || b > 1e-4, what);
}

int main() {
  cluster<48, 1630, 1, TFC_SMALL_ROWS>("N=48 K=1630 one term", 1);  // many waves, a tail
  cluster<48, 1630, 3, TFC_SMALL_ROWS>("N=48 K=1630 three terms", 5);
  cluster<32, 200, 1, TFC_SMALL_ROWS>("N=32 K=200 one term", 8);  // fewer chunks than a wave's slots
  cluster<16, 64, 3, TFC_SMALL_ROWS>("N=16 K=64 three terms", 8);  // one chunk: ranks 1-3 idle
  cluster<32, 520, 1, 32>("band N=32 K=520 one term", 40);        // two bands of up to 32 rows
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
