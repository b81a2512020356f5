#!/usr/bin/env bash
# The tensor-core GEMM tile alone (tools/gpu/gemm_tiles.cu) under several tile and warp layouts,
# in BF16 and F32 precision: time, TFLOP/s and whether each layout gives the first one's bits.
#   tools/gpu/gemm-tiles.sh OUT [NVCC FLAGS...]
set -euo pipefail
out=${1:?OUT}
shift
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gemm-tiles.txt"
for p in 1 0; do
	nvcc -arch=sm_90 -O3 -std=c++17 -DTFC_BF16=$p "$@" -Ikernels -o "$out/gemm_tiles_$p" tools/gpu/gemm_tiles.cu &
done
wait
for p in 1 0; do
	echo "== TFC_BF16=$p $*" | tee -a "$out/gemm-tiles.txt"
	"$out/gemm_tiles_$p" | tee -a "$out/gemm-tiles.txt"
	rm -f "$out/gemm_tiles_$p"
done
