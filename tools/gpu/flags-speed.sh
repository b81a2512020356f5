#!/usr/bin/env bash
# Speed of one tfc build under several nvcc flag sets ($TFC_NVCC_FLAGS) in one run: each flag set
# becomes a build of its own for tools/gpu/ab-speed.sh (sides A, B, ... in the order given).
#   tools/gpu/flags-speed.sh OUT "FLAGS A" "FLAGS B" ...   (bin/tfc built; "" is the sources as they are)
set -uo pipefail
out=${1:?OUT}
shift
[ $# -ge 2 ] || { echo "usage: $0 OUT FLAGS FLAGS [FLAGS ...]" >&2; exit 2; }
mkdir -p "$out/bin"
tfc=$(realpath bin/tfc)
sides=(A B C D E F G H)
bins=()
: >"$out/flags.txt"
for flags in "$@"; do
	side=${sides[${#bins[@]}]:?at most ${#sides[@]} flag sets}
	printf '#!/bin/sh\nTFC_NVCC_FLAGS=%q exec %q "$@"\n' "$flags" "$tfc" >"$out/bin/tfc-$side"
	chmod +x "$out/bin/tfc-$side"
	bins+=("$out/bin/tfc-$side")
	echo "$side: TFC_NVCC_FLAGS='$flags'" >>"$out/flags.txt"
done
exec tools/gpu/ab-speed.sh "${bins[@]}" "$out"
