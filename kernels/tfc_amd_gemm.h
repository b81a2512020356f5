// tfc_amd_gemm.h: the matrix-core GEMM of the linears on AMD (tfc_gemm_amd: MFMA 16×16×16 BF16 on
// CDNA, WMMA 16×16×16 BF16 on RDNA3), F32 activations split exactly into BF16 terms as
// tfc_gemm_mma splits them on CUDA.
#pragma once
#include "tfc_mma_gemm.h"

#if TFC_AMD_MATRIX
// tfc_gemm_amd computes the BM×BN tile at row m0 of X·Wᵀ (X F32 [M,K], W BF16 [N,K]; tile column c
// is W row tfc_col(cols, c)) and leaves it in smem as C[r*(BN+1) + c] for the same epilogue as
// tfc_gemm_mma, on the matrix cores: one 16×16×16 BF16 instruction with F32 accumulation for each
// 16×16 block of outputs and 16 columns of K. X is split into TERMS BF16 terms and staged in LDS
// by tfc_mma_load and tfc_mma_store, in tfc_gemm_mma's two stages and K step, one barrier a step.
//
// Order of accumulation, fixed for every output: k in steps of 16 from 0 (K padded with zeros to
// a multiple of TFC_MMA_BK); within each TFC_KC chunk the hi products go to one accumulator and
// the lo2 then lo products to another, both from zero; at the chunk's end hi + lo is added to the
// output's sum, chunks in ascending order. Each 16×16 block of outputs is one chain of matrix
// instructions on the same operands whatever the tile, so a row's bits do not depend on the
// launch: decode rows (a 16×TFC_SMALL_BN tile), mid (16-row) and full tiles give the same bits.
//
// The block's waves (4 of 64 lanes on CDNA, 8 of 32 on RDNA) share the tile's 16×16 blocks. Where
// it has fewer blocks than waves (small tiles) and they divide the waves, SPLIT waves share one,
// wave part p taking the chunks c with c % SPLIT == p; each chunk's sum goes to an LDS slot after
// the stages, and at the end of every SPLIT chunks the part-0 wave adds the slots to the output's
// sum in chunk order.
//
// Operands (tfc_amd_mx): lane l of a wave holds, of A (16 rows × 16 k), row l%16 at OPS
// consecutive k from k0(l); of B (16 k × 16 columns), column l%16 at the same k; of D, ELEMS
// elements, element r at row tfc_amd_mx::row(l, r), column l%16. An operand is 2·OPS consecutive
// bytes of a staged BF16 row.
struct tfc_amd_mx {
#if TFC_MFMA  // v_mfma_f32_16x16x16bf16_1k: k 4(l/16)..+3; D rows 4(l/16) + r
  static constexpr int wave = 64, ops = 4, elems = 4;
  static __device__ __forceinline__ int k0(int l) { return 4 * (l / 16); }
  static __device__ __forceinline__ int row(int l, int r) { return 4 * (l / 16) + r; }
#else  // v_wmma_f32_16x16x16_bf16 (wave32): all 16 k, lanes 16..31 repeating 0..15; D rows 2r + l/16
  static constexpr int wave = 32, ops = 16, elems = 8;
  static __device__ __forceinline__ int k0(int) { return 0; }
  static __device__ __forceinline__ int row(int l, int r) { return 2 * r + l / 16; }
#endif
  static constexpr int waves = 256 / wave;
};

#ifndef TFC_MMA_EMULATED  // a host test can supply this to run tfc_gemm_amd on the CPU
// tfc_amd_bf16: d += a·b on a 16×16 block, a and b the lane's BF16 of A and B, two a register.
__device__ __forceinline__ void tfc_amd_bf16(float (&d)[tfc_amd_mx::elems], const unsigned (&a)[tfc_amd_mx::ops / 2],
                                             const unsigned (&b)[tfc_amd_mx::ops / 2]) {
  typedef short tfc_sv __attribute__((ext_vector_type(tfc_amd_mx::ops)));
  typedef float tfc_fv __attribute__((ext_vector_type(tfc_amd_mx::elems)));
  tfc_sv va, vb;
  tfc_fv c;
  __builtin_memcpy(&va, a, sizeof va);
  __builtin_memcpy(&vb, b, sizeof vb);
  __builtin_memcpy(&c, d, sizeof c);
#if TFC_MFMA
  c = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(va, vb, c, 0, 0, 0);
#else
  c = __builtin_amdgcn_wmma_f32_16x16x16_bf16_w32(va, vb, c);
#endif
  __builtin_memcpy(d, &c, sizeof c);
}
#endif

