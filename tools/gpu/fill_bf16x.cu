// fill_bf16x.cu: what the prompt fill's linears would gain with X stored in BF16. Times, at the
// fill's and the tower's shapes, the fill layout as it ships (tfc_gemm_mma_fill, mma.sync, X F32
// holding BF16 values), its wgmma form (tfc_gemm_wgmma_fill), and a probe that reads X already in
// BF16 (converted once, timed apart): its copies go straight into wgmma's core matrices, with no
// split step. Every layout must give the first one's bits (the same chunk order). cuBLAS's BF16
// GEMM (F32 out, its own order) is timed as a peer.
//   nvcc -arch=sm_90a -O3 -std=c++17 -DTFC_BF16=1 -Ikernels -o fill_bf16x tools/gpu/fill_bf16x.cu -lcublas
#include <cublas_v2.h>

#include "probe.h"

// out writes a block's C tile (smem, BN + 1 a row) to Y [M, N].
template <int BM, int BN, int N>
__device__ void out(const float* smem, float* Y, int M, int m0, int n0) {
  for (int i = threadIdx.x; i < BM * BN; i += blockDim.x) {
    const int r = i / BN, c = i % BN;
    if (m0 + r < M && n0 + c < N) Y[(size_t)(m0 + r) * N + n0 + c] = smem[r * (BN + 1) + c];
  }
}

template <int BM, int BN, int N, int K>
__global__ __launch_bounds__(256) void fill_mma(const float* X, const tfc_bf16* W, float* Y, int M) {
  float* smem = tfc_fill_lds();
  tfc_gemm_mma_fill<BM, BN, N, K, 0, 1, 2>(smem, X, K, W, K, M, blockIdx.x * BM, (int)blockIdx.y * BN);
  out<BM, BN, N>(smem, Y, M, blockIdx.x * BM, blockIdx.y * BN);
}

template <int BM, int BN, int N, int K>
__global__ __launch_bounds__(256) void fill_wgmma(const float* X, const tfc_bf16* W, float* Y, int M) {
#if TFC_WGMMA  // the device pass for sm_90a; the host pass sees an empty body
  float* smem = tfc_fill_lds();
  tfc_gemm_wgmma_fill<BM, BN, N, K, 0>(smem, X, K, W, K, M, blockIdx.x * BM, (int)blockIdx.y * BN);
  out<BM, BN, N>(smem, Y, M, blockIdx.x * BM, blockIdx.y * BN);
#endif
}

// to_bf16 is the conversion X would take once: each F32 to its high half, NaNs quieted as tfc_put_terms does.
__global__ void to_bf16(const float* X, tfc_bf16* B, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) B[i] = tfc_bf16{(unsigned short)tfc_bf16_hi(X[i])};
}

// probe_bytes is the probe's LDS: P stages of X and W in core matrices, or the C tile.
template <int BM, int BN, int BK, int P>
constexpr int probe_bytes() { return P * (BM + BN) * BK * 2 > BM * (BN + 1) * 4 ? P * (BM + BN) * BK * 2 : BM * (BN + 1) * 4; }

