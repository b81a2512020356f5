// Runs tfc_block_argmax (kernels/tfc_reduce.h), the greedy pick of a decoder round's logit rows,
// on the CPU through tfc_hip.h beside it: a block a row, as the generated *_decode_argmax
// kernels launch it. Every row's pick must be the first column holding the row's largest value,
// NaN never winning and a row of NaN giving 0: random rows of several widths (the vocabulary
// of the Qwen2 decoders among them), rows of ties, NaN, ±Inf and zeros of both signs, and rows
// whose largest value lies in the first or the last column. The off-by-one, wrong-stride and
// missing-barrier controls must change a pick. It prints one line a case and "N passed, N failed".
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "tfc_kernels.h"

static int passed, failed;

// picks launches the kernel over rows rows of v columns, row r at x + r * ld.
// LDS holds stale entries that lose at each block's start (as a GPU's LDS may hold the last
// launch's right ones): the missing-barrier control must turn red by the race it plants itself.
static float bv[256];
static int bi[256];

template <int MUT>
static std::vector<int> picks(const std::vector<float>& x, int rows, int v, int ld) {
  std::vector<int> y(rows, -7);
  static unsigned char lds[16];
  const float* X = x.data();
  int* Y = y.data();
  for (int m = 0; m < rows; ++m) {
    for (int t = 0; t < 256; ++t) bv[t] = -INFINITY, bi[t] = -1;
    emu_run(lds, m, 0, [=] {
      tfc_block_argmax<256, MUT>(X + (size_t)blockIdx.x * tfc_stride<MUT>(ld), v, Y + blockIdx.x, bv, bi);
    });
  }
  return y;
}

// reference is contracts.Argmax.
static std::vector<int> reference(const std::vector<float>& x, int rows, int v, int ld) {
  std::vector<int> y(rows);
  for (int r = 0; r < rows; ++r) {
    int best = -1;
    for (int c = 0; c < v; ++c) {
      const float a = x[(size_t)r * ld + c];
      if (!std::isnan(a) && (best < 0 || a > x[(size_t)r * ld + best])) best = c;
    }
    y[r] = best < 0 ? 0 : best;
  }
  return y;
}

static void check(const char* name, const std::vector<float>& x, int rows, int v, int ld) {
  const auto want = reference(x, rows, v, ld);
  const auto got = picks<TFC_MUT_NONE>(x, rows, v, ld);
  bool ok = got == want;
  for (int r = 0; r < rows && !ok; ++r)
    if (got[r] != want[r]) printf("  %s: row %d picked %d, want %d\n", name, r, got[r], want[r]);
  // the controls: each must change some pick
  const bool bound = picks<TFC_MUT_BOUND>(x, rows, v, ld) != want;
  const bool stride = rows < 2 || picks<TFC_MUT_STRIDE>(x, rows, v, ld) != want;
  const bool barrier = picks<TFC_MUT_BARRIER>(x, rows, v, ld) != want;
  const bool red = bound && stride && barrier;
  printf("%s %s: %d rows of %d (ld %d)%s%s%s\n", ok && red ? "PASS" : "FAIL", name, rows, v, ld, bound ? "" : "; off-by-one not red",
         stride ? "" : "; wrong-stride not red", barrier ? "" : "; missing-barrier not red");
  (ok && red ? passed : failed)++;
}

int main() {
  std::mt19937 rng(20261206);
  std::normal_distribution<float> nd;
  const float nan = NAN, inf = INFINITY;
  for (int v : {257, 1000, 151936}) {
    const int rows = v > 100000 ? 2 : 5, ld = v + 3;
    std::vector<float> x((size_t)rows * ld, 1e30f);  // the padding is larger than any value: a wrong stride picks it
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < v; ++c) x[(size_t)r * ld + c] = nd(rng);
    x[(size_t)0 * ld + v - 1] = 50;  // row 0's largest in its last column
    x[(size_t)1 * ld + 0] = 40;      // row 1's second largest in its first column, its largest in its sixth
    x[(size_t)1 * ld + 5] = 50;
    char name[32];
    snprintf(name, sizeof name, "random %d", v);
    check(name, x, rows, v, ld);
  }
  {  // ties, NaN, infinities and signed zeros, 40 columns a row
    const int v = 40, rows = 6, ld = 40;
    std::vector<float> x((size_t)rows * ld);
    for (auto& a : x) a = (float)(rng() % 7);
    x[0] = nan, x[1] = 6, x[2] = 6, x[39] = 6;                  // the first of tied largest, after a NaN
    x[ld + 17] = inf, x[ld + 30] = inf;                         // the first of two +Inf
    for (int c = 0; c < v; ++c) x[2 * ld + c] = nan;            // all NaN: 0
    for (int c = 0; c < v; ++c) x[3 * ld + c] = -inf;           // all -Inf but a NaN: the first -Inf
    x[3 * ld] = nan;
    for (int c = 0; c < v; ++c) x[4 * ld + c] = -1;             // -0 and +0 tie: the first
    x[4 * ld + 20] = 0, x[4 * ld + 39] = -0.f;
    for (int c = 0; c < v; ++c) x[5 * ld + c] = (float)(c % 3); // 2 at 2, 5, ..., 38; 7 at the last
    x[5 * ld + 39] = 7;
    check("ties, NaN, Inf, zeros", x, rows, v, ld);
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
