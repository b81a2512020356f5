// tfc_mma_gemm.h: the tensor-core GEMM of the linears on CUDA (tfc_gemm_mma, mma.sync BF16 with
// F32 activations split exactly into three BF16 terms), and its small-row layout (tfc_gemm_mma_rows).
// The split, the K step and the LDS stages are shared with the AMD matrix-core GEMM (tfc_amd_gemm.h).
#pragma once
#include "tfc_gemm.h"
#include "tfc_math.h"

#if TFC_CUDA || TFC_AMD_MATRIX
// ---------------------------------------------------------------------------------------------
// Tensor-core GEMM (CUDA): the linears with BF16 weights, vision and decoder.
//
// tfc_gemm_mma computes what tfc_gemm_tile computes, the BM×BN tile at row m0 of X·Wᵀ with X
// F32 [M,K] and W BF16 [N,K] (tile column c is column tfc_col(cols, c): cols is n0, or a
// tfc_rope_pairs), and leaves it in smem as C[r*(BN+1) + c] for the same epilogue,
// but on the tensor cores (mma.sync m16n8k16, BF16 operands, F32 accumulation). Each activation
// is split exactly into three BF16 terms, x = hi + lo + lo2: hi is x with its low 16 bits
// cleared, lo the rest with its low 16 bits cleared, and lo2 what is left, which has at most 8
// significant bits. Weights are BF16 already, so every product is the product of the F32
// operands; the error is the accumulation's alone. Two terms would keep 16 of x's 24 bits, a
// relative error of up to 2^-16 on every product, too close to the contract's 4e-5 bound of a
// linear; the third term costs a third more tensor-core work and leaves no representation error.
// In BF16 precision activations are BF16-exact, lo and lo2 are zero, and hi alone is taken
// (TFC_MMA_TERMS, tfc_math.h): the same bits for a third of the tensor work.
// ±Inf and NaN go in hi alone (NaN made quiet), so they reach the outputs as the reference's.
//
// Order of accumulation, fixed for every output: k in steps of 16 from 0 (K padded with zeros to
// a multiple of TFC_MMA_BK); within each TFC_KC chunk the hi products go to one accumulator and
// the lo2 then lo products to another, both from zero; at the chunk's end hi + lo is added to the
// output's sum, chunks in ascending order. An output's bits depend only on its own row of X and
// column of W: every tile, whatever its width and however many of its rows are real (rows past M
// are zeros), computes each element with the same instructions. So a row's result does not
// depend on the launch, and tfc_gemm_mma_rows (below) keeps these bits for launches of few rows.
//
// 256 threads are 8 warps, WM along the rows by WN = 8/WM along the columns; warp (wm, wn) owns
// the row tiles of 16 at 16wm, 16(wm + WM), ... and the 8-column tiles wn, wn + WN, ... Each TFC_MMA_BK step is staged
// in LDS as BF16 (a plane of each of X's terms taken and one of W, rows padded to 8 elements
// past the step so that ldmatrix reads hit distinct banks), double-buffered: the next step's
// global loads are in flight while the tensor cores work on this one, and one barrier a step
// separates them. A step is TFC_MMA_BK = 32 columns of K with three terms, and TFC_MMA_BK1 = 64
// with one (one plane of X leaves room for them): twice the tensor work between barriers for the
// same global latency. Either way an output takes the same mma.sync chain (k16 steps in order,
// steps past K's padding to 32 skipped), so the bits do not depend on the step.
#define TFC_MMA_BK 32
#define TFC_MMA_LD (TFC_MMA_BK + 8)
#ifndef TFC_MMA_BK1
#define TFC_MMA_BK1 64
#endif

// tfc_mma_step is the K step and the LDS row of tfc_gemm_mma taking TERMS terms of X into a tile
// of ROWS = TERMS·BM + BN staged rows: TFC_MMA_BK1 with one term where two stages of it fit 48 KiB.
template <int TERMS, int ROWS>
struct tfc_mma_step {
  static constexpr int bk = TERMS == 1 && ROWS * (TFC_MMA_BK1 + 8) * 4 <= 48 * 1024 ? TFC_MMA_BK1 : TFC_MMA_BK, ld = bk + 8;
};

// tfc_mma_smem is the LDS (in floats) tfc_gemm_mma needs: two stages, then the C tile.
template <int BM, int BN, int TERMS = TFC_MMA_TERMS>
struct tfc_mma_smem {
  static constexpr int stage = (TERMS * BM + BN) * tfc_mma_step<TERMS, TERMS * BM + BN>::ld;  // BF16 elements of one stage
  static constexpr int ab = stage;                                          // floats of two stages
  static constexpr int c = BM * (BN + 1);
  static constexpr int floats = ab > c ? ab : c;
};

// tfc_bf16_hi is the high BF16 bits of x, all of x where x is BF16-exact (a NaN stays a NaN).
__device__ __forceinline__ unsigned tfc_bf16_hi(float x) {
  const unsigned u = __float_as_uint(x);
  return (u & 0x7f800000u) == 0x7f800000u ? (u >> 16) | ((u & 0x007fffffu) ? 0x40u : 0u) : u >> 16;
}
// tfc_hi2 packs the high BF16 halves of a (low) and b (high): tfc_bf16_hi of both where neither is a NaN.
__device__ __forceinline__ unsigned tfc_hi2(float a, float b) { return __float_as_uint(a) >> 16 | (__float_as_uint(b) & 0xffff0000u); }
// tfc_bf16_hi2 packs tfc_bf16_hi of a (low) and b (high) without a branch: tfc_hi2, a NaN given the quiet bit.
__device__ __forceinline__ unsigned tfc_bf16_hi2(float a, float b) { return tfc_hi2(a, b) | (a != a ? 0x40u : 0u) | (b != b ? 0x400000u : 0u); }

// tfc_split3 splits x into the BF16 bits of hi, lo and lo2 (see above).
__device__ __forceinline__ void tfc_split3(float x, unsigned& hi, unsigned& lo, unsigned& lo2) {
  const unsigned u = __float_as_uint(x);
  hi = tfc_bf16_hi(x);
  if ((u & 0x7f800000u) == 0x7f800000u) {
    lo = lo2 = 0u;
    return;
  }
  const float r = x - __uint_as_float(u & 0xffff0000u);  // exact: the low 16 bits of x
  const unsigned ur = __float_as_uint(r);
  const float r2 = r - __uint_as_float(ur & 0xffff0000u);  // exact, at most 8 significant bits
  lo = ur >> 16;
  lo2 = __float_as_uint(r2) >> 16;
}

#if TFC_CUDA && !defined(TFC_MMA_EMULATED)  // a host test can supply these to run tfc_gemm_mma on the CPU
__device__ __forceinline__ unsigned tfc_smem_addr(const void* p) {
  unsigned a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }\n" : "=r"(a) : "l"(p));
  return a;
}
// tfc_ldsm_x4 loads four 8×8 BF16 matrices from the shared address a of each lane: lane l gives
// row l%8 of matrix l/8, and register j of lane l holds elements 2(l%4), 2(l%4)+1 of row l/4 of
// matrix j.
__device__ __forceinline__ void tfc_ldsm_x4(unsigned (&r)[4], unsigned a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a)
               : "memory");
}
// tfc_ldsm_x2 is tfc_ldsm_x4 for two matrices; lanes 0..15 give the addresses.
__device__ __forceinline__ void tfc_ldsm_x2(unsigned (&r)[2], unsigned a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(a)
               : "memory");
}
// tfc_mma_bf16: d += a·b on a 16×8 tile, a 16×16 row-major BF16, b 16×8 column-major BF16.
__device__ __forceinline__ void tfc_mma_bf16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif

