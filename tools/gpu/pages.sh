#!/usr/bin/env bash
# Pages per second on a dots.ocr-shaped random BF16 checkpoint, tfc serve against transformers in
# one run: tools/oracle/pages.py builds the checkpoint and the pages and times transformers'
# generate on them; then `tfc serve` takes the same checkpoint and `tfc bench serve` sends it the
# same pages and prompt at each concurrency of CONCURRENCY, NEW tokens a page with EOS ignored,
# without copy drafts (random weights fall into loops that drafts would predict, which real pages
# do not) and without the prompt and vision caches (the pages repeat).
# Writes OUT/hf-pages.json, OUT/bench-cC.json, OUT/metrics.txt and OUT/pages.md.
# usage: tools/gpu/pages.sh OUT (repository root, bin/tfc built, `make testdata` done, the publisher's
# files in tools/oracle/publisher/dots_ocr); PAGES_BUDGET seconds in all (default 560). HF=0 skips
# transformers and serves PAGES_WORK/checkpoint as it is (BACKEND=cpu with a tiny checkpoint: a smoke run)
set -uo pipefail
out=${1:?OUT}
work=${PAGES_WORK:-/tmp/tfc-pages}
new=${NEW:-1000}
conc=${CONCURRENCY:-1 4 16 32 64}
precision=${PRECISION:-bf16}
backend=${BACKEND:-cuda}
budget=${PAGES_BUDGET:-560}
port=8792
mkdir -p "$out"
t0=$(date +%s)
left() { echo $((budget - ($(date +%s) - t0))); }
log() { printf '[%s +%3ds] %s\n' "$(date -u +%H:%M:%S)" $(($(date +%s) - t0)) "$*" | tee -a "$out/pages.log" >&2; }

if [ "${HF:-1}" = 1 ]; then
	log "transformers: checkpoint, pages and generate"
	timeout $(($(left) - 200)) python3 tools/oracle/pages.py --work "$work" --out "$out" --new-tokens "$new" \
		${HF_BATCHES:+--batches "$HF_BATCHES"} >"$out/hf.log" 2>&1
	log "transformers: exit $?; $(grep -c '"batch"' "$out/hf-pages.json" 2>/dev/null) runs"
fi
[ -d "$work/checkpoint" ] || { log "no checkpoint"; exit 1; }
# the prompt keeps its trailing newline: $(...) would drop it, so it is read up to a final "."
prompt=$(cat "$work/prompt.txt"; echo .)
prompt=${prompt%.}

bin/tfc serve "$work/checkpoint" --backend "$backend" --precision "$precision" --port $port --parallel 64 --context 4096 \
	--no-repetition-stop --no-drafts --no-prompt-cache --vision-cache-mib 0 >"$out/serve.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null' EXIT
for i in $(seq 240); do curl -sf localhost:$port/health >/dev/null && break; sleep 1; done
log "serve: up after $i s"
url=http://127.0.0.1:$port
bin/tfc bench serve --url $url --images "$work/pages" --prompt "$prompt" --requests 2 --concurrency 2 --max-tokens 16 \
	--ignore-eos >"$out/warmup.log" 2>&1
log "warm-up: exit $?"
for c in $conc; do
	n=$((c < 2 ? 2 : c))
	[ "$(left)" -lt 30 ] && { log "c=$c: no time left"; break; }
	timeout "$(left)" bin/tfc bench serve --url $url --images "$work/pages" --prompt "$prompt" --requests $n \
		--concurrency "$c" --max-tokens "$new" --ignore-eos --timings --out "$out/bench-c$c.json" >"$out/bench-c$c.log" 2>&1
	log "c=$c: exit $?; $(grep -E 'pages/s' "$out/bench-c$c.log" | head -1)"
done
curl -sf localhost:$port/metrics >"$out/metrics.txt"
python3 - "$out" <<'PY' | tee "$out/pages.md"
import glob, json, os, sys
out = sys.argv[1]
hf = json.load(open(os.path.join(out, "hf-pages.json"))) if os.path.exists(os.path.join(out, "hf-pages.json")) else None
print("| engine | concurrency or batch | pages | pages/s | output tok/s | TTFT p50 ms | TPOT p50 ms |")
print("| --- | --- | --- | --- | --- | --- | --- |")
if hf:
    for r in hf["runs"]:
        if "error" in r:
            print(f"| transformers generate | batch {r['batch']} | failed: {r['error'][:80]} | | | | |")
            continue
        print(f"| transformers generate | batch {r['batch']} | {r['batch']} | {r['pages_per_second']:.3f} | {r['output_tok_per_second']:.0f} | — | — |")
stages = None
for f in sorted(glob.glob(os.path.join(out, "bench-c*.json")), key=lambda f: int(f.split("-c")[-1][:-5])):
    r = json.load(open(f))
    print(f"| tfc serve | {r['concurrency']} | {r['succeeded']}/{r['requests']} | {r['pages_per_second']:.3f} | "
          f"{r['output_tok_per_second']:.0f} | {r['ttft_ms']['p50']:.0f} | {r['tpot_ms']['p50']:.1f} |")
    if stages is None or r["pages_per_second"] > stages[0]:
        stages = (r["pages_per_second"], r["concurrency"], r.get("server_stages_ms") or {})
if stages:
    print(f"\nServer stages at the best concurrency ({stages[1]}), ms a request (p50 / p90 / mean):\n")
    for k, s in sorted(stages[2].items()):
        print(f"- {k}: {s['p50']:.1f} / {s['p90']:.1f} / {s['mean']:.1f}")
PY
