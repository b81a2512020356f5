// Runs two generated linear kernels with a fused rope epilogue (rope_kernels.hip beside it,
// rendered by compiler/emit/hip's TestRopeEpilogueEmulated) on the CPU through tfc_hip.h here,
// and checks them against a float64 reference of linear + bias + rotate-half rope. head_dim is
// 12, so a tile is BN = 48 columns, four heads, and neither rope range ends on a tile:
//
//   k_proj_mrope     N = 24 (2 heads), K = 48, bias, M-RoPE (sections 2, 2, 2) at column 0: the
//                    only tile's last two heads lie past N (in the next row when ld = N).
//   vision_qkv_rope  N = 108 (q, k, v of 3 heads), K = 36, bias, vision rope (per_axis, 3 + 3)
//                    of q at column 0 and of k at column 36 (each with its own Pos): tile 0
//                    holds q's three heads and k's first, tile 1 k's last two and v's first two,
//                    which no rope may rotate. Under TFC_CUDA its linear is tfc_gemm_mma's.
//
// Each runs with M = 5 (tfc_gemm_rows' small tiles) and M = 70 (a BM tile and a small one), its
// output rows laid out with ld = N and with ld = N + 29, in a buffer filled with a sentinel: every
// column < N of every row must be the reference's (within 1e-4 of the row's largest magnitude),
// and every other element, the padding columns and the rows after M, must keep the sentinel. LDS
// is NaN at each block's start. The grid is the emitter's (hip.Launches), passed in as -D
// constants. It prints one line a case and "N passed, N failed".
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "tfc_hip.h"

// Every __shared__ array goes in section emu_lds, so that one base below all of them serves
// tfc_smem_addr (an offset of 32 bits) and the whole of LDS can be made stale between blocks.
#undef __shared__
#define __shared__ __attribute__((section("emu_lds"))) static
extern "C" unsigned char __start_emu_lds[], __stop_emu_lds[];

#include "rope_kernels.hip"

// __all_sync, which tfc_gemm_rows' CUDA path votes with and tfc_hip.h only declares: the whole
// warp meets, as it does on the GPU.
int __all_sync(unsigned, int p) {
  const int lane = threadIdx.x % 32;
  emu_warp& w = emu->warps[threadIdx.x / 32];
  w.addr[lane] = p != 0;
  emu_wait(w.bar);
  int all = 1;
  for (int l = 0; l < 32; ++l) all &= (int)w.addr[l];
  emu_wait(w.bar);
  return all;
}

static int passed, failed;

static tfc_bf16 to_bf16(float x) {
  unsigned u = __float_as_uint(x);
  u += 0x7fffu + ((u >> 16) & 1u);
  return tfc_bf16{(unsigned short)(u >> 16)};
}

constexpr unsigned sentinel = 0x7fc0beefu;  // a NaN no computation makes

struct Rope {
  int col, heads, hd;
  bool per_axis;
  std::vector<int> sections;
  double theta;
  std::vector<int> pos;  // [M, sections]
};

struct Linear {
  int N, K;
  std::vector<float> x, b;  // x [M, K]
  std::vector<tfc_bf16> w;  // [N, K]
};

static Linear make_linear(int M, int N, int K, unsigned seed) {
  Linear l{N, K, std::vector<float>((size_t)M * K), std::vector<float>(N), std::vector<tfc_bf16>((size_t)N * K)};
  unsigned s = seed;
  auto next = [&] {  // deterministic values in [-1, 1)
    s = s * 1664525u + 1013904223u;
    return (float)((s >> 8) & 0xffff) / 32768.f - 1.f;
  };
  for (auto& v : l.x) v = next();
  for (auto& v : l.w) v = to_bf16(next() * 0.5f);
  for (auto& v : l.b) v = next();
  return l;
}

static Rope make_rope(int M, int col, int heads, bool per_axis, std::vector<int> sections, double theta, int shift) {
  Rope r{col, heads, 12, per_axis, sections, theta, std::vector<int>((size_t)M * sections.size())};
  for (int m = 0; m < M; ++m)
    for (size_t a = 0; a < sections.size(); ++a) r.pos[m * sections.size() + a] = (m * 7 + (int)a * 13 + shift) % 61 + (int)a;
  return r;
}

// reference is linear + bias, then each rope over its heads, in float64: [M, N].
static std::vector<double> reference(const Linear& l, const std::vector<const Rope*>& ropes, int M) {
  std::vector<double> y((size_t)M * l.N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < l.N; ++n) {
      double s = l.b[n];
      for (int k = 0; k < l.K; ++k) s += (double)l.x[(size_t)m * l.K + k] * tfc_ld(&l.w[(size_t)n * l.K + k]);
      y[(size_t)m * l.N + n] = s;
    }
  for (const Rope* r : ropes) {
    const int half = r->hd / 2, axes = (int)r->sections.size();
    for (int m = 0; m < M; ++m)
      for (int h = 0; h < r->heads; ++h)
        for (int j = 0; j < half; ++j) {
          // ropeAngle: pair j is on the axis of the section it falls in; its inverse frequency
          // is theta^(-2j/hd), or per axis theta^(-(j - start)/width) of its section.
          int a = 0, start = 0;
          while (j >= start + r->sections[a]) start += r->sections[a++];
          const double f = r->per_axis ? std::pow(r->theta, -(double)(j - start) / r->sections[a]) : std::pow(r->theta, -2.0 * j / r->hd);
          const double t = r->pos[(size_t)m * axes + a] * f;
          double& x = y[(size_t)m * l.N + r->col + h * r->hd + j];
          double& z = y[(size_t)m * l.N + r->col + h * r->hd + j + half];
          const double nx = x * std::cos(t) - z * std::sin(t), nz = z * std::cos(t) + x * std::sin(t);
          x = nx;
          z = nz;
        }
  }
  return y;
}