// tfc_mma_load reads the BK step at k0 of the tile into registers: a thread's float4s of X
// (unit u: row u/(BK/4), k 4(u%(BK/4))) and 8-element pieces of W (unit u: column u/(BK/8), k
// 8(u%(BK/8))). Past
// M, N or kend it reads zeros; rows that are not 16-byte aligned are read an element at a time.
// Tile column c is W row tfc_col(cols, c): cols is n0, or a tfc_rope_pairs.
template <int BM, int BN, int N, int BK, int A4, int B8, typename COLS>
__device__ __forceinline__ void tfc_mma_load(float4 (&ra)[A4], uint4 (&rb)[B8], const float* X, int ldx, bool xvec,
                                             const tfc_bf16* W, int ldw, bool wvec, int M, int m0, COLS cols, int k0,
                                             int kend) {
#pragma unroll
  for (int i = 0; i < A4; ++i) {
    const int u = threadIdx.x + 256 * i, m = m0 + u / (BK / 4), k = k0 + 4 * (u % (BK / 4));
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (u < BM * BK / 4 && m < M) {
      const float* p = X + (size_t)m * ldx + k;
      if (xvec && k + 4 <= kend) {
        v = *reinterpret_cast<const float4*>(p);
      } else {
        v.x = k < kend ? p[0] : 0.f;
        v.y = k + 1 < kend ? p[1] : 0.f;
        v.z = k + 2 < kend ? p[2] : 0.f;
        v.w = k + 3 < kend ? p[3] : 0.f;
      }
    }
    ra[i] = v;
  }
#pragma unroll
  for (int i = 0; i < B8; ++i) {
    const int u = threadIdx.x + 256 * i, n = tfc_col(cols, u / (BK / 8)), k = k0 + 8 * (u % (BK / 8));
    uint4 w = make_uint4(0u, 0u, 0u, 0u);
    if (u < BN * BK / 8 && n < N) {
      const tfc_bf16* p = W + (size_t)n * ldw + k;
      if (wvec && k + 8 <= kend) {
        w = *reinterpret_cast<const uint4*>(p);
      } else {
        unsigned e[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) e[j] = k + j < kend ? p[j].bits : 0u;
        w = make_uint4(e[0] | e[1] << 16, e[2] | e[3] << 16, e[4] | e[5] << 16, e[6] | e[7] << 16);
      }
    }
    rb[i] = w;
  }
}

// tfc_put_terms writes four consecutive activations v as their BF16 terms (tfc_split3): hi at d,
// and with three terms lo and lo2 plane and 2·plane elements on, 8 bytes each. HI2 (the fill
// layout's copy, bound by issue) packs one term's v without a NaN from its high halves, the same
// bits; the tile keeps one path (the branch cost it registers: 126 -> 130 at 64×128, a block a
// multiprocessor instead of two, the tower's q,k,v 753 -> 1,486 µs on an H100).
template <int TERMS, bool HI2 = false>
__device__ __forceinline__ void tfc_put_terms(unsigned short* d, int plane, const float4& v) {
  if (HI2 && TERMS == 1 && !((v.x != v.x) | (v.y != v.y) | (v.z != v.z) | (v.w != v.w))) {
    *reinterpret_cast<uint2*>(d) = make_uint2(tfc_hi2(v.x, v.y), tfc_hi2(v.z, v.w));
    return;
  }
  unsigned h[4], l[4], l2[4];
  tfc_split3(v.x, h[0], l[0], l2[0]);
  tfc_split3(v.y, h[1], l[1], l2[1]);
  tfc_split3(v.z, h[2], l[2], l2[2]);
  tfc_split3(v.w, h[3], l[3], l2[3]);
  *reinterpret_cast<uint2*>(d) = make_uint2(h[0] | h[1] << 16, h[2] | h[3] << 16);
  if (TERMS == 1) return;
  *reinterpret_cast<uint2*>(d + plane) = make_uint2(l[0] | l[1] << 16, l[2] | l[3] << 16);
  *reinterpret_cast<uint2*>(d + 2 * plane) = make_uint2(l2[0] | l2[1] << 16, l2[2] | l2[3] << 16);
}

// tfc_mma_store writes the registers tfc_mma_load read into the stage at s: X split into its
// TERMS planes [TERMS][BM][LD], then W [BN][LD] (tfc_mma_step's BK and LD).
template <int BM, int BN, int A4, int B8, int MUT, int TERMS>
__device__ __forceinline__ void tfc_mma_store(unsigned short* s, const float4 (&ra)[A4], const uint4 (&rb)[B8]) {
  constexpr int BK = tfc_mma_step<TERMS, TERMS * BM + BN>::bk, LD = tfc_mma_step<TERMS, TERMS * BM + BN>::ld;
  tfc_fill_skew<MUT>();
#pragma unroll
  for (int i = 0; i < A4; ++i) {
    const int u = threadIdx.x + 256 * i, r = u / (BK / 4), k = 4 * (u % (BK / 4));
    if (u < BM * BK / 4) tfc_put_terms<TERMS>(s + r * LD + k, BM * LD, ra[i]);
  }
#pragma unroll
  for (int i = 0; i < B8; ++i) {
    const int u = threadIdx.x + 256 * i, c = u / (BK / 8), k = 8 * (u % (BK / 8));
    if (u < BN * BK / 8) *reinterpret_cast<uint4*>(s + (TERMS * BM + c) * LD + k) = rb[i];
  }
}

// tfc_fill_smem is the LDS in bytes of tfc_gemm_mma_fill (below) at tile BM×BN: TFC_FILL_STAGES
// stages of X rows (F32) and W rows (BF16), TFC_MMA_BK + 8 elements each, then two steps of X's
// BF16 terms (three planes of BM rows, TFC_MMA_BK + 8 elements each), or the C tile where that is
// larger. A fill function's launch passes it as dynamic LDS, tfc_fill_lds.
#ifndef TFC_FILL_STAGES
#define TFC_FILL_STAGES 4
#endif
template <int BM, int BN>
struct tfc_fill_smem {
  static constexpr int ldx = TFC_MMA_BK + 8, ldw = TFC_MMA_BK + 8;  // floats of an X row, BF16 of a W row
  static constexpr int stage = BM * ldx * 4 + BN * ldw * 2;           // bytes of a stage
  static constexpr int terms = 3 * BM * ldw * 2;                       // bytes of a step's BF16 terms
  static constexpr int c = BM * (BN + 1) * 4;
  static constexpr int bytes = TFC_FILL_STAGES * stage + 2 * terms > c ? TFC_FILL_STAGES * stage + 2 * terms : c;
  // the byte offsets in a stage of X's 16-byte unit u (row u / (BK/4)) and of W's (column u / (BK/8))
  __device__ static unsigned x_at(int u) { return 4 * (u / (TFC_MMA_BK / 4) * ldx + 4 * (u % (TFC_MMA_BK / 4))); }
  __device__ static unsigned w_at(int u) { return BM * ldx * 4 + 2 * (u / (TFC_MMA_BK / 8) * ldw + 8 * (u % (TFC_MMA_BK / 8))); }
};
#ifndef TFC_MMA_EMULATED
__device__ __forceinline__ float* tfc_fill_lds() {
  extern __shared__ __align__(16) float tfc_dynamic_lds[];
  return tfc_dynamic_lds;
}
#endif

#endif  // TFC_CUDA || TFC_AMD_MATRIX: what follows is mma.sync's alone

#if TFC_CUDA
// tfc_mma_terms adds one k16 step's products of a row tile's BF16 terms a (hi, lo, lo2) and b to
// its chunk sums, in the order every layout takes: lo2 then lo into plo, hi into phi (one term:
// hi alone).
template <int TERMS>
__device__ __forceinline__ void tfc_mma_terms(float (&phi)[4], float (&plo)[4], const unsigned (&a)[3][4], const unsigned (&b)[2]) {
  if (TERMS == 3) {
    tfc_mma_bf16(plo, a[2], b);
    tfc_mma_bf16(plo, a[1], b);
  }
  tfc_mma_bf16(phi, a[0], b);
}

// tfc_mma_fold ends a TFC_KC chunk: each output's sum takes the chunk's hi + lo, and both start
// again from zero. With one term lo stays +0, and acc + hi is acc + (hi + 0) (acc, from +0, is
// never -0), so the add of lo is left out.
template <int TERMS, int MT, int NT>
__device__ __forceinline__ void tfc_mma_fold(float (&acc)[MT][NT][4], float (&phi)[MT][NT][4], float (&plo)[MT][NT][4]) {
#pragma unroll
  for (int r = 0; r < MT; ++r)
#pragma unroll
    for (int i = 0; i < NT; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        acc[r][i][e] += TERMS == 1 ? phi[r][i][e] : phi[r][i][e] + plo[r][i][e];
        phi[r][i][e] = plo[r][i][e] = 0.f;
      }
}

// tfc_mma_put writes a lane's part of a 16×8 accumulator d at c, its element (g, 2t) in a C tile of
// row stride ld: columns 2t, 2t + 1 of rows g and g + 8.
__device__ __forceinline__ void tfc_mma_put(float* c, int ld, const float (&d)[4]) {
  c[0] = d[0];
  c[1] = d[1];
  c[8 * ld] = d[2];
  c[8 * ld + 1] = d[3];
}

