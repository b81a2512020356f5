// tfc_kernels.h: the device templates that generated kernels specialise.
//
// Generated kernels (kernels/<family>.hip) are thin: they bake in a family's constants, compose
// epilogues op by op, and call these templates for the parts that are the same everywhere (GEMM
// tiles, block reductions, attention). Every reduction runs in a fixed order that depends only
// on the row being computed, never on how many rows a launch has. Reductions go through LDS, so
// the code is the same for wave32 and wave64.
//
// MUT selects a planted control (a deliberately wrong kernel for the contract's gates) and is
// TFC_MUT_NONE in every kernel that serves.
#pragma once
#include "tfc_hip.h"

#define TFC_MUT_NONE 0
#define TFC_MUT_BOUND 1    // a loop stops one element short
#define TFC_MUT_SCALE 2    // a scale factor is dropped
#define TFC_MUT_STRIDE 3   // the first input's row stride is read one short
#define TFC_MUT_BARRIER 4  // the barrier after an LDS fill is missing

template <int MUT>
__device__ constexpr int tfc_bound(int n) { return MUT == TFC_MUT_BOUND ? n - 1 : n; }
template <int MUT>
__device__ constexpr int tfc_stride(int ld) { return MUT == TFC_MUT_STRIDE ? ld - 1 : ld; }
template <int MUT>
__device__ constexpr float tfc_scale(float s) { return MUT == TFC_MUT_SCALE ? 1.f : s; }
template <int MUT>
__device__ __forceinline__ void tfc_fill_barrier() {
  if (MUT != TFC_MUT_BARRIER) __syncthreads();
}
// tfc_fill_skew, before an LDS fill, holds back every wave but the first in the missing-barrier
// mutant, as a busy multiprocessor may, so that the race the mutant plants shows on every launch
// instead of by chance. Kernels that serve compile it to nothing.
template <int MUT>
__device__ __forceinline__ void tfc_fill_skew() {
  if (MUT == TFC_MUT_BARRIER && (int)threadIdx.x >= TFC_WAVE) {
    const long long t0 = clock64();
    while (clock64() - t0 < 20000) {
    }
  }
}

