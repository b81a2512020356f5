// Runs tfc_attention_spans (kernels/tfc_kernels.h) on the CPU through the emulated warp
// instructions of tfc_hip.h beside it: under TFC_CUDA the tensor-core path (tfc_attention_mma),
// compiled with EMU_PORTABLE the path other targets take (tfc_attend over sub-groups). It checks
// against a float64 reference what a GPU run cannot show without a GPU: every output of every
// span (lengths 1 to 300, head_dim 16, 80 and 128, GQA, strided rows) within F32 accuracy, a
// row's bits the same wherever its span sits in the batch, NaN and ±Inf in Q, K or V coming out
// as the reference's, and the off-by-one, dropped-scale, wrong-stride and missing-barrier
// controls changing the result. Built with TFC_BF16=1 it checks BF16 precision instead (bf16
// below). It prints "N passed, N failed".
#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "attn_check.h"
#include "tfc_kernels.h"

constexpr int QG = 128;  // the emitter's rows a block (spanRows)
// TOL is the worst error allowed against float64: F32 accuracy, or a few BF16 roundings in BF16
// precision (inputs BF16-exact, one term of each on the tensor cores, P and the output rounded).
#if TFC_BF16
constexpr double TOL = 0x1p-6;
#else
constexpr double TOL = 5e-6;
#endif

struct Batch {
  std::vector<int> spans;
  int heads, kvh, hd, ldq, ldk;
  std::vector<float> q, k, v;  // q [R, ldq], k and v [R, ldk]
  int rows() const { return spans.back(); }
};

static Batch make(std::vector<int> lens, int heads, int kvh, int hd, int qpad, unsigned seed, float qscale) {
  Batch b{{0}, heads, kvh, hd, heads * hd + qpad, kvh * hd + (qpad ? 3 : 0), {}, {}, {}};
  for (int n : lens) b.spans.push_back(b.spans.back() + n);
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  const int r = b.rows();
  b.q.resize((size_t)r * b.ldq + 1);
  b.k.resize((size_t)r * b.ldk + 1);
  b.v.resize((size_t)r * b.ldk + 1);
  for (auto& x : b.q) x = tfc_rnd(qscale * nd(rng));  // BF16-exact in BF16 precision
  for (auto& x : b.k) x = tfc_rnd(nd(rng));
  for (auto& x : b.v) x = tfc_rnd(nd(rng));
  return b;
}

// run launches the emitter's grid (groups of QG rows plus one a span, by heads) into y [R, heads*hd],
// the tensor cores taking TERMS BF16 terms of each operand.
template <int HD, int MUT, int TERMS = TFC_MMA_TERMS>
static std::vector<float> run(const Batch& b, float scale) {
  const int S = (int)b.spans.size() - 1, ldy = b.heads * HD;
  std::vector<float> y((size_t)b.rows() * ldy, NAN);
#if TFC_CUDA
  unsigned char* sm = reinterpret_cast<unsigned char*>(tfc_attn_smem<HD, TERMS>());
  const size_t bytes = tfc_attn_mma_shape<HD, TERMS>::size * 2;
#else
  static float4 lds[4];  // tfc_attend's LDS is its own statics
  unsigned char* sm = reinterpret_cast<unsigned char*>(lds);
  const size_t bytes = sizeof lds;
#endif
  const int gx = (b.rows() + QG - 1) / QG + S;
  const float *Q = b.q.data(), *K = b.k.data(), *V = b.v.data();
  const int* spans = b.spans.data();
  float* Y = y.data();
  const int ldq = b.ldq, ldk = b.ldk, heads = b.heads, kvh = b.kvh;
  for (int h = 0; h < b.heads; ++h)
    for (int x = 0; x < gx; ++x) {
      std::memset(sm, 0xff, bytes);  // stale LDS: NaN
      emu_run(sm, x, h, [=] {
        tfc_attention_spans<HD, QG, 32, 256, MUT, TERMS>(Q, ldq, K, ldk, V, ldk, Y, ldy, spans, S, heads, kvh, scale);
      });
    }
  return y;
}