// tfc_mma_warp_rows is how many of tfc_gemm_mma's 8 warps share a BM×BN tile's columns, each
// taking BM/(16·WM) row tiles of 16 (TFC_MMA_WM caps it; the bits never depend on it).
template <int BM, int BN>
constexpr int tfc_mma_warp_rows() {
#ifdef TFC_MMA_WM
  return BM / 16 < TFC_MMA_WM ? BM / 16 : TFC_MMA_WM;
#else
  return BM / 16 < 8 ? BM / 16 : 8;
#endif
}

template <int BM, int BN, int N, int K, int MUT, int TERMS = TFC_MMA_TERMS, int WM = tfc_mma_warp_rows<BM, BN>(), typename COLS>
__device__ __forceinline__ void tfc_gemm_mma(float* smem, const float* X, int ldx, const tfc_bf16* W, int ldw, int M, int m0, COLS cols) {
  constexpr int BK = tfc_mma_step<TERMS, TERMS * BM + BN>::bk, LD = tfc_mma_step<TERMS, TERMS * BM + BN>::ld;
  constexpr int KP = (K + TFC_MMA_BK - 1) / TFC_MMA_BK * TFC_MMA_BK;  // K padded as every layout pads it
  constexpr int MT = BM / 16 / WM, WN = 8 / WM;          // row tiles of a warp; warps along columns
  constexpr int NT8 = BN / 8, NT = (NT8 + WN - 1) / WN;  // 8-column tiles: of the tile, of a warp
  constexpr int A4 = (BM * BK / 4 + 255) / 256, B8 = (BN * BK / 8 + 255) / 256;
  constexpr int KT = (K + BK - 1) / BK, STAGE = tfc_mma_smem<BM, BN, TERMS>::stage;
  static_assert(BM % 16 == 0 && WM >= 1 && WM <= 8 && 8 % WM == 0 && BM % (16 * WM) == 0, "BM must be 16, 32, 64 or 128 rows over WM warps");
  static_assert(BN % 8 == 0, "BN must be a multiple of 8");
  static_assert(TFC_KC % BK == 0, "chunks hold whole steps");
  static_assert(tfc_mma_smem<BM, BN, TERMS>::floats * 4 <= 48 * 1024, "the tile's LDS must fit a block's static 48 KiB");
  static_assert(TERMS == 1 || TERMS == 3, "an activation is taken as one BF16 term or three");
  unsigned short* const sm = reinterpret_cast<unsigned short*>(smem);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, wm = warp % WM, wn = warp / WM;
  // shared byte addresses of this lane's ldmatrix rows in stage 0: A (row tile 0 of the warp's
  // hi; row tile r is 16r·WM rows on, lo and lo2 follow BM rows apart) and B (8-column tile 0;
  // tile j is 8j rows on)
  const unsigned a0 = tfc_smem_addr(sm) + 2 * ((wm * 16 + lane % 16) * LD + lane / 16 * 8);
  const unsigned b0 = tfc_smem_addr(sm) + 2 * ((TERMS * BM + lane % 8) * LD + lane / 8 % 2 * 8);
  const unsigned b0x4 = b0 + 2 * (lane / 16 * WN * 8 * LD);  // lanes 16..31: tile j + WN
  const int kend = tfc_bound<MUT>(K);
  const int ldxm = tfc_stride<MUT>(ldx);
  const bool xvec = tfc_aligned16(X, ldxm, 4), wvec = tfc_aligned16(W, ldw, 2);
  float acc[MT][NT][4], phi[MT][NT][4], plo[MT][NT][4];
#pragma unroll
  for (int r = 0; r < MT; ++r)
#pragma unroll
    for (int i = 0; i < NT; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[r][i][e] = phi[r][i][e] = plo[r][i][e] = 0.f;

  float4 ra[A4];
  uint4 rb[B8];
  tfc_mma_load<BM, BN, N, BK>(ra, rb, X, ldxm, xvec, W, ldw, wvec, M, m0, cols, 0, kend);
  tfc_mma_store<BM, BN, A4, B8, MUT, TERMS>(sm, ra, rb);
  tfc_fill_barrier<MUT>();
#pragma unroll 1
  for (int s = 0; s < KT; ++s) {
    if (s + 1 < KT) tfc_mma_load<BM, BN, N, BK>(ra, rb, X, ldxm, xvec, W, ldw, wvec, M, m0, cols, (s + 1) * BK, kend);
    const unsigned st = 2 * (s & 1) * STAGE;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      if (KP % BK != 0 && s * BK + kk >= KP) break;  // past the padding every layout takes
      unsigned a[MT][3][4];  // hi, lo, lo2 of the warp's row tiles, k kk..kk+15
#pragma unroll
      for (int r = 0; r < MT; ++r)
#pragma unroll
        for (int p = 0; p < TERMS; ++p) tfc_ldsm_x4(a[r][p], a0 + st + 2 * ((p * BM + 16 * WM * r) * LD + kk));
      unsigned bb[4];  // when every warp has NT whole tiles, tiles i and i+1 load together
#pragma unroll
      for (int i = 0; i < NT; ++i) {
        const int j = wn + WN * i;
        if (NT8 % WN != 0 && j >= NT8) continue;
        unsigned b[2];
        if (NT8 % WN == 0 && i % 2 == 0 && i + 1 < NT) {
          tfc_ldsm_x4(bb, b0x4 + st + 2 * (j * 8 * LD + kk));
          b[0] = bb[0], b[1] = bb[1];
        } else if (NT8 % WN == 0 && i % 2 == 1) {
          b[0] = bb[2], b[1] = bb[3];
        } else {
          tfc_ldsm_x2(b, b0 + st + 2 * (j * 8 * LD + kk));
        }
#pragma unroll
        for (int r = 0; r < MT; ++r) tfc_mma_terms<TERMS>(phi[r][i], plo[r][i], a[r], b);
      }
    }
    if (((s + 1) * BK) % TFC_KC == 0 || s + 1 == KT) tfc_mma_fold<TERMS>(acc, phi, plo);
    if (s + 1 < KT) {
      tfc_mma_store<BM, BN, A4, B8, MUT, TERMS>(sm + ((s + 1) & 1) * STAGE, ra, rb);
      tfc_fill_barrier<MUT>();
    }
  }
  __syncthreads();  // C overlays the stages
  float* C = smem;
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int r = 0; r < MT; ++r)
#pragma unroll
    for (int i = 0; i < NT; ++i) {
      const int j = wn + WN * i;
      if (NT8 % WN != 0 && j >= NT8) continue;
      tfc_mma_put(C + (16 * (wm + WM * r) + g) * (BN + 1) + j * 8 + 2 * t, BN + 1, acc[r][i]);
    }
  __syncthreads();
}

// ---------------------------------------------------------------------------------------------
// tfc_gemm_mma_rows is tfc_gemm_mma for at most ROWS rows past m0 (decode rounds: TFC_SMALL_ROWS
// a launch, or a band of up to 32 of a launch's rows): every output goes through the same chain of mma.sync
// instructions on the same fragments, so its bits are tfc_gemm_mma's, but the work is laid out
// for streaming W instead of for reuse. Fragments come straight from global memory (no LDS
// stages), and the tile's K is split across the warps by TFC_KC chunks: each chunk's sum starts
// from zero in tfc_gemm_mma too, so warps compute chunk sums side by side and, a wave at a time,
// the block's threads add them to the outputs' sums in ascending chunk order (an output a
// thread), as tfc_gemm_mma does. A
// warp multiplies T 8-column tiles by each chunk of X it splits (two when the tile has an even
// number under 8, so X's split is shared) and, in a band of more than 16 rows, by both row tiles
// of 16 (each W fragment loaded once for both), U chunks a wave; its sums pass through LDS slots,
// double-buffered by wave, one barrier a wave. A wave's W is loaded TFC_ROWS_PIPE - 1 waves ahead,
// so that those loads are in flight while the warp multiplies. The C tile is left in smem as
// tfc_gemm_mma leaves it (rows past its row tiles untouched). The missing-barrier control drops the wave
// barriers and the one before the epilogue reads C.
//
// The knobs below change how W streams, never an output's bits; nvcc -D sets them.
#ifndef TFC_ROWS_PIPE  // waves whose W is in registers: 1 loads a wave's W as it starts
#define TFC_ROWS_PIPE 1
#endif
#ifndef TFC_ROWS_TILE_CHUNKS  // chunks of 8-column tiles (1 KiB of W each) a warp takes a wave: 1, 2 or 4
#define TFC_ROWS_TILE_CHUNKS 4
#endif
#ifndef TFC_ROWS_NC  // W's loads: 0 plain, 1 ld.global.nc.L1::no_allocate, 2 that and L2::256B
#define TFC_ROWS_NC 0
#endif

