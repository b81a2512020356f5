// A host stand-in for kernels/tfc_hip.h: it lets kernels/tfc_kernels.h compile as C++ on the CPU
// with TFC_CUDA set, so that main.cpp can run tfc_gemm_mma (attn.cpp tfc_attention_spans) with a
// fiber for each GPU thread. The warp instructions the tensor-core paths use (ldmatrix x4/x2, x2.trans,
// mma.sync m16n8k16, shuffles) are emulated here from the PTX ISA's fragment layouts, each warp
// meeting at a barrier. With EMU_MFMA it compiles the CDNA path instead (TFC_MFMA, waves of 64)
// and emulates v_mfma_f32_16x16x16bf16_1k, with EMU_WMMA the RDNA3 path (TFC_WMMA, waves of 32)
// and v_wmma_f32_16x16x16_bf16, each from its ISA's operand layout (amd.cpp).
#pragma once
#include <ucontext.h>

#include <barrier>
#include <thread>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#if defined(EMU_MFMA)  // the CDNA paths: matrix cores, waves of 64
#define TFC_MFMA 1
#define TFC_AMD_MATRIX 1
#define EMU_WAVE 64
#elif defined(EMU_WMMA)  // the RDNA3 paths: matrix cores, waves of 32
#define TFC_WMMA 1
#define TFC_AMD_MATRIX 1
#elif !defined(EMU_PORTABLE)  // EMU_PORTABLE compiles the portable (AMD) paths instead of the CUDA ones
#define TFC_CUDA 1
#endif
#ifndef EMU_WAVE
#define EMU_WAVE 32
#endif
#define TFC_MMA_EMULATED 1
#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(n)
// EMU_CLUSTER runs the blocks of a cluster at once, each on an OS thread of its own with its own
// fibers and LDS (the emulation's state and every __shared__ array are thread_local).
#ifdef EMU_CLUSTER
#define EMU_TLS thread_local
#else
#define EMU_TLS
#endif
#define __shared__ static EMU_TLS
#define __align__(n) __attribute__((aligned(n)))
#define TFC_WAVE EMU_WAVE
#define warpSize EMU_WAVE
#define TFC_NEG_INF (-INFINITY)
#define tfc_trap() abort()

struct emu_dim3 {
  unsigned x, y, z;
};
inline EMU_TLS emu_dim3 threadIdx, blockIdx;

struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(8) uint2 {
  unsigned x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
inline uint2 make_uint2(unsigned a, unsigned b) { return {a, b}; }
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
struct alignas(8) float2 {
  float x, y;
};
inline float2 make_float2(float a, float b) { return {a, b}; }
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
int __all_sync(unsigned, int);
// The rounding intrinsics are one float operation each (volatile, so nothing contracts them);
// clusters are emulated with EMU_CLUSTER (emu_run_cluster, below).
inline float __fmul_rn(float a, float b) {
  volatile float r = a * b;
  return r;
}
inline float __fadd_rn(float a, float b) {
  volatile float r = a + b;
  return r;
}
inline float __fdiv_rn(float a, float b) {
  volatile float r = a / b;
  return r;
}
void emu_yield();
inline EMU_TLS int emu_cur;  // the running thread
inline long long clock64() {  // a reading lets the other threads run on; 100 of the thread's cycles pass
  static EMU_TLS long long now[256];
  emu_yield();
  return now[emu_cur] += 100;
}
using std::max;
using std::min;

struct tfc_bf16 {
  unsigned short bits;
};
inline float tfc_ld(const float* p) { return *p; }
inline float tfc_ld(const tfc_bf16* p) { return __uint_as_float((unsigned)p->bits << 16); }
inline void tfc_st(float* p, float v) { *p = v; }
// tfc_ld_w16: the streaming load of W that tfc_mma_gemm.h makes with ld.global.nc under CUDA.
inline uint4 tfc_ld_w16(const tfc_bf16* p) {
  uint4 v;
  std::memcpy(&v, p, 16);
  return v;
}

// One block runs at a time, its 256 threads as fibers on one OS thread (ucontext), switched at
// barriers: __syncthreads meets all 256, a warp instruction the warp's 32.
struct emu_barrier {
  int n, count = 0, gen = 0;
};
struct emu_warp {
  emu_barrier bar{EMU_WAVE};
  unsigned addr[EMU_WAVE];
  unsigned a[EMU_WAVE][8], b[EMU_WAVE][8];
};
struct emu_block {
  unsigned char* smem;
  emu_barrier bar{256};
  emu_warp warps[256 / EMU_WAVE];
  ucontext_t sched, fiber[256];
  bool done[256];
  std::function<void()> body;
};
inline EMU_TLS emu_block* emu;

inline void emu_wait(emu_barrier& b) {
  const int g = b.gen;
  if (++b.count == b.n) {
    b.count = 0;
    ++b.gen;
    return;
  }
  while (b.gen == g) swapcontext(&emu->fiber[emu_cur], &emu->sched);
}

inline void emu_fiber_main() {
  emu->body();
  emu->done[emu_cur] = true;
}

// emu_run runs body as the 256 threads of one block, with LDS at smem.
inline void emu_run(unsigned char* smem, unsigned bx, unsigned by, std::function<void()> body) {
  static EMU_TLS std::vector<char> stacks(256 * 65536);
  auto blk = std::make_unique<emu_block>();
  emu = blk.get();
  emu->smem = smem;
  emu->body = std::move(body);
  blockIdx = {bx, by, 0};
  for (int t = 0; t < 256; ++t) {
    emu->done[t] = false;
    getcontext(&emu->fiber[t]);
    emu->fiber[t].uc_stack.ss_sp = stacks.data() + (size_t)t * 65536;
    emu->fiber[t].uc_stack.ss_size = 65536;
    emu->fiber[t].uc_link = &emu->sched;
    makecontext(&emu->fiber[t], emu_fiber_main, 0);
  }
  for (int left = 256; left > 0;) {
    left = 0;
    for (int t = 0; t < 256; ++t) {
      if (emu->done[t]) continue;
      emu_cur = t;
      threadIdx = {(unsigned)t, 0, 0};
      swapcontext(&emu->sched, &emu->fiber[t]);
      left += !emu->done[t];
    }
  }
  emu = nullptr;
}

inline void emu_yield() {
  if (emu) swapcontext(&emu->fiber[emu_cur], &emu->sched);
}
inline void __syncthreads() { emu_wait(emu->bar); }

#ifdef EMU_CLUSTER
// A cluster: n blocks at once, block rank c on a thread of its own. Every thread_local lies at the
// same offset from emu_anchor in each thread, so tfc_cluster_map moves a pointer by the offset
// between the two blocks' anchors.
struct emu_cluster {
  std::barrier<>* bar;
  std::vector<char*> anchor;
};
inline emu_cluster* emu_cl;
inline thread_local char emu_anchor;
inline thread_local int emu_rank;
inline int tfc_cluster_rank() { return emu_rank; }
// tfc_cluster_sync: every thread of the block arrives, then the block meets the cluster's others.
inline void tfc_cluster_sync() {
  emu_wait(emu->bar);
  if (threadIdx.x == 0) emu_cl->bar->arrive_and_wait();
  emu_wait(emu->bar);
}
template <typename T>
T* tfc_cluster_map(T* p, int rank) {
  return reinterpret_cast<T*>(emu_cl->anchor[rank] + (reinterpret_cast<const char*>(p) - &emu_anchor));
}
// emu_run_cluster runs body as the n blocks (bx, by0 + c) of a cluster, at once.
inline void emu_run_cluster(int n, unsigned bx, unsigned by0, std::function<void()> body) {
  std::barrier bar(n);
  emu_cluster cl{&bar, std::vector<char*>(n)};
  emu_cl = &cl;
  std::vector<std::thread> blocks;
  for (int c = 0; c < n; ++c)
    blocks.emplace_back([&, c] {
      emu_rank = c;
      cl.anchor[c] = &emu_anchor;  // set before the block's first cluster barrier, read after it
      static thread_local unsigned char smem[16];
      emu_run(smem, bx, by0 + c, body);
    });
  for (auto& b : blocks) b.join();
  emu_cl = nullptr;
}
#else
int tfc_cluster_rank();
void tfc_cluster_sync();
template <typename T>
T* tfc_cluster_map(T* p, int rank);
#endif
inline void __syncwarp() { emu_wait(emu->warps[threadIdx.x / EMU_WAVE].bar); }

// A shared address is the byte offset from the block's smem, 32 bits as on the GPU; the LDS arrays
// may lie before smem, so a read takes it back as signed.
inline unsigned tfc_smem_addr(const void* p) { return (unsigned)((const unsigned char*)p - emu->smem); }

// ldmatrix: register j of lane l is row l/4 of matrix j, elements 2(l%4) and 2(l%4)+1; the row's
// address comes from lane 8j + l/4.
template <int X>
inline void emu_ldsm(unsigned (&r)[X], unsigned a) {
  const int lane = threadIdx.x % 32;
  emu_warp& w = emu->warps[threadIdx.x / 32];
  w.addr[lane] = a;
  emu_wait(w.bar);
  for (int j = 0; j < X; ++j) {
    unsigned short e[2];
    std::memcpy(e, emu->smem + (int)w.addr[8 * j + lane / 4] + 4 * (lane % 4), 4);
    r[j] = e[0] | (unsigned)e[1] << 16;
  }
  emu_wait(w.bar);
}
inline void tfc_ldsm_x4(unsigned (&r)[4], unsigned a) { emu_ldsm<4>(r, a); }
// tfc_fill_lds: a fill function's dynamic LDS is the block's.
inline float* tfc_fill_lds() { return reinterpret_cast<float*>(emu->smem); }
inline float rsqrtf(float x) { return 1.f / std::sqrt(x); }
// cp.async: a thread's copies wait in its open group until a wait_group lets them land, so a read
// of LDS that no wait (or no barrier after the writer's wait) covers sees what was there before.
struct emu_copy {
  unsigned dst;
  unsigned char bytes[16];
};
struct emu_copies {
  std::vector<std::vector<emu_copy>> groups;  // committed, oldest first
  std::vector<emu_copy> open;
};
inline EMU_TLS emu_copies emu_cp[256];
inline void tfc_cp_async16(unsigned dst, const void* src, int n) {
  emu_copy c{dst, {}};
  std::memcpy(c.bytes, src, n);  // the rest are zeros
  emu_cp[threadIdx.x].open.push_back(c);
}
inline void tfc_cp_async_commit() {
  emu_copies& q = emu_cp[threadIdx.x];
  q.groups.push_back(std::move(q.open));
  q.open.clear();
}
template <int N>
inline void tfc_cp_async_wait() {
  emu_copies& q = emu_cp[threadIdx.x];
  while ((int)q.groups.size() > N) {
    for (const emu_copy& c : q.groups.front()) std::memcpy(emu->smem + (int)c.dst, c.bytes, 16);
    q.groups.erase(q.groups.begin());
  }
  emu_yield();  // the others run on meanwhile
}

inline void tfc_ldsm_x2(unsigned (&r)[2], unsigned a) { emu_ldsm<2>(r, a); }

// ldmatrix .trans: register j of lane l is column l/4 of matrix j, rows 2(l%4) and 2(l%4)+1; row r
// of matrix j comes from lane 8j + r.
template <int X>
inline void emu_ldsm_trans(unsigned (&r)[X], unsigned a) {
  const int lane = threadIdx.x % 32;
  emu_warp& w = emu->warps[threadIdx.x / 32];
  w.addr[lane] = a;
  emu_wait(w.bar);
  for (int j = 0; j < X; ++j) {
    unsigned short e[2];
    for (int h = 0; h < 2; ++h) std::memcpy(&e[h], emu->smem + (int)w.addr[8 * j + 2 * (lane % 4) + h] + 2 * (lane / 4), 2);
    r[j] = e[0] | (unsigned)e[1] << 16;
  }
  emu_wait(w.bar);
}
inline void tfc_ldsm_x2_trans(unsigned (&r)[2], unsigned a) { emu_ldsm_trans<2>(r, a); }
inline void tfc_prefetch_l2(const void*) {}  // a hint: nothing to emulate
inline void tfc_ldsm_x4_trans(unsigned (&r)[4], unsigned a) { emu_ldsm_trans<4>(r, a); }

inline double emu_bf16(unsigned reg, int half) { return __uint_as_float((half ? reg >> 16 : reg & 0xffffu) << 16); }

// mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32 with groupID g = lane/4, t = lane%4:
// A register i of lane l holds row g + 8(i%2), columns 2t + 8(i/2) and +1;
// B register i holds rows 2t + 8i and +1 of column g; D element e is row g + 8(e/2), column
// 2t + e%2. The products are summed exactly (in double) and rounded once to F32 with d.
inline void tfc_mma_bf16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  const int lane = threadIdx.x % 32;
  emu_warp& w = emu->warps[threadIdx.x / 32];
  std::memcpy(w.a[lane], a, sizeof a);
  std::memcpy(w.b[lane], b, sizeof b);
  emu_wait(w.bar);
  for (int e = 0; e < 4; ++e) {
    const int row = lane / 4 + 8 * (e / 2), col = 2 * (lane % 4) + e % 2;
    double sum = d[e];
    for (int k = 0; k < 16; ++k) {
      const double x = emu_bf16(w.a[(row % 8) * 4 + (k % 8) / 2][row / 8 + 2 * (k / 8)], k % 2);
      const double y = emu_bf16(w.b[col * 4 + (k % 8) / 2][k / 8], k % 2);
      sum += x * y;
    }
    d[e] = (float)sum;
  }
  emu_wait(w.bar);
}

