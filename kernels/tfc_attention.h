// tfc_attention.h: attention over spans (vision) and over the paged KV cache (decoder), online softmax in
// F32, and the KV cache store. In BF16 precision the weights p = exp(s - m) go into P·V rounded
// to BF16 (m the running max, as flash kernels take it; their sum stays F32) and the output is rounded.
#pragma once
#include "tfc_math.h"
#include "tfc_reduce.h"

// Key rows of an attention: key t of a span starting at row s0, or position t through a page table.
struct tfc_span_keys {
  int s0;
  __device__ size_t operator()(int t) const { return (size_t)(s0 + t); }
};
template <int PS>
struct tfc_paged_keys {
  const int* pages;
  __device__ size_t operator()(int t) const { return (size_t)pages[t / PS] * PS + t % PS; }
};

// tfc_attend is online-softmax attention, in F32, for nq ≤ QG queries (qs [QG*HD] in LDS) that
// share the keys t in [0, nkeys), read at row keys(t), columns kcol.. of K and V, in tiles of BKV
// from t = 0. It leaves the unnormalised outputs in os [QG*HD] and the softmax sums in ls [QG].
template <int HD, int QG, int BKV, int THREADS, int MUT, typename TK, typename TV, typename Keys>
__device__ __forceinline__ void tfc_attend(const float* qs, int nq, const TK* K, int ldk, const TV* V, int ldv, int kcol, int nkeys,
                           float scale, Keys keys, float* os, float* ls) {
  __shared__ float ks[BKV * (HD + 1)];
  __shared__ float vs[BKV * HD];
  __shared__ float ps[QG * BKV];
  __shared__ float ms[QG], as[QG];
  const int tid = threadIdx.x;
  for (int e = tid; e < QG * HD; e += THREADS) os[e] = 0.f;
  for (int g = tid; g < QG; g += THREADS) {
    ms[g] = TFC_NEG_INF;
    ls[g] = 0.f;
  }
  const int kend = tfc_bound<MUT>(nkeys);
  for (int t0 = 0; t0 < kend; t0 += BKV) {
    const int nt = min(BKV, kend - t0);
    tfc_fill_skew<MUT>();
    for (int e = tid; e < BKV * HD; e += THREADS) {
      const int j = e / HD, d = e % HD;
      float kv = 0.f, vv = 0.f;
      if (j < nt) {
        const size_t row = keys(t0 + j);
        kv = tfc_ld(K + row * ldk + kcol + d);
        vv = tfc_ld(V + row * ldv + kcol + d);
      }
      ks[j * (HD + 1) + d] = kv;
      vs[j * HD + d] = vv;
    }
    tfc_fill_barrier<MUT>();
    for (int e = tid; e < QG * BKV; e += THREADS) {
      const int g = e / BKV, j = e % BKV;
      float s = TFC_NEG_INF;
      if (g < nq && j < nt) {
        float acc = 0.f;
        for (int d = 0; d < HD; ++d) acc = fmaf(qs[g * HD + d], ks[j * (HD + 1) + d], acc);
        s = acc * tfc_scale<MUT>(scale);
      }
      ps[e] = s;
    }
    __syncthreads();
    for (int g = tid; g < nq; g += THREADS) {
      float m = ms[g];
      for (int j = 0; j < nt; ++j) m = fmaxf(m, ps[g * BKV + j]);
      const float alpha = expf(ms[g] - m);
      float l = ls[g] * alpha;
      for (int j = 0; j < nt; ++j) {
        const float p = expf(ps[g * BKV + j] - m);
        ps[g * BKV + j] = tfc_rnd(p);
        l += p;
      }
      ms[g] = m;
      ls[g] = l;
      as[g] = alpha;
    }
    __syncthreads();
    for (int e = tid; e < nq * HD; e += THREADS) {
      const int g = e / HD, d = e % HD;
      float o = os[e] * as[g];
      for (int j = 0; j < nt; ++j) o = fmaf(ps[g * BKV + j], vs[j * HD + d], o);
      os[e] = o;
    }
    __syncthreads();
  }
}

