// Runs tfc_attention_paged (kernels/tfc_kernels.h) on the CPU through the emulated warp
// instructions of tfc_hip.h beside it: the tensor-core cached attention (tfc_attention_paged_mma)
// that CUDA takes with TFC_PAGED_MMA in BF16 precision, or without it the CUDA-core kernel
// (tfc_attention_paged_warps) in either precision, each in both layouts (launches of more than 8
// rows, and of at most 8, whose blocks run as clusters). It checks against a float64 causal
// reference over a paged cache what a GPU run cannot show without a GPU: every row of a launch
// that mixes decode rows, prompt chunks starting anywhere and contexts of several rounds of
// chunks, within a few BF16 roundings (and BF16-exact in BF16 precision); a row's bits the same
// launched alone, in another chunk of its prompt and in the clusters of a launch of at most 8
// rows; NaN and ±Inf in Q, K or V coming out as the reference's (V's past a row's position not
// reaching it); and the off-by-one, dropped-scale, wrong-stride and missing-barrier controls
// changing the result. It prints "N passed, N failed".
#define EMU_CLUSTER 1  // launches of at most 8 rows take clusters of blocks
#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "attn_check.h"
#include "tfc_kernels.h"

constexpr int PS = 16, SPLIT = 8, THREADS = 256;

struct Row {
  int seq, pos;
};

// Cache is the paged K and V of some sequences: sequence s's position p is cache row
// pages[s][p / PS] * PS + p % PS.
struct Cache {
  int heads, kvh, hd, ldpt;
  std::vector<int> table;  // [seqs, ldpt]
  std::vector<float> k, v;  // [pages * PS, kvh * hd]
  size_t row(int s, int p) const { return (size_t)table[(size_t)s * ldpt + p / PS] * PS + p % PS; }
};

static float bf(float x) { return tfc_rnd(x); }

static Cache make(std::vector<int> lens, int heads, int kvh, int hd, unsigned seed) {
  Cache c{heads, kvh, hd, 0, {}, {}, {}};
  for (int n : lens) c.ldpt = std::max(c.ldpt, (n + PS - 1) / PS);
  const int pages = c.ldpt * (int)lens.size() + 3;
  std::vector<int> perm(pages);
  for (int i = 0; i < pages; ++i) perm[i] = i;
  std::mt19937 rng(seed);
  std::shuffle(perm.begin(), perm.end(), rng);
  c.table.assign(perm.begin(), perm.begin() + c.ldpt * lens.size());
  std::normal_distribution<float> nd;
  c.k.resize((size_t)pages * PS * kvh * hd);
  c.v.resize(c.k.size());
  for (auto& x : c.k) x = bf(nd(rng));
  for (auto& x : c.v) x = bf(nd(rng));
  return c;
}

static std::vector<float> queries(int m, int ldq, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<float> q((size_t)m * ldq + 1);
  for (auto& x : q) x = bf(2.f * nd(rng));
  return q;
}

// run launches the emitter's grid into y [rows, heads*hd]: for launches of more than 8 rows x a
// row and y a head, whatever the rows (small false); with small true the grid of launches of at
// most 8 rows, x a row and y a head's SPLIT blocks, each head's blocks a cluster.
template <int HD, int MUT = TFC_MUT_NONE, bool SMALL = false>
static std::vector<float> run(const Cache& c, const std::vector<Row>& rows, const std::vector<float>& q, int ldq, float scale) {
  const int M = (int)rows.size(), ldy = c.heads * HD, ldk = c.kvh * HD, qg = c.heads / c.kvh;
  std::vector<float> y((size_t)M * ldy, NAN);
  std::vector<int> seq(M), pos(M);
  for (int i = 0; i < M; ++i) seq[i] = rows[i].seq, pos[i] = rows[i].pos;
  static EMU_TLS unsigned char sm[16];  // beside the kernels' LDS arrays, for ldmatrix's 32-bit offsets
  const float *Q = q.data(), *K = c.k.data(), *V = c.v.data();
  const int *rs = seq.data(), *rp = pos.data(), *pt = c.table.data();
  float* Y = y.data();
  const int ldpt = c.ldpt;
  auto body = [=] {
    if (qg == 2)
      tfc_attention_paged<HD, 2, 32, THREADS, PS, SPLIT, SMALL, MUT>(Q, ldq, K, ldk, V, ldk, Y, ldy, rs, rp, pt, ldpt, M, scale);
    else if (qg == 6)
      tfc_attention_paged<HD, 6, 32, THREADS, PS, SPLIT, SMALL, MUT>(Q, ldq, K, ldk, V, ldk, Y, ldy, rs, rp, pt, ldpt, M, scale);
    else
      tfc_attention_paged<HD, 1, 32, THREADS, PS, SPLIT, SMALL, MUT>(Q, ldq, K, ldk, V, ldk, Y, ldy, rs, rp, pt, ldpt, M, scale);
  };
  // with TFC_PAGED_MMA 2 the tensor-core kernel's own grid: y a block of tfc_paged_heads heads
  const int hb = TFC_PAGED_MMA != 2 ? 1 : qg == 2 ? tfc_paged_heads<2, THREADS>::value : qg == 6 ? tfc_paged_heads<6, THREADS>::value : 1;
  for (int y = 0; y < (SMALL ? c.heads : c.heads / hb); ++y)
    for (int x = 0; x < M; ++x) {
      if (SMALL)
        emu_run_cluster(SPLIT, x, y * SPLIT, body);
      else
        emu_run(sm, x, y, body);
    }
  return y;
}

