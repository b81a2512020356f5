#!/usr/bin/env bash
# A/B speed of two or more tfc builds in one run on the Qwen2-VL-2B-shaped random BF16 checkpoint
# (tools/oracle/full_size.py --checkpoint-only): decode at batch 1 and 8 (128-token prompts, 32
# new tokens) and prompt fill (batch 1, 2,048 prompt tokens), each build twice, alternating.
# AB_BATCH, AB_PROMPT and AB_NEW set decode's batches, prompt and new tokens (32); AB_FILL (BATCHxTOKENS, ...) the fills;
# AB_TOWER=1 adds the vision tower on the 1000×1400 page (3 runs a bench); AB_ROUNDS the rounds (2).
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
for round in $(seq "${AB_ROUNDS:-2}"); do
	for i in "${!bins[@]}"; do
		side=${sides[$i]}
		bin=${bins[$i]}
		timeout 150 "$bin" bench "$work/checkpoint" --backend cuda --batch "${AB_BATCH:-1,8}" --prompt-tokens "${AB_PROMPT:-128}" --new-tokens "${AB_NEW:-32}" --out "$out/$side-decode-$round.json" >"$out/$side-decode-$round.log" 2>&1
		for fill in ${AB_FILL:-1x2048}; do
			timeout 150 "$bin" bench "$work/checkpoint" --backend cuda --batch "${fill%x*}" --prompt-tokens "${fill#*x}" --new-tokens 24 --out "$out/$side-fill$fill-$round.json" >"$out/$side-fill$fill-$round.log" 2>&1
		done
		if [ "${AB_TOWER:-0}" = 1 ]; then
			timeout 150 "$bin" bench "$work/checkpoint" --backend cuda --batch "" --image "$work/images/page-1000x1400.png" --repeat 3 --out "$out/$side-tower-$round.json" >"$out/$side-tower-$round.log" 2>&1
		fi
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
    v = d.get("vision")
    if v:
        rows.append(f"{os.path.basename(f)} vision {v['patches']} patches: {v['ms']:.1f} ms (runs {', '.join(f'{x:.1f}' for x in v['runs_ms'])})")
open(os.path.join(out, "summary.txt"), "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
PY