// tfc_attention_spans: block (b, h) takes group b of QG consecutive rows inside one span (groups
// are counted span by span, so a row's group and key tiles depend only on its own span) and
// query head h; every row attends to all rows of its span. Blocks past the last group exit.
// Under CUDA the group runs on the tensor cores (tfc_attention_mma, at the end of this file);
// elsewhere it runs through tfc_attend in sub-groups of 8 rows.
// TERMS is how many BF16 terms of each operand the tensor cores take (TFC_MMA_TERMS).
#if TFC_CUDA
template <int HD, int QG, int MUT, int TERMS, typename TQ, typename TK, typename TV, typename TY>
__device__ __forceinline__ void tfc_attention_mma(const TQ* Q, int ldq, const TK* K, int ldk, const TV* V, int ldv, TY* Y,
                                                  int ldy, int h, int kh, int s0, int s1, int r0, float scale);
#endif
template <int HD, int QG, int BKV, int THREADS, int MUT, int TERMS = TFC_MMA_TERMS, typename TQ, typename TK, typename TV, typename TY>
__device__ __forceinline__ void tfc_attention_spans(const TQ* Q, int ldq, const TK* K, int ldk, const TV* V, int ldv, TY* Y, int ldy,
                                    const int* spans, int S, int heads, int kvheads, float scale) {
  const int b = blockIdx.x, h = blockIdx.y;
  int s0 = 0, s1 = 0, r0 = -1;
  for (int s = 0, first = 0; s < S; ++s) {
    const int a = spans[s], z = spans[s + 1], groups = (z - a + QG - 1) / QG;
    if (b < first + groups) {
      s0 = a;
      s1 = z;
      r0 = a + (b - first) * QG;
      break;
    }
    first += groups;
  }
  if (r0 < 0) return;
  const int kh = h / (heads / kvheads);
#if TFC_CUDA
  tfc_attention_mma<HD, QG, MUT, TERMS>(Q, ldq, K, ldk, V, ldv, Y, ldy, h, kh, s0, s1, r0, scale);
#else
  constexpr int SG = 8;  // rows of a sub-group
  __shared__ float qs[SG * HD], os[SG * HD], ls[SG];
  const int ldqm = tfc_stride<MUT>(ldq);
  for (int rs = r0; rs < min(r0 + QG, s1); rs += SG) {
    const int nq = min(SG, s1 - rs);
    for (int e = threadIdx.x; e < SG * HD; e += THREADS) {
      const int g = e / HD, d = e % HD;
      qs[e] = g < nq ? tfc_ld(Q + (size_t)(rs + g) * ldqm + h * HD + d) : 0.f;
    }
    __syncthreads();
    tfc_attend<HD, SG, BKV, THREADS, MUT>(qs, nq, K, ldk, V, ldv, kh * HD, s1 - s0, scale, tfc_span_keys{s0}, os, ls);
    for (int e = threadIdx.x; e < nq * HD; e += THREADS) {
      const int g = e / HD, d = e % HD;
      tfc_st(Y + (size_t)(rs + g) * ldy + h * HD + d, tfc_rnd(os[e] / ls[g]));
    }
    __syncthreads();  // the next sub-group's tfc_attend rewrites os and ls
  }
#endif
}

// tfc_paged_heads<QG, THREADS>::value is the query heads of one KV head a block of the tensor-core
// kernel takes: the largest divisor of QG (the query heads a KV head serves) not above its warps.
template <int QG, int K>
struct tfc_divisor_upto {
  static constexpr int value = K >= QG ? QG : QG % K == 0 ? K : tfc_divisor_upto<QG, K - 1>::value;
};
template <int QG>
struct tfc_divisor_upto<QG, 1> {
  static constexpr int value = 1;
};
template <int QG, int THREADS>
struct tfc_paged_heads : tfc_divisor_upto<QG, THREADS / 32> {};