// Activations, as runtime/device.Act names them.
__device__ __forceinline__ float tfc_silu(float x) { return x / (1.f + expf(-x)); }
__device__ __forceinline__ float tfc_gelu(float x) { return 0.5f * x * (1.f + erff(x * 0.70710678118654752f)); }
__device__ __forceinline__ float tfc_gelu_tanh(float x) {
  return 0.5f * x * (1.f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}
__device__ __forceinline__ float tfc_quick_gelu(float x) { return x / (1.f + expf(-1.702f * x)); }

// tfc_rotate turns the pair (x, y) by angle pos·inv_freq (rotate-half RoPE).
__device__ __forceinline__ void tfc_rotate(float& x, float& y, float pos, float inv_freq) {
  float s, c;
  sincosf(pos * inv_freq, &s, &c);
  const float nx = x * c - y * s;
  const float ny = y * c + x * s;
  x = nx;
  y = ny;
}

// tfc_block_sum adds v over the block's THREADS threads (a power of two) through LDS red[THREADS]
// in a fixed tree order; every thread gets the sum.
template <int THREADS, int MUT>
__device__ __forceinline__ float tfc_block_sum(float v, float* red) {
  static_assert((THREADS & (THREADS - 1)) == 0, "THREADS must be a power of two");
  red[threadIdx.x] = v;
  tfc_fill_barrier<MUT>();
  for (int s = THREADS / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  const float r = red[0];
  __syncthreads();
  return r;
}

// tfc_gemm_smem is the LDS (in floats) tfc_gemm_tile needs: the A and B tiles, then the C tile.
template <int BM, int BN, int BK>
struct tfc_gemm_smem {
  static constexpr int ab = BK * (BM + 1) + BK * (BN + 1);
  static constexpr int c = BM * (BN + 1);
  static constexpr int floats = ab > c ? ab : c;
};

// Every GEMM output is summed in one order, whatever the launch: k in chunks of TFC_KC from 0
// (the last chunk ends at K rounded up to BK, padded with zeros), each chunk summed from zero in
// ascending k, the chunk sums added in ascending order. Both paths below follow it, so a row's
// result does not depend on how many rows share its tile.
#define TFC_KC 64
// Tiles with at most TFC_SMALL_ROWS rows (decode rounds) split k across threads instead; a GEMM
// launched on that few rows takes tiles TFC_SMALL_BN columns wide (a rope GEMM's hold rotary pairs).
#define TFC_SMALL_ROWS 8
#define TFC_SMALL_BN 16

// tfc_col is the output column of column c of a tile: n0 + c for a tile of consecutive columns.
__device__ __forceinline__ int tfc_col(int n0, int c) { return n0 + c; }
// tfc_rope_pairs is a TFC_SMALL_BN-column tile of rotary pairs: columns n0 + [0, TFC_SMALL_BN/2)
// of a head, then their partners HALF (head_dim/2) columns on.
template <int HALF>
struct tfc_rope_pairs {
  int n0;
};
template <int HALF>
__device__ __forceinline__ int tfc_col(tfc_rope_pairs<HALF> p, int c) {
  return p.n0 + (c < TFC_SMALL_BN / 2 ? c : c - TFC_SMALL_BN / 2 + HALF);
}

// tfc_rows_chunk sums, for the tile's rows, the chunk of item it (column c + BN·chunk j of the
// batch starting at chunk j0; output column tfc_col(cols, c)) into smem[(r*BN + c)*nb + j], walking
// k one element at a time. Each chunk is one fmaf chain over ascending k from zero, as
// tfc_gemm_tile sums it.
template <int BN, int KPAD, typename TX, typename TW, typename COLS>
__device__ __forceinline__ void tfc_rows_chunk(float* smem, const TX* X, int ldx, const TW* W, int ldw, int N, int kend,
                                               int rows, int m0, COLS cols, int j0, int jn, int nb, int it) {
  if (it >= BN * jn) return;
  const int c = it % BN, j = it / BN, n = tfc_col(cols, c);
  const int kb = (j0 + j) * TFC_KC, ke = kb + TFC_KC < KPAD ? kb + TFC_KC : KPAD;
  float p[TFC_SMALL_ROWS];
#pragma unroll
  for (int r = 0; r < TFC_SMALL_ROWS; ++r) p[r] = 0.f;
#pragma unroll 1
  for (int k = kb; k < ke; ++k) {
    const float b = (n < N && k < kend) ? tfc_ld(W + (size_t)n * ldw + k) : 0.f;
#pragma unroll
    for (int r = 0; r < TFC_SMALL_ROWS; ++r)
      if (r < rows) p[r] = fmaf(k < kend ? tfc_ld(X + (size_t)(m0 + r) * ldx + k) : 0.f, b, p[r]);
  }
#pragma unroll
  for (int r = 0; r < TFC_SMALL_ROWS; ++r)
    if (r < rows) smem[(r * BN + c) * nb + j] = p[r];
}

#if TFC_CUDA
// On CUDA a thread takes TFC_ROWS_ITEMS items (it0, it0 + 256, ...) at a time.
#define TFC_ROWS_ITEMS 4

template <int BN, int KPAD, typename TX, typename TW, typename COLS>
__device__ __forceinline__ void tfc_rows_items(float* smem, const TX* X, int ldx, const TW* W, int ldw, int N, int kend,
                                               int rows, int m0, COLS cols, int j0, int jn, int nb, int it0) {
#pragma unroll
  for (int u = 0; u < TFC_ROWS_ITEMS; ++u)
    tfc_rows_chunk<BN, KPAD>(smem, X, ldx, W, ldw, N, kend, rows, m0, cols, j0, jn, nb, it0 + 256 * u);
}

// tfc_w8_at is weight i of eight BF16 weights loaded as 16 bytes.
__device__ __forceinline__ float tfc_w8_at(const uint4& u, int i) {
  const unsigned w = i < 2 ? u.x : i < 4 ? u.y : i < 6 ? u.z : u.w;
  return __uint_as_float(i & 1 ? w & 0xffff0000u : w << 16);
}
__device__ __forceinline__ bool tfc_aligned16(const void* p, int ld, int size) {
  return ((size_t)p % 16 == 0) && ((size_t)ld * size % 16 == 0);
}
__device__ __forceinline__ uint4 tfc_shfl_xor(const uint4& v, int d) {
  return make_uint4(__shfl_xor_sync(0xffffffffu, v.x, d), __shfl_xor_sync(0xffffffffu, v.y, d),
                    __shfl_xor_sync(0xffffffffu, v.z, d), __shfl_xor_sync(0xffffffffu, v.w, d));
}
// tfc_swap_bit exchanges with lane ^ d: the lane with bit d set gives lo and takes the partner's
// hi into lo; the other gives hi and takes the partner's lo into hi.
__device__ __forceinline__ uint4 tfc_pick(bool c, uint4 a, uint4 b) {
  return make_uint4(c ? a.x : b.x, c ? a.y : b.y, c ? a.z : b.z, c ? a.w : b.w);
}
__device__ __forceinline__ void tfc_swap_bit(uint4& lo, uint4& hi, bool up, int d) {
  const uint4 got = tfc_shfl_xor(tfc_pick(up, lo, hi), d);
  lo = tfc_pick(up, got, lo);
  hi = tfc_pick(up, hi, got);
}
// With F32 activations and BF16 weights, when every item of a warp has its chunk whole inside K
// and 16-byte aligned rows, the warp loads its 32 chunks together: at load g, lane 8q + i reads
// the i-th 16 bytes of chunk 8q + g, so each load covers four whole 128-byte lines; three
// butterfly exchanges (lane bit against load bit) then leave each lane holding its own chunk's
// 64 weights. All of a thread's items are in flight before the first FMA, and each chunk's
// weights serve every row, in the chains tfc_rows_chunk computes. Other warps take
// tfc_rows_chunk. it0 is the item of this lane for u = 0; a warp's lanes hold consecutive items.
template <int BN, int KPAD, typename COLS>
__device__ __forceinline__ void tfc_rows_items(float* smem, const float* X, int ldx, const tfc_bf16* W, int ldw, int N, int kend,
                                               int rows, int m0, COLS cols, int j0, int jn, int nb, int it0) {
  constexpr int U = TFC_ROWS_ITEMS, G = TFC_KC / 8;
  const int lane = threadIdx.x % 32, q = lane / 8, i8 = lane % 8;
  const bool vec = tfc_aligned16(X + (size_t)m0 * ldx, ldx, 4) && tfc_aligned16(W, ldw, 2);
  uint4 w[U][G];
  bool fast[U];
  int kb[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int it = it0 + 256 * u, n = tfc_col(cols, it % BN);
    kb[u] = (j0 + it / BN) * TFC_KC;
    fast[u] = __all_sync(0xffffffffu, vec && it < BN * jn && n < N && kb[u] + TFC_KC <= kend);
    if (fast[u]) {
#pragma unroll
      for (int g = 0; g < G; ++g) {  // chunk 8q + g of the warp, its i8-th 16 bytes
        const int src = it - lane + 8 * q + g;
        const tfc_bf16* row = W + (size_t)tfc_col(cols, src % BN) * ldw + (j0 + src / BN) * TFC_KC;
        w[u][g] = reinterpret_cast<const uint4*>(row)[i8];
      }
      uint4* v = w[u];  // (lane i8, load g) -> (lane g, load i8), one bit at a time
      tfc_swap_bit(v[0], v[4], i8 & 4, 4), tfc_swap_bit(v[1], v[5], i8 & 4, 4);
      tfc_swap_bit(v[2], v[6], i8 & 4, 4), tfc_swap_bit(v[3], v[7], i8 & 4, 4);
      tfc_swap_bit(v[0], v[2], i8 & 2, 2), tfc_swap_bit(v[1], v[3], i8 & 2, 2);
      tfc_swap_bit(v[4], v[6], i8 & 2, 2), tfc_swap_bit(v[5], v[7], i8 & 2, 2);
      tfc_swap_bit(v[0], v[1], i8 & 1, 1), tfc_swap_bit(v[2], v[3], i8 & 1, 1);
      tfc_swap_bit(v[4], v[5], i8 & 1, 1), tfc_swap_bit(v[6], v[7], i8 & 1, 1);
    }
  }
#pragma unroll
  for (int u = 0; u < U; ++u)
    if (!fast[u]) tfc_rows_chunk<BN, KPAD>(smem, X, ldx, W, ldw, N, kend, rows, m0, cols, j0, jn, nb, it0 + 256 * u);
#pragma unroll 1
  for (int r = 0; r < rows; ++r) {
    const float* xr = X + (size_t)(m0 + r) * ldx;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (!fast[u]) continue;
      const float4* x4 = reinterpret_cast<const float4*>(xr + kb[u]);
      float p = 0.f;
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float4 a = x4[2 * g], b = x4[2 * g + 1];
        const float x[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
        for (int i = 0; i < 8; ++i) p = fmaf(x[i], tfc_w8_at(w[u][g], i), p);
      }
      const int it = it0 + 256 * u;
      smem[(r * BN + it % BN) * nb + it / BN] = p;
    }
  }
}
#endif

// tfc_gemm_rows is tfc_gemm_tile for a tile of rows ≤ TFC_SMALL_ROWS: threads sum (column, chunk)
// pairs for every row at once, in batches whose chunk sums fit in smem, and each thread then adds
// the chunk sums of the (row, column) outputs it owns in ascending order. smem holds FLOATS. Tile
// column c is output column tfc_col(cols, c): cols is n0, or a tfc_rope_pairs.
template <int BM, int BN, int BK, int N, int K, int MUT, int FLOATS = tfc_gemm_smem<BM, BN, BK>::floats, typename TX, typename TW,
          typename COLS>
__device__ __forceinline__ void tfc_gemm_rows(float* smem, const TX* X, int ldx, const TW* W, int ldw, int rows, int m0, COLS cols) {
  constexpr int KPAD = (K + BK - 1) / BK * BK;
  constexpr int NC = (KPAD + TFC_KC - 1) / TFC_KC;
  constexpr int OWN = (BN * TFC_SMALL_ROWS + 255) / 256;
  const int kend = tfc_bound<MUT>(K);
  const int ldxm = tfc_stride<MUT>(ldx);
  const int owners = BN * rows;
  const int nb = FLOATS / owners;  // chunk sums a batch keeps
  float total[OWN];
#pragma unroll
  for (int o = 0; o < OWN; ++o) total[o] = 0.f;
  for (int j0 = 0; j0 < NC; j0 += nb) {
    const int jn = NC - j0 < nb ? NC - j0 : nb;
#if TFC_CUDA  // whole warps of 32 consecutive items go round together: the CUDA path loads by warp
    for (int base = threadIdx.x / 32 * 32; base < BN * jn; base += 256 * TFC_ROWS_ITEMS)
      tfc_rows_items<BN, KPAD>(smem, X, ldxm, W, ldw, N, kend, rows, m0, cols, j0, jn, nb, base + threadIdx.x % 32);
#else  // one item a thread: on gfx9 the register-blocked path needs more SGPRs than a wave has (tfc audit)
    for (int it = threadIdx.x; it < BN * jn; it += 256)
      tfc_rows_chunk<BN, KPAD>(smem, X, ldxm, W, ldw, N, kend, rows, m0, cols, j0, jn, nb, it);
#endif
    tfc_fill_barrier<MUT>();
#pragma unroll
    for (int o = 0; o < OWN; ++o) {
      const int own = threadIdx.x + 256 * o;
      if (own < owners)
        for (int j = 0; j < jn; ++j) total[o] += smem[own * nb + j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int o = 0; o < OWN; ++o) {
    const int own = threadIdx.x + 256 * o;
    if (own < owners) smem[(own / BN) * (BN + 1) + own % BN] = total[o];
  }
  __syncthreads();
}

// tfc_gemm_tile computes the BM×BN tile at (m0, n0) of X·Wᵀ, X [M,K] and W [N,K], accumulating in
// F32 in the order above, and leaves it in smem as C[r*(BN+1) + c] for the epilogue.
// 256 threads as a 16×16 grid; thread (ty, tx) owns rows ty+16i and columns tx+16j.
template <int BM, int BN, int BK, int N, int K, int MUT, typename TX, typename TW>
__device__ __forceinline__ void tfc_gemm_tile(float* smem, const TX* X, int ldx, const TW* W, int ldw, int M, int m0, int n0) {
  static_assert(BM % 16 == 0 && BN % 16 == 0, "tile sides must be multiples of 16");
  static_assert(TFC_KC == 64 && TFC_KC % BK == 0 && BM >= TFC_SMALL_ROWS, "chunks hold whole BK steps");
  const int rows = M - m0 < BM ? M - m0 : BM;
  if (rows <= TFC_SMALL_ROWS) {
    tfc_gemm_rows<BM, BN, BK, N, K, MUT>(smem, X, ldx, W, ldw, rows, m0, n0);
    return;
  }
  constexpr int TM = BM / 16, TN = BN / 16;
  float* As = smem;                 // [BK][BM+1]
  float* Bs = smem + BK * (BM + 1);  // [BK][BN+1]
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int kend = tfc_bound<MUT>(K);
  const int ldxm = tfc_stride<MUT>(ldx);
  float acc[TM][TN], part[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = part[i][j] = 0.f;

  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int e = threadIdx.x; e < BM * BK; e += 256) {
      const int r = e / BK, k = e % BK, m = m0 + r, kk = k0 + k;
      As[k * (BM + 1) + r] = (m < M && kk < kend) ? tfc_ld(X + (size_t)m * ldxm + kk) : 0.f;
    }
    for (int e = threadIdx.x; e < BN * BK; e += 256) {
      const int c = e / BK, k = e % BK, n = n0 + c, kk = k0 + k;
      Bs[k * (BN + 1) + c] = (n < N && kk < kend) ? tfc_ld(W + (size_t)n * ldw + kk) : 0.f;
    }
    tfc_fill_barrier<MUT>();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = As[k * (BM + 1) + ty + 16 * i];
#pragma unroll
      for (int j = 0; j < TN; ++j) b[j] = Bs[k * (BN + 1) + tx + 16 * j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) part[i][j] = fmaf(a[i], b[j], part[i][j]);
    }
    if ((k0 + BK) % TFC_KC == 0 || k0 + BK >= K) {
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) {
          acc[i][j] += part[i][j];
          part[i][j] = 0.f;
        }
    }
    __syncthreads();
  }
  float* C = smem;
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) C[(ty + 16 * i) * (BN + 1) + tx + 16 * j] = acc[i][j];
  __syncthreads();
}

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

