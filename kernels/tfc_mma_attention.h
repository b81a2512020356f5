// tfc_mma_attention.h: attention on tensor cores on CUDA: over spans (the vision attention,
// tfc_attention_mma) with the exact three-term split of tfc_mma_gemm.h, and over the paged cache
// in BF16 (tfc_attention_paged_mma, behind TFC_PAGED_MMA).
#pragma once
#include "tfc_mma_gemm.h"
#include "tfc_attention.h"

#if TFC_CUDA
// ---------------------------------------------------------------------------------------------
// Vision attention on tensor cores (CUDA): tfc_attention_spans' group of QG rows, one head.
//
// Flash attention with mma.sync m16n8k16 (BF16 operands, F32 accumulation) for Q·Kᵀ and P·V.
// Both operands are F32, so each is split exactly into three BF16 terms (tfc_split3: x = hi +
// lo + lo2, |lo| < 2^-7|x|, |lo2| < 2^-15|x|) and a product x·y is taken as hi·hi + hi·lo +
// lo·hi + hi·lo2 + lo·lo + lo2·hi: the terms left out are below 2^-21 of |x·y| together, so a
// score or an output is within a few F32 roundings of its F32 sum. Within a key tile the hi·hi products go to one accumulator and
// the others (smallest first) to another, both from zero; the tile's scores are their sum, and
// a tile's P·V is added to the output in F32 (o·alpha + tile), so the tensor cores never carry a
// long sum. The softmax is the F32 online softmax of tfc_attend in log2 units: a row's running
// max m of the scores s·scale·log2(e), p = 2^(s - m) (exp2f), the sum of p and the output rescaled
// by 2^(m_old - m_new). In BF16
// precision Q, K, V and (rounded after its sum) P are BF16-exact, so hi·hi alone is taken
// (TERMS 1): the same bits as the six products for a sixth of the work, the lo planes neither
// staged nor read.
//
// 256 threads are 8 warps; warp w owns rows 16w..16w+15 of the group (QG = 128) and keeps its
// Q fragments (three planes) in registers for the whole span. Keys are staged BK at a time from
// key 0 of the span (16 or 32 with three terms, 64 with one): K and V as [plane][key][d], BF16, rows padded by 8 elements so that
// ldmatrix reads hit distinct banks (V is read transposed, with ldmatrix .trans); head_dim is
// padded with zeros to a multiple of 16 and keys past the span are zeros with score -Inf. Everything a row's bits
// depend on (its warp's instructions, the key tiles, the order of every sum) is fixed by the
// row's span and its place in it, never by the launch.
//
// Non-finite inputs: the cross products would turn an infinite x against a finite y whose lo
// is zero into Inf·0 = NaN where the reference has ±Inf. So a score whose Q row or K row holds
// a NaN or ±Inf is recomputed as a plain F32 dot product (as tfc_attend does), and a V element
// that is not finite is staged as zero and its p·v added to the output apart. The fill flags
// such K rows and V columns with the tile's first key (-1 is none).
// TFC_ATTN_TILE1 is the keys a tile where one term of each operand is taken (BF16 precision):
// two planes leave room for 64 keys at head_dim 128, halving the barriers and per-tile work.
#ifndef TFC_ATTN_TILE1
#define TFC_ATTN_TILE1 64
#endif
template <int HD, int TERMS>
struct tfc_attn_mma_shape {
  static constexpr int hdp = (HD + 15) / 16 * 16;  // head_dim padded to the mma's k
  static constexpr int ldk = hdp + 8;              // a K or V tile row (BF16 elements)
  static constexpr int planes = 2 * TERMS;         // K's terms, then V's
  static constexpr int tk = TERMS == 1 ? TFC_ATTN_TILE1 : planes * 32 * ldk * 2 <= 40 * 1024 ? 32 : 16;  // keys a tile
  static constexpr int plane = tk * ldk;
  static constexpr int size = planes * plane;  // BF16 elements
};

// tfc_attn_smem is the LDS of a tile: the K planes, then the V planes.
template <int HD, int TERMS>
__device__ __forceinline__ unsigned short* tfc_attn_smem() {
  __shared__ __align__(16) unsigned short sm[tfc_attn_mma_shape<HD, TERMS>::size];
  return sm;
}

// TFC_ATTN_AHEAD is the registers a thread may hold for the next tile's K and V.
#ifndef TFC_ATTN_AHEAD
#define TFC_ATTN_AHEAD 40
#endif

// tfc_ld4 loads p[0..3] (those below n) as floats: one 16-byte load where vec says the F32 rows
// allow it.
template <typename T>
__device__ __forceinline__ float4 tfc_ld4(const T* p, int n, bool vec) {
  if (sizeof(T) == 4 && vec && n >= 4) return *reinterpret_cast<const float4*>(p);
  return make_float4(n > 0 ? tfc_ld(p) : 0.f, n > 1 ? tfc_ld(p + 1) : 0.f, n > 2 ? tfc_ld(p + 2) : 0.f, n > 3 ? tfc_ld(p + 3) : 0.f);
}

__device__ __forceinline__ bool tfc_finite(float x) { return (__float_as_uint(x) & 0x7f800000u) != 0x7f800000u; }
__device__ __forceinline__ unsigned tfc_pack_bf16(unsigned lo, unsigned hi) { return lo | hi << 16; }
// tfc_finite4 says whether all four of v are finite (one compare each, no branch).
__device__ __forceinline__ bool tfc_finite4(const float4& v) {
  return fabsf(v.x) <= 3.40282347e38f && fabsf(v.y) <= 3.40282347e38f && fabsf(v.z) <= 3.40282347e38f && fabsf(v.w) <= 3.40282347e38f;
}
#ifndef TFC_MMA_EMULATED
// tfc_rn2 packs a (low) and b (high) rounded to the nearest BF16 (ties to even), tfc_rnd's values
// for every finite and infinite input, in one cvt.
__device__ __forceinline__ unsigned tfc_rn2(float a, float b) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(b), "f"(a));
  return r;
}
#else
__device__ __forceinline__ unsigned tfc_rn1(float v) {  // what cvt.rn gives one value (NaN: 0x7fff)
  const unsigned u = __float_as_uint(v);
  return (u & 0x7fffffffu) > 0x7f800000u ? 0x7fffu : (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
__device__ __forceinline__ unsigned tfc_rn2(float a, float b) { return tfc_rn1(a) | tfc_rn1(b) << 16; }
#endif
#ifndef TFC_MMA_EMULATED
// tfc_ldsm_x2_trans is tfc_ldsm_x2 transposed: register j of lane l holds elements (2(l%4), l/4)
// and (2(l%4)+1, l/4) of matrix j, whose row r comes from lane 8j + r.
__device__ __forceinline__ void tfc_ldsm_x2_trans(unsigned (&r)[2], unsigned a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(a)
               : "memory");
}
// tfc_prefetch_l2 asks for the 128-byte line at p to be brought into L2.
__device__ __forceinline__ void tfc_prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p)); }
// tfc_ldsm_x4_trans is tfc_ldsm_x2_trans for four matrices (row r of matrix j from lane 8j + r).
__device__ __forceinline__ void tfc_ldsm_x4_trans(unsigned (&r)[4], unsigned a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a)
               : "memory");
}
#endif

