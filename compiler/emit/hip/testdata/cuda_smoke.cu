// cuda_smoke.cu runs the sample kernels on an NVIDIA GPU against float64 references on the host
// and checks that a row's result does not depend on the other rows of its launch.
//
//   nvcc -arch=sm_90 -O2 -I kernels -o smoke compiler/emit/hip/testdata/cuda_smoke.cu && ./smoke
//
// It is a smoke test of the templates and the renderer's argument rule; the kernel contract
// (tfc contract) is the real gate.
#include "sample.hip"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

using std::vector;

static std::mt19937 rng(7);
static int failures = 0;

static vector<float> rnd(size_t n, float a = 1.f) {
  std::uniform_real_distribution<float> u(-a, a);
  vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

static uint16_t bf16_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static float bf16_value(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static vector<tfc_bf16> to_bf16(const vector<float>& v) {
  vector<tfc_bf16> o(v.size());
  for (size_t i = 0; i < v.size(); ++i) o[i].bits = bf16_bits(v[i]);
  return o;
}
static vector<float> bf16_round(const vector<float>& v) {
  vector<float> o(v.size());
  for (size_t i = 0; i < v.size(); ++i) o[i] = bf16_value(bf16_bits(v[i]));
  return o;
}

template <class T>
static T* up(const vector<T>& v) {
  T* d = nullptr;
  cudaMalloc(&d, v.size() * sizeof(T));
  cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
  return d;
}
template <class T>
static T* zeros(size_t n) {
  T* d = nullptr;
  cudaMalloc(&d, n * sizeof(T));
  cudaMemset(d, 0xff, n * sizeof(T));  // poisoned: NaN for floats
  return d;
}
template <class T>
static vector<T> down(const T* d, size_t n) {
  vector<T> v(n);
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    printf("CUDA error: %s\n", cudaGetErrorString(e));
    failures++;
  }
  cudaMemcpy(v.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost);
  return v;
}

static void check(const char* name, const vector<float>& got, const vector<double>& ref, double tol) {
  double err = 0, mag = 0;
  bool bad = got.size() != ref.size();
  for (size_t i = 0; i < got.size() && !bad; ++i) {
    if (!std::isfinite(got[i])) bad = true;
    err = fmax(err, fabs(got[i] - ref[i]));
    mag = fmax(mag, fabs(ref[i]));
  }
  const double rel = err / fmax(1.0, mag);
  const bool ok = !bad && rel <= tol;
  printf("%-34s max|err| %.3g (max|ref| %.3g, tol %.0e) %s\n", name, err, mag, tol, ok ? "ok" : "FAIL");
  if (!ok) failures++;
}

static void same(const char* name, const float* a, const float* b, size_t n) {
  const bool ok = memcmp(a, b, n * sizeof(float)) == 0;
  printf("%-34s %s\n", name, ok ? "bitwise equal" : "FAIL: differs");
  if (!ok) failures++;
}

static double silu(double x) { return x / (1 + exp(-x)); }
static double gelu_tanh(double x) { return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }

// ref_linear: x [M,K] · w [N,K]ᵀ
static vector<double> ref_linear(const vector<float>& x, const vector<float>& w, int M, int N, int K) {
  vector<double> y((size_t)M * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double s = 0;
      for (int k = 0; k < K; ++k) s += (double)x[(size_t)m * K + k] * w[(size_t)n * K + k];
      y[(size_t)m * N + n] = s;
    }
  return y;
}

// ref_rope rotates heads of row y (columns col.. of width ld) by the row's positions.
static void ref_rope(double* y, const int* pos, int heads, int hd, const vector<int>& sect, bool per_axis, double theta) {
  for (int h = 0; h < heads; ++h)
    for (int j = 0; j < hd / 2; ++j) {
      int a = 0, start = 0;
      while (j >= start + sect[a]) start += sect[a++];
      const double f = per_axis ? pow(theta, -(double)(j - start) / sect[a]) : pow(theta, -2.0 * j / hd);
      const double ang = pos[a] * f, c = cos(ang), s = sin(ang);
      double& x = y[h * hd + j];
      double& z = y[h * hd + j + hd / 2];
      const double nx = x * c - z * s, nz = z * c + x * s;
      x = nx;
      z = nz;
    }
}

static void test_gemm_residual() {
  const int M = 37, N = 1280, K = 1280;
  auto x = rnd((size_t)M * K), w = bf16_round(rnd((size_t)N * K, 0.05f)), b = rnd(N), res = rnd((size_t)M * N);
  auto dx = up(x), db = up(b), dres = up(res);
  auto dw = up(to_bf16(w));
  auto dy = zeros<float>((size_t)M * N), dy5 = zeros<float>((size_t)5 * N);
  vision_proj_residual<<<dim3((M + 63) / 64, 20), 256>>>(dx, K, dw, K, db, N, dres, N, dy, N, M);
  vision_proj_residual<<<dim3(1, 20), 256>>>(dx, K, dw, K, db, N, dres, N, dy5, N, 5);
  auto y = down(dy, (size_t)M * N), y5 = down(dy5, (size_t)5 * N);
  auto ref = ref_linear(x, w, M, N, K);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) ref[(size_t)m * N + n] += b[n] + res[(size_t)m * N + n];
  check("linear bias+residual (bf16 W)", y, ref, 1e-5);
  same("linear rows alone vs in batch", y.data(), y5.data(), (size_t)5 * N);
}