// tfc_attention_paged: block (r, h) takes row r and query head h, which reads KV head h / QG; it
// attends causally to positions 0..pos of the row's sequence through its page table.
#if TFC_CUDA
// On CUDA the block's warps split the keys 0..pos into contiguous ranges of ceil((pos+1)/warps)
// keys, so the split depends on pos alone. A warp walks its range in runs of 32 keys, each lane
// looking up one key's cache row a run ahead, and loads tfc_attn_keys<HD> keys at a time, K and V
// together (keys past the run load its last key again and weigh 0). A lane holds dims lane + 32i
// of q, of each key and of the output. A score is the lane's fmaf chain over its dims, summed
// over the warp by an xor butterfly (16, 8, 4, 2, 1), so every lane holds the same bits. Each
// warp keeps its own online softmax (max m, sum l, output o), rescaled once per load of keys; the
// warps' (m, l, o) then meet in LDS and each output dim adds them up in warp order. A running max
// of -inf (no finite score yet) rescales from 0 instead, so keys scored -inf weigh 0 and a row
// with no finite score ends as 0/0 (NaN), as softmax gives.
template <int HD>
__device__ constexpr int tfc_attn_keys() { return (HD + 31) / 32 <= 4 ? 16 : (HD + 31) / 32 <= 8 ? 8 : 4; }