// tfc_mma_split6 adds the six kept products of two split operands, a = a0 + a1 + a2 and b = bh +
// bl + b2: hi·hi into big, the five smaller ones into small, smallest first. With one term
// (BF16-exact operands) only hi·hi.
template <int TERMS>
__device__ __forceinline__ void tfc_mma_split6(float (&big)[4], float (&small)[4], const unsigned (&a)[3][4],
                                               const unsigned (&bh)[2], const unsigned (&bl)[2], const unsigned (&b2)[2]) {
  if (TERMS == 3) {
    tfc_mma_bf16(small, a[2], bh);
    tfc_mma_bf16(small, a[0], b2);
    tfc_mma_bf16(small, a[1], bl);
    tfc_mma_bf16(small, a[1], bh);
    tfc_mma_bf16(small, a[0], bl);
  }
  tfc_mma_bf16(big, a[0], bh);
}

template <int HD, int QG, int MUT, int TERMS, typename TQ, typename TK, typename TV, typename TY>
__device__ __forceinline__ void tfc_attention_mma(const TQ* Q, int ldq, const TK* K, int ldk, const TV* V, int ldv, TY* Y,
                                                  int ldy, int h, int kh, int s0, int s1, int r0, float scale) {
  using shape = tfc_attn_mma_shape<HD, TERMS>;
  constexpr int HDP = shape::hdp, BK = shape::tk, LDK = shape::ldk, PL = shape::plane, VP = TERMS * PL;
  constexpr int KS = HDP / 16, NK = BK / 8, KK = BK / 16, ND = HDP / 8;
  static_assert(QG == 128, "a block is 8 warps of 16 rows");
  static_assert(shape::size * 2 <= 40 * 1024, "the tiles' LDS must leave room in a block's static 48 KiB");
  unsigned short* const sm = tfc_attn_smem<HD, TERMS>();
  __shared__ int kbad[BK], vbad[HDP], tbad[2];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
  const int nq = min(QG, s1 - r0), kcol = kh * HD, qcol = h * HD;
  const int kend = tfc_bound<MUT>(s1 - s0);
  const int ldqm = tfc_stride<MUT>(ldq);
  // scores are kept in log2 units, s·scale·log2(e), so that p = 2^(s - m) is one exp2f
  const float sc = tfc_scale<MUT>(scale) * 1.44269504f;
  const bool active = warp * 16 < nq;  // warp-uniform: a warp with no rows only stages tiles
  const int rw = warp * 16 + g;        // the lane's rows: rw and rw + 8 of the group

  for (int e = tid; e < BK; e += 256) kbad[e] = -1;
  for (int e = tid; e < HDP; e += 256) vbad[e] = -1;
  if (tid < 2) tbad[tid] = -1;

  // Q fragments: register i of step ks holds row rw + 8(i%2), columns 16ks + 2t + 8(i/2) and +1
  unsigned qf[KS][3][4];
  int qbad[2] = {0, 0};
#pragma unroll
  for (int ks = 0; ks < KS; ++ks)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = rw + 8 * (i % 2), d = 16 * ks + 2 * t + 8 * (i / 2);
      unsigned hh[2], ll[2], l2[2];
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const float x = active && r < nq && d + c < HD ? tfc_ld(Q + (size_t)(r0 + r) * ldqm + qcol + d + c) : 0.f;
        qbad[i % 2] |= !tfc_finite(x);
        tfc_split3(x, hh[c], ll[c], l2[c]);
      }
      qf[ks][0][i] = tfc_pack_bf16(hh[0], hh[1]);
      qf[ks][1][i] = tfc_pack_bf16(ll[0], ll[1]);
      qf[ks][2][i] = tfc_pack_bf16(l2[0], l2[1]);
    }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    qbad[i] |= __shfl_xor_sync(0xffffffffu, qbad[i], 1);
    qbad[i] |= __shfl_xor_sync(0xffffffffu, qbad[i], 2);
  }

  float o[ND][4], m[2] = {TFC_NEG_INF, TFC_NEG_INF}, l[2] = {0.f, 0.f};
