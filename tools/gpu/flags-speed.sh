#!/usr/bin/env bash
# Decode speed of one tfc build under several nvcc flag sets ($TFC_NVCC_FLAGS), in one run on the
# Qwen2-VL-2B-shaped random BF16 checkpoint (tools/oracle/full_size.py --checkpoint-only): decode
# at batch 1 and 8 (128-token prompts, 32 new tokens), every variant twice, alternating.
#   tools/gpu/flags-speed.sh OUT "FLAGS A" "FLAGS B" ...   (bin/tfc built; "" is the sources as they are)
set -uo pipefail
out=${1:?OUT}
shift
work=/tmp/tfc-full-qwen
mkdir -p "$out"
[ -f "$work/checkpoint/config.json" ] || python3 tools/oracle/full_size.py reference --work "$work" --out "$out/checkpoint" --checkpoint-only >"$out/checkpoint.log" 2>&1
for round in 1 2; do
	i=0
	for flags in "$@"; do
		i=$((i + 1))
		TFC_NVCC_FLAGS="$flags" timeout 200 bin/tfc bench "$work/checkpoint" --backend cuda --batch 1,8 --prompt-tokens 128 --new-tokens 32 \
			--out "$out/v$i-decode-$round.json" >"$out/v$i-decode-$round.log" 2>&1
	done
done
python3 - "$out" "$@" <<'PY'
import json, sys, glob, os
out, flags = sys.argv[1], sys.argv[2:]
rows = []
for i, f in enumerate(flags, 1):
    for path in sorted(glob.glob(os.path.join(out, f"v{i}-decode-*.json"))):
        try:
            d = json.load(open(path))
        except Exception as e:
            rows.append(f"v{i} [{f}] {os.path.basename(path)}: {e}")
            continue
        for r in d.get("decode", []):
            rows.append(f"v{i} [{f}] {os.path.basename(path)} batch {r['batch']}: {r['tok_s']:.1f} tok/s, {r['ms_per_round']:.2f} ms a round")
open(os.path.join(out, "summary.txt"), "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
PY