// tfc_attention_paged: row r and query head h, which reads KV head h / QG, attend causally to
// positions 0..pos of the row's sequence through its page table. The grid is (M, heads): a block
// a row and query head; launches of at most 8 rows (M, heads · SPLIT), a cluster of SPLIT blocks a
// row and query head.
#if TFC_CUDA
// On CUDA (tfc_attention_paged_warps; TFC_PAGED_MMA takes the tensor cores in BF16, below) the
// keys 0..pos are cut into SPLIT*NW contiguous ranges, range g holding keys
// [g*per, (g+1)*per) with per = ceil((pos+1)/(SPLIT*NW)), so the cut depends on pos alone. A
// warp walks a range in runs of 32 keys, each lane looking up one key's cache row a run ahead,
// and loads tfc_attn_keys<HD> keys at a time, K and V together (keys past the run load its last
// key again and weigh 0). A lane holds dims lane + 32i of q, of each key and of the output. A
// score is the lane's fmaf chain over its dims, summed over the warp by an xor butterfly (16, 8,
// 4, 2, 1), so every lane holds the same bits. Each range keeps its own online softmax (max m,
// sum l, output o) from -inf, 0, 0, rescaled once per load of keys; then each output dim adds up
// the ranges' (m, l, o) in range order. A running max of -inf (no finite score yet) rescales from
// 0 instead, so keys scored -inf weigh 0 and a row with no finite score ends as 0/0 (NaN), as
// softmax gives. Products and sums are written out (__fmul_rn, __fadd_rn, fmaf) so that no layout
// contracts them differently.
//
// Two layouts give these bits. Launches of many rows (small false) take block (r, h): warp w
// walks ranges w, w + NW, ... one after the other and leaves each range's (m, l, o) in LDS.
// Launches of few rows (small true, decode rounds) take SPLIT blocks (r, h*SPLIT + c), launched
// as a cluster: warp w of block c walks range c*NW + w alone, and the ranges meet across the
// cluster's LDS, output dim d summed by block d % SPLIT.
// TFC_PAGED_MINPER is the fewest keys a range takes: per = max(TFC_PAGED_MINPER, ceil((pos+1)/G)),
// a rule of pos alone, so both layouts keep each other's bits whatever it is. 1 cuts every
// context into G ranges (short contexts into ranges of a key or two); a larger value gives
// prompt rows at low positions fewer, longer ranges. Ranges past the last key are empty: they
// add nothing to the sum, and the combine skips them.
#ifndef TFC_PAGED_MINPER
#define TFC_PAGED_MINPER 1
#endif
// TFC_PAGED_HEADS is how many query heads of one KV head a decode row's cluster takes at once
// (the layout of at most 8 rows; where it divides the heads a KV head serves, else 1): each key
// and value is loaded once for all of them, and each head takes the same instructions as alone,
// so the bits do not change. The grid stays a cluster a head; the clusters of the other heads of
// the group exit at once.
#ifndef TFC_PAGED_HEADS
#define TFC_PAGED_HEADS 1
#endif

template <int HD>
__device__ constexpr int tfc_attn_keys() { return (HD + 31) / 32 <= 4 ? 16 : (HD + 31) / 32 <= 8 ? 8 : 4; }

// tfc_attn_range is one warp's online softmax over keys [t0, t1) of a row (see above), for HG
// query heads that read the same KV head: each key and value is loaded once for all of them,
// and each head's scores, sums and output take the same instructions as one head alone.
template <int HD, int PS, int HG, typename TC>
__device__ __forceinline__ void tfc_attn_range(const float (&q)[HG][(HD + 31) / 32], const int* pages, const TC* kb, int ldkc,
                                               const TC* vb, int ldvc, int t0, int t1, float sc, float (&m)[HG], float (&l)[HG],
                                               float (&o)[HG][(HD + 31) / 32]) {
  constexpr int D = (HD + 31) / 32, U = tfc_attn_keys<HD>();
  constexpr unsigned all = 0xffffffffu;
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int a = 0; a < HG; ++a) {
    m[a] = TFC_NEG_INF;
    l[a] = 0.f;
#pragma unroll
    for (int i = 0; i < D; ++i) o[a][i] = 0.f;
  }
  int next = 0;  // the cache row of the next run's key c0 + lane
  if (t0 < t1) {
    const int t = t0 + min(lane, t1 - t0 - 1);
    next = pages[t / PS] * PS + t % PS;
  }