#pragma unroll
  for (int n = 0; n < ND; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[n][e] = 0.f;
  // shared byte addresses of this lane's ldmatrix rows (x2: lanes 0..7 give matrix 0, 8..15
  // matrix 1): K key lane%8 and columns 8(lane/8%2).. (k = head dims), V key lane%16 (k = keys)
  const unsigned ka = tfc_smem_addr(sm) + 2 * ((lane % 8) * LDK + lane / 8 % 2 * 8);
  const unsigned va = tfc_smem_addr(sm) + 2 * (VP + (lane % 16) * LDK);
  __syncthreads();  // the flags are reset

  // a tile's K and V pass through registers four head dims at a time: unit u = tid + 256i is key
  // u / (HDP/4), dims 4(u % (HDP/4)).., one 16-byte load each where the rows allow. In F32
  // precision, where head_dim is at most 96 and the loads fit TFC_ATTN_AHEAD registers, the next
  // tile's loads are in flight while the tensor cores work; with one term (64-key tiles) holding
  // them costs more than it hides (measured on sm_90: 3.8 ms a launch without, 5.5 with).
  constexpr int UR = HDP / 4, FU = (BK * UR + 255) / 256;
  constexpr bool ahead = TERMS == 3 && HDP <= 96 && 8 * FU <= TFC_ATTN_AHEAD;
  const bool vec = HD % 4 == 0 && ldk % 4 == 0 && ldv % 4 == 0 && ((reinterpret_cast<size_t>(K) | reinterpret_cast<size_t>(V)) & 15) == 0;
  float4 kr[FU], vr[FU];
  auto load = [&](int t0) {
    if (sizeof(TK) == 4 && sizeof(TV) == 4 && HDP == HD && vec && t0 + BK <= kend) {
      // a whole tile of unpadded F32 rows: one 16-byte load a unit, nothing to check
      const TK* const kb = K + (size_t)(s0 + t0) * ldk + kcol;
      const TV* const vb = V + (size_t)(s0 + t0) * ldv + kcol;
#pragma unroll
      for (int i = 0; i < FU; ++i) {
        const int u = tid + 256 * i, j = u / UR, d = 4 * (u % UR);
        if (BK * UR % 256 != 0 && u >= BK * UR) continue;
        kr[i] = *reinterpret_cast<const float4*>(kb + (size_t)j * ldk + d);
        vr[i] = *reinterpret_cast<const float4*>(vb + (size_t)j * ldv + d);
      }
      return;
    }
#pragma unroll
    for (int i = 0; i < FU; ++i) {
      const int u = tid + 256 * i, j = u / UR, d = 4 * (u % UR);
      kr[i] = vr[i] = make_float4(0.f, 0.f, 0.f, 0.f);
      if (u < BK * UR && t0 + j < kend && d < HD) {
        const size_t row = (size_t)(s0 + t0 + j);
        kr[i] = tfc_ld4(K + row * ldk + kcol + d, HD - d, vec);
        vr[i] = tfc_ld4(V + row * ldv + kcol + d, HD - d, vec);
      }
    }
  };
  if (ahead) load(0);
#pragma unroll 1
  for (int t0 = 0; t0 < kend; t0 += BK) {
    const int nt = min(BK, kend - t0);
    if (!ahead) load(t0);
    tfc_fill_skew<MUT>();
#pragma unroll
    for (int i = 0; i < FU; ++i) {
      const int u = tid + 256 * i, j = u / UR, d = 4 * (u % UR);
      if (u >= BK * UR) continue;
      float kx[4] = {kr[i].x, kr[i].y, kr[i].z, kr[i].w}, vx[4] = {vr[i].x, vr[i].y, vr[i].z, vr[i].w};
      if (!tfc_finite4(kr[i])) kbad[j] = tbad[0] = t0;
      if (!tfc_finite4(vr[i]))
#pragma unroll
        for (int c = 0; c < 4; ++c)
          if (!tfc_finite(vx[c])) {
            vbad[d + c] = tbad[1] = t0;
            vx[c] = 0.f;
          }
      unsigned short* const kt = sm + j * LDK + d;
      if (TERMS == 1) {  // BF16-exact: the high halves are the values
        *reinterpret_cast<uint2*>(kt) = make_uint2(tfc_hi2(kx[0], kx[1]), tfc_hi2(kx[2], kx[3]));
        *reinterpret_cast<uint2*>(kt + VP) = make_uint2(tfc_hi2(vx[0], vx[1]), tfc_hi2(vx[2], vx[3]));
      } else {
        unsigned kh[4], kl[4], k2[4], vh[4], vl[4], v2[4];
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          tfc_split3(kx[c], kh[c], kl[c], k2[c]);
          tfc_split3(vx[c], vh[c], vl[c], v2[c]);
        }
        *reinterpret_cast<uint2*>(kt) = make_uint2(tfc_pack_bf16(kh[0], kh[1]), tfc_pack_bf16(kh[2], kh[3]));
        *reinterpret_cast<uint2*>(kt + VP) = make_uint2(tfc_pack_bf16(vh[0], vh[1]), tfc_pack_bf16(vh[2], vh[3]));
        *reinterpret_cast<uint2*>(kt + PL) = make_uint2(tfc_pack_bf16(kl[0], kl[1]), tfc_pack_bf16(kl[2], kl[3]));
        *reinterpret_cast<uint2*>(kt + 2 * PL) = make_uint2(tfc_pack_bf16(k2[0], k2[1]), tfc_pack_bf16(k2[2], k2[3]));
        *reinterpret_cast<uint2*>(kt + 4 * PL) = make_uint2(tfc_pack_bf16(vl[0], vl[1]), tfc_pack_bf16(vl[2], vl[3]));
        *reinterpret_cast<uint2*>(kt + 5 * PL) = make_uint2(tfc_pack_bf16(v2[0], v2[1]), tfc_pack_bf16(v2[2], v2[3]));
      }
    }
    tfc_fill_barrier<MUT>();
    if (ahead && t0 + BK < kend) load(t0 + BK);
    if (active) {
      // scores of rows rw, rw + 8 against keys 8n + 2t, +1: element e is row rw + 8(e/2), key 8n + 2t + e%2
      float s[NK][4];
      {
        float sb[NK][4], ss[NK][4];
#pragma unroll
        for (int n = 0; n < NK; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) sb[n][e] = ss[n][e] = 0.f;
#pragma unroll
        for (int ks = 0; ks < KS; ++ks)
#pragma unroll
          for (int n = 0; n < NK; ++n) {
            unsigned bh[2], bl[2] = {0, 0}, b2[2] = {0, 0};
            const unsigned a = ka + 2 * (n * 8 * LDK + ks * 16);
            tfc_ldsm_x2(bh, a);
            if (TERMS == 3) {  // one term reads the hi plane alone
              tfc_ldsm_x2(bl, a + 2 * PL);
              tfc_ldsm_x2(b2, a + 4 * PL);
            }
            tfc_mma_split6<TERMS>(sb[n], ss[n], qf[ks], bh, bl, b2);
          }
#pragma unroll
        for (int n = 0; n < NK; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[n][e] = (TERMS == 1 ? sb[n][e] : sb[n][e] + ss[n][e]) * sc;
        if (nt < BK)  // the span's last tile: keys past it are -Inf
#pragma unroll
          for (int n = 0; n < NK; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e)
              if (8 * n + 2 * t + e % 2 >= nt) s[n][e] = TFC_NEG_INF;
        const bool kany = tbad[0] == t0;
        if (qbad[0] | qbad[1] | kany)  // a non-finite Q or K row: its scores as plain F32 dot products
#pragma unroll
          for (int n = 0; n < NK; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int j = 8 * n + 2 * t + e % 2, r = rw + 8 * (e / 2);
              if (j >= nt || !(qbad[e / 2] || (kany && kbad[j] == t0))) continue;
              float acc = 0.f;
              if (r < nq)
                for (int d = 0; d < HD; ++d)
                  acc = fmaf(tfc_ld(Q + (size_t)(r0 + r) * ldqm + qcol + d), tfc_ld(K + (size_t)(s0 + t0 + j) * ldk + kcol + d), acc);
              s[n][e] = acc * sc;
            }
      }
      // online softmax: the row's max over the quad's lanes, then p = exp(s - m) in place
      float alpha[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        float mx = TFC_NEG_INF;
#pragma unroll
        for (int n = 0; n < NK; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * i], s[n][2 * i + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float mn = fmaxf(m[i], mx), mu = mn == TFC_NEG_INF ? 0.f : mn;  // all -Inf so far: p = 0
        alpha[i] = exp2f(m[i] - mu);
        m[i] = mn;
        float sum = 0.f;
#pragma unroll
        for (int n = 0; n < NK; ++n) {
          const float p0 = exp2f(s[n][2 * i] - mu), p1 = exp2f(s[n][2 * i + 1] - mu);
          sum += p0 + p1;
          // P·V takes p rounded in BF16 precision (one term: rounded as it is packed); the sum is F32
          s[n][2 * i] = TERMS == 1 ? p0 : tfc_rnd(p0);
          s[n][2 * i + 1] = TERMS == 1 ? p1 : tfc_rnd(p1);
        }
        l[i] = l[i] * alpha[i] + sum;
      }
      // P as A fragments: step kk is key tiles 2kk (registers 0, 1) and 2kk + 1 (2, 3)
      unsigned pf[KK][3][4];
#pragma unroll
      for (int kk = 0; kk < KK; ++kk)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          if (TERMS == 1) {
            pf[kk][0][i] = tfc_rn2(s[2 * kk + i / 2][2 * (i % 2)], s[2 * kk + i / 2][2 * (i % 2) + 1]);
            continue;
          }
          unsigned hh[2], ll[2], l2[2];
          tfc_split3(s[2 * kk + i / 2][2 * (i % 2)], hh[0], ll[0], l2[0]);
          tfc_split3(s[2 * kk + i / 2][2 * (i % 2) + 1], hh[1], ll[1], l2[1]);
          pf[kk][0][i] = tfc_pack_bf16(hh[0], hh[1]);
          pf[kk][1][i] = tfc_pack_bf16(ll[0], ll[1]);
          pf[kk][2][i] = tfc_pack_bf16(l2[0], l2[1]);
        }
#pragma unroll
      for (int n = 0; n < ND; ++n) {
        float cb[4] = {0.f, 0.f, 0.f, 0.f}, cs[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int kk = 0; kk < KK; ++kk) {
          unsigned bh[2], bl[2] = {0, 0}, b2[2] = {0, 0};
          const unsigned a = va + 2 * (kk * 16 * LDK + n * 8);
          tfc_ldsm_x2_trans(bh, a);
          if (TERMS == 3) {
            tfc_ldsm_x2_trans(bl, a + 2 * PL);
            tfc_ldsm_x2_trans(b2, a + 4 * PL);
          }
          tfc_mma_split6<TERMS>(cb, cs, pf[kk], bh, bl, b2);
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) o[n][e] = o[n][e] * alpha[e / 2] + (TERMS == 1 ? cb[e] : cb[e] + cs[e]);
      }
      if (tbad[1] == t0) {  // V elements that are not finite: p·v apart
        // dim d = 8n + dd adds to element dd%2 (and 2 + dd%2) of o[n] in lane t = dd/2 of each
        // row's quad: n unrolled and the element picked by branches, so that o is never indexed
        // at run time (a run-time index put o in local memory, about 22 spill loads and stores
        // a tile)
#pragma unroll
        for (int n = 0; n < ND; ++n)
          for (int dd = 0; dd < 8; ++dd) {
            const int d = 8 * n + dd;
            if (d >= HD || vbad[d] != t0) continue;
            float a0 = 0.f, a1 = 0.f;
#pragma unroll
            for (int j = 0; j < BK; ++j) {
              const int src = (lane & ~3) | (j % 8) / 2;
              const float p0 = tfc_rnd(__shfl_sync(0xffffffffu, s[j / 8][j % 2], src));
              const float p1 = tfc_rnd(__shfl_sync(0xffffffffu, s[j / 8][2 + j % 2], src));
              if (j < nt) {
                const float v = tfc_ld(V + (size_t)(s0 + t0 + j) * ldv + kcol + d);
                if (!tfc_finite(v)) {
                  a0 += p0 * v;
                  a1 += p1 * v;
                }
              }
            }
            if (t == dd / 2) {
              if (dd % 2 == 0) {
                o[n][0] += a0;
                o[n][2] += a1;
              } else {
                o[n][1] += a0;
                o[n][3] += a1;
              }
            }
          }
      }
    }
    __syncthreads();  // the next fill overwrites the tile
  }
  if (!active) return;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
  }