template <int BM, int BN>
struct tfc_amd_layout {
  static constexpr int waves = tfc_amd_mx::waves;
  static constexpr int blocks = BM / 16 * (BN / 16);                                    // 16×16 blocks of the tile
  static constexpr int split = blocks < waves && waves % blocks == 0 ? waves / blocks : 1;  // waves a block
  static constexpr int groups = waves / split;                                          // waves taking blocks apart
  static constexpr int per = (blocks + groups - 1) / groups;                            // blocks a wave
  static constexpr int slots = split > 1 ? 256 * tfc_amd_mx::elems : 0;                 // floats of the chunk sums
};

// tfc_amd_smem is the LDS (in floats) tfc_gemm_amd needs: tfc_gemm_mma's stages and C tile, then
// the chunk sums' slots.
template <int BM, int BN, int TERMS = TFC_MMA_TERMS>
constexpr int tfc_amd_smem = tfc_mma_smem<BM, BN, TERMS>::floats + tfc_amd_layout<BM, BN>::slots;

// tfc_mma_floats is the LDS a kernel declares at tile BM×BN: the tile's, or the decode rows'
// 16×TFC_SMALL_BN tile's where that is larger.
template <int BM, int BN>
constexpr int tfc_mma_floats = tfc_amd_smem<BM, BN> > tfc_amd_smem<16, TFC_SMALL_BN> ? tfc_amd_smem<BM, BN> : tfc_amd_smem<16, TFC_SMALL_BN>;

// tfc_lds_op reads the N registers of an operand at p from LDS.
template <int N>
__device__ __forceinline__ void tfc_lds_op(unsigned (&r)[N], const unsigned short* p) {
  if constexpr (N == 2) {
    const uint2 v = *reinterpret_cast<const uint2*>(p);
    r[0] = v.x, r[1] = v.y;
  } else {
#pragma unroll
    for (int i = 0; i < N; i += 4) {
      const uint4 v = *reinterpret_cast<const uint4*>(p + 2 * i);
      r[i] = v.x, r[i + 1] = v.y, r[i + 2] = v.z, r[i + 3] = v.w;
    }
  }
}