#ifndef TFC_MMA_EMULATED  // a host test supplies a plain load
// tfc_ld_w16 reads the 16 bytes of W at p (16-byte aligned), which nothing writes while a kernel runs.
__device__ __forceinline__ uint4 tfc_ld_w16(const tfc_bf16* p) {
#if TFC_ROWS_NC == 1
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
#elif TFC_ROWS_NC == 2
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];\n"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
#else
  return *reinterpret_cast<const uint4*>(p);
#endif
}
#endif

// tfc_mma_rows_smem is tfc_gemm_mma_rows's layout at tile BM×BN for ROWS rows: row tiles (mt),
// column tiles a warp (t), groups of them (groups), warps a group (wpt), chunks a warp a wave (u,
// fewer with two row tiles, so that u·t·mt ≤ 4 and the slots fit what the compiler budgets), and
// the LDS (in floats) it needs: the C tile, then two sets of chunk-sum slots.
template <int BM, int BN, int ROWS = TFC_SMALL_ROWS>
struct tfc_mma_rows_smem {
  static constexpr int mt = ROWS > 16 ? 2 : 1;  // row tiles of 16 sharing each W fragment
  static constexpr int nt8 = BN / 8, t = nt8 < 8 && nt8 % 2 == 0 ? 2 : 1, groups = nt8 / t;
  static constexpr int wpt = nt8 >= 8 ? 1 : 8 / groups, u = TFC_ROWS_TILE_CHUNKS > t * mt ? TFC_ROWS_TILE_CHUNKS / (t * mt) : 1;
  static constexpr int c = BM * (BN + 1);
  static constexpr int slots = wpt > 1 ? 2 * groups * wpt * u * t * mt * 128 : 0;
  static constexpr int floats = c + slots;
};

// tfc_mma_b_span turns the 16 bytes lane t of each lane group loaded from W row g, BF16 pairs
// 4t..4t+3 of a 32-k span, into its B fragments of the span's two k16 steps: pairs t, t+4
// (step 0) and t+8, t+12 (step 1), a 4×4 transpose of pairs across the group in two exchanges.
__device__ __forceinline__ void tfc_mma_b_span(unsigned (&r)[4], int t) {
  const bool hi = t & 2, odd = t & 1;
  unsigned v0 = __shfl_xor_sync(0xffffffffu, hi ? r[0] : r[2], 2);
  unsigned v1 = __shfl_xor_sync(0xffffffffu, hi ? r[1] : r[3], 2);
  if (hi) {
    r[0] = v0, r[1] = v1;
  } else {
    r[2] = v0, r[3] = v1;
  }
  v0 = __shfl_xor_sync(0xffffffffu, odd ? r[0] : r[1], 1);
  v1 = __shfl_xor_sync(0xffffffffu, odd ? r[2] : r[3], 1);
  if (odd) {
    r[0] = v0, r[2] = v1;
  } else {
    r[1] = v0, r[3] = v1;
  }
}

// tfc_mma_rows_load loads W for U chunks of the T 8-column tiles from j0 (tile column j*8 + lane/4
// is W row tfc_col(cols, ...)): chunk c0 + WPT*u of tile j0 + i into b[u][i], 16 bytes a lane,
// 64 contiguous bytes a row for each lane group and 32-k span, as tfc_mma_b_span takes them.
// Chunks at or past NC, and steps at or past KPAD, are zeros and read nothing.
template <int N, int KPAD, int NC, int U, int T, int WPT, typename COLS>
__device__ __forceinline__ void tfc_mma_rows_load(unsigned (&b)[U][T][TFC_KC / 16][2], const tfc_bf16* W, int ldw, bool wvec,
                                                  COLS cols, int j0, int c0, int kend) {
  constexpr int KS = TFC_KC / 16;  // k16 steps a chunk
  static_assert(KS % 2 == 0, "chunks of whole 32-k spans");
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int i = 0; i < T; ++i) {
    const int n = tfc_col(cols, (j0 + i) * 8 + g);
    const tfc_bf16* const p = W + (size_t)(n < N ? n : 0) * ldw;
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int s2 = 0; s2 < KS / 2; ++s2) {
        const int c = c0 + WPT * u, k = c * TFC_KC + 32 * s2 + 8 * t;
        const bool live = c < NC && c * TFC_KC + 32 * s2 < KPAD;
        unsigned e[4] = {0u, 0u, 0u, 0u};
        if (live && n < N) {
          if (wvec && k + 8 <= kend) {
            const uint4 q = tfc_ld_w16(p + k);
            e[0] = q.x, e[1] = q.y, e[2] = q.z, e[3] = q.w;
          } else {
#pragma unroll
            for (int j = 0; j < 4; ++j)
              e[j] = (k + 2 * j < kend ? p[k + 2 * j].bits : 0u) | (k + 2 * j + 1 < kend ? (unsigned)p[k + 2 * j + 1].bits << 16 : 0u);
          }
        }
        b[u][i][2 * s2][0] = e[0], b[u][i][2 * s2][1] = e[1], b[u][i][2 * s2 + 1][0] = e[2], b[u][i][2 * s2 + 1][1] = e[3];
      }
  }
}

// tfc_mma_rows_sums computes the sums of the U chunks whose W tfc_mma_rows_load left in b (which
// it lays out as fragments), chunk c0 + WPT*u of tile i and row tile r (rows m0 + 16r ...) into
// sum[r][u][i], each as tfc_gemm_mma sums a chunk: from zero, k16 steps in ascending order, the
// lo2, lo and hi products of X's rows m0 + 16r + lane/4 and that + 8 added to two accumulators,
// then hi + lo. X is split once a step for all T tiles; a row tile's values for the U chunks are
// loaded before its first product. A row tile wholly past M (a band's second) takes no products.
template <int KPAD, int NC, int U, int T, int WPT, int TERMS, int ROWS>
__device__ __forceinline__ void tfc_mma_rows_sums(float (&sum)[(ROWS + 15) / 16][U][T][4], unsigned (&b)[U][T][TFC_KC / 16][2],
                                                  const float* X, int ldx, bool xvec, int M, int m0, int c0, int kend) {
  constexpr int KS = TFC_KC / 16, MT = (ROWS + 15) / 16;
  static_assert(MT <= 2, "at most two row tiles share the fragments");
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  constexpr int R = ROWS > 8 ? 2 : 1;  // rows a lane loads a row tile: g, and g+8 when launches may hold it
#pragma unroll
  for (int rt = 0; rt < MT; ++rt) {
    const int mr = m0 + 16 * rt;
    if (rt > 0 && mr >= M) {
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int i = 0; i < T; ++i)
#pragma unroll
          for (int e = 0; e < 4; ++e) sum[rt][u][i][e] = 0.f;
      continue;
    }
    const bool r0 = mr + g < M, r1 = mr + g + 8 < M;
    const float* x0 = X + (size_t)(mr + g) * ldx;
    const float* x1 = X + (size_t)(mr + g + 8) * ldx;
    float v[U][KS][2][R][2];  // rows g (and g+8) by k 2t, 2t+8
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int s = 0; s < KS; ++s)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int c = c0 + WPT * u, k = c * TFC_KC + 16 * s + 8 * h + 2 * t;
          const bool live = c < NC && c * TFC_KC + 16 * s < KPAD;
#pragma unroll
          for (int r = 0; r < R; ++r) {
            const bool real = live && (r ? r1 : r0);
            const float* x = r ? x1 : x0;
            float a0 = 0.f, a1 = 0.f;
            if (real) {
              if (xvec && k + 2 <= kend) {
                const float2 f = *reinterpret_cast<const float2*>(x + k);
                a0 = f.x, a1 = f.y;
              } else {
                a0 = k < kend ? x[k] : 0.f;
                a1 = k + 1 < kend ? x[k + 1] : 0.f;
              }
            }
            v[u][s][h][r][0] = a0;
            v[u][s][h][r][1] = a1;
          }
        }
    if (rt == 0)
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int i = 0; i < T; ++i)
#pragma unroll
          for (int s2 = 0; s2 < KS / 2; ++s2) {
            unsigned q[4] = {b[u][i][2 * s2][0], b[u][i][2 * s2][1], b[u][i][2 * s2 + 1][0], b[u][i][2 * s2 + 1][1]};
            tfc_mma_b_span(q, t);
            b[u][i][2 * s2][0] = q[0], b[u][i][2 * s2][1] = q[1], b[u][i][2 * s2 + 1][0] = q[2], b[u][i][2 * s2 + 1][1] = q[3];
          }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float phi[T][4], plo[T][4];
#pragma unroll
      for (int i = 0; i < T; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) phi[i][e] = plo[i][e] = 0.f;
      const int c = c0 + WPT * u;