// wgmma.mma_async.m64nNk16.f32.bf16.bf16 with both operands in LDS, K-major, no swizzle (the PTX
// ISA's shared-memory descriptor: start address, leading byte offset to the next core matrix along
// K, stride byte offset to the next 8 rows, each in 16-byte units; swizzle and base offset must be
// 0). Warp w of the warpgroup holds D's rows 16w..16w+15 as mma.sync's 16×8 tiles side by side:
// element (i, e) is row 16w + g + 8(e/2), column 8i + 2t + e%2. The products are summed exactly (in
// double) and rounded once to F32 with d, as tfc_mma_bf16 does; the group runs at once, so fence,
// commit and wait have nothing to order.
inline unsigned emu_core(unsigned long long desc, int r, int k) {
  if ((desc >> 49 & 7) != 0 || (desc >> 62) != 0) {
    std::fprintf(stderr, "wgmma descriptor with a swizzle or base offset: %llx\n", desc);
    std::abort();
  }
  const unsigned start = (desc & 0x3fff) << 4, lbo = (desc >> 16 & 0x3fff) << 4, sbo = (desc >> 32 & 0x3fff) << 4;
  return start + r / 8 * sbo + k / 8 * lbo + r % 8 * 16 + k % 8 * 2;
}
template <int N>
inline void tfc_wgmma_bf16(float (&d)[N / 8][4], unsigned long long a, unsigned long long b) {
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32 % 4;
  auto at = [](unsigned long long desc, int r, int k) {
    unsigned short h;
    std::memcpy(&h, emu->smem + emu_core(desc, r, k), 2);
    return (double)__uint_as_float((unsigned)h << 16);
  };
  for (int i = 0; i < N / 8; ++i)
    for (int e = 0; e < 4; ++e) {
      const int row = 16 * w + lane / 4 + 8 * (e / 2), col = 8 * i + 2 * (lane % 4) + e % 2;
      double sum = d[i][e];
      for (int k = 0; k < 16; ++k) sum += at(a, row, k) * at(b, col, k);
      d[i][e] = (float)sum;
    }
}
inline void tfc_wgmma_fence() {}
inline void tfc_wgmma_commit() {}
template <int N>
inline void tfc_wgmma_wait() {}
inline void tfc_proxy_fence() {}
template <int NT>
inline void tfc_wgmma_hold(float (&)[NT][4]) {}