#pragma unroll
  for (int n = 0; n < ND; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = rw + 8 * (e / 2), d = 8 * n + 2 * t + e % 2;
      if (r < nq && d < HD) tfc_st(Y + (size_t)(r0 + r) * ldy + qcol + d, tfc_rnd(o[n][e] / l[e / 2]));
    }
}
#endif

#if TFC_CUDA
// ---------------------------------------------------------------------------------------------
// Cached attention on tensor cores (CUDA, BF16 precision, head_dim ≤ 128): tfc_attention_paged's
// rows, the same bits for a row whether it comes in a prompt chunk, a decode round, a draft
// verification or a resumed prefix, by construction.
//
// A row's bits: its keys 0..pos are cut into chunks of TFC_PAGED_CHUNK (64) keys fixed by position
// (chunk c is keys [64c, 64c + 64)). For each chunk, from scratch, on one mma row (mma.sync
// m16n8k16, BF16 operands, F32 accumulation): the scores s = (q·k)·scale (head_dim steps in
// order; keys past the row's position -Inf), the chunk's max m_c, p = exp(s - m_c), l_c = Σp (each
// of the row's four lanes adds its sixteen keys 8j + 2t, 8j + 2t + 1 for j = 0..7 in order, then an
// xor butterfly over the four) and o_c = P·V with p rounded to BF16 (the chunk's four 16-key steps
// in order); (m_c, l_c, o_c) is folded into the row's running (m, l, o) from (-Inf, 0, 0) by
// tfc_attn_fold, chunk after chunk. The output is o / l. The mma computes each of its rows from
// that row alone, so no other row, head or launch touches a row's bits.
//
// Layout: a block takes HB query heads of one KV head (HB the largest divisor of QG not above its
// warps) and a group of up to 16·SG rows of one sequence at consecutive positions (SG = warps /
// HB): warp w takes head w % HB and rows 16(w / HB).. of the group, a row an mma row, and keeps its
// Q fragments in registers. A row starts a group unless it continues row r-1's sequence at the
// next position and that position is not a multiple of 16·SG. Block (r, h) takes the group that
// starts at row r and heads h..h+HB-1 where HB divides h (with a cluster, the cluster of query
// head h); the other blocks exit, five in six of them where a KV head serves 6 query heads (the
// grid is the CUDA-core kernel's, a block a row and query head). The block stages
// each chunk's K and V once for all its warps (in LDS as BF16, the next chunk's loads in flight
// in registers while the tensor cores work). Launches of many rows walk the chunks in one block,
// folding each as it comes; launches of at most 8 rows (decode rounds) spread them over a cluster
// of CL blocks, block c of a round taking chunk base + c, and rank 0 folds the round's partials in
// chunk order from the cluster's LDS.
//
// Non-finite V elements are staged as zero and each warp adds p·v apart for them (p rounded, for
// its rows whose position reaches the key), so a key a row does not attend to cannot turn that
// row's output into NaN through p = 0.
constexpr int TFC_PAGED_CHUNK = 64;
// TFC_PAGED_MMA (tfc_attention.h) turns this kernel on; it is off by default.
// TFC_PAGED_AHEAD is how the next chunk's K and V come while the tensor cores work on this one:
// 0 not at all (loaded when staged), 1 into registers (as BF16), 2 into L2 (prefetch.global.L2,
// the cache rows looked up a chunk ahead), loaded from there when staged.
#ifndef TFC_PAGED_AHEAD
#define TFC_PAGED_AHEAD 2
#endif

// tfc_cache_row is the cache row of a sequence's key in its pages of PS keys (-1 at or past kend).
template <int PS>
__device__ __forceinline__ long long tfc_cache_row(const int* pages, int key, int kend) {
  return key < kend ? (long long)pages[key / PS] * PS + key % PS : -1;
}

// tfc_prefetch_row asks for the 128-byte lines first, first + 4, ... of a cache row (HD elements)
// to be brought into L2.
template <int HD, typename TC>
__device__ __forceinline__ void tfc_prefetch_row(const TC* base, int ld, long long row, int first) {
  for (int l = 128 * first; l < HD * (int)sizeof(TC); l += 512) tfc_prefetch_l2(reinterpret_cast<const char*>(base + (size_t)row * ld) + l);
}

// tfc_attn_fold folds a chunk's (mc, lc) into a row's running (mt, lt) and gives the weights a
// of the running output and b of the chunk's: o = o·a + o_c·b.
__device__ __forceinline__ void tfc_attn_fold(float& mt, float& lt, float mc, float lc, float& a, float& b) {
  const float mn = fmaxf(mt, mc), mu = mn == TFC_NEG_INF ? 0.f : mn;
  a = expf(__fadd_rn(mt, -mu));
  b = expf(__fadd_rn(mc, -mu));
  lt = fmaf(lc, b, __fmul_rn(lt, a));
  mt = mn;
}

// tfc_attn_fold_dims folds a chunk's partial (row max mc, sum lc, P·V po of the lane's row, dim
// block nb at po[8nb..]) into the lane's running totals (mt, lt, o): elements 0 and 1 of dim
// blocks first, first + step, ... in o[0], o[1], ...
template <int NO, int ND>
__device__ __forceinline__ void tfc_attn_fold_dims(float& mt, float& lt, float (&o)[NO][4], float mc, float lc, const float* po, int first,
                                                   int step) {
  float a, b;
  tfc_attn_fold(mt, lt, mc, lc, a, b);
#pragma unroll
  for (int j = 0; j < NO; ++j) {
    const int nb = first + step * j;
#pragma unroll
    for (int e = 0; e < 2; ++e)
      if (nb < ND) o[j][e] = fmaf(po[8 * nb + e], b, __fmul_rn(o[j][e], a));
  }
}

template <int HD, int QG, int THREADS>
struct tfc_paged_mma_shape {
  static constexpr int hdp = (HD + 15) / 16 * 16;  // head_dim padded to the mma's k
  static constexpr int ldk = hdp + 8;              // a staged K or V row (BF16 elements)
  static constexpr int ks = hdp / 16, nd = hdp / 8;
  static constexpr int nw = THREADS / 32;                          // warps
  static constexpr int hb = tfc_paged_heads<QG, THREADS>::value;   // query heads a block
  static constexpr int sg = nw / hb;                               // 16-row subgroups a block
};

