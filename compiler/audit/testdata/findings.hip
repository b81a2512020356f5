#include <hip/hip_runtime.h>
extern "C" __global__ __launch_bounds__(128) void scale2(float* y, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.f * x[i];
}
extern "C" __global__ void private_array(float* y, const int* idx, int n) {
  float t[64];
  for (int i = 0; i < 64; ++i) t[i] = y[i * n];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = t[idx[i] & 63];
}