// __shfl_sync and __shfl_xor_sync: lane l gets v of lane src (l ^ d), for 32-bit T.
template <class T>
inline T emu_shfl(T v, int src) {
  static_assert(sizeof(T) == 4, "32-bit shuffles");
  const int lane = threadIdx.x % EMU_WAVE;
  emu_warp& w = emu->warps[threadIdx.x / EMU_WAVE];
  std::memcpy(&w.addr[lane], &v, 4);
  emu_wait(w.bar);
  T r;
  std::memcpy(&r, &w.addr[src & (EMU_WAVE - 1)], 4);
  emu_wait(w.bar);
  return r;
}
template <class T>
inline T __shfl_sync(unsigned, T v, int src) {
  return emu_shfl(v, src);
}
template <class T>
inline T __shfl_xor_sync(unsigned, T v, int d) {
  return emu_shfl(v, (int)(threadIdx.x % EMU_WAVE) ^ d);
}
// tfc_shfl_xor: the portability header's, on the emulated shuffle.
inline float tfc_shfl_xor(float v, int d) { return __shfl_xor_sync(0xffffffffu, v, d); }
// __any_sync: whether p holds on any lane of the warp (an or-butterfly of shuffles).
inline int __any_sync(unsigned m, int p) {
  int v = p != 0;
  for (int d = 1; d < EMU_WAVE; d <<= 1) v |= __shfl_xor_sync(m, v, d);
  return v;
}