// reference is causal attention in float64 over positions 0..pos - drop of each row.
static std::vector<double> reference(const Cache& c, const std::vector<Row>& rows, const std::vector<float>& q, int ldq, double scale,
                                     int drop = 0) {
  const int hd = c.hd, ldy = c.heads * hd, ldk = c.kvh * hd;
  std::vector<double> y(rows.size() * ldy);
  for (size_t i = 0; i < rows.size(); ++i)
    for (int h = 0; h < c.heads; ++h) {
      const int g = h / (c.heads / c.kvh), n = rows[i].pos + 1 - drop;
      std::vector<double> sc(std::max(n, 0));
      double mx = -INFINITY, sum = 0;
      for (int j = 0; j < n; ++j) {
        double d = 0;
        const size_t kr = c.row(rows[i].seq, j);
        for (int t = 0; t < hd; ++t) d += (double)q[i * ldq + h * hd + t] * c.k[kr * ldk + g * hd + t];
        sc[j] = d * scale;
        mx = std::isnan(sc[j]) || std::isnan(mx) ? NAN : std::max(mx, sc[j]);
      }
      for (auto& x : sc) {
        x = std::exp(x - mx);
        sum += x;
      }
      for (int t = 0; t < hd; ++t) {
        double o = 0;
        for (int j = 0; j < n; ++j) o += sc[j] / sum * c.v[c.row(rows[i].seq, j) * ldk + g * hd + t];
        y[i * ldy + h * hd + t] = o;
      }
    }
  return y;
}

static std::vector<Row> run_of(int seq, int p0, int n) {
  std::vector<Row> r;
  for (int i = 0; i < n; ++i) r.push_back({seq, p0 + i});
  return r;
}

// sub is rows [lo, hi) of a launch's Q.
static std::vector<float> sub(const std::vector<float>& q, int ldq, int lo, int hi) {
  std::vector<float> s(q.begin() + (size_t)lo * ldq, q.begin() + (size_t)hi * ldq);
  s.push_back(0.f);
  return s;
}

// sameRows: rows [lo, hi) of a launch of y equal z's rows from 0, bit for bit.
static bool sameRows(const std::vector<float>& y, const std::vector<float>& z, int ldy, int lo, int hi) {
  return std::memcmp(&y[(size_t)lo * ldy], z.data(), (size_t)(hi - lo) * ldy * 4) == 0;
}

