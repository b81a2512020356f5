// A probe for tools/sass/sass.sh: a prompt chunk's linear on the fill layout (tfc_gemm_mma_fill),
// the down projection of Qwen2-VL-2B (N 1,536 ≤ 4,096: 128×64 tiles, 4 warps along the rows).
#include "tfc_hip.h"
#include "tfc_kernels.h"
extern "C" __global__ __launch_bounds__(256) void probe_fill(const float* X, int ldx, const tfc_bf16* W, int ldw, float* Y, int ldy, int M) {
  constexpr int FBM = 128, FBN = 64, N = 1536, K = 8960;
  float* const smem = tfc_fill_lds();
  const int m0 = blockIdx.x * FBM, n0 = blockIdx.y * FBN;
  tfc_gemm_mma_fill<FBM, FBN, N, K, TFC_MUT_NONE, TFC_MMA_TERMS, 4>(smem, X, ldx, W, ldw, M, m0, n0);
  for (int e = threadIdx.x; e < FBM * FBN; e += 256) {
    const int r = e / FBN, c = e % FBN;
    if (m0 + r < M) Y[(size_t)(m0 + r) * ldy + n0 + c] = smem[r * (FBN + 1) + c];
  }
}
// the default tile the same launch takes without the fill layout
extern "C" __global__ __launch_bounds__(256) void probe_tile(const float* X, int ldx, const tfc_bf16* W, int ldw, float* Y, int ldy, int M) {
  constexpr int BM = 32, BN = 64, N = 1536, K = 8960;
  __shared__ __align__(16) float smem[tfc_mma_floats<BM, BN>];
  const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
  tfc_gemm_mma<BM, BN, N, K, TFC_MUT_NONE>(smem, X, ldx, W, ldw, M, m0, n0);
  for (int e = threadIdx.x; e < BM * BN; e += 256) {
    const int r = e / BN, c = e % BN;
    if (m0 + r < M) Y[(size_t)(m0 + r) * ldy + n0 + c] = smem[r * (BN + 1) + c];
  }
}
