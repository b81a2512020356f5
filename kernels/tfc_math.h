// tfc_math.h: the precision's rounding point, activations and the rotary turn, as runtime/device
// names them.
#pragma once
#include "tfc_hip.h"

// TFC_BF16 is 1 when the family's source is built for BF16 precision (the backend defines it on
// the source's first line): every value a kernel stores, and each rounding point the op catalog
// lists, is rounded to BF16; arithmetic between them stays F32.
#ifndef TFC_BF16
#define TFC_BF16 0
#endif

// TFC_MMA_TERMS is how many BF16 terms of each F32 operand the tensor-core products take: 3 in F32
// precision; 1 in BF16 precision, where every operand is BF16-exact, so lo and lo2 are zero and
// hi alone gives the same bits as three terms (their products would add zeros) for a third of the
// tensor work (a sixth in attention).
#if TFC_BF16
#define TFC_MMA_TERMS 1
#else
#define TFC_MMA_TERMS 3
#endif

// tfc_rnd is a rounding point: v rounded to the nearest BF16 (ties to even; NaN stays a quiet
// NaN) in BF16 precision, v itself in F32 precision.
__device__ __forceinline__ float tfc_rnd(float v) {
#if TFC_BF16
  unsigned u = __float_as_uint(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return __uint_as_float((u | 0x400000u) & 0xffff0000u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return __uint_as_float(u & 0xffff0000u);
#else
  return v;
#endif
}

// Activations, as runtime/device.Act names them.
__device__ __forceinline__ float tfc_silu(float x) { return x / (1.f + expf(-x)); }
__device__ __forceinline__ float tfc_gelu(float x) { return 0.5f * x * (1.f + erff(x * 0.70710678118654752f)); }
__device__ __forceinline__ float tfc_gelu_tanh(float x) {
  return 0.5f * x * (1.f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}
// In BF16 precision QuickGELU is transformers' three torch ops, x * sigmoid(1.702 * x), each rounded.
__device__ __forceinline__ float tfc_quick_gelu(float x) {
#if TFC_BF16
  return x * tfc_rnd(1.f / (1.f + expf(-tfc_rnd(1.702f * x))));
#else
  return x / (1.f + expf(-1.702f * x));
#endif
}

// tfc_rotate turns the pair (x, y) by angle pos·inv_freq (rotate-half RoPE). In BF16 precision
// the result is rounded, and with TERMS (every mode but per-axis: the text rotary) so are cos and
// sin and the products x·cos, y·sin, as torch multiplies BF16 tensors.
template <bool TERMS>
__device__ __forceinline__ void tfc_rotate(float& x, float& y, float pos, float inv_freq) {
  float s, c;
  sincosf(pos * inv_freq, &s, &c);
#if TFC_BF16
  if (TERMS) {
    c = tfc_rnd(c), s = tfc_rnd(s);
    const float nx = tfc_rnd(tfc_rnd(x * c) - tfc_rnd(y * s));
    const float ny = tfc_rnd(tfc_rnd(y * c) + tfc_rnd(x * s));
    x = nx;
    y = ny;
    return;
  }
#endif
  const float nx = x * c - y * s;
  const float ny = y * c + x * s;
  x = tfc_rnd(nx);
  y = tfc_rnd(ny);
}