template <int HD>
static void suite(const char* name, int heads, int kvh, int qpad, bool alone) {
  char what[200];
  const float scale = 1.f / std::sqrt((float)HD);
  // sequences: 0 decodes at 130, 1 at 600 (ten chunks: two rounds of eight warps), 2 fills
  // 0..69, 3 fills 500..540, 4 decodes at 0, 5 at 1100 (eighteen chunks: two rounds of a lone
  // row's cluster)
  Cache c = make({131, 601, 70, 541, 1, 1101}, heads, kvh, HD, 7 + HD);
  std::vector<Row> rows = {{0, 130}};
  for (Row r : run_of(2, 0, 70)) rows.push_back(r);
  rows.push_back({1, 600});
  for (Row r : run_of(3, 500, 41)) rows.push_back(r);
  rows.push_back({4, 0});
  rows.push_back({5, 1100});
  const int M = (int)rows.size(), ldq = heads * HD + qpad, ldy = heads * HD;
  const auto q = queries(M, ldq, 3 + HD);
  const auto y = run<HD>(c, rows, q, ldq, scale);
  const double e = worst(HD, y, reference(c, rows, q, ldq, scale));
  std::snprintf(what, sizeof what, "%s: %d mixed rows, worst %.3g against float64, within a few BF16 roundings", name, M, e);
  check(e >= 0 && e < 0x1p-6, what);
  std::printf("  %s\n", what);
  bool exact = true;
  for (float x : y) exact = exact && tfc_rnd(x) == x;  // tfc_rnd is the identity in F32 precision
  std::snprintf(what, sizeof what, "%s: every output is BF16-exact in BF16 precision", name);
  check(exact, what);
  // the same rows in other launches keep their bits
  struct Part {
    int lo, hi;
  };
  std::vector<Part> parts = {{0, 1}, {1, 31}, {31, 71}, {71, 72}, {72, 77}, {77, 113}, {112, 113}, {113, 114}, {114, 115}};
  if (alone)
    for (int i = 0; i < M; i += 9) parts.push_back({i, i + 1});
  for (Part p : parts) {
    std::vector<Row> rs(rows.begin() + p.lo, rows.begin() + p.hi);
    const auto z = run<HD>(c, rs, sub(q, ldq, p.lo, p.hi), ldq, scale);
    std::snprintf(what, sizeof what, "%s: rows [%d,%d) launched alone keep their bits", name, p.lo, p.hi);
    check(sameRows(y, z, ldy, p.lo, p.hi), what);
  }
  // decode rows and a piece of a prompt in the layout of at most 8 rows (clusters): the same bits
  for (Part p : std::vector<Part>{{0, 1}, {71, 72}, {113, 114}, {114, 115}, {104, 112}}) {
    std::vector<Row> rs(rows.begin() + p.lo, rows.begin() + p.hi);
    const auto z = run<HD, TFC_MUT_NONE, true>(c, rs, sub(q, ldq, p.lo, p.hi), ldq, scale);
    std::snprintf(what, sizeof what, "%s: rows [%d,%d) in the clusters of a launch of at most 8 rows keep their bits", name, p.lo, p.hi);
    check(sameRows(y, z, ldy, p.lo, p.hi), what);
  }
}

// specials plants NaN, +Inf and -Inf into Q, K or V (which: bits 1, 2, 4), V's also past the
// rows' positions in the cache of a sequence that fills.
template <int HD>
static void specials(int which, unsigned seed) {
  char what[200];
  const float scale = 1.f / std::sqrt((float)HD);
  Cache c = make({90, 70}, 4, 2, HD, seed);
  std::vector<Row> rows = run_of(0, 30, 20);
  rows.push_back({1, 69});
  const int M = (int)rows.size(), ldq = 4 * HD, ldk = 2 * HD;
  auto q = queries(M, ldq, seed + 1);
  std::mt19937 rng(seed);
  for (float s : {NAN, INFINITY, -INFINITY}) {
    if (which & 1) q[(size_t)(rng() % M) * ldq + rng() % ldq] = s;
    if (which & 2) c.k[c.row(rng() % 2, rng() % 50) * ldk + rng() % ldk] = s;
    if (which & 4) {
      c.v[c.row(rng() % 2, rng() % 50) * ldk + rng() % ldk] = s;
      c.v[c.row(0, 55 + rng() % 30) * ldk + rng() % ldk] = s;  // past some rows' positions, or all
    }
  }
  const auto y = run<HD>(c, rows, q, ldq, scale);
  const double e = worst(HD, y, reference(c, rows, q, ldq, scale));
  std::snprintf(what, sizeof what, "hd=%d specials in %s%s%s: NaN and ±Inf as the reference's, worst %.3g", HD, which & 1 ? "Q" : "",
                which & 2 ? "K" : "", which & 4 ? "V" : "", e);
  check(e >= 0 && e < 0x1p-6, what);
}

