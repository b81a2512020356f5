#!/usr/bin/env bash
# A/B speed of two or more tfc builds in one run on the Qwen2-VL-2B-shaped random BF16 checkpoint
# (tools/oracle/full_size.py --checkpoint-only): decode at batch 1 and 8 (128-token prompts, 32
# new tokens) and prompt fill (batch 1, 2,048 prompt tokens), each build twice, alternating.
#   tools/gpu/ab-speed.sh A B [OUT]       (A, B: tfc binaries; OUT: the JSON of every bench and a summary)
#   tools/gpu/ab-speed.sh A B C ... OUT   (more builds, sides A, B, C, ...; OUT then required)
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 A B [OUT] | $0 A B C ... OUT" >&2; exit 2; }
if [ $# -eq 2 ]; then
	bins=("$@")
	out=out/ab
elif [ $# -eq 3 ]; then
	bins=("$1" "$2")
	out=$3
else
	bins=("${@:1:$#-1}")
	out=${!#}
fi
sides=(A B C D E F G H)
[ ${#bins[@]} -le ${#sides[@]} ] || { echo "$0: at most ${#sides[@]} builds" >&2; exit 2; }
work=/tmp/tfc-full-qwen
mkdir -p "$out"
[ -f "$work/checkpoint/config.json" ] || python3 tools/oracle/full_size.py reference --work "$work" --out "$out/checkpoint" --checkpoint-only >"$out/checkpoint.log" 2>&1
for round in 1 2; do
	for i in "${!bins[@]}"; do
		side=${sides[$i]}
		bin=${bins[$i]}
		timeout 150 "$bin" bench "$work/checkpoint" --backend cuda --batch 1,8 --prompt-tokens 128 --new-tokens 32 --out "$out/$side-decode-$round.json" >"$out/$side-decode-$round.log" 2>&1
		timeout 150 "$bin" bench "$work/checkpoint" --backend cuda --batch 1 --prompt-tokens 2048 --new-tokens 4 --out "$out/$side-fill-$round.json" >"$out/$side-fill-$round.log" 2>&1
	done
done
python3 - "$out" <<'PY'
import json, sys, glob, os
out = sys.argv[1]
rows = []
for f in sorted(glob.glob(os.path.join(out, "*-*-*.json"))):
    try:
        d = json.load(open(f))
    except Exception as e:
        rows.append(f"{os.path.basename(f)}: {e}")
        continue
    for r in d.get("decode", []):
        rows.append(f"{os.path.basename(f)} batch {r['batch']} prompt {r['prompt_tokens']}: {r['tok_s']:.1f} tok/s, "
                    f"{r['ms_per_round']:.2f} ms a round ({r['forward_ms']:.2f} forward), prefill {r['prefill_ms']:.1f} ms "
                    f"({r['batch'] * r['prompt_tokens'] / r['prefill_ms'] * 1000:.0f} prompt tok/s)")
open(os.path.join(out, "summary.txt"), "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
PY