static void test_gemm_mul() {
  const int M = 3, N = 8960, K = 1536;
  auto x = rnd((size_t)M * K), w = bf16_round(rnd((size_t)N * K, 0.05f)), g = rnd((size_t)M * N);
  auto dx = up(x), dg = up(g);
  auto dw = up(to_bf16(w));
  auto dy = zeros<float>((size_t)M * N);
  mlp_up_mul<<<dim3(1, 140), 256>>>(dx, K, dw, K, nullptr, N, nullptr, N, dg, N, dy, N, M);
  auto y = down(dy, (size_t)M * N);
  auto ref = ref_linear(x, w, M, N, K);
  for (size_t i = 0; i < ref.size(); ++i) ref[i] *= g[i];
  check("linear(internal) -> mul", y, ref, 1e-5);
}

static void test_gemm_mrope() {
  const int M = 5, N = 1536, K = 1536;
  auto x = rnd((size_t)M * K), w = bf16_round(rnd((size_t)N * K, 0.05f)), b = rnd(N);
  vector<int> pos(M * 3);
  for (auto& p : pos) p = rng() % 300;
  auto dx = up(x), db = up(b);
  auto dw = up(to_bf16(w));
  auto dpos = up(pos);
  auto dy = zeros<float>((size_t)M * N);
  q_proj_mrope<<<dim3(1, 12), 256>>>(dx, K, dw, K, db, N, dy, N, dy, N, dpos, 3, M);
  auto y = down(dy, (size_t)M * N);
  auto ref = ref_linear(x, w, M, N, K);
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) ref[(size_t)m * N + n] += b[n];
    ref_rope(&ref[(size_t)m * N], &pos[m * 3], 12, 128, {16, 24, 24}, false, 1e6);
  }
  check("linear bias -> mrope", y, ref, 1e-4);
}

static void test_gemm_vision_rope() {
  const int M = 7, N = 3840, K = 1280;
  auto x = rnd((size_t)M * K), w = bf16_round(rnd((size_t)N * K, 0.05f)), b = rnd(N);
  vector<int> pos(M * 2);
  for (auto& p : pos) p = rng() % 64;
  auto dx = up(x), db = up(b);
  auto dw = up(to_bf16(w));
  auto dpos = up(pos);
  auto dy = zeros<float>((size_t)M * N);
  vision_qkv_rope<<<dim3(1, 48), 256>>>(dx, K, dw, K, db, N, dy, N, dy, N, dpos, 2, dy + 1280, N, dpos, 2, M);
  auto y = down(dy, (size_t)M * N);
  auto ref = ref_linear(x, w, M, N, K);
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) ref[(size_t)m * N + n] += b[n];
    ref_rope(&ref[(size_t)m * N], &pos[m * 2], 16, 80, {20, 20}, true, 1e4);
    ref_rope(&ref[(size_t)m * N + 1280], &pos[m * 2], 16, 80, {20, 20}, true, 1e4);
  }
  check("qkv bias -> 2-D rope on q and k", y, ref, 1e-4);
}