#pragma unroll 1
  for (int c0 = t0; c0 < t1; c0 += 32) {
    const int n = min(32, t1 - c0), crow = next;
    if (c0 + 32 < t1) {
      const int t = c0 + 32 + min(lane, t1 - c0 - 33);
      next = pages[t / PS] * PS + t % PS;
    }
#pragma unroll 1
    for (int u0 = 0; u0 < n; u0 += U) {
      float kk[U][D], vv[U][D];
#pragma unroll
      for (int j = 0; j < U; ++j) {
        const size_t row = (size_t)__shfl_sync(all, crow, min(u0 + j, n - 1));
#pragma unroll
        for (int i = 0; i < D; ++i) {
          const int d = lane + 32 * i;
          kk[j][i] = d < HD ? tfc_ld(kb + row * ldkc + d) : 0.f;
          vv[j][i] = d < HD ? tfc_ld(vb + row * ldvc + d) : 0.f;
        }
      }
#pragma unroll
      for (int a = 0; a < HG; ++a) {
        float s[U];
#pragma unroll
        for (int j = 0; j < U; ++j) {
          float p = 0.f;
#pragma unroll
          for (int i = 0; i < D; ++i) p = fmaf(q[a][i], kk[j][i], p);
          s[j] = p;
        }
#pragma unroll
        for (int b = 16; b > 0; b >>= 1) {
#pragma unroll
          for (int j = 0; j < U; ++j) s[j] = __fadd_rn(s[j], __shfl_xor_sync(all, s[j], b));
        }
        float mb = m[a];
#pragma unroll
        for (int j = 0; j < U; ++j) {
          s[j] = u0 + j < n ? __fmul_rn(s[j], sc) : TFC_NEG_INF;
          mb = fmaxf(mb, s[j]);
        }
        const float mref = mb == TFC_NEG_INF ? 0.f : mb;
        const float alpha = expf(__fadd_rn(m[a], -mref));
        l[a] = __fmul_rn(l[a], alpha);
#pragma unroll
        for (int i = 0; i < D; ++i) o[a][i] = __fmul_rn(o[a][i], alpha);
#pragma unroll
        for (int j = 0; j < U; ++j) {
          if (u0 + j < n) {
            const float p = expf(__fadd_rn(s[j], -mref)), pr = tfc_rnd(p);
            l[a] = __fadd_rn(l[a], p);
#pragma unroll
            for (int i = 0; i < D; ++i) o[a][i] = fmaf(pr, vv[j][i], o[a][i]);
          }
        }
        m[a] = mb;
      }
    }
  }
}

// tfc_attn_combine adds up the ranges' (m, l, o) for output dim d in range order: range g's
// values are m(g), l(g) and o(g, d), for the live ranges g < live. An empty range
// (m = -Inf, l = 0, o = 0) would add exact zeros, so leaving the empty ones out keeps the bits.
template <typename FM, typename FL, typename FO>
__device__ __forceinline__ float tfc_attn_combine(FM m, FL l, FO o, int d, int live) {
  float mx = TFC_NEG_INF;
#pragma unroll 8
  for (int g = 0; g < live; ++g) mx = fmaxf(mx, m(g));
  const float mref = mx == TFC_NEG_INF ? 0.f : mx;
  float lsum = 0.f, osum = 0.f;
#pragma unroll 8
  for (int g = 0; g < live; ++g) {
    const float f = expf(__fadd_rn(m(g), -mref));
    lsum = fmaf(l(g), f, lsum);
    osum = fmaf(o(g, d), f, osum);
  }
  return tfc_rnd(__fdiv_rn(osum, lsum));
}

