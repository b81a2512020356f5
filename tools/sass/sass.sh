#!/bin/sh
# tools/sass/sass.sh PROBE.cu [NVCC FLAGS...]: builds a probe kernel (a .cu that includes the
# kernel headers and instantiates one template at a real shape) with nvcc for sm_90, as the CUDA
# backend builds a family, and prints its registers, stack and LDS, then the instructions of each
# region between its block barriers, leaving out the blocks that load from global memory one
# element at a time (the fallback paths). Counts are static SASS, cold branches included: an upper
# bound to compare builds of a kernel bound by issue; follow the hot path in PROBE.sass, beside.
# Needs nvcc and cuobjdump (any CUDA toolkit that knows sm_90), no GPU.
set -e
probe=${1:?a probe .cu}
shift
dir=$(cd "$(dirname "$0")/../.." && pwd)
out=${probe%.cu}
nvcc -arch=sm_90 -cubin -O3 -std=c++17 -I"$dir/kernels" -o "$out.cubin" "$@" -x cu "$probe"
cuobjdump -res-usage "$out.cubin" | grep -E "Function|REG"
cuobjdump -sass "$out.cubin" >"$out.sass"
python3 "$dir/tools/sass/regions.py" "$out.sass"
