// tfc_hip.h: the portability header of the generated kernels.
//
// Kernels are written in HIP. Under clang/hipcc (AMD) this header includes the HIP runtime; under
// nvcc the few names the kernels use beyond the common CUDA/HIP dialect are mapped here, so that
// `nvcc -arch=sm_90 -cubin -x cu kernels/<family>.hip` builds the same source.
//
// Common to both dialects and used unmapped: __global__, __device__, __forceinline__, __shared__,
// __launch_bounds__, threadIdx, blockIdx, blockDim, warpSize, __syncthreads, __float_as_uint,
// __uint_as_float, __half with __half2float and __float2half, and the float math functions
// (expf, erff, tanhf, rsqrtf, powf, sincosf, fmaf, fmaxf).
#pragma once

#if defined(__HIP__) || defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#define TFC_HIP 1
#define tfc_trap() __builtin_trap()
#elif defined(__CUDACC__)
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#define TFC_CUDA 1
#define tfc_trap() __trap()
#else
#error "tfc_hip.h: compile with clang -x hip, hipcc, or nvcc -x cu"
#endif

// TFC_MFMA is 1 in device code for the CDNA targets whose matrix cores multiply BF16 16×16×16
// blocks (v_mfma_f32_16x16x16bf16_1k: gfx90a, gfx94x), TFC_WMMA for RDNA3 (v_wmma_f32_16x16x16_bf16,
// gfx11); TFC_AMD_MATRIX is either, where the linears take tfc_gemm_amd.
#if TFC_HIP && (defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__))
#define TFC_MFMA 1
#elif TFC_HIP && defined(__GFX11__)
#define TFC_WMMA 1
#endif
#if TFC_MFMA || TFC_WMMA
#define TFC_AMD_MATRIX 1
#endif

// TFC_CLUSTER_Y(n) launches a kernel in clusters of n blocks along y where the device has them
// (CUDA, sm_90); elsewhere the blocks run alone.
// tfc_cluster_rank, tfc_cluster_sync and tfc_cluster_map are the block's rank in its cluster, a
// barrier of the whole cluster, and the address of p in the LDS of the cluster's block rank.
#if TFC_CUDA
#define TFC_CLUSTER_Y(n) __cluster_dims__(1, n, 1)
__device__ __forceinline__ int tfc_cluster_rank() { return (int)cooperative_groups::this_cluster().block_rank(); }
__device__ __forceinline__ void tfc_cluster_sync() { cooperative_groups::this_cluster().sync(); }
template <typename T>
__device__ __forceinline__ T* tfc_cluster_map(T* p, int rank) {
  return cooperative_groups::this_cluster().map_shared_rank(p, (unsigned)rank);
}
#else
#define TFC_CLUSTER_Y(n)
#endif

// TFC_WAVE is the wave (warp) size of the device being compiled for: 32 or 64. Kernels reduce
// through LDS and never assume a width; this is for code that must size by waves.
#define TFC_WAVE warpSize

// tfc_shfl_xor is v of lane l ^ d to lane l; with d < 32 the lanes trade within groups of 32 on
// waves of 32 and of 64 alike.
#if TFC_HIP
__device__ __forceinline__ float tfc_shfl_xor(float v, int d) { return __shfl_xor(v, d); }
#else
__device__ __forceinline__ float tfc_shfl_xor(float v, int d) { return __shfl_xor_sync(0xffffffffu, v, d); }
#endif

// TFC_NEG_INF is -infinity without depending on math.h's INFINITY.
#define TFC_NEG_INF __uint_as_float(0xff800000u)

// tfc_bf16 is a bfloat16 stored as its 16 bits, bit-compatible with hip_bfloat16 and
// __nv_bfloat16, so the same buffers serve both dialects without their conversion headers.
struct tfc_bf16 {
  unsigned short bits;
};

__device__ __forceinline__ float tfc_ld(const float* p) { return *p; }
__device__ __forceinline__ float tfc_ld(const tfc_bf16* p) { return __uint_as_float((unsigned)p->bits << 16); }
__device__ __forceinline__ float tfc_ld(const __half* p) { return __half2float(*p); }

__device__ __forceinline__ void tfc_st(float* p, float v) { *p = v; }
__device__ __forceinline__ void tfc_st(__half* p, float v) { *p = __float2half(v); }
// Round to nearest even; NaN stays a quiet NaN of the same sign.
__device__ __forceinline__ void tfc_st(tfc_bf16* p, float v) {
  unsigned u = __float_as_uint(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    p->bits = (unsigned short)((u >> 16) | 0x40u);
    return;
  }
  u += 0x7fffu + ((u >> 16) & 1u);
  p->bits = (unsigned short)(u >> 16);
}