// reference is the contract's attention (contracts/reference.go attend) in float64.
static std::vector<double> reference(const Batch& b, double scale, int drop = 0, int ldq = 0) {
  const int hd = b.hd, ldy = b.heads * hd;
  if (!ldq) ldq = b.ldq;
  std::vector<double> y((size_t)b.rows() * ldy);
  for (size_t s = 0; s + 1 < b.spans.size(); ++s) {
    const int lo = b.spans[s], hi = b.spans[s + 1] - drop;
    for (int i = b.spans[s]; i < b.spans[s + 1]; ++i)
      for (int h = 0; h < b.heads; ++h) {
        const int g = h / (b.heads / b.kvh);
        std::vector<double> sc(std::max(hi - lo, 0));
        double mx = -INFINITY, sum = 0;
        for (int j = lo; j < hi; ++j) {
          double d = 0;
          for (int t = 0; t < hd; ++t) d += (double)b.q[(size_t)i * ldq + h * hd + t] * b.k[(size_t)j * b.ldk + g * hd + t];
          sc[j - lo] = d * scale;
          mx = std::isnan(sc[j - lo]) || std::isnan(mx) ? NAN : std::max(mx, sc[j - lo]);
        }
        for (auto& x : sc) {
          x = std::exp(x - mx);
          sum += x;
        }
        for (int t = 0; t < hd; ++t) {
          double o = 0;
          for (int j = lo; j < hi; ++j) o += sc[j - lo] / sum * b.v[(size_t)j * b.ldk + g * hd + t];
          y[(size_t)i * ldy + h * hd + t] = o;
        }
      }
  }
  return y;
}

template <int HD>
static void suite(const char* name, std::vector<int> lens, int heads, int kvh, int qpad, bool reorder) {
  char what[160];
  const float scale = 1.f / std::sqrt((float)HD);
  Batch b = make(lens, heads, kvh, HD, qpad, 11 + HD + qpad, 3.f);
  const auto y = run<HD, TFC_MUT_NONE>(b, scale);
  const double e = worst(b.hd, y, reference(b, scale));
  std::snprintf(what, sizeof what, "%s: worst %.3g", name, e);
  check(e >= 0 && e < TOL, what);
  std::printf("  %s\n", what);
  if (!reorder) return;
  // the same spans in another order, each row's bits unchanged
  std::vector<int> order(lens.size());
  for (size_t i = 0; i < lens.size(); ++i) order[i] = (int)(lens.size() - 1 - i);
  std::rotate(order.begin(), order.begin() + 1, order.end());
  std::vector<int> lens2;
  for (int i : order) lens2.push_back(lens[i]);
  Batch c = make(lens2, heads, kvh, HD, qpad, 1, 1.f);
  for (size_t n = 0; n < order.size(); ++n) {
    const int src = b.spans[order[n]], dst = c.spans[n];
    for (int r = 0; r < lens[order[n]]; ++r) {
      std::memcpy(&c.q[(size_t)(dst + r) * c.ldq], &b.q[(size_t)(src + r) * b.ldq], b.ldq * 4);
      std::memcpy(&c.k[(size_t)(dst + r) * c.ldk], &b.k[(size_t)(src + r) * b.ldk], b.ldk * 4);
      std::memcpy(&c.v[(size_t)(dst + r) * c.ldk], &b.v[(size_t)(src + r) * b.ldk], b.ldk * 4);
    }
  }
  const auto z = run<HD, TFC_MUT_NONE>(c, scale);
  bool same = true;
  const int ldy = heads * HD;
  for (size_t n = 0; n < order.size(); ++n)
    same = same && std::memcmp(&z[(size_t)c.spans[n] * ldy], &y[(size_t)b.spans[order[n]] * ldy],
                               (size_t)lens[order[n]] * ldy * 4) == 0;
  std::snprintf(what, sizeof what, "%s: rows keep their bits with the spans reordered", name);
  check(same, what);
}

// specials plants NaN, +Inf and -Inf into Q, K or V (which: bits 1, 2, 4).
template <int HD>
static void specials(int which, unsigned seed) {
  char what[160];
  const float scale = 1.f / std::sqrt((float)HD);
  Batch b = make({5, 1, 7, 30}, 4, 2, HD, 0, seed, 1.f);
  std::mt19937 rng(seed);
  std::vector<float>* ts[3] = {&b.q, &b.k, &b.v};
  for (int i = 0; i < 3; ++i) {
    if (!(which >> i & 1)) continue;
    for (float s : {NAN, INFINITY, -INFINITY}) {
      const int r = rng() % b.rows(), c = rng() % (i ? b.kvh * HD : b.heads * HD);
      (*ts[i])[(size_t)r * (i ? b.ldk : b.ldq) + c] = s;
    }
  }
  const auto y = run<HD, TFC_MUT_NONE>(b, scale);
  const double e = worst(b.hd, y, reference(b, scale));
  std::snprintf(what, sizeof what, "hd=%d specials in %s%s%s: NaN and ±Inf as the reference's, worst %.3g", HD,
                which & 1 ? "Q" : "", which & 2 ? "K" : "", which & 4 ? "V" : "", e);
  check(e >= 0 && e < TOL, what);
}