#pragma unroll
      for (int s = 0; s < KS; ++s) {
        if (c >= NC || c * TFC_KC + 16 * s >= KPAD) continue;
        unsigned a[3][4];  // hi, lo, lo2 of the A fragment: register q is row g + 8(q%2), k 2t + 8(q/2)
        bool nan = false;  // with one term, a fragment without a NaN is packed from its high halves
#pragma unroll
        for (int q = 0; q < 4; ++q)
          if (TERMS == 1 && q % 2 < R) {
            const float* x = v[u][s][q / 2][q % 2 < R ? q % 2 : 0];
            nan |= (x[0] != x[0]) | (x[1] != x[1]);
          }
        if (TERMS == 1 && !nan) {
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const float* x = v[u][s][q / 2][q % 2 < R ? q % 2 : 0];
            a[0][q] = q % 2 < R ? tfc_hi2(x[0], x[1]) : 0u;
          }
        } else {
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            unsigned h0 = 0u, l0 = 0u, z0 = 0u, h1 = 0u, l1 = 0u, z1 = 0u;
            if (q % 2 < R) {
              tfc_split3(v[u][s][q / 2][q % 2 < R ? q % 2 : 0][0], h0, l0, z0);
              tfc_split3(v[u][s][q / 2][q % 2 < R ? q % 2 : 0][1], h1, l1, z1);
            }
            a[0][q] = h0 | h1 << 16;
            a[1][q] = l0 | l1 << 16;
            a[2][q] = z0 | z1 << 16;
          }
        }
#pragma unroll
        for (int i = 0; i < T; ++i) tfc_mma_terms<TERMS>(phi[i], plo[i], a, b[u][i][s]);
      }
#pragma unroll
      for (int i = 0; i < T; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) sum[rt][u][i][e] = phi[i][e] + plo[i][e];
    }
  }
}

// tfc_max_int is the larger of a and b, at compile time.
constexpr int tfc_max_int(int a, int b) { return a > b ? a : b; }

// tfc_mma_floats is the LDS a kernel declares for both layouts at tile BM×BN (and the small-row
// tiles of TFC_SMALL_BN columns, of one row tile or a band's two).
template <int BM, int BN>
constexpr int tfc_mma_floats = tfc_max_int(tfc_max_int(tfc_mma_smem<BM, BN>::floats, tfc_mma_rows_smem<BM, BN>::floats),
                                             tfc_max_int(tfc_mma_rows_smem<BM, TFC_SMALL_BN>::floats, tfc_mma_rows_smem<BM, TFC_SMALL_BN, 32>::floats));

template <int BM, int BN, int N, int K, int MUT, int TERMS = TFC_MMA_TERMS, int ROWS = TFC_SMALL_ROWS, typename COLS>
__device__ __forceinline__ void tfc_gemm_mma_rows(float* smem, const float* X, int ldx, const tfc_bf16* W, int ldw, int M, int m0, COLS cols) {
  using S = tfc_mma_rows_smem<BM, BN, ROWS>;
  constexpr int BK = TFC_MMA_BK, KPAD = (K + BK - 1) / BK * BK, NC = (KPAD + TFC_KC - 1) / TFC_KC;
  constexpr int NT8 = S::nt8, T = S::t, G = S::groups, WPT = S::wpt, U = S::u, WAVE = WPT * U, KS = TFC_KC / 16, MT = S::mt;
  constexpr int P = TFC_ROWS_PIPE, NW = (NC + WAVE - 1) / WAVE;  // waves in registers; waves of the tile
  static_assert(BM >= 16 * MT && BN % 8 == 0 && TFC_KC % 16 == 0 && ROWS <= 32, "tiles of whole mma fragments");
  static_assert(P >= 1 && (TFC_ROWS_TILE_CHUNKS == 1 || TFC_ROWS_TILE_CHUNKS == 2 || TFC_ROWS_TILE_CHUNKS == 4),
                "the compiler budgets LDS for at most 4 chunks of tiles a warp a wave");
  // M - m0 <= ROWS: the launch's rows past that are not read
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
  const int kend = tfc_bound<MUT>(K);
  const int ldxm = tfc_stride<MUT>(ldx);
  const bool xvec = tfc_aligned16(X, ldxm, 4), wvec = tfc_aligned16(W, ldw, 2);
  if constexpr (WPT == 1) {
    // 8 or more column tiles: a warp takes whole tiles and walks K alone, U chunks a wave
    for (int j = warp; j < NT8; j += 8) {
      float a4[MT][4];
#pragma unroll
      for (int r = 0; r < MT; ++r)
#pragma unroll
        for (int e = 0; e < 4; ++e) a4[r][e] = 0.f;
      unsigned b[P][U][1][KS][2];
#pragma unroll
      for (int p = 0; p + 1 < P; ++p) tfc_mma_rows_load<N, KPAD, NC, U, 1, 1>(b[p], W, ldw, wvec, cols, j, p * U, kend);
#pragma unroll 1
      for (int w0 = 0; w0 < NW; w0 += P)
#pragma unroll
        for (int p = 0; p < P; ++p) {
          const int c = (w0 + p) * U;
          if (NW % P != 0 && c >= NC) continue;
          tfc_mma_rows_load<N, KPAD, NC, U, 1, 1>(b[(p + P - 1) % P], W, ldw, wvec, cols, j, c + (P - 1) * U, kend);
          float sum[MT][U][1][4];
          tfc_mma_rows_sums<KPAD, NC, U, 1, 1, TERMS, ROWS>(sum, b[p], X, ldxm, xvec, M, m0, c, kend);
#pragma unroll
          for (int u = 0; u < U; ++u)
            if (c + u < NC)
#pragma unroll
              for (int r = 0; r < MT; ++r)
#pragma unroll
                for (int e = 0; e < 4; ++e) a4[r][e] += sum[r][u][0][e];
        }
      tfc_fill_skew<MUT>();
#pragma unroll
      for (int r = 0; r < MT; ++r) tfc_mma_put(smem + (16 * r + g) * (BN + 1) + j * 8 + 2 * t, BN + 1, a4[r]);
    }
  } else {
    // slot s of a wave is chunk c0 + s; warp q takes slots WPT-1-q, 2WPT-1-q, ... After a wave's
    // barrier every thread adds its outputs' chunk sums, VG a group (the lane values of its
    // fragments), to their sums in chunk order: one warp adding all of them took most of a wave.
    const int gi = warp / WPT, q = warp % WPT, cq = WPT - 1 - q;  // this warp's group of T tiles, place in it, first slot
    constexpr int VG = MT * T * 128, NV = (G * VG + 255) / 256;  // a group's outputs; a thread's
    float acc[NV];
#pragma unroll
    for (int v = 0; v < NV; ++v) acc[v] = 0.f;
    float* const slots = smem + S::c;  // [2][G][WAVE][MT][T][32 lanes][4]
    unsigned b[P][U][T][KS][2];
    if (gi < G) {
#pragma unroll
      for (int p = 0; p + 1 < P; ++p) tfc_mma_rows_load<N, KPAD, NC, U, T, WPT>(b[p], W, ldw, wvec, cols, gi * T, p * WAVE + cq, kend);
    }
#pragma unroll 1
    for (int w0 = 0; w0 < NW; w0 += P)
#pragma unroll
      for (int p = 0; p < P; ++p) {
        const int wave = w0 + p, c0 = wave * WAVE;
        if (NW % P != 0 && wave >= NW) continue;
        float* const set = slots + (wave & 1) * G * WAVE * MT * T * 128;
        if (gi < G) {
          tfc_mma_rows_load<N, KPAD, NC, U, T, WPT>(b[(p + P - 1) % P], W, ldw, wvec, cols, gi * T, c0 + (P - 1) * WAVE + cq, kend);
          float sum[MT][U][T][4];
          tfc_mma_rows_sums<KPAD, NC, U, T, WPT, TERMS, ROWS>(sum, b[p], X, ldxm, xvec, M, m0, c0 + cq, kend);
          tfc_fill_skew<MUT>();
#pragma unroll
          for (int u = 0; u < U; ++u) {
            const int s = cq + WPT * u;
            if (c0 + s >= NC) continue;
#pragma unroll
            for (int r = 0; r < MT; ++r)
#pragma unroll
              for (int i = 0; i < T; ++i) {
                float* sl = set + ((((gi * WAVE + s) * MT + r) * T + i) * 32 + lane) * 4;
#pragma unroll
                for (int e = 0; e < 4; ++e) sl[e] = sum[r][u][i][e];
              }
          }
        }
        tfc_fill_barrier<MUT>();
#pragma unroll
        for (int v = 0; v < NV; ++v) {
          const int o = threadIdx.x + 256 * v;  // group o / VG's slot place o % VG: [MT][T][32 lanes][4]
          if (G * VG % 256 != 0 && o >= G * VG) continue;
          const float* sl = set + o / VG * WAVE * VG + o % VG;
#pragma unroll
          for (int s = 0; s < WAVE; ++s)
            if (c0 + s < NC) acc[v] += sl[s * VG];
        }
      }
    tfc_fill_skew<MUT>();
#pragma unroll
    for (int v = 0; v < NV; ++v) {
      const int o = threadIdx.x + 256 * v, og = o / VG, ow = o % VG;  // element e of lane ln's fragment of tile it
      if (G * VG % 256 != 0 && o >= G * VG) continue;
      const int e = ow % 4, ln = ow / 4 % 32, it = ow / 128, r = it / T, i = it % T;
      smem[(16 * r + ln / 4 + 8 * (e / 2)) * (BN + 1) + (og * T + i) * 8 + 2 * (ln % 4) + e % 2] = acc[v];
    }
  }
  tfc_fill_barrier<MUT>();  // the epilogue reads C
}
// ---------------------------------------------------------------------------------------------
// tfc_gemm_mma_fill is tfc_gemm_mma for launches of many rows (prompt chunks, vision towers), laid
// out for the tensor cores' rate: the same chain of mma.sync a output (k16 steps in order, a
// TFC_KC chunk's hi and lo products summed apart from zero and added in chunk order), so the same
// bits, on BM×BN tiles whose TFC_FILL_STAGES stages of X (F32) and W (BF16) stream into dynamic
// LDS by cp.async while the tensor cores work on the oldest. Each step's X is split once into its
// BF16 terms (tfc_put_terms) by the whole block, the step before its products, into one of two
// term buffers, so both operands reach the warps by ldmatrix (each warp splitting its own
// fragments took 240 registers and 5 instructions an mma: 82-93 TFLOP/s on an H100,
// docs/receipts/2026-12-07-h100-bands-fill.md). 8 warps, WM along the rows by 8/WM along the
// columns, each owning a contiguous (BM/WM)×(BN/(8/WM)) sub-tile. Rows of X or W that are not 16-byte aligned are read an element at
// a time into the same stage. The C tile overlays the stages as tfc_gemm_mma leaves it, in
// tfc_fill_smem<BM, BN>::bytes of LDS.