template <int HD, int QG, int BKV, int THREADS, int PS, int SPLIT, bool SMALL, int MUT, typename TQ, typename TC, typename TY>
__device__ __forceinline__ void tfc_attention_paged_warps(const TQ* Q, int ldq, const TC* Kc, int ldkc, const TC* Vc, int ldvc, TY* Y,
                                    int ldy, const int* row_seq, const int* row_pos, const int* page_table, int ldpt,
                                    int M, float scale, int h) {
  static_assert(THREADS % 32 == 0, "THREADS must be whole warps");
  constexpr int NW = THREADS / 32, D = (HD + 31) / 32, G = SPLIT * NW;
  constexpr int HG = SMALL && QG % TFC_PAGED_HEADS == 0 ? TFC_PAGED_HEADS : 1;  // query heads a block
  constexpr int RANGES = SMALL ? NW : G;                                          // ranges a block keeps in LDS
  static_assert(HG * RANGES * (HD + 2) * 4 <= 44 * 1024, "the ranges' partials must fit a block's LDS");
  __shared__ float pm[HG * RANGES], pl[HG * RANGES], po[HG * RANGES * HD];
  const int r = blockIdx.x;
  if (r >= M || h % HG != 0) return;  // in a cluster, the whole cluster: it shares r and h
  const int seq = row_seq[r], pos = row_pos[r];
  if (pos < 0 || pos / PS >= ldpt) tfc_trap();
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
  const int ldqm = tfc_stride<MUT>(ldq);
  const float sc = tfc_scale<MUT>(scale);
  float q[HG][D], o[HG][D];
#pragma unroll
  for (int a = 0; a < HG; ++a)
#pragma unroll
    for (int i = 0; i < D; ++i) {
      const int d = lane + 32 * i;
      q[a][i] = d < HD ? tfc_ld(Q + (size_t)r * ldqm + (h + a) * HD + d) : 0.f;
    }
  const int* pages = page_table + (size_t)seq * ldpt;
  const TC* kb = Kc + (h / QG) * HD;
  const TC* vb = Vc + (h / QG) * HD;
  const int nkeys = tfc_bound<MUT>(pos + 1);
  const int per = max(TFC_PAGED_MINPER, (nkeys + G - 1) / G), live = min(G, (nkeys + per - 1) / per);
  const int c = SMALL ? tfc_cluster_rank() : 0;
  tfc_fill_skew<MUT>();
#pragma unroll 1
  for (int j = 0; j < (SMALL ? 1 : SPLIT); ++j) {
    const int g = SMALL ? c * NW + w : j * NW + w, slot = SMALL ? w : g;
    if (!SMALL && g >= live) break;  // the warp's ranges from here on are empty
    const int t0 = min(nkeys, g * per), t1 = min(nkeys, t0 + per);
    float m[HG], l[HG];
    tfc_attn_range<HD, PS, HG>(q, pages, kb, ldkc, vb, ldvc, t0, t1, sc, m, l, o);
#pragma unroll
    for (int a = 0; a < HG; ++a) {
      if (lane == 0) {
        pm[a * RANGES + slot] = m[a];
        pl[a * RANGES + slot] = l[a];
      }
#pragma unroll
      for (int i = 0; i < D; ++i) {
        const int d = lane + 32 * i;
        if (d < HD) po[(a * RANGES + slot) * HD + d] = o[a][i];
      }
    }
  }
  if constexpr (SMALL) {
    // every block's ranges are written before any is read (the missing-barrier control drops this)
    if (MUT != TFC_MUT_BARRIER) tfc_cluster_sync();
    // range g's partials lie in block g / NW's LDS, mapped where they are read (arrays of the
    // blocks' pointers, indexed at run time, sat in local memory)
    for (int e = c + SPLIT * threadIdx.x; e < HG * HD; e += SPLIT * THREADS) {  // head a's output dim d
      const int a = e / HD, d = e % HD, at = a * RANGES;
      tfc_st(Y + (size_t)r * ldy + (h + a) * HD + d,
             tfc_attn_combine([&](int g) { return tfc_cluster_map(pm, g / NW)[at + g % NW]; },
                              [&](int g) { return tfc_cluster_map(pl, g / NW)[at + g % NW]; },
                              [&](int g, int d) { return tfc_cluster_map(po, g / NW)[(at + g % NW) * HD + d]; }, d, live));
    }
    tfc_cluster_sync();  // no block leaves while the others read its LDS
  } else {
    tfc_fill_barrier<MUT>();
    for (int d = threadIdx.x; d < HD; d += THREADS)
      tfc_st(Y + (size_t)r * ldy + h * HD + d,
             tfc_attn_combine([&](int g) { return pm[g]; }, [&](int g) { return pl[g]; },
                                 [&](int g, int d) { return po[g * HD + d]; }, d, live));
  }
}

// TFC_PAGED_MMA 1 takes the tensor-core kernel below on the grid above; 2 (which the CUDA backend
// sets in BF16 precision, with the schedule's paged_mma_grid_y, unless TFC_PAGED_MMA=0 is in its
// environment) on its own grid for launches of many rows, (M, heads / tfc_paged_heads), a block a
// row and the heads it takes. On an H100 it fills a 2,048-token prompt 2.2 times and a 512-token
// one 1.7 times as fast as the CUDA-core kernel, decodes batch 8 1.28 times as fast, and batch 1
// 0.96 times (docs/receipts/2026-12-07-h100-wgmma-fill-paged-default.md). The headers' default, 0,
// is the CUDA-core kernel (the F32 precision's, and other targets').
#ifndef TFC_PAGED_MMA
#define TFC_PAGED_MMA 0
#endif
// With TFC_PAGED_MMA, in BF16 precision where head_dim is at most 128, the rows go to the tensor
// cores instead (tfc_attention_paged_mma); with SMALL a row's SPLIT blocks are a cluster that
// takes its chunks SPLIT at a time.
template <int HD, int QG, int PS, int THREADS, int CL, int MUT, typename TQ, typename TC, typename TY>
__device__ __forceinline__ void tfc_attention_paged_mma(const TQ* Q, int ldq, const TC* Kc, int ldkc, const TC* Vc, int ldvc, TY* Y,
                                                        int ldy, const int* row_seq, const int* row_pos, const int* page_table,
                                                        int ldpt, int M, float scale, int r, int h0);