static void test_norms() {
  const int M = 9, D = 1536, VD = 1280;
  {
    auto x = rnd((size_t)M * D), res = rnd((size_t)M * D), w = rnd(D);
    auto dx = up(x), dres = up(res), dw = up(w);
    auto dsum = zeros<float>((size_t)M * D), dy = zeros<float>((size_t)M * D);
    residual_rmsnorm<<<M, 256>>>(dx, D, dres, D, dsum, D, dw, D, dy, D, M);
    auto y = down(dy, (size_t)M * D), sum = down(dsum, (size_t)M * D);
    vector<double> rs((size_t)M * D), ry((size_t)M * D);
    for (int m = 0; m < M; ++m) {
      double ss = 0;
      for (int c = 0; c < D; ++c) {
        rs[(size_t)m * D + c] = (double)x[(size_t)m * D + c] + res[(size_t)m * D + c];
        ss += rs[(size_t)m * D + c] * rs[(size_t)m * D + c];
      }
      const double inv = 1 / sqrt(ss / D + 1e-6);
      for (int c = 0; c < D; ++c) ry[(size_t)m * D + c] = rs[(size_t)m * D + c] * inv * w[c];
    }
    check("rmsnorm with residual: Sum", sum, rs, 1e-6);
    check("rmsnorm with residual: Y", y, ry, 1e-5);
    // add -> rmsnorm: the same through the add chain.
    auto dy2 = zeros<float>((size_t)M * D), dsum2 = zeros<float>((size_t)M * D);
    add_rmsnorm<<<M, 256>>>(dx, D, dres, D, dsum2, D, nullptr, D, dw, D, dy2, D, M);
    auto y2 = down(dy2, (size_t)M * D);
    check("add -> rmsnorm", y2, ry, 1e-5);
  }
  {
    auto x = rnd((size_t)M * VD, 3), w = rnd(VD), b = rnd(VD);
    auto dx = up(x), dw = up(w), db = up(b);
    auto dy = zeros<float>((size_t)M * VD), dy2 = zeros<float>((size_t)M * VD), dn = zeros<float>((size_t)M * VD);
    vision_norm<<<M, 256>>>(dx, VD, dw, VD, db, VD, dy, VD, M);
    merger_norm_gelu<<<M, 256>>>(dx, VD, dw, VD, db, VD, dn, VD, nullptr, VD, dy2, VD, M);
    auto y = down(dy, (size_t)M * VD), y2 = down(dy2, (size_t)M * VD);
    vector<double> ry((size_t)M * VD), rg((size_t)M * VD);
    for (int m = 0; m < M; ++m) {
      double mean = 0, var = 0;
      for (int c = 0; c < VD; ++c) mean += x[(size_t)m * VD + c];
      mean /= VD;
      for (int c = 0; c < VD; ++c) var += (x[(size_t)m * VD + c] - mean) * (x[(size_t)m * VD + c] - mean);
      const double inv = 1 / sqrt(var / VD + 1e-6);
      for (int c = 0; c < VD; ++c) {
        ry[(size_t)m * VD + c] = (x[(size_t)m * VD + c] - mean) * inv * w[c] + b[c];
        rg[(size_t)m * VD + c] = gelu_tanh(ry[(size_t)m * VD + c]);
      }
    }
    check("layernorm", y, ry, 1e-5);
    check("layernorm -> gelu_tanh", y2, rg, 1e-5);
  }
}

static void test_rope_alone() {
  const int M = 6, N = 1536;
  auto x = rnd((size_t)M * N);
  vector<int> pos(M * 3);
  for (auto& p : pos) p = rng() % 4000;
  auto dx = up(x);
  auto dpos = up(pos);
  mrope<<<M, 256>>>(dx, N, dpos, 3, M);
  auto y = down(dx, (size_t)M * N);
  vector<double> ref(x.begin(), x.end());
  for (int m = 0; m < M; ++m) ref_rope(&ref[(size_t)m * N], &pos[m * 3], 12, 128, {16, 24, 24}, false, 1e6);
  check("mrope in place (positions < 4000)", y, ref, 1e-3);
}

static vector<double> ref_attend(const float* q, const vector<const float*>& ks, const vector<const float*>& vs, int hd,
                                 double scale) {
  vector<double> s(ks.size()), o(hd, 0.0);
  double mx = -1e300, sum = 0;
  for (size_t t = 0; t < ks.size(); ++t) {
    double d = 0;
    for (int i = 0; i < hd; ++i) d += (double)q[i] * ks[t][i];
    s[t] = d * scale;
    mx = fmax(mx, s[t]);
  }
  for (size_t t = 0; t < ks.size(); ++t) {
    s[t] = exp(s[t] - mx);
    sum += s[t];
  }
  for (size_t t = 0; t < ks.size(); ++t)
    for (int i = 0; i < hd; ++i) o[i] += s[t] / sum * vs[t][i];
  return o;
}

