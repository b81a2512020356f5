// tfc_gemm.h: the GEMM tiles of every linear: tfc_gemm_tile, and tfc_gemm_rows for tiles of at most
// TFC_SMALL_ROWS rows (decode rounds), both summing every output in one fixed order.
#pragma once
#include "tfc_mutations.h"

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

// TFC_FILL is where a linear's fill function (launches of many rows) takes the fill layout,
// tfc_gemm_mma_fill: CUDA. Elsewhere that function is the many-row one.
#if TFC_CUDA
#define TFC_FILL 1
#else
#define TFC_FILL 0
#endif

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
// tfc_glu_pairs is a BN-column tile of a gate and up stack: gate columns n0 + [0, BN/2), then
// their up partners HALF (the gate's width) columns on.
template <int BN, int HALF>
struct tfc_glu_pairs {
  int n0;
};
template <int BN, int HALF>
__device__ __forceinline__ int tfc_col(tfc_glu_pairs<BN, HALF> p, int c) {
  return p.n0 + (c < BN / 2 ? c : c - BN / 2 + HALF);
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

// tfc_aligned16 says whether p and every row ld elements of size bytes on are 16-byte aligned.
__device__ __forceinline__ bool tfc_aligned16(const void* p, int ld, int size) {
  return ((size_t)p % 16 == 0) && ((size_t)ld * size % 16 == 0);
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

// tfc_gemm_tile computes the BM×BN tile at row m0 of X·Wᵀ, X [M,K] and W [N,K] (tile column c is
// column tfc_col(cols, c): cols is n0, or a tfc_glu_pairs), accumulating in F32 in the order
// above, and leaves it in smem as C[r*(BN+1) + c] for the epilogue.
// 256 threads as a 16×16 grid; thread (ty, tx) owns rows ty+16i and columns tx+16j.
template <int BM, int BN, int BK, int N, int K, int MUT, typename TX, typename TW, typename COLS>
__device__ __forceinline__ void tfc_gemm_tile(float* smem, const TX* X, int ldx, const TW* W, int ldw, int M, int m0, COLS cols) {
  static_assert(BM % 16 == 0 && BN % 16 == 0, "tile sides must be multiples of 16");
  static_assert(TFC_KC == 64 && TFC_KC % BK == 0 && BM >= TFC_SMALL_ROWS, "chunks hold whole BK steps");
  const int rows = M - m0 < BM ? M - m0 : BM;
  if (rows <= TFC_SMALL_ROWS) {
    tfc_gemm_rows<BM, BN, BK, N, K, MUT>(smem, X, ldx, W, ldw, rows, m0, cols);
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
      const int c = e / BK, k = e % BK, n = tfc_col(cols, c), kk = k0 + k;
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
