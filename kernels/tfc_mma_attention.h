// tfc_mma_attention.h: vision attention on tensor cores on CUDA (tfc_attention_mma), with the exact
// three-term split of tfc_mma_gemm.h.
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
// long sum. The softmax is the F32 online softmax of tfc_attend: a row's running max m, scores
// s·scale, p = exp(s - m), the sum of p and the output rescaled by exp(m_old - m_new). In BF16
// precision Q, K, V and (rounded after its sum) P are BF16-exact, so hi·hi alone is taken
// (TERMS 1): the same bits as the six products for a sixth of the work, the lo planes neither
// staged nor read.
//
// 256 threads are 8 warps; warp w owns rows 16w..16w+15 of the group (QG = 128) and keeps its
// Q fragments (three planes) in registers for the whole span. Keys are staged BK at a time from
// key 0 of the span: K and V as [plane][key][d], BF16, rows padded by 8 elements so that
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
template <int HD>
struct tfc_attn_mma_shape {
  static constexpr int hdp = (HD + 15) / 16 * 16;  // head_dim padded to the mma's k
  static constexpr int ldk = hdp + 8;              // a K or V tile row (BF16 elements)
  static constexpr int tk = 6 * 32 * ldk * 2 <= 40 * 1024 ? 32 : 16;  // keys a tile: 32 where six planes fit 40 KiB
  static constexpr int plane = tk * ldk;
  static constexpr int size = 6 * plane;  // BF16 elements
};

// tfc_attn_smem is the LDS of a tile: the three K planes, then the three V planes.
template <int HD>
__device__ __forceinline__ unsigned short* tfc_attn_smem() {
  __shared__ __align__(16) unsigned short sm[tfc_attn_mma_shape<HD>::size];
  return sm;
}