#ifndef TFC_MMA_EMULATED  // a host test supplies these
// tfc_cp_async16 copies the 16 bytes at src into the shared address dst asynchronously, reading the
// first n of them (0 to 16) and zeroing the rest; tfc_cp_async_commit closes a group of copies and
// tfc_cp_async_wait waits until at most N groups are in flight.
__device__ __forceinline__ void tfc_cp_async16(unsigned dst, const void* src, int n) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n) : "memory");
}
__device__ __forceinline__ void tfc_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void tfc_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
// tfc_proxy_fence makes this thread's LDS writes visible to wgmma's reads (another proxy); empty
// where wgmma is not built.
__device__ __forceinline__ void tfc_proxy_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
#endif

// tfc_fill_load issues the stage of step s (BK = TFC_MMA_BK columns of K from s·BK) into the
// stage at byte offset st: X [BM][ldx] F32, then W [BN][ldw] BF16, zeros past M, N and kend.
template <int BM, int BN, int N, class S, typename COLS>
__device__ __forceinline__ void tfc_fill_load(unsigned char* sm, unsigned st, const float* X, int ldx, bool xvec,
                                              const tfc_bf16* W, int ldw, bool wvec, int M, int m0, COLS cols, int s, int kend) {
  constexpr int BK = TFC_MMA_BK, XU = BM * BK / 4, WU = BN * BK / 8;  // 16-byte units of a stage
  const unsigned base = tfc_smem_addr(sm) + st;
  const int k0 = s * BK;
#pragma unroll
  for (int i = 0; i < (XU + 255) / 256; ++i) {
    const int u = threadIdx.x + 256 * i, r = u / (BK / 4), k = k0 + 4 * (u % (BK / 4)), m = m0 + r;
    if (XU % 256 != 0 && u >= XU) break;
    const unsigned dst = base + S::x_at(u);
    const float* p = X + (size_t)(m < M ? m : 0) * ldx + k;
    if (xvec) {
      const int n = m < M ? (kend - k >= 4 ? 16 : kend > k ? 4 * (kend - k) : 0) : 0;
      tfc_cp_async16(dst, n > 0 ? p : X, n);
    } else {
      float* d = reinterpret_cast<float*>(sm + st + S::x_at(u));
#pragma unroll
      for (int j = 0; j < 4; ++j) d[j] = m < M && k + j < kend ? p[j] : 0.f;
    }
  }
#pragma unroll
  for (int i = 0; i < (WU + 255) / 256; ++i) {
    const int u = threadIdx.x + 256 * i, c = u / (BK / 8), k = k0 + 8 * (u % (BK / 8)), n = tfc_col(cols, c);
    if (WU % 256 != 0 && u >= WU) break;
    const unsigned dst = base + S::w_at(u);
    const tfc_bf16* p = W + (size_t)(n < N ? n : 0) * ldw + k;
    if (wvec) {
      const int b = n < N ? (kend - k >= 8 ? 16 : kend > k ? 2 * (kend - k) : 0) : 0;
      tfc_cp_async16(dst, b > 0 ? p : W, b);
    } else {
      unsigned short* d = reinterpret_cast<unsigned short*>(sm + st + S::w_at(u));
#pragma unroll
      for (int j = 0; j < 8; ++j) d[j] = n < N && k + j < kend ? p[j].bits : 0u;
    }
  }
}

// tfc_fill_stream is a thread's part of the copies that fill a tile's stages (S: tfc_fill_smem or
// a layout of W of its own). A stage of 16-byte rows whose K lies before kend is copied without
// checks: the thread's units (X row and k, W column and k) are the same every step, their source
// offsets kept; other stages take tfc_fill_load.
template <int BM, int BN, int N, class S, typename COLS>
struct tfc_fill_stream {
  static constexpr int BK = TFC_MMA_BK, XU = BM * BK / 4, WU = BN * BK / 8, XI = (XU + 255) / 256, WI = (WU + 255) / 256;
  unsigned char* sm;
  const float* X;
  const tfc_bf16* W;
  int ldx, ldw, M, m0, kend;
  bool xvec, wvec;
  COLS cols;
  int xo[XI], wo[WI];   // element offsets of the units' sources at step 0 (row 0 past M, column 0 past N)
  bool xl[XI], wl[WI];  // the unit's row or column is in the launch
  __device__ __forceinline__ tfc_fill_stream(unsigned char* sm, const float* X, int ldx, bool xvec, const tfc_bf16* W, int ldw, bool wvec,
                                             int M, int m0, COLS cols, int kend)
      : sm(sm), X(X), W(W), ldx(ldx), ldw(ldw), M(M), m0(m0), kend(kend), xvec(xvec), wvec(wvec), cols(cols) {
#pragma unroll
    for (int i = 0; i < XI; ++i) {
      const int u = threadIdx.x + 256 * i, m = m0 + u / (BK / 4);
      xl[i] = m < M;
      xo[i] = (xl[i] ? m : 0) * ldx + 4 * (u % (BK / 4));
    }
#pragma unroll
    for (int i = 0; i < WI; ++i) {
      const int u = threadIdx.x + 256 * i, n = tfc_col(cols, u / (BK / 8));
      wl[i] = n < N;
      wo[i] = (wl[i] ? n : 0) * ldw + 8 * (u % (BK / 8));
    }
  }
  // load issues step s into its stage.
  __device__ __forceinline__ void load(int s) {
    const unsigned st = s % TFC_FILL_STAGES * S::stage;
    if (!xvec || !wvec || (s + 1) * BK > kend) {
      tfc_fill_load<BM, BN, N, S>(sm, st, X, ldx, xvec, W, ldw, wvec, M, m0, cols, s, kend);
      return;
    }
    const unsigned base = tfc_smem_addr(sm) + st;
#pragma unroll
    for (int i = 0; i < XI; ++i) {
      const int u = threadIdx.x + 256 * i;
      if (XU % 256 != 0 && u >= XU) break;
      tfc_cp_async16(base + S::x_at(u), X + xo[i] + s * BK, xl[i] ? 16 : 0);
    }
#pragma unroll
    for (int i = 0; i < WI; ++i) {
      const int u = threadIdx.x + 256 * i;
      if (WU % 256 != 0 && u >= WU) break;
      tfc_cp_async16(base + S::w_at(u), W + wo[i] + s * BK, wl[i] ? 16 : 0);
    }
  }
  // begin issues steps 0 to P-2 of KT and waits until step 0 is in every thread's view.
  template <int MUT>
  __device__ __forceinline__ void begin(int KT) {
    tfc_fill_skew<MUT>();
#pragma unroll
    for (int s = 0; s < TFC_FILL_STAGES - 1; ++s) {
      if (s < KT) load(s);
      tfc_cp_async_commit();
    }
    tfc_cp_async_wait<TFC_FILL_STAGES - 2>();
    tfc_fill_barrier<MUT>();
  }
  // step starts step s of KT: step s + 1 and what threads wrote for step s are then in every
  // thread's view (wgmma's too under PROXY), step s - 1's places are free, and step s + P - 1 is issued.
  template <int MUT, bool PROXY = false>
  __device__ __forceinline__ void step(int s, int KT) {
    tfc_cp_async_wait<TFC_FILL_STAGES - 3>();
    if constexpr (PROXY) tfc_proxy_fence();
    tfc_fill_barrier<MUT>();
    if (s + TFC_FILL_STAGES - 1 < KT) load(s + TFC_FILL_STAGES - 1);
    tfc_cp_async_commit();
  }
};

