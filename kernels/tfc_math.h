// tfc_math.h: activations and the rotary turn, as runtime/device names them.
#pragma once
#include "tfc_hip.h"

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
