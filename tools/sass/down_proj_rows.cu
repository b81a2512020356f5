// A probe for tools/sass/sass.sh: a decode round's down projection at one to eight rows
// (tfc_gemm_mma_rows, Qwen2-VL-2B's N 1,536 and K 8,960), as the generated _rows function calls it.
#include "tfc_hip.h"
#include "tfc_kernels.h"
extern "C" __global__ __launch_bounds__(256) void probe_down_proj_rows(const float* X, int ldx, const tfc_bf16* W, int ldw, float* Y, int ldy, int M) {
  constexpr int BM = 32, BN = 64, N = 1536, K = 8960;
  __shared__ __align__(16) float smem[tfc_mma_floats<BM, BN>];
  const int m0 = blockIdx.x * BM, n0 = blockIdx.y * TFC_SMALL_BN;
  tfc_gemm_mma_rows<BM, TFC_SMALL_BN, N, K, TFC_MUT_NONE, TFC_MMA_TERMS, TFC_SMALL_ROWS>(smem, X, ldx, W, ldw, M, m0, n0);
  for (int e = threadIdx.x; e < TFC_SMALL_ROWS * TFC_SMALL_BN; e += 256) {
    const int r = e / TFC_SMALL_BN, c = e % TFC_SMALL_BN;
    if (m0 + r < M) Y[(size_t)(m0 + r) * ldy + n0 + c] = smem[r * (TFC_SMALL_BN + 1) + c];
  }
}
