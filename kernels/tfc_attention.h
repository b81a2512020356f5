// tfc_attention.h: attention over spans (vision) and over the paged KV cache (decoder), online softmax in
// F32, and the KV cache store.
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
        ps[g * BKV + j] = p;
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
#if TFC_CUDA
template <int HD, int QG, int MUT, typename TQ, typename TK, typename TV, typename TY>
__device__ __forceinline__ void tfc_attention_mma(const TQ* Q, int ldq, const TK* K, int ldk, const TV* V, int ldv, TY* Y,
                                                  int ldy, int h, int kh, int s0, int s1, int r0, float scale);
#endif
template <int HD, int QG, int BKV, int THREADS, int MUT, typename TQ, typename TK, typename TV, typename TY>
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
  tfc_attention_mma<HD, QG, MUT>(Q, ldq, K, ldk, V, ldv, Y, ldy, h, kh, s0, s1, r0, scale);
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
      tfc_st(Y + (size_t)(rs + g) * ldy + h * HD + d, os[e] / ls[g]);
    }
    __syncthreads();  // the next sub-group's tfc_attend rewrites os and ls
  }
#endif
}

// tfc_attention_paged: blocks (r, h*SPLIT + c), c < SPLIT, take row r and query head h, which
// reads KV head h / QG; they attend causally to positions 0..pos of the row's sequence through
// its page table.
#if TFC_CUDA
// On CUDA the SPLIT blocks of a (row, head) form a cluster (launched in clusters of SPLIT along y)
// and split the keys 0..pos between their SPLIT*NW warps, warp g = c*NW + w taking the contiguous
// range [g*per, (g+1)*per) with per = ceil((pos+1)/(SPLIT*NW)), so the split depends on pos alone.
// A warp walks its range in runs of 32 keys, each lane looking up one key's cache row a run ahead,
// and loads tfc_attn_keys<HD> keys at a time, K and V together (keys past the run load its last
// key again and weigh 0). A lane holds dims lane + 32i of q, of each key and of the output. A
// score is the lane's fmaf chain over its dims, summed over the warp by an xor butterfly (16, 8,
// 4, 2, 1), so every lane holds the same bits. Each warp keeps its own online softmax (max m, sum
// l, output o), rescaled once per load of keys; the warps' (m, l, o) then meet in the blocks' LDS,
// read across the cluster, and each output dim (dim d is block d % SPLIT's) adds them up in warp
// order g. A running max of -inf (no finite score yet) rescales from 0 instead, so keys scored
// -inf weigh 0 and a row with no finite score ends as 0/0 (NaN), as softmax gives.
template <int HD>
__device__ constexpr int tfc_attn_keys() { return (HD + 31) / 32 <= 4 ? 16 : (HD + 31) / 32 <= 8 ? 8 : 4; }

template <int HD, int QG, int BKV, int THREADS, int PS, int SPLIT, int MUT, typename TQ, typename TC, typename TY>
__device__ __forceinline__ void tfc_attention_paged(const TQ* Q, int ldq, const TC* Kc, int ldkc, const TC* Vc, int ldvc, TY* Y,
                                    int ldy, const int* row_seq, const int* row_pos, const int* page_table, int ldpt,
                                    int M, float scale) {
  static_assert(THREADS % 32 == 0, "THREADS must be whole warps");
  constexpr int NW = THREADS / 32, D = (HD + 31) / 32, U = tfc_attn_keys<HD>();
  constexpr unsigned all = 0xffffffffu;
  __shared__ float pm[NW], pl[NW], po[NW * HD];
  const int r = blockIdx.x, h = blockIdx.y / SPLIT, c = tfc_cluster_rank();
  if (r >= M) return;  // the whole cluster: it shares r
  const int seq = row_seq[r], pos = row_pos[r];
  if (pos < 0 || pos / PS >= ldpt) tfc_trap();
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
  const int ldqm = tfc_stride<MUT>(ldq);
  const float sc = tfc_scale<MUT>(scale);
  float q[D], o[D];
#pragma unroll
  for (int i = 0; i < D; ++i) {
    const int d = lane + 32 * i;
    q[i] = d < HD ? tfc_ld(Q + (size_t)r * ldqm + h * HD + d) : 0.f;
    o[i] = 0.f;
  }
  const int* pages = page_table + (size_t)seq * ldpt;
  const TC* kb = Kc + (h / QG) * HD;
  const TC* vb = Vc + (h / QG) * HD;
  const int nkeys = tfc_bound<MUT>(pos + 1);
  const int per = (nkeys + SPLIT * NW - 1) / (SPLIT * NW);
  const int t0 = min(nkeys, (c * NW + w) * per), t1 = min(nkeys, t0 + per);
  float m = TFC_NEG_INF, l = 0.f;
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
      float kk[U][D], vv[U][D], s[U];
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
      for (int j = 0; j < U; ++j) {
        float p = 0.f;
#pragma unroll
        for (int i = 0; i < D; ++i) p = fmaf(q[i], kk[j][i], p);
        s[j] = p;
      }
#pragma unroll
      for (int b = 16; b > 0; b >>= 1) {
#pragma unroll
        for (int j = 0; j < U; ++j) s[j] += __shfl_xor_sync(all, s[j], b);
      }
      float mb = m;
#pragma unroll
      for (int j = 0; j < U; ++j) {
        s[j] = u0 + j < n ? s[j] * sc : TFC_NEG_INF;
        mb = fmaxf(mb, s[j]);
      }
      const float mref = mb == TFC_NEG_INF ? 0.f : mb;
      const float alpha = expf(m - mref);
      l *= alpha;
#pragma unroll
      for (int i = 0; i < D; ++i) o[i] *= alpha;
#pragma unroll
      for (int j = 0; j < U; ++j) {
        if (u0 + j < n) {
          const float p = expf(s[j] - mref);
          l += p;
#pragma unroll
          for (int i = 0; i < D; ++i) o[i] = fmaf(p, vv[j][i], o[i]);
        }
      }
      m = mb;
    }
  }
  tfc_fill_skew<MUT>();
  if (lane == 0) {
    pm[w] = m;
    pl[w] = l;
  }