// tfc_paged_scores computes a warp's chunk from the staged K at ka: the scores of its rows g, g + 8
// (element e of key block j: row g + 8(e/2), key 8j + 2t + e%2), then p rounded to BF16 as A
// fragments pf (step kk: register i row g + 8(i%2), keys 16kk + 2t + 8(i/2), +1), and each row's
// chunk max mc and sum lc.
template <int ROWS = 2>
__device__ __forceinline__ void tfc_paged_softmax(float (&s)[TFC_PAGED_CHUNK / 8][4], const int (&nk)[2], int c0, float sc,
                                                  unsigned (&pf)[TFC_PAGED_CHUNK / 16][4], float (&mc)[2], float (&lc)[2]);
// tfc_paged_key_block is key block j of a warp's chunk of scores from the staged K at ka (element
// e: row g + 8(e/2), key 8j + 2t + e%2), its k steps in order from zero.
template <int KS>
__device__ __forceinline__ void tfc_paged_key_block(const unsigned (&qf)[KS][4], unsigned ka, int ldk, int j, float (&s)[4]) {
#pragma unroll
  for (int e = 0; e < 4; ++e) s[e] = 0.f;
#pragma unroll
  for (int ks = 0; ks + 1 < KS; ks += 2) {  // two steps a load
    unsigned b[4];
    tfc_ldsm_x4(b, ka + 2 * (j * 8 * ldk + ks * 16));
    tfc_mma_bf16(s, qf[ks], {b[0], b[1]});
    tfc_mma_bf16(s, qf[ks + 1], {b[2], b[3]});
  }
  if constexpr (KS % 2 == 1) {
    unsigned b[2];
    tfc_ldsm_x2(b, ka + 2 * (j * 8 * ldk + (KS - 1) * 16));
    tfc_mma_bf16(s, qf[KS - 1], b);
  }
}

template <int KS>
__device__ __forceinline__ void tfc_paged_scores(const unsigned (&qf)[KS][4], unsigned ka, int ldk, const int (&nk)[2], int c0, float sc,
                                                 unsigned (&pf)[TFC_PAGED_CHUNK / 16][4], float (&mc)[2], float (&lc)[2]) {
  float s[TFC_PAGED_CHUNK / 8][4];
#pragma unroll
  for (int j = 0; j < TFC_PAGED_CHUNK / 8; ++j) tfc_paged_key_block<KS>(qf, ka, ldk, j, s[j]);
  tfc_paged_softmax(s, nk, c0, sc, pf, mc, lc);
}

// tfc_paged_softmax turns a warp's chunk of products s (q·k, element e of key block j: row g +
// 8(e/2), key 8j + 2t + e%2) into p rounded to BF16 as A fragments pf and each row's max mc and
// sum lc (see tfc_paged_scores). With ROWS 1 (a lone row's heads, rows g alone) rows g + 8 are
// left out: their p are zeros, which adds nothing to rows g.
template <int ROWS>
__device__ __forceinline__ void tfc_paged_softmax(float (&s)[TFC_PAGED_CHUNK / 8][4], const int (&nk)[2], int c0, float sc,
                                                  unsigned (&pf)[TFC_PAGED_CHUNK / 16][4], float (&mc)[2], float (&lc)[2]) {
  constexpr int CH = TFC_PAGED_CHUNK, NJ = CH / 8;
  constexpr unsigned all = 0xffffffffu;
  const int t = threadIdx.x % 4;
  if constexpr (ROWS == 1) {
    mc[1] = TFC_NEG_INF, lc[1] = 0.f;
#pragma unroll
    for (int j = 0; j < NJ; ++j) s[j][2] = s[j][3] = 0.f;
  }
#pragma unroll
  for (int i = 0; i < ROWS; ++i) {
    float mx = TFC_NEG_INF;
#pragma unroll
    for (int j = 0; j < NJ; ++j)
#pragma unroll
      for (int e = 2 * i; e < 2 * i + 2; ++e) {
        s[j][e] = c0 + 8 * j + 2 * t + e % 2 < nk[i] ? __fmul_rn(s[j][e], sc) : TFC_NEG_INF;
        mx = fmaxf(mx, s[j][e]);
      }
    mx = fmaxf(mx, __shfl_xor_sync(all, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(all, mx, 2));
    const float mu = mx == TFC_NEG_INF ? 0.f : mx;
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < NJ; ++j)
#pragma unroll
      for (int e = 2 * i; e < 2 * i + 2; ++e) {
        s[j][e] = expf(__fadd_rn(s[j][e], -mu));
        sum = j == 0 && e == 2 * i ? s[j][e] : __fadd_rn(sum, s[j][e]);
      }
    sum = __fadd_rn(sum, __shfl_xor_sync(all, sum, 1));
    sum = __fadd_rn(sum, __shfl_xor_sync(all, sum, 2));
    mc[i] = mx;
    lc[i] = sum;
  }
#pragma unroll
  for (int kk = 0; kk < CH / 16; ++kk)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      pf[kk][i] = tfc_rn2(s[2 * kk + i / 2][2 * (i % 2)], s[2 * kk + i / 2][2 * (i % 2) + 1]);  // p in [0, 1], or NaN
}

template <int HD, int PS, typename TC>
__device__ __forceinline__ void tfc_paged_apart(const unsigned (&pf)[TFC_PAGED_CHUNK / 16][4], int nb, const int* pages, const TC* vb,
                                                int ldvc, int c0, int kend, const int (&nk)[2], float (&acc)[4]);

// tfc_paged_pv is dim block nb of a warp's chunk P·V (element e: row g + 8(e/2), dim 8nb + 2t +
// e%2) from the staged V at va; where the chunk holds V elements that are not finite (bad), their
// p·v is added apart, key by key, for the rows whose key count nk passes the key.
template <int HD, int PS, typename TC>
__device__ __forceinline__ void tfc_paged_pv(const unsigned (&pf)[TFC_PAGED_CHUNK / 16][4], unsigned va, int ldk, int nb, bool bad,
                                             const int* pages, const TC* vb, int ldvc, int c0, int kend, const int (&nk)[2],
                                             float (&acc)[4]) {
  constexpr int CH = TFC_PAGED_CHUNK;
#pragma unroll
  for (int e = 0; e < 4; ++e) acc[e] = 0.f;
#pragma unroll
  for (int kk = 0; kk < CH / 16; kk += 2) {  // two steps a load
    unsigned vf[4];
    tfc_ldsm_x4_trans(vf, va + 2 * (kk * 16 * ldk + nb * 8));
    tfc_mma_bf16(acc, pf[kk], {vf[0], vf[1]});
    tfc_mma_bf16(acc, pf[kk + 1], {vf[2], vf[3]});
  }
  if (bad) tfc_paged_apart<HD, PS>(pf, nb, pages, vb, ldvc, c0, kend, nk, acc);
}

// tfc_paged_apart adds p·v to dim block nb of a chunk's P·V (acc) for its V elements that are not
// finite (staged as zero), key by key, for the rows whose key count nk passes the key.
template <int HD, int PS, typename TC>
__device__ __forceinline__ void tfc_paged_apart(const unsigned (&pf)[TFC_PAGED_CHUNK / 16][4], int nb, const int* pages, const TC* vb,
                                                int ldvc, int c0, int kend, const int (&nk)[2], float (&acc)[4]) {
  constexpr int CH = TFC_PAGED_CHUNK;
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll 1
  for (int k = 0; k < CH && c0 + k < kend; ++k) {
    // p of key k for rows g and g + 8: register (k % 16) / 8 * 2 + i of step k / 16, lane 4g + (k % 8) / 2
    float p[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      unsigned w = 0;
#pragma unroll
      for (int kk = 0; kk < CH / 16; ++kk)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf)
          if (kk == k / 16 && hf == k % 16 / 8) w = pf[kk][2 * hf + i];
      w = __shfl_sync(0xffffffffu, w, 4 * g + k % 8 / 2);
      p[i] = __uint_as_float((k % 2 ? w >> 16 : w & 0xffffu) << 16);
    }
    const size_t row = (size_t)pages[(c0 + k) / PS] * PS + (c0 + k) % PS;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int d = 8 * nb + 2 * t + e % 2;
      if (d >= HD || c0 + k >= nk[e / 2]) continue;
      const float v = tfc_ld(vb + row * ldvc + d);
      if (!tfc_finite(v)) acc[e] += p[e / 2] * v;
    }
  }
}

