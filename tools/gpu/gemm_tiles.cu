// gemm_tiles.cu: the tensor-core GEMM tile (kernels/tfc_mma_gemm.h) alone, at the linears' shapes,
// under several tile and warp layouts: each layout's time and TFLOP/s, and whether its outputs
// are the first layout's bit for bit (every layout must give the same bits).
//   nvcc -arch=sm_90 -O3 -std=c++17 -DTFC_BF16=1 -Ikernels -o gemm_tiles tools/gpu/gemm_tiles.cu
//   ./gemm_tiles      (tools/gpu/gemm-tiles.sh builds and runs it in both precisions)
#include "probe.h"

// gemm runs one BM×BN tile a block (warps WM along its rows) and writes its C tile to Y [M, N].
template <int BM, int BN, int WM, int N, int K>
__global__ __launch_bounds__(256) void gemm(const float* X, const tfc_bf16* W, float* Y, int M) {
  __shared__ __align__(16) float smem[tfc_mma_smem<BM, BN>::floats];
  const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
  tfc_gemm_mma<BM, BN, N, K, 0, TFC_MMA_TERMS, WM>(smem, X, K, W, K, M, m0, n0);
  for (int i = threadIdx.x; i < BM * BN; i += 256) {
    const int r = i / BN, c = i % BN;
    if (m0 + r < M && n0 + c < N) Y[(size_t)(m0 + r) * N + n0 + c] = smem[r * (BN + 1) + c];
  }
}

struct Shape {
  const char* name;
  int M;
};

// Bench times one layout on M rows and compares its outputs with ref (filled by the first layout).
template <int BM, int BN, int WM, int N, int K>
static void bench(const char* shape, int M, const float* X, const tfc_bf16* W, float* Y, std::vector<float>& ref) {
  const dim3 grid((M + BM - 1) / BM, (N + BN - 1) / BN);
  CHECK(cudaMemset(Y, 0xff, (size_t)M * N * 4));
  gemm<BM, BN, WM, N, K><<<grid, 256>>>(X, W, Y, M);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  std::vector<float> out((size_t)M * N);
  CHECK(cudaMemcpy(out.data(), Y, out.size() * 4, cudaMemcpyDeviceToHost));
  const char* bits = "reference";
  if (ref.empty()) {
    ref = out;
  } else {
    bits = std::memcmp(ref.data(), out.data(), out.size() * 4) == 0 ? "same" : "DIFFER";
  }
  const float t = timed([&] { gemm<BM, BN, WM, N, K><<<grid, 256>>>(X, W, Y, M); }, 20);
  int regs = 0;
  cudaFuncAttributes attr;
  if (cudaFuncGetAttributes(&attr, gemm<BM, BN, WM, N, K>) == cudaSuccess) regs = attr.numRegs;
  std::printf("%-14s M=%-5d N=%-5d K=%-5d tile %3dx%-3d warps %dx%d regs %3d blocks %5d  %9.1f us  %6.1f TFLOP/s  %5.2f TB/s W  %s\n",
              shape, M, N, K, BM, BN, WM, 8 / WM, regs, grid.x * grid.y, t, 2.0 * M * N * K / t / 1e6,
              (double)N * K * 2 / t / 1e6, bits);
  std::fflush(stdout);
}

// Shapes runs every layout at N×K for each M.
template <int N, int K>
static void shapes(const char* name, std::initializer_list<int> ms) {
  int maxM = 0;
  for (int m : ms) maxM = m > maxM ? m : maxM;
  std::vector<float> hx;
  std::vector<tfc_bf16> hw;
  operands(N, K, maxM, TFC_BF16, hx, hw);  // BF16-exact activations in BF16 precision
  float* X;
  tfc_bf16* W;
  float* Y;
  CHECK(cudaMalloc(&X, hx.size() * 4));
  CHECK(cudaMalloc(&W, hw.size() * 2));
  CHECK(cudaMalloc(&Y, (size_t)maxM * N * 4));
  CHECK(cudaMemcpy(X, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(W, hw.data(), hw.size() * 2, cudaMemcpyHostToDevice));
  for (int M : ms) {
    std::vector<float> ref;
    bench<64, 64, 4, N, K>(name, M, X, W, Y, ref);  // the layout the emitter uses today
    bench<64, 64, 2, N, K>(name, M, X, W, Y, ref);
    bench<64, 64, 1, N, K>(name, M, X, W, Y, ref);
    bench<32, 64, 2, N, K>(name, M, X, W, Y, ref);
    bench<32, 64, 1, N, K>(name, M, X, W, Y, ref);
    bench<64, 32, 4, N, K>(name, M, X, W, Y, ref);
    bench<64, 32, 2, N, K>(name, M, X, W, Y, ref);
    bench<16, 64, 1, N, K>(name, M, X, W, Y, ref);
#if TFC_BF16  // two stages of these tiles fit 48 KiB with one term alone
    bench<128, 64, 8, N, K>(name, M, X, W, Y, ref);
    bench<128, 64, 4, N, K>(name, M, X, W, Y, ref);
    bench<128, 64, 2, N, K>(name, M, X, W, Y, ref);
    bench<64, 128, 2, N, K>(name, M, X, W, Y, ref);
    bench<64, 128, 1, N, K>(name, M, X, W, Y, ref);
#endif
  }
  CHECK(cudaFree(X));
  CHECK(cudaFree(W));
  CHECK(cudaFree(Y));
}

int main() {
  // The Qwen2-VL tower (1,280 wide, 7,200 patches of a 1000×1400 page) and the 1.5 B decoder
  // (1,536 wide: dots.ocr's and Qwen2-VL-2B's) at prompt chunks of 512 and decode rounds of 16-64.
  shapes<3840, 1280>("vision qkv", {7200});
  shapes<5120, 1280>("vision fc1", {7200});
  shapes<1280, 5120>("vision fc2", {7200});
  shapes<1280, 1280>("vision proj", {7200});
  shapes<17920, 1536>("gate/up", {512, 64, 32, 16});
  shapes<1536, 8960>("down", {512, 64, 32, 16});
  shapes<2048, 1536>("qkv", {512, 64});
  shapes<1536, 1536>("o", {512, 64});
  return 0;
}