template <int HD, int QG, int BKV, int THREADS, int PS, int MUT, typename TQ, typename TC, typename TY>
__device__ __forceinline__ void tfc_attention_paged(const TQ* Q, int ldq, const TC* Kc, int ldkc, const TC* Vc, int ldvc, TY* Y,
                                    int ldy, const int* row_seq, const int* row_pos, const int* page_table, int ldpt,
                                    int M, float scale) {
  static_assert(THREADS % 32 == 0, "THREADS must be whole warps");
  constexpr int NW = THREADS / 32, D = (HD + 31) / 32, U = tfc_attn_keys<HD>();
  constexpr unsigned all = 0xffffffffu;
  __shared__ float pm[NW], pl[NW], po[NW * HD];
  const int r = blockIdx.x, h = blockIdx.y;
  if (r >= M) return;
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
  const int per = (nkeys + NW - 1) / NW;
  const int t0 = min(nkeys, w * per), t1 = min(nkeys, t0 + per);
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
  tfc_fill_barrier<MUT>();
  float mx = TFC_NEG_INF;
#pragma unroll
  for (int v = 0; v < NW; ++v) mx = fmaxf(mx, pm[v]);
  const float mref = mx == TFC_NEG_INF ? 0.f : mx;
  for (int d = threadIdx.x; d < HD; d += THREADS) {
    float lsum = 0.f, osum = 0.f;
#pragma unroll
    for (int v = 0; v < NW; ++v) {
      const float f = expf(pm[v] - mref);
      lsum = fmaf(pl[v], f, lsum);
      osum = fmaf(po[v * HD + d], f, osum);
    }
    tfc_st(Y + (size_t)r * ldy + h * HD + d, osum / lsum);
  }
}
#else
// Elsewhere the block's threads take the keys together in LDS tiles (tfc_attend, one query).
template <int HD, int QG, int BKV, int THREADS, int PS, int MUT, typename TQ, typename TC, typename TY>
__device__ __forceinline__ void tfc_attention_paged(const TQ* Q, int ldq, const TC* Kc, int ldkc, const TC* Vc, int ldvc, TY* Y,
                                    int ldy, const int* row_seq, const int* row_pos, const int* page_table, int ldpt,
                                    int M, float scale) {
  __shared__ float qs[HD], os[HD], ls[1];
  const int r = blockIdx.x, h = blockIdx.y;
  if (r >= M) return;
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

#if TFC_CUDA
// ---------------------------------------------------------------------------------------------
// Tensor-core GEMM (CUDA): the linears of the vision towers.
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
// ±Inf and NaN go in hi alone (NaN made quiet), so they reach the outputs as the reference's.
//
// Order of accumulation, fixed for every output: k in steps of 16 from 0 (K padded with zeros to
// a multiple of TFC_MMA_BK); within each TFC_KC chunk the hi products go to one accumulator and
// the lo2 then lo products to another, both from zero; at the chunk's end hi + lo is added to the
// output's sum, chunks in ascending order. An output's bits depend only on its own row of X and
// column of W: every tile, whatever its width and however many of its rows are real (rows past M
// are zeros), computes each element with the same instructions. So the path is the same at every
// M (there is no small-row path here) and a row's result does not depend on the launch.
//
// 256 threads are 8 warps, (BM/16) along the rows by 8/(BM/16) along the columns; warp (wm, wn)
// owns rows 16wm..16wm+15 and the 8-column tiles wn, wn + WN, ... Each TFC_MMA_BK step is staged
// in LDS as BF16 (three planes of X's terms and one of W, rows padded to TFC_MMA_LD elements so
// that ldmatrix reads hit distinct banks), double-buffered: the next step's global loads are in
// flight while the tensor cores work on this one, and one barrier a step separates them.
#define TFC_MMA_BK 32
#define TFC_MMA_LD (TFC_MMA_BK + 8)

// tfc_mma_smem is the LDS (in floats) tfc_gemm_mma needs: two stages, then the C tile.
template <int BM, int BN>
struct tfc_mma_smem {
  static constexpr int stage = (3 * BM + BN) * TFC_MMA_LD;  // BF16 elements of one stage
  static constexpr int ab = stage;                          // floats of two stages
  static constexpr int c = BM * (BN + 1);
  static constexpr int floats = ab > c ? ab : c;
};

// tfc_split3 splits x into the BF16 bits of hi, lo and lo2 (see above).
__device__ __forceinline__ void tfc_split3(float x, unsigned& hi, unsigned& lo, unsigned& lo2) {
  const unsigned u = __float_as_uint(x);
  if ((u & 0x7f800000u) == 0x7f800000u) {
    hi = (u >> 16) | ((u & 0x007fffffu) ? 0x40u : 0u);
    lo = lo2 = 0u;
    return;
  }
  const float r = x - __uint_as_float(u & 0xffff0000u);  // exact: the low 16 bits of x
  const unsigned ur = __float_as_uint(r);
  const float r2 = r - __uint_as_float(ur & 0xffff0000u);  // exact, at most 8 significant bits
  hi = u >> 16;
  lo = ur >> 16;
  lo2 = __float_as_uint(r2) >> 16;
}

#ifndef TFC_MMA_EMULATED  // a host test can supply these three to run tfc_gemm_mma on the CPU
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

// tfc_mma_load reads the TFC_MMA_BK step at k0 of the tile into registers: a thread's float4s of
// X (unit u: row u/8, k 4(u%8)) and 8-element pieces of W (unit u: column u/4, k 8(u%4)). Past
// M, N or kend it reads zeros; rows that are not 16-byte aligned are read an element at a time.
// Tile column c is W row tfc_col(cols, c): cols is n0, or a tfc_rope_pairs.
template <int BM, int BN, int N, int A4, int B8, typename COLS>
__device__ __forceinline__ void tfc_mma_load(float4 (&ra)[A4], uint4 (&rb)[B8], const float* X, int ldx, bool xvec,
                                             const tfc_bf16* W, int ldw, bool wvec, int M, int m0, COLS cols, int k0,
                                             int kend) {
  constexpr int BK = TFC_MMA_BK;
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

// tfc_mma_store writes the registers tfc_mma_load read into the stage at s: X split into its
// three planes [3][BM][TFC_MMA_LD], then W [BN][TFC_MMA_LD].
template <int BM, int BN, int A4, int B8, int MUT>
__device__ __forceinline__ void tfc_mma_store(unsigned short* s, const float4 (&ra)[A4], const uint4 (&rb)[B8]) {
  constexpr int BK = TFC_MMA_BK, LD = TFC_MMA_LD;
  tfc_fill_skew<MUT>();
#pragma unroll
  for (int i = 0; i < A4; ++i) {
    const int u = threadIdx.x + 256 * i, r = u / (BK / 4), k = 4 * (u % (BK / 4));
    if (u >= BM * BK / 4) continue;
    unsigned h[4], l[4], l2[4];
    tfc_split3(ra[i].x, h[0], l[0], l2[0]);
    tfc_split3(ra[i].y, h[1], l[1], l2[1]);
    tfc_split3(ra[i].z, h[2], l[2], l2[2]);
    tfc_split3(ra[i].w, h[3], l[3], l2[3]);
    *reinterpret_cast<uint2*>(s + r * LD + k) = make_uint2(h[0] | h[1] << 16, h[2] | h[3] << 16);
    *reinterpret_cast<uint2*>(s + (BM + r) * LD + k) = make_uint2(l[0] | l[1] << 16, l[2] | l[3] << 16);
    *reinterpret_cast<uint2*>(s + (2 * BM + r) * LD + k) = make_uint2(l2[0] | l2[1] << 16, l2[2] | l2[3] << 16);
  }
#pragma unroll
  for (int i = 0; i < B8; ++i) {
    const int u = threadIdx.x + 256 * i, c = u / (BK / 8), k = 8 * (u % (BK / 8));
    if (u < BN * BK / 8) *reinterpret_cast<uint4*>(s + (3 * BM + c) * LD + k) = rb[i];
  }
}

template <int BM, int BN, int N, int K, int MUT, typename COLS>
__device__ __forceinline__ void tfc_gemm_mma(float* smem, const float* X, int ldx, const tfc_bf16* W, int ldw, int M, int m0, COLS cols) {
  constexpr int BK = TFC_MMA_BK, LD = TFC_MMA_LD;
  constexpr int WM = BM / 16, WN = 8 / WM;            // warps along rows and columns
  constexpr int NT8 = BN / 8, NT = (NT8 + WN - 1) / WN;  // 8-column tiles: of the tile, of a warp
  constexpr int A4 = (BM * BK / 4 + 255) / 256, B8 = (BN * BK / 8 + 255) / 256;
  constexpr int KT = (K + BK - 1) / BK, STAGE = tfc_mma_smem<BM, BN>::stage;
  static_assert(BM % 16 == 0 && WM >= 1 && WM <= 8 && 8 % WM == 0, "BM must be 16, 32, 64 or 128");
  static_assert(BN % 8 == 0, "BN must be a multiple of 8");
  static_assert(TFC_KC % BK == 0, "chunks hold whole steps");
  static_assert(tfc_mma_smem<BM, BN>::floats * 4 <= 48 * 1024, "the tile's LDS must fit a block's static 48 KiB");
  unsigned short* const sm = reinterpret_cast<unsigned short*>(smem);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, wm = warp % WM, wn = warp / WM;
  // shared byte addresses of this lane's ldmatrix rows in stage 0: A (hi; lo and lo2 follow
  // BM rows apart) and B (8-column tile 0; tile j is 8j rows on)
  const unsigned a0 = tfc_smem_addr(sm) + 2 * ((wm * 16 + lane % 16) * LD + lane / 16 * 8);
  const unsigned b0 = tfc_smem_addr(sm) + 2 * ((3 * BM + lane % 8) * LD + lane / 8 % 2 * 8);
  const unsigned b0x4 = b0 + 2 * (lane / 16 * WN * 8 * LD);  // lanes 16..31: tile j + WN
  const int kend = tfc_bound<MUT>(K);
  const int ldxm = tfc_stride<MUT>(ldx);
  const bool xvec = tfc_aligned16(X, ldxm, 4), wvec = tfc_aligned16(W, ldw, 2);
  float acc[NT][4], phi[NT][4], plo[NT][4];
#pragma unroll
  for (int i = 0; i < NT; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[i][e] = phi[i][e] = plo[i][e] = 0.f;

  float4 ra[A4];
  uint4 rb[B8];
  tfc_mma_load<BM, BN, N>(ra, rb, X, ldxm, xvec, W, ldw, wvec, M, m0, cols, 0, kend);
  tfc_mma_store<BM, BN, A4, B8, MUT>(sm, ra, rb);
  tfc_fill_barrier<MUT>();
#pragma unroll 1
  for (int s = 0; s < KT; ++s) {
    if (s + 1 < KT) tfc_mma_load<BM, BN, N>(ra, rb, X, ldxm, xvec, W, ldw, wvec, M, m0, cols, (s + 1) * BK, kend);
    const unsigned st = 2 * (s & 1) * STAGE;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      unsigned a[3][4];  // hi, lo, lo2 of rows 16wm.., k kk..kk+15
#pragma unroll
      for (int p = 0; p < 3; ++p) tfc_ldsm_x4(a[p], a0 + st + 2 * (p * BM * LD + kk));
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
        tfc_mma_bf16(plo[i], a[2], b);
        tfc_mma_bf16(plo[i], a[1], b);
        tfc_mma_bf16(phi[i], a[0], b);
      }
    }
    if (((s + 1) * BK) % TFC_KC == 0 || s + 1 == KT) {
#pragma unroll
      for (int i = 0; i < NT; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          acc[i][e] += phi[i][e] + plo[i][e];
          phi[i][e] = plo[i][e] = 0.f;
        }
    }
    if (s + 1 < KT) {
      tfc_mma_store<BM, BN, A4, B8, MUT>(sm + ((s + 1) & 1) * STAGE, ra, rb);
      tfc_fill_barrier<MUT>();
    }
  }
  __syncthreads();  // C overlays the stages
  float* C = smem;
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int i = 0; i < NT; ++i) {
    const int j = wn + WN * i;
    if (NT8 % WN != 0 && j >= NT8) continue;
    float* c = C + (wm * 16 + g) * (BN + 1) + j * 8 + 2 * t;
    c[0] = acc[i][0];
    c[1] = acc[i][1];
    c[8 * (BN + 1)] = acc[i][2];
    c[8 * (BN + 1) + 1] = acc[i][3];
  }
  __syncthreads();
}

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
// s·scale, p = exp(s - m), the sum of p and the output rescaled by exp(m_old - m_new).
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
// bl + b2: hi·hi into big, the five smaller ones into small, smallest first.
__device__ __forceinline__ void tfc_mma_split6(float (&big)[4], float (&small)[4], const unsigned (&a)[3][4],
                                               const unsigned (&bh)[2], const unsigned (&bl)[2], const unsigned (&b2)[2]) {
  tfc_mma_bf16(small, a[2], bh);
  tfc_mma_bf16(small, a[0], b2);
  tfc_mma_bf16(small, a[1], bl);
  tfc_mma_bf16(small, a[1], bh);
  tfc_mma_bf16(small, a[0], bl);
  tfc_mma_bf16(big, a[0], bh);
}