// tfc_paged_stage passes a chunk's K and V through registers as BF16: thread tid takes key tid / 4
// of the chunk, dims 4(tid % 4) + 16i .. +3 of step i (four threads a key read 64 contiguous bytes
// a step), V elements that are not finite as zero (bad says the thread's V held one).
template <int HD, int KS, int PS, typename TC>
struct tfc_paged_stage {
  uint2 k[KS], v[KS];
  bool bad;
  // key_row is the cache row of the thread's key of the chunk at key c0 (-1 past kend).
  __device__ static long long key_row(const int* pages, int c0, int kend) { return tfc_cache_row<PS>(pages, c0 + threadIdx.x / 4, kend); }
  // load takes the key of cache row row0 (-1: past the keys, zeros); vec: F32 rows in float4.
  __device__ __forceinline__ void load(const TC* kb, int ldkc, const TC* vb, int ldvc, bool vec, long long row0) {
    const bool live = row0 >= 0;
    const size_t row = live ? (size_t)row0 : 0;
    const int dk = 4 * (threadIdx.x % 4);
    bad = false;
#pragma unroll
    for (int i = 0; i < KS; ++i) {
      const int d = dk + 16 * i;
      float4 kx = make_float4(0.f, 0.f, 0.f, 0.f), vx = kx;
      if (live && d < HD) {
        const TC* kp = kb + row * ldkc + d;
        const TC* vp = vb + row * ldvc + d;
        if (sizeof(TC) == 4 && HD % 4 == 0 && vec) {
          kx = *reinterpret_cast<const float4*>(kp);
          vx = *reinterpret_cast<const float4*>(vp);
        } else {
          kx = make_float4(tfc_ld(kp), d + 1 < HD ? tfc_ld(kp + 1) : 0.f, d + 2 < HD ? tfc_ld(kp + 2) : 0.f, d + 3 < HD ? tfc_ld(kp + 3) : 0.f);
          vx = make_float4(tfc_ld(vp), d + 1 < HD ? tfc_ld(vp + 1) : 0.f, d + 2 < HD ? tfc_ld(vp + 2) : 0.f, d + 3 < HD ? tfc_ld(vp + 3) : 0.f);
        }
      }
      // V's elements that are not finite as zero, then both as their high halves (tfc_hi2), a NaN
      // of K kept a NaN (the quiet bit, as tfc_bf16_hi): a few instructions an element, no branch
      const bool f0 = fabsf(vx.x) <= 3.40282347e38f, f1 = fabsf(vx.y) <= 3.40282347e38f;
      const bool f2 = fabsf(vx.z) <= 3.40282347e38f, f3 = fabsf(vx.w) <= 3.40282347e38f;
      bad |= !(f0 && f1 && f2 && f3);
      v[i] = make_uint2(tfc_hi2(f0 ? vx.x : 0.f, f1 ? vx.y : 0.f), tfc_hi2(f2 ? vx.z : 0.f, f3 ? vx.w : 0.f));
      k[i] = make_uint2(tfc_bf16_hi2(kx.x, kx.y), tfc_bf16_hi2(kx.z, kx.w));
    }
  }
  // store puts the thread's part into the K and V tiles (rows of ldk elements).
  __device__ __forceinline__ void store(unsigned short* kt, unsigned short* vt, int ldk) const {
    const int at0 = threadIdx.x / 4 * ldk + 4 * (threadIdx.x % 4);
#pragma unroll
    for (int i = 0; i < KS; ++i) {
      *reinterpret_cast<uint2*>(kt + at0 + 16 * i) = k[i];
      *reinterpret_cast<uint2*>(vt + at0 + 16 * i) = v[i];
    }
  }
};

// TFC_PAGED_SLOTS is how many chunks a block of a lone row's cluster takes a round (a partial's LDS
// slot each).
#ifndef TFC_PAGED_SLOTS
#define TFC_PAGED_SLOTS 2
#endif

// tfc_paged_lds is the LDS of tfc_attention_paged_mma: the staged chunk's K and V, and for a lone
// row a round's partials (row max pm, sum pl and P·V po of each slot's 8 mma rows) and the
// chunk's scores as the warps leave them (ps).
template <int HDP, int NW>
struct tfc_paged_lds {
  static constexpr int ldk = HDP + 8, ch = TFC_PAGED_CHUNK, slots = TFC_PAGED_SLOTS;
  unsigned short kv[2 * ch * ldk];  // K, then V
  float po[slots * 8 * HDP];
  float pm[NW * 8], pl[NW * 8];  // a lone row's slots, or the staged walk's partials in a cluster (one a warp)
  float2 ps[NW * 32];
  static_assert(slots <= NW, "a lone row's slots fit pm and pl");
  int vbad;  // c + 1 when chunk c holds a V element that is not finite
  __device__ unsigned short* kt() { return kv; }
  __device__ unsigned short* vt() { return kv + ch * ldk; }
  // ka and va are the lane's ldmatrix addresses: K rows as B (k = dims), V rows as B transposed
  // (k = keys), two steps a load
  __device__ unsigned ka() { return tfc_smem_addr(kt()) + 2 * ((threadIdx.x % 8) * ldk + threadIdx.x % 32 / 8 * 8); }
  __device__ unsigned va() { return tfc_smem_addr(vt()) + 2 * (threadIdx.x % 32 * ldk); }
};

// tfc_paged_packed takes a group of one row (a decode row) and HB query heads: mma row i is head
// h0 + i. Block c of a cluster of CL (c = 0 without one) takes chunks base + CL·i + c, i < S, of
// each round of CL·S chunks, staged in LDS as the staged walk stages them (the next one's K and V
// in registers meanwhile). Warp w scores key block w of the chunk for all the heads and leaves it
// in LDS; every warp reads the chunk's scores back and takes its softmax (each the same bits),
// then P·V of dim blocks w, w + NW, ... into the chunk's partial slot. The round's partials are
// folded in chunk order from the cluster's LDS, warp w of block c keeping dim blocks NW·c + w,
// + CL·NW, ... Each score, sum and product is the staged walk's: the same bits as the row in a
// prompt chunk.
template <int HD, int HB, int PS, int THREADS, int CL, int MUT, typename TQ, typename TC, typename TY>
__device__ __forceinline__ void tfc_paged_packed(const TQ* Q, int ldqm, const TC* kb, int ldkc, const TC* vb, int ldvc, bool vec, TY* Y,
                                                 int ldy, const int* pages, int r, int h0, int kend, float sc,
                                                 tfc_paged_lds<(HD + 15) / 16 * 16, THREADS / 32>& sm) {
  constexpr int CH = TFC_PAGED_CHUNK, NJ = CH / 8, NW = THREADS / 32, S = TFC_PAGED_SLOTS, RW = CL * S;  // RW: chunks a round
  constexpr int HDP = (HD + 15) / 16 * 16, LDK = HDP + 8, KS = HDP / 16, ND = HDP / 8, NO = (ND + CL * NW - 1) / (CL * NW);
  static_assert(HB <= 8, "a block's heads are mma rows 0..7");
  static_assert(NW == NJ, "warp w scores key block w");
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
  const int nk[2] = {g < HB ? kend : 0, 0};  // key counts of the lane's mma rows g and g + 8
  unsigned qf[KS][4];  // register i of step ks: head h0 + g + 8(i%2), dims 16ks + 2t + 8(i/2) and +1
#pragma unroll
  for (int ks = 0; ks < KS; ++ks)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = g + 8 * (i % 2), d = 16 * ks + 2 * t + 8 * (i / 2);
      const TQ* q = Q + (size_t)r * ldqm + (h0 + (row < HB ? row : 0)) * HD + d;
      const float x0 = row < HB && d < HD ? tfc_ld(q) : 0.f, x1 = row < HB && d + 1 < HD ? tfc_ld(q + 1) : 0.f;
      qf[ks][i] = tfc_pack_bf16(tfc_bf16_hi(x0), tfc_bf16_hi(x1));
    }
  const unsigned ka = sm.ka(), va = sm.va();
  float mt = TFC_NEG_INF, lt = 0.f, o[NO][4];