// tfc_fill_row is the byte offset of BF16 element (r, k) in a plane of [BM][ldw].
template <int BM, int BN>
struct tfc_fill_row {
  __device__ unsigned operator()(int r, int k) const { return 2 * (r * tfc_fill_smem<BM, BN>::ldw + k); }
};

// tfc_fill_terms writes step s's X (F32, in its stage at byte st) as its BF16 terms (TERMS planes
// of BM·ldw elements, element (r, k) at byte where(r, k) of a plane) from byte offset at: a thread
// 16 elements, each taken as every layout takes it.
template <int BM, int BN, int TERMS, class WHERE>
__device__ __forceinline__ void tfc_fill_terms(unsigned char* sm, unsigned st, unsigned at, WHERE where) {
  using S = tfc_fill_smem<BM, BN>;
  constexpr int BK = TFC_MMA_BK, XU = BM * BK / 4;  // float4s of a step
#pragma unroll
  for (int i = 0; i < (XU + 255) / 256; ++i) {
    const int u = threadIdx.x + 256 * i, r = u / (BK / 4), k = 4 * (u % (BK / 4));
    if (XU % 256 != 0 && u >= XU) break;
    tfc_put_terms<TERMS, true>(reinterpret_cast<unsigned short*>(sm + at + where(r, k)), BM * S::ldw,
                               *reinterpret_cast<const float4*>(sm + st + 4 * (r * S::ldx + k)));
  }
}

// TFC_FILL_WGMMA=1 takes the fill layout's BF16 tiles of 128 rows on wgmma where the target has it
// (TFC_WGMMA: sm_90a), tfc_gemm_wgmma_fill below.
#ifndef TFC_FILL_WGMMA
#define TFC_FILL_WGMMA 0
#endif
#if TFC_CUDA && (defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(TFC_MMA_EMULATED))
#define TFC_WGMMA 1
#else
#define TFC_WGMMA 0
#endif
#if TFC_WGMMA
template <int BM, int BN, int N, int K, int MUT, typename COLS>
__device__ __forceinline__ void tfc_gemm_wgmma_fill(float* smem, const float* X, int ldx, const tfc_bf16* W, int ldw, int M, int m0, COLS cols);
#endif

template <int BM, int BN, int N, int K, int MUT, int TERMS = TFC_MMA_TERMS, int WM = 2, typename COLS>
__device__ __forceinline__ void tfc_gemm_mma_fill(float* smem, const float* X, int ldx, const tfc_bf16* W, int ldw, int M, int m0, COLS cols) {
#if TFC_FILL_WGMMA && TFC_WGMMA
  if constexpr (TERMS == 1 && BM == 128 && (BN == 64 || BN == 128)) {
    tfc_gemm_wgmma_fill<BM, BN, N, K, MUT>(smem, X, ldx, W, ldw, M, m0, cols);
    return;
  }
#endif
  using S = tfc_fill_smem<BM, BN>;
  constexpr int BK = TFC_MMA_BK, KT = (K + BK - 1) / BK, P = TFC_FILL_STAGES;
  constexpr int WN = 8 / WM, MT = BM / WM / 16, NT = BN / WN / 8;  // a warp's row tiles of 16 and column tiles of 8
  static_assert(WM >= 1 && WM <= 8 && 8 % WM == 0 && BM % (16 * WM) == 0 && BN % (16 * WN) == 0, "whole 16×16 pieces a warp");
  static_assert(TFC_KC % BK == 0 && P >= 3, "chunks hold whole steps; at least three stages");
  static_assert(TERMS == 1 || TERMS == 3, "an activation is taken as one BF16 term or three");
  unsigned char* const sm = reinterpret_cast<unsigned char*>(smem);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, wm = warp % WM, wn = warp / WM, g = lane / 4, t = lane % 4;
  const int kend = tfc_bound<MUT>(K);
  const int ldxm = tfc_stride<MUT>(ldx);
  const bool xvec = tfc_aligned16(X, ldxm, 4), wvec = tfc_aligned16(W, ldw, 2);
  // the steps' BF16 terms lie past the stages, two steps by turns; this lane's ldmatrix rows of
  // the warp's row tile 0 there (A) and of its tile pair 0 in a stage (W)
  const unsigned terms = P * S::stage;
  const unsigned a0 = tfc_smem_addr(sm) + terms + 2 * ((wm * (BM / WM) + lane % 16) * S::ldw + lane / 16 * 8);
  const unsigned b0 = tfc_smem_addr(sm) + BM * S::ldx * 4 + 2 * ((wn * (BN / WN) + lane % 8 + lane / 16 * 8) * S::ldw + lane / 8 % 2 * 8);
  float acc[MT][NT][4], phi[MT][NT][4], plo[MT][NT][4];
#pragma unroll
  for (int r = 0; r < MT; ++r)
#pragma unroll
    for (int i = 0; i < NT; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[r][i][e] = phi[r][i][e] = plo[r][i][e] = 0.f;

  tfc_fill_stream<BM, BN, N, S, COLS> in(sm, X, ldxm, xvec, W, ldw, wvec, M, m0, cols, kend);
  const tfc_fill_row<BM, BN> row;
  in.template begin<MUT>(KT);
  tfc_fill_terms<BM, BN, TERMS>(sm, 0, terms, row);
#pragma unroll 1
  for (int s = 0; s < KT; ++s) {
    in.template step<MUT>(s, KT);  // step s's terms are in view; step s - 1's are free
    if (s + 1 < KT) tfc_fill_terms<BM, BN, TERMS>(sm, (s + 1) % P * S::stage, terms + (s + 1) % 2 * S::terms, row);
    const unsigned st = s % P * S::stage, at = s % 2 * S::terms;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      unsigned b[NT][2];
#pragma unroll
      for (int i = 0; i < NT; i += 2) {
        unsigned q[4];
        tfc_ldsm_x4(q, b0 + st + 2 * (i * 8 * S::ldw + kk));
        b[i][0] = q[0], b[i][1] = q[1], b[i + 1][0] = q[2], b[i + 1][1] = q[3];
      }
#pragma unroll
      for (int r = 0; r < MT; ++r) {
        unsigned a[3][4];  // hi, lo, lo2 of row tile r, k kk..kk+15
#pragma unroll
        for (int p = 0; p < TERMS; ++p) tfc_ldsm_x4(a[p], a0 + at + 2 * ((p * BM + 16 * r) * S::ldw + kk));
#pragma unroll
        for (int i = 0; i < NT; ++i) tfc_mma_terms<TERMS>(phi[r][i], plo[r][i], a, b[i]);
      }
    }
    if (((s + 1) * BK) % TFC_KC == 0 || s + 1 == KT) tfc_mma_fold<TERMS>(acc, phi, plo);
  }
  tfc_cp_async_wait<0>();
  __syncthreads();  // C overlays the stages
#pragma unroll
  for (int r = 0; r < MT; ++r)
#pragma unroll
    for (int i = 0; i < NT; ++i) tfc_mma_put(smem + (wm * (BM / WM) + 16 * r + g) * (BN + 1) + wn * (BN / WN) + 8 * i + 2 * t, BN + 1, acc[r][i]);
  __syncthreads();
}
// ---------------------------------------------------------------------------------------------
// The fill layout on Hopper's warpgroup MMA (wgmma.mma_async, sm_90a), TFC_FILL_WGMMA=1 (TFC_WGMMA
// above; off by default, as the fill layout is): tfc_gemm_wgmma_fill takes a 128-row fill tile's
// products in BF16 precision as two warpgroups of 64 rows, each a m64nBNk16 wgmma a k16 step with
// both operands in LDS, waiting for a step's wgmma before the next barrier. On an H100 it gives the
// mma.sync layout's bits (the contract's gate 3 at the fixture's and the 2B-shaped checkpoint's
// shapes) and the same speed within 10%: a 128×128 tile of F32 X is bound by its copies' latency,
// not by the tensor cores (docs/receipts/2026-12-07-h100-wgmma-fill-paged-default.md). Keeping a
// step's wgmma in flight past the next barrier (two sets of chunk sums, a fifth stage) was
// serialized by ptxas (C7514) and no faster. The chain an output takes is the mma.sync one (k16
// steps in order from zero within a TFC_KC chunk, the chunk's sum added to the output's in chunk
// order), so its bits are the other layouts' wherever the two instructions round alike. The stages, their copies and the split into BF16 are the fill layout's; only W's place in a
// stage and the terms' differ: both lie in 8×8 core matrices (8 rows of 16 bytes of K, 128 bytes),
// K-major without swizzling, as wgmma reads them.
#if TFC_WGMMA
// tfc_core_at is the byte offset of element (r, k) of a K-major BF16 operand of BK columns laid
// in core matrices: core (r/8, k/8) at 128 bytes each, K's first.
template <int BK = TFC_MMA_BK>
__device__ __forceinline__ unsigned tfc_core_at(int r, int k) { return (r / 8 * (BK / 8) + k / 8) * 128 + r % 8 * 16 + k % 8 * 2; }
// tfc_wgmma_desc is the shared-memory descriptor of such an operand at shared address a: the next
// core matrix along K 128 bytes on (leading byte offset), the next 8 rows BK/8·128 on (stride
// byte offset), no swizzle.
template <int BK = TFC_MMA_BK>
__device__ __forceinline__ unsigned long long tfc_wgmma_desc(unsigned a) {
  return (unsigned long long)((a & 0x3ffff) >> 4) | (unsigned long long)(128 >> 4) << 16 | (unsigned long long)(BK / 8 * 128 >> 4) << 32;
}
// tfc_wgmma_smem is tfc_fill_smem with W's 16-byte unit u (column u/(BK/8), k 8(u%(BK/8))) in core matrices.
template <int BM, int BN>
struct tfc_wgmma_smem : tfc_fill_smem<BM, BN> {
  static constexpr unsigned w0 = BM * tfc_fill_smem<BM, BN>::ldx * 4;  // W's offset in a stage
  __device__ static unsigned w_at(int u) { return w0 + tfc_core_at(u / (TFC_MMA_BK / 8), 8 * (u % (TFC_MMA_BK / 8))); }
};
#ifndef TFC_MMA_EMULATED  // a host test supplies these
// tfc_wgmma_fence orders the registers' and LDS's earlier writes before the next wgmma;
// tfc_wgmma_commit closes a group of wgmma; tfc_wgmma_wait waits until at most N groups are in
// flight.
__device__ __forceinline__ void tfc_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void tfc_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void tfc_wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// tfc_wgmma_hold keeps the compiler from moving reads or writes of d across the asm around it.
template <int NT>
__device__ __forceinline__ void tfc_wgmma_hold(float (&d)[NT][4]) {
#pragma unroll
  for (int i = 0; i < NT; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[i][e])::"memory");
}
// tfc_wgmma_bf16: d += a·b on the warpgroup's 64×N tile, a 64×16 and b 16×N BF16 K-major in LDS
// (descriptors); d's element (i, e) is row 16·warp + g + 8(e/2), column 8i + 2t + e%2, as mma.sync's.
template <int N>
__device__ __forceinline__ void tfc_wgmma_bf16(float (&d)[N / 8][4], unsigned long long a, unsigned long long b);
template <>
__device__ __forceinline__ void tfc_wgmma_bf16<128>(float (&d)[16][4], unsigned long long a, unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
      "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
      "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
      "%64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]),
        "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]),
        "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
        "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]),
        "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]),
        "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]),
        "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]),
        "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
      : "l"(a), "l"(b), "n"(1));
}
template <>
__device__ __forceinline__ void tfc_wgmma_bf16<64>(float (&d)[8][4], unsigned long long a, unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "
      "%32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]),
        "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]),
        "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
        "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
      : "l"(a), "l"(b), "n"(1));
}
#endif

