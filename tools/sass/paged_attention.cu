// A probe for tools/sass/sass.sh: the decoder's cached attention at Qwen2-VL-2B's shape (head_dim
// 128, 6 query heads a KV head, pages of 16), its prompt rows' layout and its decode rows' (a
// cluster of 8), as the generated kernels call it. -DTFC_PAGED_MMA=1 builds the tensor-core kernel.
#include "tfc_hip.h"
#include "tfc_kernels.h"
#define PROBE(name, small)                                                                                               \
  extern "C" __global__ __launch_bounds__(256) void name(const float* Q, int ldq, float* Kc, int ldk, float* Vc, int ldv,  \
                                                         float* Y, int ldy, const int* seq, const int* pos, const int* pt, \
                                                         int ldpt, int M) {                                                \
    tfc_attention_paged<128, 6, 32, 256, 16, 8, small, TFC_MUT_NONE>(Q, ldq, Kc, ldk, Vc, ldv, Y, ldy, seq, pos, pt, ldpt, M, \
                                                                     0.08838835f);                                        \
  }
PROBE(probe_paged_prompt, false)
PROBE(probe_paged_rows, true)