#pragma unroll
  for (int i = 0; i < D; ++i) {
    const int d = lane + 32 * i;
    if (d < HD) po[w * HD + d] = o[i];
  }
  // every block's partials are written before any is read (the missing-barrier control drops this)
  if (MUT != TFC_MUT_BARRIER) tfc_cluster_sync();
  const float* rm[SPLIT];
  const float* rl[SPLIT];
  const float* ro[SPLIT];
#pragma unroll
  for (int b = 0; b < SPLIT; ++b) {
    rm[b] = tfc_cluster_map(pm, b);
    rl[b] = tfc_cluster_map(pl, b);
    ro[b] = tfc_cluster_map(po, b);
  }
  float mx = TFC_NEG_INF;
#pragma unroll
  for (int b = 0; b < SPLIT; ++b)
#pragma unroll
    for (int v = 0; v < NW; ++v) mx = fmaxf(mx, rm[b][v]);
  const float mref = mx == TFC_NEG_INF ? 0.f : mx;
  for (int d = c + SPLIT * threadIdx.x; d < HD; d += SPLIT * THREADS) {
    float lsum = 0.f, osum = 0.f;
#pragma unroll
    for (int b = 0; b < SPLIT; ++b)
#pragma unroll
      for (int v = 0; v < NW; ++v) {
        const float f = expf(rm[b][v] - mref);
        lsum = fmaf(rl[b][v], f, lsum);
        osum = fmaf(ro[b][v * HD + d], f, osum);
      }
    tfc_st(Y + (size_t)r * ldy + h * HD + d, osum / lsum);
  }
  tfc_cluster_sync();  // no block leaves while the others read its LDS
}
#else
// Elsewhere the block's threads take the keys together in LDS tiles (tfc_attend, one query).
// Only block c = 0 of a (row, head) works; the others exit.
template <int HD, int QG, int BKV, int THREADS, int PS, int SPLIT, int MUT, typename TQ, typename TC, typename TY>
__device__ __forceinline__ void tfc_attention_paged(const TQ* Q, int ldq, const TC* Kc, int ldkc, const TC* Vc, int ldvc, TY* Y,
                                    int ldy, const int* row_seq, const int* row_pos, const int* page_table, int ldpt,
                                    int M, float scale) {
  __shared__ float qs[HD], os[HD], ls[1];
  const int r = blockIdx.x, h = blockIdx.y / SPLIT;
  if (r >= M || blockIdx.y % SPLIT != 0) return;
  const int seq = row_seq[r], pos = row_pos[r];
  if (pos < 0 || pos / PS >= ldpt) tfc_trap();
  const int ldqm = tfc_stride<MUT>(ldq);
  for (int d = threadIdx.x; d < HD; d += THREADS) qs[d] = tfc_ld(Q + (size_t)r * ldqm + h * HD + d);
  __syncthreads();
  const tfc_paged_keys<PS> keys{page_table + (size_t)seq * ldpt};
  tfc_attend<HD, 1, BKV, THREADS, MUT>(qs, 1, Kc, ldkc, Vc, ldvc, (h / QG) * HD, pos + 1, scale, keys, os, ls);
  for (int d = threadIdx.x; d < HD; d += THREADS) tfc_st(Y + (size_t)r * ldy + h * HD + d, os[d] / ls[0]);
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