// launch runs a kernel over the emitter's grid: (ceil(M/BM), GY) blocks, or (1, SGY) when SGY > 0
// and M ≤ TFC_SMALL_ROWS.
template <class F>
static void launch(int M, int BM, int GY, int SGY, F kernel) {
  const bool small = SGY > 0 && M <= TFC_SMALL_ROWS;
  const int gx = small ? 1 : (M + BM - 1) / BM, gy = small ? SGY : GY;
  for (int by = 0; by < gy; ++by)
    for (int bx = 0; bx < gx; ++bx) {
      std::memset(__start_emu_lds, 0xff, __stop_emu_lds - __start_emu_lds);  // stale LDS: NaN
      emu_run(__start_emu_lds, bx, by, kernel);
    }
}

// check compares y (ld columns a row, M rows, then tail elements) with the reference.
static void check(const char* name, int M, int N, int ld, const std::vector<float>& y, const std::vector<double>& ref) {
  double worst = 0;
  long bad = 0, changed = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const int m = (int)(i / ld), n = (int)(i % ld);
    if (m >= M || n >= N) {
      changed += __float_as_uint(y[i]) != sentinel;
      continue;
    }
    double scale = 1e-30;
    for (int c = 0; c < N; ++c) scale = std::max(scale, std::fabs(ref[(size_t)m * N + c]));
    const double e = std::fabs(y[i] - ref[(size_t)m * N + n]) / scale;
    if (!(e <= 1e-4)) ++bad;
    if (!(e <= worst)) worst = e;  // NaN too
  }
  const bool ok = bad == 0 && changed == 0;
  ok ? ++passed : ++failed;
  std::printf("%s %s M=%d ld=%d: worst %.3g, %ld outputs off, %ld padding elements written\n", ok ? "ok  " : "FAIL", name, M, ld, worst, bad,
              changed);
}

static std::vector<float> output(int M, int ld) {
  std::vector<float> y((size_t)(M + 2) * ld + 64);
  const float s = __uint_as_float(sentinel);
  std::fill(y.begin(), y.end(), s);
  return y;
}

static void k_proj(int M, int pad) {
  const Linear l = make_linear(M, 24, 48, 1 + M);
  const Rope r = make_rope(M, 0, 2, false, {2, 2, 2}, 1e6, 0);
  const int ld = l.N + pad;
  std::vector<float> y = output(M, ld);
  float* Y = y.data();
  const float *X = l.x.data(), *B = l.b.data();
  const tfc_bf16* W = l.w.data();
  const int* P = r.pos.data();
#if KPROJ_MID  // the mid-size function, on tiles of KPROJ_MBM rows, takes launches of at most KPROJ_MID rows
  if (M <= KPROJ_MID)
    launch(M, KPROJ_MBM, KPROJ_GY, 0, [=] { k_proj_mrope_mid(X, l.K, W, l.K, B, l.N, Y, ld, Y + r.col, ld, P, 3, M); });
  else
#endif
    launch(M, KPROJ_BM, KPROJ_GY, KPROJ_SGY, [=] { k_proj_mrope(X, l.K, W, l.K, B, l.N, Y, ld, Y + r.col, ld, P, 3, M); });
  check("k_proj_mrope", M, l.N, ld, y, reference(l, {&r}, M));
}

static void vision_qkv(int M, int pad) {
  const Linear l = make_linear(M, 108, 36, 2 + M);
  const Rope q = make_rope(M, 0, 3, true, {3, 3}, 10000, 0), k = make_rope(M, 36, 3, true, {3, 3}, 10000, 17);
  const int ld = l.N + pad;
  std::vector<float> y = output(M, ld);
  float* Y = y.data();
  const float *X = l.x.data(), *B = l.b.data();
  const tfc_bf16* W = l.w.data();
  const int *PQ = q.pos.data(), *PK = k.pos.data();
  launch(M, QKV_BM, QKV_GY, QKV_SGY, [=] { vision_qkv_rope(X, l.K, W, l.K, B, l.N, Y, ld, Y + q.col, ld, PQ, 2, Y + k.col, ld, PK, 2, M); });
  check("vision_qkv_rope", M, l.N, ld, y, reference(l, {&q, &k}, M));
}

int main() {
  for (int M : {5, 40, 70})
    for (int pad : {0, 29}) {
      k_proj(M, pad);
      vision_qkv(M, pad);
    }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
