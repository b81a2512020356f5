#!/usr/bin/env bash
# Serves a tiny checkpoint with `tfc serve --backend BACKEND` and checks over HTTP that greedy and
# seeded ids are the same solo, 4 at once, and with drafts off, and that greedy ids equal the
# oracle's for one recorded case; prints a markdown receipt. PRECISION=bf16 serves in BF16, where
# the ids are checked against the solo greedy run instead of the oracle's F32 ones.
# usage: tools/gpu/serve-receipt.sh [BACKEND] [DIR] [CASE] (from the repository root, with bin/tfc
# built; defaults cuda, testdata/qwen2-vl-tiny, image1)
set -euo pipefail
backend=${1:-cuda}
dir=${2:-testdata/qwen2-vl-tiny}
case=${3:-image1}
precision=${PRECISION:-f32}
port=8791
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

request() { # $1: extra JSON fields; the case's messages with its images as data URLs
	python3 - "$dir" "$case" "$1" <<'PY'
import base64, json, sys
d, case, extra = sys.argv[1], sys.argv[2], sys.argv[3]
oc = json.load(open(f"{d}/oracle/{case}.json"))
msgs = []
for m in oc["messages"]:
    content = m["content"]
    if isinstance(content, list):
        parts = []
        for p in content:
            if p.get("type") == "image":
                data = base64.b64encode(open(f"{d}/oracle/{p['image']}", "rb").read()).decode()
                parts.append({"type": "image_url", "image_url": {"url": "data:image/png;base64," + data}})
            else:
                parts.append({"type": "text", "text": p["text"]})
        content = parts
    msgs.append({"role": m["role"], "content": content})
req = {"messages": msgs, "max_tokens": oc["max_new_tokens"], "return_token_ids": True}
req.update(json.loads("{" + extra.lstrip(",") + "}"))
print(json.dumps(req))
PY
}
request '' >"$work/greedy.json"
request ',"temperature":0.8,"top_p":0.95,"seed":7' >"$work/seeded.json"

serve() { # $@: extra flags
	bin/tfc serve $dir --backend "$backend" --precision "$precision" --port $port "$@" >"$work/serve.log" 2>&1 &
	for _ in $(seq 600); do curl -sf localhost:$port/health >/dev/null && return; sleep 0.2; done
	cat "$work/serve.log"; exit 1
}
ids() { curl -sS localhost:$port/v1/chat/completions -H 'Content-Type: application/json' -d @"$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["token_ids"])'; }
stop() { kill %1; wait %1 2>/dev/null || true; }

want=$(python3 -c 'import json; print(json.load(open("'$dir/oracle/$case'.json"))["output_ids"])')
serve
greedy_solo=$(ids "$work/greedy.json")
seeded_solo=$(ids "$work/seeded.json")
[ "$precision" = f32 ] || want=$greedy_solo
for i in 1 2 3 4; do ids "$work/greedy.json" >"$work/g$i" & ids "$work/seeded.json" >"$work/s$i" & done
wait $(jobs -p | tail -n +2)
stop
serve --no-drafts --no-prompt-cache
greedy_plain=$(ids "$work/greedy.json")
seeded_plain=$(ids "$work/seeded.json")
stop

ok=yes
check() { [ "$2" = "$3" ] || { ok=no; echo "MISMATCH $1: $2 vs $3" >&2; }; }
check "greedy solo vs transformers" "$greedy_solo" "$want"
check "greedy without drafts and cache" "$greedy_plain" "$want"
check "seeded without drafts and cache" "$seeded_plain" "$seeded_solo"
for i in 1 2 3 4; do
	check "greedy concurrent $i" "$(cat "$work/g$i")" "$want"
	check "seeded concurrent $i" "$(cat "$work/s$i")" "$seeded_solo"
done

echo "# tfc serve --backend $backend --precision $precision: ids over HTTP"
echo
echo "- date: $(date -u +%F' '%H:%M) UTC; device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo cpu)"
echo "- tfc binary sha256: \`$(sha256sum bin/tfc | cut -c1-64)\`"
echo "- command: \`tools/gpu/serve-receipt.sh $backend $dir $case\`"
echo "- request: $case of $dir (its recorded messages and images), greedy and seeded (temperature 0.8, top_p 0.95, seed 7)"
echo "- greedy ids checked against ($([ "$precision" = f32 ] && echo "transformers'" || echo "the solo run's")): $want"
echo "- greedy solo: $greedy_solo"
echo "- greedy, 4 concurrent with 4 seeded beside them: all equal: $([ $ok = yes ] && echo yes || echo no)"
echo "- greedy with drafts and prompt cache off: $greedy_plain"
echo "- seeded solo: $seeded_solo"
echo "- seeded with drafts and prompt cache off: $seeded_plain"
echo
echo "RESULT $([ $ok = yes ] && echo 'all ids equal' || echo 'MISMATCH')"
[ $ok = yes ]