// tfc_wgmma_step adds a step of BK columns to the warpgroup's chunk sums phi (64×BN): a (its
// rows) and b in core matrices at shared addresses a and b, k16 wgmma in order, waited for.
template <int BN, int BK = TFC_MMA_BK>
__device__ __forceinline__ void tfc_wgmma_step(float (&phi)[BN / 8][4], unsigned a, unsigned b) {
  tfc_wgmma_hold(phi);
  tfc_wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < BK; kk += 16) tfc_wgmma_bf16<BN>(phi, tfc_wgmma_desc<BK>(a + kk / 8 * 128), tfc_wgmma_desc<BK>(b + kk / 8 * 128));
  tfc_wgmma_commit();
  tfc_wgmma_wait<0>();
  tfc_wgmma_hold(phi);
}
// tfc_wgmma_fold ends a TFC_KC chunk: its sums go to the outputs', then start from zero again.
template <int NT>
__device__ __forceinline__ void tfc_wgmma_fold(float (&acc)[NT][4], float (&phi)[NT][4]) {
#pragma unroll
  for (int i = 0; i < NT; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      acc[i][e] += phi[i][e];
      phi[i][e] = 0.f;
    }
}

template <int BM, int BN, int N, int K, int MUT, typename COLS>
__device__ __forceinline__ void tfc_gemm_wgmma_fill(float* smem, const float* X, int ldx, const tfc_bf16* W, int ldw, int M, int m0, COLS cols) {
  using S = tfc_wgmma_smem<BM, BN>;
  constexpr int BK = TFC_MMA_BK, KT = (K + BK - 1) / BK, NT = BN / 8, P = TFC_FILL_STAGES, TB = BM * BK * 2;  // TB: a step's BF16 X
  static_assert(BM == 128 && (BN == 64 || BN == 128), "two warpgroups of 64 rows by 64 or 128 columns");
  static_assert(TFC_KC % BK == 0 && P >= 3 && P * S::stage + 2 * TB <= S::bytes, "chunks hold whole steps; three stages; the stages and two steps' BF16 fit the fill's LDS");
  unsigned char* const sm = reinterpret_cast<unsigned char*>(smem);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
  const int kend = tfc_bound<MUT>(K);
  const int ldxm = tfc_stride<MUT>(ldx);
  tfc_fill_stream<BM, BN, N, S, COLS> in(sm, X, ldxm, tfc_aligned16(X, ldxm, 4), W, ldw, tfc_aligned16(W, ldw, 2), M, m0, cols, kend);
  // the steps' BF16 X lies past the stages, two steps by turns; this warpgroup's 64 rows there
  const unsigned terms = P * S::stage, base = tfc_smem_addr(sm), rows = warp / 4 * 64 / 8 * (BK / 8) * 128;
  // step s's X (F32, in its stage) as BF16 in core matrices
  auto split = [&](int s) { tfc_fill_terms<BM, BN, 1>(sm, s % P * S::stage, terms + s % 2 * TB, tfc_core_at<>); };
  float acc[NT][4], phi[NT][4];  // the outputs' sums; the chunk's
#pragma unroll
  for (int i = 0; i < NT; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[i][e] = phi[i][e] = 0.f;
  in.template begin<MUT>(KT);
  split(0);
#pragma unroll 1
  for (int s = 0; s < KT; ++s) {
    in.template step<MUT, true>(s, KT);  // step s's BF16 X is in wgmma's view; step s - 1's is free
    if (s + 1 < KT) split(s + 1);
    tfc_wgmma_step<BN>(phi, base + terms + s % 2 * TB + rows, base + s % P * S::stage + S::w0);
    if ((s + 1) * BK % TFC_KC == 0 || s + 1 == KT) tfc_wgmma_fold(acc, phi);
  }
  tfc_cp_async_wait<0>();
  __syncthreads();  // C overlays the stages
#pragma unroll
  for (int i = 0; i < NT; ++i) tfc_mma_put(smem + (16 * warp + g) * (BN + 1) + 8 * i + 2 * t, BN + 1, acc[i]);
  __syncthreads();
}
#endif
#endif
