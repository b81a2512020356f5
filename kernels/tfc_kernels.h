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
// Tiles with at most TFC_SMALL_ROWS rows (decode rounds) split k across threads instead; a
// rope-free GEMM launched on that few rows takes tiles TFC_SMALL_BN columns wide.
#define TFC_SMALL_ROWS 8
#define TFC_SMALL_BN 16

// tfc_rows_chunk sums, for the tile's rows, the chunk of item it (column c + BN·chunk j of the
// batch starting at chunk j0) into smem[(r*BN + c)*nb + j], walking k one element at a time. Each
// chunk is one fmaf chain over ascending k from zero, as tfc_gemm_tile sums it.
template <int BN, int KPAD, typename TX, typename TW>
__device__ __forceinline__ void tfc_rows_chunk(float* smem, const TX* X, int ldx, const TW* W, int ldw, int N, int kend,
                                               int rows, int m0, int n0, int j0, int jn, int nb, int it) {
  if (it >= BN * jn) return;
  const int c = it % BN, j = it / BN, n = n0 + c;
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

template <int BN, int KPAD, typename TX, typename TW>
__device__ __forceinline__ void tfc_rows_items(float* smem, const TX* X, int ldx, const TW* W, int ldw, int N, int kend,
                                               int rows, int m0, int n0, int j0, int jn, int nb, int it0) {
#pragma unroll
  for (int u = 0; u < TFC_ROWS_ITEMS; ++u)
    tfc_rows_chunk<BN, KPAD>(smem, X, ldx, W, ldw, N, kend, rows, m0, n0, j0, jn, nb, it0 + 256 * u);
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
template <int BN, int KPAD>
__device__ __forceinline__ void tfc_rows_items(float* smem, const float* X, int ldx, const tfc_bf16* W, int ldw, int N, int kend,
                                               int rows, int m0, int n0, int j0, int jn, int nb, int it0) {
  constexpr int U = TFC_ROWS_ITEMS, G = TFC_KC / 8;
  const int lane = threadIdx.x % 32, q = lane / 8, i8 = lane % 8;
  const bool vec = tfc_aligned16(X + (size_t)m0 * ldx, ldx, 4) && tfc_aligned16(W, ldw, 2);
  uint4 w[U][G];
  bool fast[U];
  int kb[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int it = it0 + 256 * u, n = n0 + it % BN;
    kb[u] = (j0 + it / BN) * TFC_KC;
    fast[u] = __all_sync(0xffffffffu, vec && it < BN * jn && n < N && kb[u] + TFC_KC <= kend);
    if (fast[u]) {
#pragma unroll
      for (int g = 0; g < G; ++g) {  // chunk 8q + g of the warp, its i8-th 16 bytes
        const int src = it - lane + 8 * q + g;
        const tfc_bf16* row = W + (size_t)(n0 + src % BN) * ldw + (j0 + src / BN) * TFC_KC;
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
    if (!fast[u]) tfc_rows_chunk<BN, KPAD>(smem, X, ldx, W, ldw, N, kend, rows, m0, n0, j0, jn, nb, it0 + 256 * u);
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
// the chunk sums of the (row, column) outputs it owns in ascending order. smem holds FLOATS.
template <int BM, int BN, int BK, int N, int K, int MUT, int FLOATS = tfc_gemm_smem<BM, BN, BK>::floats, typename TX, typename TW>
__device__ __forceinline__ void tfc_gemm_rows(float* smem, const TX* X, int ldx, const TW* W, int ldw, int rows, int m0, int n0) {
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
      tfc_rows_items<BN, KPAD>(smem, X, ldxm, W, ldw, N, kend, rows, m0, n0, j0, jn, nb, base + threadIdx.x % 32);
#else  // one item a thread: on gfx9 the register-blocked path needs more SGPRs than a wave has (tfc audit)
    for (int it = threadIdx.x; it < BN * jn; it += 256)
      tfc_rows_chunk<BN, KPAD>(smem, X, ldxm, W, ldw, N, kend, rows, m0, n0, j0, jn, nb, it);
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
template <int HD, int QG, int BKV, int THREADS, int MUT, typename TQ, typename TK, typename TV, typename TY>
__device__ __forceinline__ void tfc_attention_spans(const TQ* Q, int ldq, const TK* K, int ldk, const TV* V, int ldv, TY* Y, int ldy,
                                    const int* spans, int S, int heads, int kvheads, float scale) {
  __shared__ float qs[QG * HD], os[QG * HD], ls[QG];
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
  const int nq = min(QG, s1 - r0);
  const int ldqm = tfc_stride<MUT>(ldq);
  for (int e = threadIdx.x; e < QG * HD; e += THREADS) {
    const int g = e / HD, d = e % HD;
    qs[e] = g < nq ? tfc_ld(Q + (size_t)(r0 + g) * ldqm + h * HD + d) : 0.f;
  }
  __syncthreads();
  const int kh = h / (heads / kvheads);
  tfc_attend<HD, QG, BKV, THREADS, MUT>(qs, nq, K, ldk, V, ldv, kh * HD, s1 - s0, scale, tfc_span_keys{s0}, os, ls);
  for (int e = threadIdx.x; e < nq * HD; e += THREADS) {
    const int g = e / HD, d = e % HD;
    tfc_st(Y + (size_t)(r0 + g) * ldy + h * HD + d, os[e] / ls[g]);
  }
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