static void test_attention_spans() {
  const int M = 50, H = 16, HD = 80, W = H * HD, LD = 3 * W;
  const double scale = 1 / sqrt(80.0);
  auto qkv = rnd((size_t)M * LD, 2);
  vector<int> spans = {0, 13, 50};
  auto dqkv = up(qkv);
  auto dsp = up(spans);
  vector<int> second = {0, 37};
  auto dsp2 = up(second);
  auto dy = zeros<float>((size_t)M * W), dy2 = zeros<float>((size_t)37 * W);
  vision_attention<<<dim3((M + 7) / 8 + 2, H), 256>>>(dqkv, LD, dqkv + W, LD, dqkv + 2 * W, LD, dy, W, dsp, 1, M, 2);
  // The second image alone, at row 0 of its own launch.
  const float* b = dqkv + (size_t)13 * LD;
  vision_attention<<<dim3((37 + 7) / 8 + 1, H), 256>>>(b, LD, b + W, LD, b + 2 * W, LD, dy2, W, dsp2, 1, 37, 1);
  auto y = down(dy, (size_t)M * W), y2 = down(dy2, (size_t)37 * W);
  vector<double> ref((size_t)M * W);
  for (int s = 0; s < 2; ++s)
    for (int r = spans[s]; r < spans[s + 1]; ++r)
      for (int h = 0; h < H; ++h) {
        vector<const float*> ks, vs;
        for (int t = spans[s]; t < spans[s + 1]; ++t) {
          ks.push_back(&qkv[(size_t)t * LD + W + h * HD]);
          vs.push_back(&qkv[(size_t)t * LD + 2 * W + h * HD]);
        }
        auto o = ref_attend(&qkv[(size_t)r * LD + h * HD], ks, vs, HD, scale);
        for (int i = 0; i < HD; ++i) ref[(size_t)r * W + h * HD + i] = o[i];
      }
  check("attention over spans", y, ref, 1e-5);
  same("span alone vs beside another", y.data() + (size_t)13 * W, y2.data(), (size_t)37 * W);
}

static void test_attention_paged() {
  const int H = 12, KV = 2, HD = 128, PS = 16, PAGES = 8, MAXP = 4, KW = KV * HD, QW = H * HD, R = 4;
  const double scale = 1 / sqrt(128.0);
  auto kc = bf16_round(rnd((size_t)PAGES * PS * KW)), vc = bf16_round(rnd((size_t)PAGES * PS * KW));
  vector<int> pt = {5, 2, 7, 0, 1, 3, 0, 0};  // seq 0: pages 5,2,7; seq 1: pages 1,3
  vector<int> seq = {0, 1, 1, 1}, pos = {40, 0, 1, 2};
  auto q = rnd((size_t)R * QW), k = rnd((size_t)R * KW), v = rnd((size_t)R * KW);
  auto dkc = up(to_bf16(kc)), dvc = up(to_bf16(vc));
  auto dq = up(q), dk = up(k), dv = up(v);
  auto dpt = up(pt), dseq = up(seq), dpos = up(pos);
  auto dy = zeros<float>((size_t)R * QW);
  decode_attention_kvstore<<<R, 256>>>(dq, QW, dk, KW, dv, KW, dy, QW, dkc, KW, dvc, KW, dseq, R, dpos, R, dpt, MAXP, R);
  decode_attention<<<dim3(R, KV), 256>>>(dq, QW, dk, KW, dv, KW, dy, QW, dkc, KW, dvc, KW, dseq, R, dpos, R, dpt, MAXP, R);
  auto y = down(dy, (size_t)R * QW);
  // The reference cache: the stored rows, rounded to BF16 as the cache holds them.
  auto kr = bf16_round(k), vr = bf16_round(v);
  for (int r = 0; r < R; ++r) {
    const size_t row = (size_t)pt[seq[r] * MAXP + pos[r] / PS] * PS + pos[r] % PS;
    memcpy(&kc[row * KW], &kr[(size_t)r * KW], KW * 4);
    memcpy(&vc[row * KW], &vr[(size_t)r * KW], KW * 4);
  }
  vector<double> ref((size_t)R * QW);
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < H; ++h) {
      const int kh = h / (H / KV);
      vector<const float*> ks, vs;
      for (int t = 0; t <= pos[r]; ++t) {
        const size_t row = (size_t)pt[seq[r] * MAXP + t / PS] * PS + t % PS;
        ks.push_back(&kc[row * KW + kh * HD]);
        vs.push_back(&vc[row * KW + kh * HD]);
      }
      auto o = ref_attend(&q[(size_t)r * QW + h * HD], ks, vs, HD, scale);
      for (int i = 0; i < HD; ++i) ref[(size_t)r * QW + h * HD + i] = o[i];
    }
  check("kv store + paged causal attention", y, ref, 1e-5);
}