template <int HD>
static void controls() {
  char what[200];
  const float scale = 1.f / std::sqrt((float)HD);
  Cache c = make({150, 20}, 2, 2, HD, 5);
  std::vector<Row> rows = run_of(0, 100, 50);
  rows.push_back({1, 19});
  const int M = (int)rows.size(), ldq = 2 * HD;
  const auto q = queries(M, ldq, 9);
  const auto ref = reference(c, rows, q, ldq, scale);
  const double ok = worst(HD, run<HD>(c, rows, q, ldq, scale), ref);
  check(ok >= 0 && ok < 0x1p-6, "the controls' case passes unmutated");
  const double bound = worst(HD, run<HD, TFC_MUT_BOUND>(c, rows, q, ldq, scale), ref);
  std::snprintf(what, sizeof what, "hd=%d: off-by-one control differs (worst %.3g)", HD, bound);
  check(bound < 0 || bound > 0x1p-5, what);
  check(worst(HD, run<HD, TFC_MUT_BOUND>(c, rows, q, ldq, scale), reference(c, rows, q, ldq, scale, 1)) < 0x1p-6,
        "off-by-one control drops the last key");
  const double sc = worst(HD, run<HD, TFC_MUT_SCALE>(c, rows, q, ldq, scale), ref);
  std::snprintf(what, sizeof what, "hd=%d: dropped-scale control differs (worst %.3g)", HD, sc);
  check(sc < 0 || sc > 0x1p-5, what);
  const double st = worst(HD, run<HD, TFC_MUT_STRIDE>(c, rows, q, ldq, scale), ref);
  std::snprintf(what, sizeof what, "hd=%d: wrong-stride control differs (worst %.3g)", HD, st);
  check(st < 0 || st > 0x1p-5, what);
  const double ba = worst(HD, run<HD, TFC_MUT_BARRIER>(c, rows, q, ldq, scale), ref);
  std::snprintf(what, sizeof what, "hd=%d: missing-barrier control differs (worst %.3g)", HD, ba);
  check(ba < 0 || ba > 0x1p-5, what);
  // two decode rows of two query heads a KV head, in a launch of at most 8 rows (clusters)
  Cache d = make({300, 151}, 4, 2, HD, 6);
  const std::vector<Row> lone = {{0, 299}, {1, 150}};
  const auto q1 = queries(2, 4 * HD, 10);
  const auto ref1 = reference(d, lone, q1, 4 * HD, scale);
  const double ok1 = worst(HD, run<HD, TFC_MUT_NONE, true>(d, lone, q1, 4 * HD, scale), ref1);
  check(ok1 >= 0 && ok1 < 0x1p-6, "the decode rows' case passes unmutated");
  // the CUDA-core kernel's missing barrier is the cluster's, whose mutant reads a block's LDS
  // before the emulation maps it: the tensor-core kernel's alone (a block's barrier)
  constexpr int NM = TFC_PAGED_MMA ? 4 : 3;
  const double mut[4] = {worst(HD, run<HD, TFC_MUT_BOUND, true>(d, lone, q1, 4 * HD, scale), ref1),
                         worst(HD, run<HD, TFC_MUT_SCALE, true>(d, lone, q1, 4 * HD, scale), ref1),
                         worst(HD, run<HD, TFC_MUT_STRIDE, true>(d, lone, q1, 4 * HD, scale), ref1),
                         NM == 4 ? worst(HD, run<HD, TFC_MUT_BARRIER, true>(d, lone, q1, 4 * HD, scale), ref1) : 0.};
  const char* names[4] = {"off-by-one", "dropped-scale", "wrong-stride", "missing-barrier"};
  for (int i = 0; i < NM; ++i) {  // a key of 151 or 300 weighs less: the off-by-one is checked to drop it
    std::snprintf(what, sizeof what, "hd=%d decode rows in clusters: %s control differs (worst %.3g)", HD, names[i], mut[i]);
    check(mut[i] < 0 || mut[i] > (i == 0 ? 0x1p-7 : 0x1p-5), what);
  }
  check(worst(HD, run<HD, TFC_MUT_BOUND, true>(d, lone, q1, 4 * HD, scale), reference(d, lone, q1, 4 * HD, scale, 1)) < 0x1p-6,
        "off-by-one control drops the decode rows' last key");
}

int main() {
#if TFC_PAGED_MMA && !TFC_BF16
  std::printf("TFC_PAGED_MMA takes the tensor cores in BF16 precision alone: build with -DTFC_BF16=1\n0 passed, 1 failed\n");
  return 1;
#endif
#if TFC_PAGED_MMA
  suite<16>("hd=16 gqa 2:1", 4, 2, 0, true);
  suite<16>("hd=16 gqa 6:1 (6 heads a block, 2 warps idle)", 12, 2, 0, false);
  suite<24>("hd=24 (padded to 32), strided Q", 2, 2, 5, false);
  suite<128>("hd=128", 1, 1, 0, false);
  for (int which = 1; which < 8; which <<= 1) specials<16>(which, 3 + which);
#else  // the CUDA-core kernel's emulation is slower (a shuffle butterfly a key): fewer cases
  suite<16>("hd=16 gqa 2:1", 2, 1, 3, false);
#endif
  specials<16>(7, 21);
  controls<16>();
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