// fill_bf16x: two warpgroups of 64 rows by BN, BK columns a step in P stages, X and W both BF16
// copied by cp.async into core matrices, a step's k16 wgmma chained from zero in a TFC_KC chunk.
template <int BM, int BN, int N, int K, int BK, int P>
__global__ __launch_bounds__(256) void fill_bf16x(const tfc_bf16* X, const tfc_bf16* W, float* Y, int M) {
#if TFC_WGMMA
  extern __shared__ __align__(128) unsigned char sm[];
  constexpr int XB = BM * BK * 2, ST = (BM + BN) * BK * 2, KT = K / BK, NT = BN / 8;
  static_assert(K % BK == 0 && TFC_KC % BK == 0 && BM == 128, "whole steps; chunks hold whole steps");
  const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN, warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const unsigned base = tfc_smem_addr(sm);
  auto load = [&](int s) {
    const unsigned st = base + s % P * ST;
#pragma unroll
    for (int u = threadIdx.x; u < BM * BK / 8; u += 256) {
      const int r = u / (BK / 8), k = 8 * (u % (BK / 8)), m = m0 + r;
      tfc_cp_async16(st + tfc_core_at<BK>(r, k), X + (size_t)(m < M ? m : 0) * K + s * BK + k, m < M ? 16 : 0);
    }
#pragma unroll
    for (int u = threadIdx.x; u < BN * BK / 8; u += 256) {
      const int r = u / (BK / 8), k = 8 * (u % (BK / 8)), n = n0 + r;
      tfc_cp_async16(st + XB + tfc_core_at<BK>(r, k), W + (size_t)(n < N ? n : 0) * K + s * BK + k, n < N ? 16 : 0);
    }
  };
  float acc[NT][4], phi[NT][4];
#pragma unroll
  for (int i = 0; i < NT; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[i][e] = phi[i][e] = 0.f;
#pragma unroll
  for (int s = 0; s < P - 1; ++s) {
    if (s < KT) load(s);
    tfc_cp_async_commit();
  }
#pragma unroll 1
  for (int s = 0; s < KT; ++s) {
    tfc_cp_async_wait<P - 2>();
    tfc_proxy_fence();
    __syncthreads();  // step s is in wgmma's view; step s - 1's stage is free
    if (s + P - 1 < KT) load(s + P - 1);
    tfc_cp_async_commit();
    tfc_wgmma_step<BN, BK>(phi, base + s % P * ST + warp / 4 * 64 / 8 * (BK / 8) * 128, base + s % P * ST + XB);
    if ((s + 1) * BK % TFC_KC == 0 || s + 1 == KT) tfc_wgmma_fold(acc, phi);
  }
  tfc_cp_async_wait<0>();
  __syncthreads();
  float* smem = reinterpret_cast<float*>(sm);
#pragma unroll
  for (int i = 0; i < NT; ++i) tfc_mma_put(smem + (16 * warp + g) * (BN + 1) + 8 * i + 2 * t, BN + 1, acc[i]);
  __syncthreads();
  out<BM, BN, N>(smem, Y, M, m0, n0);
#endif
}

static void report(const char* shape, const char* what, int M, int N, int K, float us, const std::vector<float>& ref, float* Y, const char* note = nullptr) {
  std::vector<float> got((size_t)M * N);
  CHECK(cudaMemcpy(got.data(), Y, got.size() * 4, cudaMemcpyDeviceToHost));
  const char* bits = note ? note : std::memcmp(ref.data(), got.data(), got.size() * 4) == 0 ? "same" : "DIFFER";
  std::printf("%-12s M=%-5d N=%-5d K=%-5d %-26s %9.1f us %6.1f TFLOP/s  %s\n", shape, M, N, K, what, us, 2.0 * M * N * K / us / 1e6, bits);
  std::fflush(stdout);
}

template <int N, int K>
static void shape(const char* name, int M, cublasHandle_t h) {
  std::vector<float> hx;
  std::vector<tfc_bf16> hw;
  operands(N, K, M, true, hx, hw);
  float *X, *Y;
  tfc_bf16 *W, *XB;
  CHECK(cudaMalloc(&X, hx.size() * 4));
  CHECK(cudaMalloc(&XB, hx.size() * 2));
  CHECK(cudaMalloc(&W, hw.size() * 2));
  CHECK(cudaMalloc(&Y, (size_t)M * N * 4));
  CHECK(cudaMemcpy(X, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(W, hw.data(), hw.size() * 2, cudaMemcpyHostToDevice));
  std::vector<float> ref((size_t)M * N);
  constexpr int BM = 128, BN = 128;
  const dim3 grid((M + BM - 1) / BM, (N + BN - 1) / BN);
  const int lds = tfc_fill_smem<BM, BN>::bytes;
  CHECK(cudaFuncSetAttribute(fill_mma<BM, BN, N, K>, cudaFuncAttributeMaxDynamicSharedMemorySize, lds));
  CHECK(cudaFuncSetAttribute(fill_wgmma<BM, BN, N, K>, cudaFuncAttributeMaxDynamicSharedMemorySize, lds));
  float us = timed([&] { fill_mma<BM, BN, N, K><<<grid, 256, lds>>>(X, W, Y, M); });
  CHECK(cudaMemcpy(ref.data(), Y, ref.size() * 4, cudaMemcpyDeviceToHost));
  report(name, "fill mma.sync 128x128", M, N, K, us, ref, Y, "reference");
  CHECK(cudaMemset(Y, 0xff, (size_t)M * N * 4));
  us = timed([&] { fill_wgmma<BM, BN, N, K><<<grid, 256, lds>>>(X, W, Y, M); });
  report(name, "fill wgmma 128x128", M, N, K, us, ref, Y);
  us = timed([&] { to_bf16<<<264, 512>>>(X, XB, hx.size()); });
  report(name, "X to BF16 (once)", M, 1, K, us, ref, Y, "-");
#define PROBE(BK, P)                                                                                            \
  {                                                                                                              \
    constexpr int b = probe_bytes<BM, BN, BK, P>();                                                              \
    CHECK(cudaFuncSetAttribute(fill_bf16x<BM, BN, N, K, BK, P>, cudaFuncAttributeMaxDynamicSharedMemorySize, b)); \
    CHECK(cudaMemset(Y, 0xff, (size_t)M * N * 4));                                                               \
    us = timed([&] { fill_bf16x<BM, BN, N, K, BK, P><<<grid, 256, b>>>(XB, W, Y, M); });                          \
    report(name, "bf16 X wgmma BK" #BK " P" #P, M, N, K, us, ref, Y);                                             \
  }
  PROBE(32, 4)
  PROBE(32, 6)
  PROBE(64, 3)
  PROBE(64, 4)
  // cuBLAS: Y^T [N, M] = W [N, K] · X^T, column-major: Y (row-major M×N) = X · W^T
  const float one = 1.f, zero = 0.f;
  us = timed([&] {
    cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, W, CUDA_R_16BF, K, XB, CUDA_R_16BF, K, &zero, Y, CUDA_R_32F, N,
                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  });
  report(name, "cuBLAS BF16 (peer)", M, N, K, us, ref, Y, "its own order");
  CHECK(cudaFree(X));
  CHECK(cudaFree(XB));
  CHECK(cudaFree(W));
  CHECK(cudaFree(Y));
}

int main() {
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 1;
  shape<17920, 1536>("gate/up", 2048, h);
  shape<1536, 8960>("down", 2048, h);
  shape<2048, 1536>("qkv", 2048, h);
  shape<3840, 1280>("vision qkv", 7200, h);
  shape<5120, 1280>("vision fc1", 7200, h);
  shape<1280, 5120>("vision fc2", 7200, h);
  return 0;
}