static void test_rows_and_pointwise() {
  const int D = 1536, F = 8960, M = 4;
  {
    const int rows = 1000;
    auto table = bf16_round(rnd((size_t)rows * D));
    vector<int> ids = {7, 999, 0, 7};
    auto dt = up(to_bf16(table));
    auto dids = up(ids);
    auto dy = zeros<float>((size_t)M * D);
    embed_tokens<<<M, 256>>>(dids, M, dt, D, dy, D, M);
    auto y = down(dy, (size_t)M * D);
    vector<double> ref((size_t)M * D);
    for (int m = 0; m < M; ++m)
      for (int c = 0; c < D; ++c) ref[(size_t)m * D + c] = table[(size_t)ids[m] * D + c];
    check("embed (bf16 table)", y, ref, 0);
  }
  {
    auto g = rnd((size_t)M * F, 4), u = rnd((size_t)M * F);
    auto dg = up(g), du = up(u);
    auto dy = zeros<float>((size_t)M * F);
    swiglu<<<dim3(M, (F + 255) / 256), 256>>>(dg, F, du, F, dy, F, M);
    auto y = down(dy, (size_t)M * F);
    vector<double> ref((size_t)M * F);
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = silu(g[i]) * u[i];
    check("swiglu", y, ref, 1e-6);
  }
  {
    auto a = rnd((size_t)M * D), b = rnd((size_t)M * D), c = rnd((size_t)M * D);
    auto da = up(a), db = up(b), dc = up(c);
    auto dy = zeros<float>((size_t)M * D);
    elementwise_chain<<<dim3(M, (D + 255) / 256), 256>>>(da, D, db, D, nullptr, D, nullptr, D, dc, D, nullptr, D, nullptr,
                                                           D, nullptr, D, nullptr, D, dy, D, M);
    auto y = down(dy, (size_t)M * D);
    vector<double> ref((size_t)M * D);
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = gelu_tanh(((double)a[i] + b[i]) * c[i]);
    check("add -> mul -> gelu_tanh -> copy", y, ref, 1e-6);
  }
  {
    auto x = rnd((size_t)10 * D);
    vector<int> idx = {9, 0, 4};
    auto dx = up(x);
    auto didx = up(idx);
    auto dy = zeros<float>((size_t)3 * D);
    gather_last_rows<<<3, 256>>>(dx, D, didx, 3, dy, D, 3);
    auto y = down(dy, (size_t)3 * D);
    vector<double> ref((size_t)3 * D);
    for (int i = 0; i < 3; ++i)
      for (int c = 0; c < D; ++c) ref[(size_t)i * D + c] = x[(size_t)idx[i] * D + c];
    check("gather", y, ref, 0);
    vector<__half> src((size_t)3 * D);
    vector<float> srcf((size_t)3 * D);
    for (size_t i = 0; i < src.size(); ++i) {
      src[i] = __float2half(x[i]);
      srcf[i] = __half2float(src[i]);
    }
    auto dsrc = up(src);
    auto dout = up(vector<float>((size_t)10 * D, 0.f));
    scatter_image_rows<<<3, 256>>>(dsrc, D, didx, 3, dout, D, 3);
    auto out = down(dout, (size_t)10 * D);
    vector<double> rout((size_t)10 * D, 0.0);
    for (int i = 0; i < 3; ++i)
      for (int c = 0; c < D; ++c) rout[(size_t)idx[i] * D + c] = srcf[(size_t)i * D + c];
    check("scatter (f16 rows)", out, rout, 0);
  }
}

int main() {
  cudaDeviceProp p;
  cudaGetDeviceProperties(&p, 0);
  printf("device: %s, warp %d\n", p.name, p.warpSize);
  test_gemm_residual();
  test_gemm_mul();
  test_gemm_mrope();
  test_gemm_vision_rope();
  test_norms();
  test_rope_alone();
  test_attention_spans();
  test_attention_paged();
  test_rows_and_pointwise();
  printf("SMOKE %s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