// The AMD matrix instruction on a 16×16×16 BF16 block, from the ISAs' operand layouts (written here
// apart from the kernel's own tfc_amd_mx): lane l gives A's row l%16 and B's column l%16 at 2R
// consecutive k, two a register, low half first. MFMA (E = 4, R = 2, waves of 64): k 4(l/16)..+3,
// D element r at row 4(l/16) + r. WMMA (E = 8, R = 8, waves of 32): all 16 k, lanes 16..31
// repeating 0..15 (counted in emu_unreplicated), D element r at row 2r + l/16. Column l%16. The products are summed
// exactly (in double) and rounded once to F32 with d.
inline int emu_unreplicated;  // WMMA operands whose lanes 16..31 were not copies of 0..15
template <int E, int R>
inline void tfc_amd_bf16(float (&d)[E], const unsigned (&a)[R], const unsigned (&b)[R]) {
  static_assert((E == 4 && R == 2 && EMU_WAVE == 64) || (E == 8 && R == 8 && EMU_WAVE == 32), "MFMA or WMMA");
  const int lane = threadIdx.x % EMU_WAVE;
  emu_warp& w = emu->warps[threadIdx.x / EMU_WAVE];
  std::memcpy(w.a[lane], a, sizeof a);
  std::memcpy(w.b[lane], b, sizeof b);
  emu_wait(w.bar);
  if (E == 8 && lane >= 16 && (std::memcmp(w.a[lane], w.a[lane - 16], sizeof a) != 0 || std::memcmp(w.b[lane], w.b[lane - 16], sizeof b) != 0))
    ++emu_unreplicated;  // WMMA takes lanes 16..31 as copies of 0..15
  for (int r = 0; r < E; ++r) {
    const int row = E == 4 ? 4 * (lane / 16) + r : 2 * r + lane / 16, col = lane % 16;
    double sum = d[r];
    for (int k = 0; k < 16; ++k) {
      const int src = 16 * (k / (2 * R)), i = k % (2 * R);  // the lane group holding k, and k's place there
      sum += emu_bf16(w.a[src + row][i / 2], i % 2) * emu_bf16(w.b[src + col][i / 2], i % 2);
    }
    d[r] = (float)sum;
  }
  emu_wait(w.bar);
}