template <int BM, int BN, int N, int K, int MUT, int TERMS = TFC_MMA_TERMS, typename COLS>
__device__ __forceinline__ void tfc_gemm_amd(float* smem, const float* X, int ldx, const tfc_bf16* W, int ldw, int M, int m0, COLS cols) {
  using L = tfc_amd_layout<BM, BN>;
  using MX = tfc_amd_mx;
  constexpr int BK = tfc_mma_step<TERMS, TERMS * BM + BN>::bk, LD = tfc_mma_step<TERMS, TERMS * BM + BN>::ld;
  constexpr int KP = (K + TFC_MMA_BK - 1) / TFC_MMA_BK * TFC_MMA_BK;  // K padded as tfc_gemm_mma pads it
  constexpr int A4 = (BM * BK / 4 + 255) / 256, B8 = (BN * BK / 8 + 255) / 256, TM = BM / 16;
  constexpr int KT = (K + BK - 1) / BK, STAGE = tfc_mma_smem<BM, BN, TERMS>::stage;
  constexpr int NCH = (KT - 1) * BK / TFC_KC + 1;  // chunks the steps cover
  constexpr int SPLIT = L::split, PER = L::per, GROUPS = L::groups, E = MX::elems, R = MX::ops / 2;
  static_assert(BM % 16 == 0 && BN % 16 == 0, "tiles of whole 16×16 blocks");
  static_assert(TFC_KC % BK == 0, "chunks hold whole steps");
  static_assert(tfc_amd_smem<BM, BN, TERMS> * 4 <= 64 * 1024, "the tile's LDS must fit a block's 64 KiB");
  static_assert(TERMS == 1 || TERMS == 3, "an activation is taken as one BF16 term or three");
  unsigned short* const sm = reinterpret_cast<unsigned short*>(smem);
  float* const slot = smem + tfc_mma_smem<BM, BN, TERMS>::floats;
  const int lane = threadIdx.x % MX::wave, wave = threadIdx.x / MX::wave, part = wave % SPLIT, group = wave / SPLIT;
  const int arow = lane % 16, ak = MX::k0(lane);  // this lane's row (column) and first k in a block
  const int kend = tfc_bound<MUT>(K);
  const int ldxm = tfc_stride<MUT>(ldx);
  const bool xvec = tfc_aligned16(X, ldxm, 4), wvec = tfc_aligned16(W, ldw, 2);
  float acc[PER][E], phi[PER][E], plo[PER][E];
#pragma unroll
  for (int i = 0; i < PER; ++i)
#pragma unroll
    for (int e = 0; e < E; ++e) acc[i][e] = phi[i][e] = plo[i][e] = 0.f;

  float4 ra[A4];
  uint4 rb[B8];
  tfc_mma_load<BM, BN, N, BK>(ra, rb, X, ldxm, xvec, W, ldw, wvec, M, m0, cols, 0, kend);
  tfc_mma_store<BM, BN, A4, B8, MUT, TERMS>(sm, ra, rb);
  tfc_fill_barrier<MUT>();
#pragma unroll 1
  for (int s = 0; s < KT; ++s) {
    if (s + 1 < KT) tfc_mma_load<BM, BN, N, BK>(ra, rb, X, ldxm, xvec, W, ldw, wvec, M, m0, cols, (s + 1) * BK, kend);
    const int chunk = s * BK / TFC_KC;
    if (chunk % SPLIT == part) {
      const unsigned short* st = sm + (s & 1) * STAGE;
#pragma unroll
      for (int kk = 0; kk < BK; kk += 16) {
        if (KP % BK != 0 && s * BK + kk >= KP) break;  // past the padding tfc_gemm_mma takes
#pragma unroll
        for (int i = 0; i < PER; ++i) {
          const int b = group + GROUPS * i;
          if (L::blocks % GROUPS != 0 && b >= L::blocks) continue;
          const int tr = b % TM, tc = b / TM;
          unsigned a[3][R], w[R];
#pragma unroll
          for (int p = 0; p < TERMS; ++p) tfc_lds_op(a[p], st + (p * BM + 16 * tr + arow) * LD + kk + ak);
          tfc_lds_op(w, st + (TERMS * BM + 16 * tc + arow) * LD + kk + ak);
          if (TERMS == 3) {
            tfc_amd_bf16(plo[i], a[2], w);
            tfc_amd_bf16(plo[i], a[1], w);
          }
          tfc_amd_bf16(phi[i], a[0], w);
        }
      }
    }
    if (((s + 1) * BK) % TFC_KC == 0 || s + 1 == KT) {  // the chunk's end
      if (SPLIT == 1) {
#pragma unroll
        for (int i = 0; i < PER; ++i)
#pragma unroll
          for (int e = 0; e < E; ++e) {
            acc[i][e] += phi[i][e] + plo[i][e];
            phi[i][e] = plo[i][e] = 0.f;
          }
      } else {
        if (chunk % SPLIT == part)
#pragma unroll
          for (int e = 0; e < E; ++e) {
            slot[(wave * MX::wave + lane) * E + e] = phi[0][e] + plo[0][e];
            phi[0][e] = plo[0][e] = 0.f;
          }
        if (chunk % SPLIT == SPLIT - 1 || chunk == NCH - 1) {  // the slots of this group of chunks are full
          __syncthreads();
          if (part == 0)
            for (int q = 0; q <= chunk % SPLIT; ++q)
#pragma unroll
              for (int e = 0; e < E; ++e) acc[0][e] += slot[((group * SPLIT + q) * MX::wave + lane) * E + e];
          __syncthreads();
        }
      }
    }
    if (s + 1 < KT) {
      tfc_mma_store<BM, BN, A4, B8, MUT, TERMS>(sm + ((s + 1) & 1) * STAGE, ra, rb);
      tfc_fill_barrier<MUT>();
    }
  }
  __syncthreads();  // C overlays the stages
  if (part == 0)
#pragma unroll
    for (int i = 0; i < PER; ++i) {
      const int b = group + GROUPS * i;
      if (L::blocks % GROUPS != 0 && b >= L::blocks) continue;
      float* c = smem + 16 * (b % TM) * (BN + 1) + 16 * (b / TM) + arow;
#pragma unroll
      for (int e = 0; e < E; ++e) c[MX::row(lane, e) * (BN + 1)] = acc[i][e];
    }
  __syncthreads();
}
#endif