__device__ __forceinline__ bool tfc_finite(float x) { return (__float_as_uint(x) & 0x7f800000u) != 0x7f800000u; }
__device__ __forceinline__ unsigned tfc_pack_bf16(unsigned lo, unsigned hi) { return lo | hi << 16; }
#ifndef TFC_MMA_EMULATED
// tfc_ldsm_x2_trans is tfc_ldsm_x2 transposed: register j of lane l holds elements (2(l%4), l/4)
// and (2(l%4)+1, l/4) of matrix j, whose row r comes from lane 8j + r.
__device__ __forceinline__ void tfc_ldsm_x2_trans(unsigned (&r)[2], unsigned a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
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
  using shape = tfc_attn_mma_shape<HD>;
  constexpr int HDP = shape::hdp, BK = shape::tk, LDK = shape::ldk, PL = shape::plane;
  constexpr int KS = HDP / 16, NK = BK / 8, KK = BK / 16, ND = HDP / 8;
  static_assert(QG == 128, "a block is 8 warps of 16 rows");
  static_assert(shape::size * 2 <= 40 * 1024, "the tiles' LDS must leave room in a block's static 48 KiB");
  unsigned short* const sm = tfc_attn_smem<HD>();
  __shared__ int kbad[BK], vbad[HDP], tbad[2];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
  const int nq = min(QG, s1 - r0), kcol = kh * HD, qcol = h * HD;
  const int kend = tfc_bound<MUT>(s1 - s0);
  const int ldqm = tfc_stride<MUT>(ldq);
  const float sc = tfc_scale<MUT>(scale);
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
  const unsigned va = tfc_smem_addr(sm) + 2 * (3 * PL + (lane % 16) * LDK);
  __syncthreads();  // the flags are reset

  // a tile's K and V pass through registers: element u = tid + 256i is key u / HDP, column u % HDP.
  // Where head_dim is at most 96 the next tile's loads are in flight while the tensor cores work.
  constexpr int FR = (BK * HDP + 255) / 256;
  constexpr bool ahead = HDP <= 96;
  float kr[FR], vr[FR];
  auto load = [&](int t0) {
#pragma unroll
    for (int i = 0; i < FR; ++i) {
      const int u = tid + 256 * i, j = u / HDP, d = u % HDP;
      kr[i] = vr[i] = 0.f;
      if (u < BK * HDP && t0 + j < kend && d < HD) {
        const size_t row = (size_t)(s0 + t0 + j);
        kr[i] = tfc_ld(K + row * ldk + kcol + d);
        vr[i] = tfc_ld(V + row * ldv + kcol + d);
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
    for (int i = 0; i < FR; ++i) {
      const int u = tid + 256 * i, j = u / HDP, d = u % HDP;
      if (u >= BK * HDP) continue;
      float vx = vr[i];
      if (!tfc_finite(kr[i])) kbad[j] = tbad[0] = t0;
      if (!tfc_finite(vx)) {
        vbad[d] = tbad[1] = t0;
        vx = 0.f;
      }
      unsigned hh, ll, l2;
      tfc_split3(kr[i], hh, ll, l2);
      unsigned short* const kt = sm + j * LDK + d;
      kt[0] = hh;
      if (TERMS == 3) kt[PL] = ll, kt[2 * PL] = l2;
      tfc_split3(vx, hh, ll, l2);
      kt[3 * PL] = hh;
      if (TERMS == 3) kt[4 * PL] = ll, kt[5 * PL] = l2;
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
        const bool kany = tbad[0] == t0;
#pragma unroll
        for (int n = 0; n < NK; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int j = 8 * n + 2 * t + e % 2, r = rw + 8 * (e / 2);
            float x = (sb[n][e] + ss[n][e]) * sc;
            if (j >= nt) {
              x = TFC_NEG_INF;
            } else if (qbad[e / 2] || (kany && kbad[j] == t0)) {
              float acc = 0.f;
              if (r < nq)
                for (int d = 0; d < HD; ++d)
                  acc = fmaf(tfc_ld(Q + (size_t)(r0 + r) * ldqm + qcol + d), tfc_ld(K + (size_t)(s0 + t0 + j) * ldk + kcol + d), acc);
              x = acc * sc;
            }
            s[n][e] = x;
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
        alpha[i] = expf(m[i] - mu);
        m[i] = mn;
        float sum = 0.f;
#pragma unroll
        for (int n = 0; n < NK; ++n) {
          const float p0 = expf(s[n][2 * i] - mu), p1 = expf(s[n][2 * i + 1] - mu);
          sum += p0 + p1;
          s[n][2 * i] = tfc_rnd(p0);  // P·V takes p rounded in BF16 precision; the sum is F32
          s[n][2 * i + 1] = tfc_rnd(p1);
        }
        l[i] = l[i] * alpha[i] + sum;
      }
      // P as A fragments: step kk is key tiles 2kk (registers 0, 1) and 2kk + 1 (2, 3)
      unsigned pf[KK][3][4];
#pragma unroll
      for (int kk = 0; kk < KK; ++kk)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
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
        for (int e = 0; e < 4; ++e) o[n][e] = o[n][e] * alpha[e / 2] + (cb[e] + cs[e]);
      }
      if (tbad[1] == t0) {  // V elements that are not finite: p·v apart
        for (int d = 0; d < HD; ++d) {
          if (vbad[d] != t0) continue;
          float a0 = 0.f, a1 = 0.f;
#pragma unroll
          for (int j = 0; j < BK; ++j) {
            const int src = (lane & ~3) | (j % 8) / 2;
            const float p0 = __shfl_sync(0xffffffffu, s[j / 8][j % 2], src);
            const float p1 = __shfl_sync(0xffffffffu, s[j / 8][2 + j % 2], src);
            if (j < nt) {
              const float v = tfc_ld(V + (size_t)(s0 + t0 + j) * ldv + kcol + d);
              if (!tfc_finite(v)) {
                a0 += p0 * v;
                a1 += p1 * v;
              }
            }
          }
          if (t == d % 8 / 2) {
#pragma unroll
            for (int n = 0; n < ND; ++n) {
              if (n == d / 8 && d % 2 == 0) {  // constant indices keep o in registers
                o[n][0] += a0;
                o[n][2] += a1;
              } else if (n == d / 8) {
                o[n][1] += a0;
                o[n][3] += a1;
              }
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