template <int HD, int QG, int MUT, typename TQ, typename TK, typename TV, typename TY>
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
      kt[PL] = ll;
      kt[2 * PL] = l2;
      tfc_split3(vx, hh, ll, l2);
      kt[3 * PL] = hh;
      kt[4 * PL] = ll;
      kt[5 * PL] = l2;
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
            unsigned bh[2], bl[2], b2[2];
            const unsigned a = ka + 2 * (n * 8 * LDK + ks * 16);
            tfc_ldsm_x2(bh, a);
            tfc_ldsm_x2(bl, a + 2 * PL);
            tfc_ldsm_x2(b2, a + 4 * PL);
            tfc_mma_split6(sb[n], ss[n], qf[ks], bh, bl, b2);
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
          s[n][2 * i] = expf(s[n][2 * i] - mu);
          s[n][2 * i + 1] = expf(s[n][2 * i + 1] - mu);
          sum += s[n][2 * i] + s[n][2 * i + 1];
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
          unsigned bh[2], bl[2], b2[2];
          const unsigned a = va + 2 * (kk * 16 * LDK + n * 8);
          tfc_ldsm_x2_trans(bh, a);
          tfc_ldsm_x2_trans(bl, a + 2 * PL);
          tfc_ldsm_x2_trans(b2, a + 4 * PL);
          tfc_mma_split6(cb, cs, pf[kk], bh, bl, b2);
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
      if (r < nq && d < HD) tfc_st(Y + (size_t)(r0 + r) * ldy + qcol + d, o[n][e] / l[e / 2]);
    }
}
#endif
