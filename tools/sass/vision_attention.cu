// A probe for tools/sass/sass.sh: the vision attention at Qwen2-VL-2B's tower shape (head_dim
// 80, 16 heads), as the generated kernel instantiates it.
#include "tfc_hip.h"
#include "tfc_kernels.h"
extern "C" __global__ __launch_bounds__(256) void probe_vision_attention(const float* Q, int ldq, const float* K, int ldk, const float* V, int ldv,
                                                                       float* Y, int ldy, const int* spans, int M, int S) {
  tfc_attention_spans<80, 128, 32, 256, TFC_MUT_NONE>(Q, ldq, K, ldk, V, ldv, Y, ldy, spans, S, 16, 16, 0.1118034f);
}