#pragma unroll
  for (int j = 0; j < NO; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[j][e] = 0.f;
  const int chunks = (kend + CH - 1) / CH;
  const int rank = CL > 1 ? tfc_cluster_rank() : 0, slot = NW * rank + warp;  // the warp's dim blocks
  tfc_paged_stage<HD, KS, PS, TC> st;
  if (tid == 0) sm.vbad = 0;
  if (rank < chunks) st.load(kb, ldkc, vb, ldvc, vec, st.key_row(pages, rank * CH, kend));
#pragma unroll 1
  for (int base = 0; base < chunks; base += RW) {
#pragma unroll 1
    for (int i = 0; i < S; ++i) {
      const int c = base + CL * i + rank, c0 = c * CH;  // the block's chunk i of the round
      if (c >= chunks) break;
      __syncthreads();  // every warp is done with the last chunk's tiles and scores (and vbad is reset)
      tfc_fill_skew<MUT>();
      st.store(sm.kt(), sm.vt(), LDK);  // warp w stages keys 8w.., the key block it scores
      if (st.bad) sm.vbad = c + 1;
      if (c + CL < chunks) st.load(kb, ldkc, vb, ldvc, vec, st.key_row(pages, c0 + CL * CH, kend));  // the next chunk, while this one computes
      __syncwarp();
      float sw[4];  // the warp's key block
      tfc_paged_key_block<KS>(qf, ka, LDK, warp, sw);
      sm.ps[warp * 32 + lane] = make_float2(sw[0], sw[1]);  // rows g + 8 are no head's
      tfc_fill_barrier<MUT>();  // the chunk's V, its scores and vbad are in LDS
      const bool bad = sm.vbad == c + 1;
      float s[NJ][4];  // rows g + 8 (elements 2, 3) are set by the softmax of one row
#pragma unroll
      for (int j = 0; j < NJ; ++j) {
        const float2 x = sm.ps[j * 32 + lane];
        s[j][0] = x.x, s[j][1] = x.y;
      }
      unsigned pf[CH / 16][4];
      float mc[2], lc[2];
      tfc_paged_softmax<1>(s, nk, c0, sc, pf, mc, lc);
      if (warp == 0 && t == 0 && g < HB) sm.pm[i * 8 + g] = mc[0], sm.pl[i * 8 + g] = lc[0];
#pragma unroll
      for (int nb = warp; nb < ND; nb += NW) {
        float acc[4];
        tfc_paged_pv<HD, PS>(pf, va, LDK, nb, bad, pages, vb, ldvc, c0, kend, nk, acc);
        if (g < HB)
#pragma unroll
          for (int e = 0; e < 2; ++e) sm.po[(i * 8 + g) * HDP + 8 * nb + 2 * t + e] = acc[e];
      }
    }
    __syncthreads();  // the block's partials of the round are in LDS
    if constexpr (CL > 1) tfc_cluster_sync();
    if (g < HB) {
#pragma unroll 1
      for (int q = 0; q < RW && base + q < chunks; ++q) {
        const int qb = q % CL, qi = q / CL;  // chunk base + q's block and slot
        const float* rm = CL > 1 ? tfc_cluster_map(sm.pm, qb) : sm.pm;
        const float* rl = CL > 1 ? tfc_cluster_map(sm.pl, qb) : sm.pl;
        const float* ro = (CL > 1 ? tfc_cluster_map(sm.po, qb) : sm.po) + (qi * 8 + g) * HDP + 2 * t;
        tfc_attn_fold_dims<NO, ND>(mt, lt, o, rm[qi * 8 + g], rl[qi * 8 + g], ro, slot, CL * NW);
      }
    }
    if constexpr (CL > 1) tfc_cluster_sync();  // no block overwrites its partials while the others read them
  }
  if (g >= HB) return;
#pragma unroll
  for (int j = 0; j < NO; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int d = 8 * (slot + CL * NW * j) + 2 * t + e;
      if (d < HD) tfc_st(Y + (size_t)r * ldy + (h0 + g) * HD + d, tfc_rnd(__fdiv_rn(o[j][e], lt)));
    }
}

template <int HD, int QG, int PS, int THREADS, int CL, int MUT, typename TQ, typename TC, typename TY>
__device__ __forceinline__ void tfc_attention_paged_mma(const TQ* Q, int ldq, const TC* Kc, int ldkc, const TC* Vc, int ldvc, TY* Y,
                                                        int ldy, const int* row_seq, const int* row_pos, const int* page_table,
                                                        int ldpt, int M, float scale, int r, int h0) {
  using shape = tfc_paged_mma_shape<HD, QG, THREADS>;
  constexpr int HDP = shape::hdp, LDK = shape::ldk, KS = shape::ks, ND = shape::nd, CH = TFC_PAGED_CHUNK;
  constexpr int HB = shape::hb, SG = shape::sg, R = 16 * SG;  // heads, 16-row subgroups and rows a block
  static_assert(THREADS == 4 * CH, "four threads stage a key");
  static_assert(HDP <= 128, "the tensor-core cached attention keeps head_dim ≤ 128");
  static_assert(CL == 1 || 8 * (THREADS / 32) * HDP * 4 <= 2 * CH * LDK * 2, "a round's partials fit in the K and V tiles");
  __shared__ __align__(16) tfc_paged_lds<HDP, THREADS / 32> sm;  // with a cluster, the staged walk's partials in the K and V tiles
  unsigned short *kv = sm.kv, *kt = sm.kt(), *vt = sm.vt();
  float *pm = sm.pm, *pl = sm.pl;
  int& vbad = sm.vbad;
  if (r >= M || h0 % HB != 0) return;
  const int seq = row_seq[r];
  // the group: rows r.. of seq at consecutive positions, up to the next multiple of R
  if (r > 0 && row_seq[r - 1] == seq && row_pos[r - 1] == row_pos[r] - 1 && row_pos[r] % R != 0) return;
  int n = 1, kend = 0;
  while (n < R && r + n < M && row_seq[r + n] == seq && row_pos[r + n] == row_pos[r + n - 1] + 1 && row_pos[r + n] % R != 0) ++n;
  for (int i = 0; i < n; ++i) {
    const int pos = row_pos[r + i];
    if (pos < 0 || pos / PS >= ldpt) tfc_trap();
    kend = max(kend, tfc_bound<MUT>(pos + 1));
  }
  const int* pages = page_table + (size_t)seq * ldpt;
  const int kh = h0 / QG;
  const TC* kb = Kc + kh * HD;
  const TC* vb = Vc + kh * HD;
  const int ldqm = tfc_stride<MUT>(ldq);
  const float sc = tfc_scale<MUT>(scale);
  const bool vec = ldkc % 4 == 0 && ldvc % 4 == 0 && (kh * HD) % 4 == 0;  // F32 cache rows in float4
  if constexpr (HB > 1) {
    if (n == 1) {  // a lone row: its heads share the mma rows
      tfc_paged_packed<HD, HB, PS, THREADS, CL, MUT>(Q, ldqm, kb, ldkc, vb, ldvc, vec, Y, ldy, pages, r, h0, kend, sc, sm);
      return;
    }
  }
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
  const int h = h0 + warp % HB, r0 = 16 * (warp / HB);  // the warp's head and first row of the group
  const bool active = warp < HB * SG && r0 < n;
  int nk[2];  // key counts of the lane's mma rows g and g + 8 (0: no row)
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int row = r0 + g + 8 * i;
    nk[i] = active && row < n ? tfc_bound<MUT>(row_pos[r + row] + 1) : 0;
  }
  // Q fragments: register i of step ks holds row g + 8(i%2), dims 16ks + 2t + 8(i/2) and +1
  unsigned qf[KS][4];