template <int HD>
static void controls() {
  char what[160];
  const float scale = 1.f / std::sqrt((float)HD);
  Batch b = make({40, 70}, 2, 2, HD, 0, 5, 2.f);
  const double ok = worst(b.hd, run<HD, TFC_MUT_NONE>(b, scale), reference(b, scale));
  const double bound = worst(b.hd, run<HD, TFC_MUT_BOUND>(b, scale), reference(b, scale));
  std::snprintf(what, sizeof what, "hd=%d: off-by-one control differs (worst %.3g)", HD, bound);
  check(bound < 0 || bound > 20 * TOL, what);
  check(worst(b.hd, run<HD, TFC_MUT_BOUND>(b, scale), reference(b, scale, 1)) < TOL, "off-by-one control drops the last key");
  const double sc = worst(b.hd, run<HD, TFC_MUT_SCALE>(b, scale), reference(b, scale));
  std::snprintf(what, sizeof what, "hd=%d: dropped-scale control differs (worst %.3g)", HD, sc);
  check(sc < 0 || sc > 20 * TOL, what);
  const double st = worst(b.hd, run<HD, TFC_MUT_STRIDE>(b, scale), reference(b, scale));
  std::snprintf(what, sizeof what, "hd=%d: wrong-stride control differs (worst %.3g)", HD, st);
  check(st < 0 || st > 20 * TOL, what);
  const double ba = worst(b.hd, run<HD, TFC_MUT_BARRIER>(b, scale), reference(b, scale));
  std::snprintf(what, sizeof what, "hd=%d: missing-barrier control differs (worst %.3g)", HD, ba);
  check(ba < 0 || ba > 20 * TOL, what);
  check(ok >= 0 && ok < TOL, "the controls' case passes unmutated");
}

// bf16 checks BF16 precision on BF16-exact Q, K and V (one term of each on the tensor cores, P
// rounded before P·V): every output is BF16-exact and within a few BF16 roundings of the float64
// attention.
template <int HD>
static void bf16(const char* name, std::vector<int> lens, int heads, int kvh) {
  char what[160];
  const float scale = 1.f / std::sqrt((float)HD);
  Batch b = make(lens, heads, kvh, HD, 0, 41 + HD, 2.f);
  const auto y = run<HD, TFC_MUT_NONE>(b, scale);
  bool exact = true;
  for (float x : y) exact = exact && (x != x || tfc_rnd(x) == x);
  std::snprintf(what, sizeof what, "%s: every output is BF16-exact", name);
  check(exact, what);
  const double e = worst(b.hd, y, reference(b, scale));
  std::snprintf(what, sizeof what, "%s: worst %.3g against float64, within a few BF16 roundings", name, e);
  check(e >= 0 && e < TOL, what);
  std::printf("  %s\n", what);
}

int main() {
#if TFC_CUDA
  std::printf("tensor-core path (TFC_CUDA)\n");
#else
  std::printf("portable path\n");
#endif
#if TFC_BF16
  bf16<16>("bf16 hd=16 gqa 2:1, spans 1 7 64 100", {1, 7, 64, 100}, 2, 1);
  bf16<80>("bf16 hd=80, spans 33 140", {33, 140}, 1, 1);
  bf16<128>("bf16 hd=128, spans 65 130", {65, 130}, 1, 1);
#endif
  suite<16>("hd=16 gqa 2:1, spans 1 7 64 100 300", {1, 7, 64, 100, 300}, 2, 1, 0, true);
  suite<16>("hd=16 strided Q, spans 129 3", {129, 3}, 2, 2, 5, true);
  suite<80>("hd=80, spans 1 7 64 100 300", {1, 7, 64, 100, 300}, 1, 1, 0, true);
  suite<128>("hd=128 strided Q, spans 1 7 64 100 300", {1, 7, 64, 100, 300}, 1, 1, 5, false);
  suite<72>("hd=72 (padded to 80), spans 33 140", {33, 140}, 1, 1, 0, true);
  for (int which = 1; which < 8; which <<= 1) specials<16>(which, 3 + which);
  specials<16>(7, 21);
  specials<80>(7, 22);
  controls<16>();
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
