// tfc_mfma_gemm.h: the matrix-core GEMM of the linears on CDNA (tfc_gemm_mfma: MFMA 16×16×16 BF16,
// F32 activations split exactly into BF16 terms as tfc_gemm_mma splits them on CUDA).
#pragma once
#include "tfc_mma_gemm.h"

#if TFC_MFMA
// tfc_gemm_mfma computes the BM×BN tile at row m0 of X·Wᵀ (X F32 [M,K], W BF16 [N,K]; tile column
// c is W row tfc_col(cols, c)) and leaves it in smem as C[r*(BN+1) + c] for the same epilogue as
// tfc_gemm_mma, on the matrix cores: v_mfma_f32_16x16x16bf16_1k, BF16 operands, F32 accumulation,
// a wave of 64 lanes. X is split into TERMS BF16 terms and staged in LDS by tfc_mma_load and
// tfc_mma_store, in tfc_gemm_mma's two stages and K step, one barrier a step.
//
// Order of accumulation, fixed for every output: k in steps of 16 from 0 (K padded with zeros to
// a multiple of TFC_MMA_BK); within each TFC_KC chunk the hi products go to one accumulator and
// the lo2 then lo products to another, both from zero; at the chunk's end hi + lo is added to the
// output's sum, chunks in ascending order. Each 16×16 block of outputs is one chain of MFMA
// instructions on the same operands whatever the tile, so a row's bits do not depend on the
// launch: decode rows (a 16×TFC_SMALL_BN tile), mid (16-row) and full tiles give the same bits.
//
// The block's 4 waves share the tile's 16×16 blocks. Where it has fewer than 4 (small tiles),
// SPLIT = 4 / blocks waves share one, wave part p taking the chunks c with c % SPLIT == p; each
// chunk's sum goes to an LDS slot after the stages, and at the end of every SPLIT chunks the
// block's part-0 wave adds the slots to the output's sum in chunk order.
//
// Lane l of a wave holds, of A (16 rows × 16 k), row l%16 at k 4(l/16)..4(l/16)+3; of B (16 k × 16
// columns), column l%16 at the same k; of D, element r at row 4(l/16) + r, column l%16. An A or B
// operand is 8 consecutive bytes of a staged BF16 row.
template <int BM, int BN>
struct tfc_mfma_layout {
  static constexpr int blocks = BM / 16 * (BN / 16);        // 16×16 blocks of the tile
  static constexpr int split = blocks >= 4 ? 1 : 4 / blocks;  // waves a block, splitting its chunks
  static constexpr int per = blocks >= 4 ? (blocks + 3) / 4 : 1;  // blocks a wave
  static constexpr int slots = split > 1 ? 4 * 256 : 0;          // floats of the chunk sums' slots
};

// tfc_mfma_smem is the LDS (in floats) tfc_gemm_mfma needs: tfc_gemm_mma's stages and C tile,
// then the chunk sums' slots.
template <int BM, int BN, int TERMS = TFC_MMA_TERMS>
constexpr int tfc_mfma_smem = tfc_mma_smem<BM, BN, TERMS>::floats + tfc_mfma_layout<BM, BN>::slots;

// tfc_mma_floats is the LDS a kernel declares at tile BM×BN: the tile's, or the decode rows'
// 16×TFC_SMALL_BN tile's where that is larger.
template <int BM, int BN>
constexpr int tfc_mma_floats = tfc_mfma_smem<BM, BN> > tfc_mfma_smem<16, TFC_SMALL_BN> ? tfc_mfma_smem<BM, BN> : tfc_mfma_smem<16, TFC_SMALL_BN>;

#ifndef TFC_MMA_EMULATED  // a host test can supply this to run tfc_gemm_mfma on the CPU
// tfc_mfma_bf16: d += a·b on a 16×16 block, a and b the lane's four BF16 of A and B (above).
__device__ __forceinline__ void tfc_mfma_bf16(float (&d)[4], const unsigned (&a)[2], const unsigned (&b)[2]) {
  typedef short tfc_s4 __attribute__((ext_vector_type(4)));
  typedef float tfc_f4 __attribute__((ext_vector_type(4)));
  tfc_s4 va, vb;
  __builtin_memcpy(&va, a, 8);
  __builtin_memcpy(&vb, b, 8);
  tfc_f4 c = {d[0], d[1], d[2], d[3]};
  c = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(va, vb, c, 0, 0, 0);
  d[0] = c[0], d[1] = c[1], d[2] = c[2], d[3] = c[3];
}
#endif

// tfc_lds8 reads the 8 bytes at p (an MFMA operand) from LDS.
__device__ __forceinline__ void tfc_lds8(unsigned (&r)[2], const unsigned short* p) {
  const uint2 v = *reinterpret_cast<const uint2*>(p);
  r[0] = v.x, r[1] = v.y;
}