#pragma unroll
  for (int ks = 0; ks < KS; ++ks)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = r0 + g + 8 * (i % 2), d = 16 * ks + 2 * t + 8 * (i / 2);
      const bool live = active && row < n;
      const TQ* q = Q + (size_t)(r + (live ? row : 0)) * ldqm + h * HD + d;
      const float x0 = live && d < HD ? tfc_ld(q) : 0.f, x1 = live && d + 1 < HD ? tfc_ld(q + 1) : 0.f;
      qf[ks][i] = tfc_pack_bf16(tfc_bf16_hi(x0), tfc_bf16_hi(x1));
    }
  tfc_paged_stage<HD, KS, PS, TC> st;
  auto rowof = [&](int c0) { return st.key_row(pages, c0, kend); };
  auto load = [&](long long row) { st.load(kb, ldkc, vb, ldvc, vec, row); };
  // the lane's running totals: rows g + 8i; dims 8nb + 2t + e%2 of element e of dim block nb =
  // rank + CL·j of o[j] (with a cluster, block rank keeps dim blocks rank, rank + CL, ...)
  constexpr int NO = (ND + CL - 1) / CL;
  float mt[2] = {TFC_NEG_INF, TFC_NEG_INF}, lt[2] = {0.f, 0.f}, o[NO][4];
#pragma unroll
  for (int b = 0; b < NO; ++b)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[b][e] = 0.f;
  const unsigned ka = sm.ka(), va = sm.va();
  const int chunks = (kend + CH - 1) / CH;
  const int rank = CL > 1 ? tfc_cluster_rank() : 0;
  if (tid == 0) vbad = 0;
  long long next = rank < chunks ? rowof(rank * CH) : -1;  // the cache row of the thread's key of the block's next chunk
  if (TFC_PAGED_AHEAD == 1 && rank < chunks) load(next);
  __syncthreads();  // vbad is reset
  // Rounds of CL chunks: block rank of the cluster takes chunk base + rank and rank 0 folds the
  // round's chunks in order; without a cluster (CL 1) a round is one chunk, folded at once.
#pragma unroll 1
  for (int base = 0; base < chunks; base += CL) {
    const int c = base + rank, c0 = c * CH;
    unsigned pf[CH / 16][4];
    float mc[2], lc[2];
    float part[CL > 1 ? ND : 1][4];  // with a cluster: the chunk's P·V
    if (c < chunks) {
      // stage the chunk: K and V as BF16, V elements that are not finite as zero (and vbad = c + 1)
      if (TFC_PAGED_AHEAD != 1) load(next);
      tfc_fill_skew<MUT>();
      st.store(kt, vt, LDK);
      if (st.bad) vbad = c + 1;
      tfc_fill_barrier<MUT>();
      if (c + CL < chunks) {
        next = rowof(c0 + CL * CH);
        if (TFC_PAGED_AHEAD == 1) load(next);
        if (TFC_PAGED_AHEAD == 2 && next >= 0) {  // a key's four threads take its K and V rows' 128-byte lines in turn
          tfc_prefetch_row<HD>(kb, ldkc, next, tid % 4);
          tfc_prefetch_row<HD>(vb, ldvc, next, tid % 4);
        }
      }
      const bool bad = vbad == c + 1;
      if (active) {
        tfc_paged_scores<KS>(qf, ka, LDK, nk, c0, sc, pf, mc, lc);
        if constexpr (CL == 1) {
          float a[2], b[2];
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            a[i] = 1.f, b[i] = 0.f;
            if (c0 < nk[i]) tfc_attn_fold(mt[i], lt[i], mc[i], lc[i], a[i], b[i]);  // a row whose keys end before the chunk keeps its totals
          }
#pragma unroll
          for (int nb = 0; nb < ND; ++nb) {
            float acc[4];
            tfc_paged_pv<HD, PS>(pf, va, LDK, nb, bad, pages, vb, ldvc, c0, kend, nk, acc);
#pragma unroll
            for (int e = 0; e < 4; ++e)
              if (c0 < nk[e / 2]) o[nb][e] = fmaf(acc[e], b[e / 2], __fmul_rn(o[nb][e], a[e / 2]));
          }
        } else {
#pragma unroll
          for (int nb = 0; nb < ND; ++nb) tfc_paged_pv<HD, PS>(pf, va, LDK, nb, bad, pages, vb, ldvc, c0, kend, nk, part[nb]);
        }
      }
    }
    __syncthreads();  // every warp is done with the tiles: the next stage (or the partials) overwrites them
    if constexpr (CL > 1) {
      // the round's partials (rows 0..7 of subgroup 0: a cluster's launch has at most 8 rows) into
      // the tiles' LDS; then every block folds them in chunk order from the cluster's LDS, block
      // rank taking dim blocks rank, rank + CL, ... (each keeps the same row max and sum)
      float* po = reinterpret_cast<float*>(kv);
      if (c < chunks && active && r0 == 0) {
        if (t == 0) pm[warp * 8 + g] = mc[0], pl[warp * 8 + g] = lc[0];
#pragma unroll
        for (int nb = 0; nb < ND; ++nb)
#pragma unroll
          for (int e = 0; e < 2; ++e) po[(warp * 8 + g) * HDP + 8 * nb + 2 * t + e] = part[nb][e];
      }
      tfc_cluster_sync();
      if (active) {
#pragma unroll
        for (int q = 0; q < CL; ++q) {
          if (base + q >= chunks || (base + q) * CH >= nk[0]) continue;
          const float* rm = tfc_cluster_map(pm, q);
          const float* rl = tfc_cluster_map(pl, q);
          const float* ro = tfc_cluster_map(po, q) + (warp * 8 + g) * HDP + 2 * t;
          tfc_attn_fold_dims<NO, ND>(mt[0], lt[0], o, rm[warp * 8 + g], rl[warp * 8 + g], ro, rank, CL);
        }
      }
      tfc_cluster_sync();  // no block overwrites its LDS while the others read it
    }
  }
  if (!active) return;
#pragma unroll
  for (int j = 0; j < NO; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = r0 + g + 8 * (e / 2), d = 8 * (rank + CL * j) + 2 * t + e % 2;
      if (row < n && d < HD) tfc_st(Y + (size_t)(r + row) * ldy + h * HD + d, tfc_rnd(__fdiv_rn(o[j][e], lt[e / 2])));
    }
}
#endif