template <int HD, int QG, int BKV, int THREADS, int PS, int SPLIT, bool SMALL, int MUT, typename TQ, typename TC, typename TY>
__device__ __forceinline__ void tfc_attention_paged(const TQ* Q, int ldq, const TC* Kc, int ldkc, const TC* Vc, int ldvc, TY* Y,
                                    int ldy, const int* row_seq, const int* row_pos, const int* page_table, int ldpt,
                                    int M, float scale) {
  const int h = SMALL ? blockIdx.y / SPLIT : blockIdx.y;
  if constexpr (TFC_PAGED_MMA && TFC_BF16 && (HD + 15) / 16 * 16 <= 128) {
    // with its own grid (TFC_PAGED_MMA 2) block y of a launch of many rows takes heads HB·y..
    const int h0 = !SMALL && TFC_PAGED_MMA == 2 ? blockIdx.y * tfc_paged_heads<QG, THREADS>::value : h;
    tfc_attention_paged_mma<HD, QG, PS, THREADS, SMALL ? SPLIT : 1, MUT>(Q, ldq, Kc, ldkc, Vc, ldvc, Y, ldy, row_seq, row_pos, page_table,
                                                                      ldpt, M, scale, blockIdx.x, h0);
  } else {
    tfc_attention_paged_warps<HD, QG, BKV, THREADS, PS, SPLIT, SMALL, MUT>(Q, ldq, Kc, ldkc, Vc, ldvc, Y, ldy, row_seq, row_pos,
                                                                          page_table, ldpt, M, scale, h);
  }
}
#else
// Elsewhere the block's threads take the keys together in LDS tiles (tfc_attend, one query).
// Block (r, h), or with SMALL the first of SPLIT blocks (r, h*SPLIT + c), takes the row; the others exit.
template <int HD, int QG, int BKV, int THREADS, int PS, int SPLIT, bool SMALL, int MUT, typename TQ, typename TC, typename TY>
__device__ __forceinline__ void tfc_attention_paged(const TQ* Q, int ldq, const TC* Kc, int ldkc, const TC* Vc, int ldvc, TY* Y,
                                    int ldy, const int* row_seq, const int* row_pos, const int* page_table, int ldpt,
                                    int M, float scale) {
  __shared__ float qs[HD], os[HD], ls[1];
  const int r = blockIdx.x, h = SMALL ? blockIdx.y / SPLIT : blockIdx.y;
  if (r >= M || (SMALL && blockIdx.y % SPLIT != 0)) return;
  const int seq = row_seq[r], pos = row_pos[r];
  if (pos < 0 || pos / PS >= ldpt) tfc_trap();
  const int ldqm = tfc_stride<MUT>(ldq);
  for (int d = threadIdx.x; d < HD; d += THREADS) qs[d] = tfc_ld(Q + (size_t)r * ldqm + h * HD + d);
  __syncthreads();
  const tfc_paged_keys<PS> keys{page_table + (size_t)seq * ldpt};
  tfc_attend<HD, 1, BKV, THREADS, MUT>(qs, 1, Kc, ldkc, Vc, ldvc, (h / QG) * HD, pos + 1, scale, keys, os, ls);
  for (int d = threadIdx.x; d < HD; d += THREADS) tfc_st(Y + (size_t)r * ldy + h * HD + d, tfc_rnd(os[d] / ls[0]));
}
#endif

// tfc_kv_store writes row r of K and V (W columns) into the paged caches at the row's
// (sequence, position). It runs as its own launch before tfc_attention_paged.
template <int W, int PS, int THREADS, typename TK, typename TV, typename TC>
__device__ __forceinline__ void tfc_kv_store(const TK* K, int ldk, const TV* V, int ldv, TC* Kc, int ldkc, TC* Vc, int ldvc,
                             const int* row_seq, const int* row_pos, const int* page_table, int ldpt, int M) {
  const int r = blockIdx.x;
  if (r >= M) return;
  const int seq = row_seq[r], pos = row_pos[r];
  if (pos < 0 || pos / PS >= ldpt) tfc_trap();
  const size_t row = (size_t)page_table[(size_t)seq * ldpt + pos / PS] * PS + pos % PS;
  for (int c = threadIdx.x; c < W; c += THREADS) {
    tfc_st(Kc + row * ldkc + c, tfc_ld(K + (size_t)r * ldk + c));
    tfc_st(Vc + row * ldvc + c, tfc_ld(V + (size_t)r * ldv + c));
  }
}