template <int BM, int BN, int N, int K, int MUT, int TERMS = TFC_MMA_TERMS, typename COLS>
__device__ __forceinline__ void tfc_gemm_mfma(float* smem, const float* X, int ldx, const tfc_bf16* W, int ldw, int M, int m0, COLS cols) {
  using L = tfc_mfma_layout<BM, BN>;
  constexpr int BK = tfc_mma_step<TERMS, TERMS * BM + BN>::bk, LD = tfc_mma_step<TERMS, TERMS * BM + BN>::ld;
  constexpr int KP = (K + TFC_MMA_BK - 1) / TFC_MMA_BK * TFC_MMA_BK;  // K padded as tfc_gemm_mma pads it
  constexpr int A4 = (BM * BK / 4 + 255) / 256, B8 = (BN * BK / 8 + 255) / 256, TM = BM / 16;
  constexpr int KT = (K + BK - 1) / BK, STAGE = tfc_mma_smem<BM, BN, TERMS>::stage;
  constexpr int NCH = (KT - 1) * BK / TFC_KC + 1;  // chunks the steps cover
  constexpr int SPLIT = L::split, PER = L::per, GROUPS = 4 / SPLIT;
  static_assert(BM % 16 == 0 && BN % 16 == 0, "tiles of whole 16×16 blocks");
  static_assert(TFC_KC % BK == 0, "chunks hold whole steps");
  static_assert(tfc_mfma_smem<BM, BN, TERMS> * 4 <= 64 * 1024, "the tile's LDS must fit a block's 64 KiB");
  static_assert(TERMS == 1 || TERMS == 3, "an activation is taken as one BF16 term or three");
  unsigned short* const sm = reinterpret_cast<unsigned short*>(smem);
  float* const slot = smem + tfc_mma_smem<BM, BN, TERMS>::floats;
  const int lane = threadIdx.x % 64, wave = threadIdx.x / 64, part = wave % SPLIT, group = wave / SPLIT;
  const int arow = lane % 16, ak = 4 * (lane / 16);  // this lane's row (column) and k in a block
  const int kend = tfc_bound<MUT>(K);
  const int ldxm = tfc_stride<MUT>(ldx);
  const bool xvec = tfc_aligned16(X, ldxm, 4), wvec = tfc_aligned16(W, ldw, 2);
  float acc[PER][4], phi[PER][4], plo[PER][4];
#pragma unroll
  for (int i = 0; i < PER; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[i][e] = phi[i][e] = plo[i][e] = 0.f;

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
          if (L::blocks % 4 != 0 && b >= L::blocks) continue;
          const int tr = b % TM, tc = b / TM;
          unsigned a[3][2], w[2];
#pragma unroll
          for (int p = 0; p < TERMS; ++p) tfc_lds8(a[p], st + (p * BM + 16 * tr + arow) * LD + kk + ak);
          tfc_lds8(w, st + (TERMS * BM + 16 * tc + arow) * LD + kk + ak);
          if (TERMS == 3) {
            tfc_mfma_bf16(plo[i], a[2], w);
            tfc_mfma_bf16(plo[i], a[1], w);
          }
          tfc_mfma_bf16(phi[i], a[0], w);
        }
      }
    }
    if (((s + 1) * BK) % TFC_KC == 0 || s + 1 == KT) {  // the chunk's end
      if (SPLIT == 1) {
#pragma unroll
        for (int i = 0; i < PER; ++i)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            acc[i][e] += phi[i][e] + plo[i][e];
            phi[i][e] = plo[i][e] = 0.f;
          }
      } else {
        if (chunk % SPLIT == part)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            slot[(wave * 64 + lane) * 4 + e] = phi[0][e] + plo[0][e];
            phi[0][e] = plo[0][e] = 0.f;
          }
        if (chunk % SPLIT == SPLIT - 1 || chunk == NCH - 1) {  // the slots of chunks first.. chunk are full
          __syncthreads();
          if (part == 0)
            for (int q = 0; q <= chunk % SPLIT; ++q)
#pragma unroll
              for (int e = 0; e < 4; ++e) acc[0][e] += slot[((group * SPLIT + q) * 64 + lane) * 4 + e];
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
      if (L::blocks % 4 != 0 && b >= L::blocks) continue;
      float* c = smem + (16 * (b % TM) + ak) * (BN + 1) + 16 * (b / TM) + arow;
#pragma unroll
      for (int r = 0; r < 4; ++r) c[r * (BN + 1)] = acc[i][r];
    }
  __syncthreads();
}
#endif
