#!/usr/bin/env bash
# Full-size measurements on the GPU machine, in one run: builds the random Qwen2-VL-2B-shaped BF16
# checkpoint and transformers' references and speeds on it (tools/oracle/full_size.py), runs
# `tfc generate` on the same text and image prompts (64 tokens, EOS ignored) and `tfc bench`
# (decode at batch 1 and 8, the vision tower on a 1000x1400 page), and writes a receipt comparing them.
#
# usage, from the repository root with bin/tfc built (CGO_ENABLED=0) and `make testdata` done:
#   tools/gpu/full-size.sh [OUTDIR]          (OUTDIR defaults to $OUT, else out/full-size)
# environment: BACKEND (cuda), FULL_SIZE_WORK (scratch for the 4.5 GB checkpoint, /tmp/tfc-full-size),
#   FULL_SIZE_BUDGET (seconds for the whole run, 530), FULL_SIZE_CANDIDATE (weight draw; full_size.py's default is the recorded one),
#   FULL_SIZE_RECORDED (set: build the checkpoint only and compare with the references and transformers' timings recorded in docs/receipts),
#   TFC_PRECISION (f32 or bf16: tfc generate and bench run in that precision; default f32, the
#   exactness reference, whose ids the gate holds to transformers' float32 run).
# Writes under OUTDIR: hf-reference.json, hf-timings.json, tfc-generate.json, tfc-bench.json,
# summary.json, receipt.md and run.log. A tfc step that fails or runs out of time is recorded and
# the run goes on.
set -uo pipefail
out=${1:-${OUT:-out/full-size}}
work=${FULL_SIZE_WORK:-/tmp/tfc-full-size}
budget=${FULL_SIZE_BUDGET:-530}
backend=${BACKEND:-cuda}
candidate=${FULL_SIZE_CANDIDATE:-}
precision=(--precision "${TFC_PRECISION:-f32}")
t0=$(date +%s)
mkdir -p "$out" "$work"
: >"$out/run.log"

log() { printf '[%s +%3ds] %s\n' "$(date -u +%H:%M:%S)" $(($(date +%s) - t0)) "$*" | tee -a "$out/run.log" >&2; }
# seconds a step may take: at most $1, leaving $2 (default 25) for the steps after it
allow() {
	local left=$((budget - ($(date +%s) - t0) - ${2:-25}))
	((left > $1)) && left=$1
	((left < 5)) && left=5
	echo $left
}

[ -x bin/tfc ] || { log "bin/tfc is missing: build it first (CGO_ENABLED=0 go build -o bin/tfc ./cmd/tfc)"; exit 2; }
[ -f testdata/tokenizer/qwen/tokenizer.json ] || { log "testdata/tokenizer/qwen/tokenizer.json is missing: run make testdata"; exit 2; }
log "device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo none)"
log "tfc: $(sha256sum bin/tfc | cut -c1-64); work $work; out $out; budget ${budget}s; precision ${TFC_PRECISION:-f32}"

args=(reference --work "$work" --out "$out")
[ -n "$candidate" ] && args+=(--candidate "$candidate")
if [ -n "${FULL_SIZE_RECORDED:-}" ]; then
	# tfc's side only: the same checkpoint, against the recorded references and transformers' timings
	log "checkpoint only; transformers' references and timings from docs/receipts (recorded)"
	args+=(--checkpoint-only)
	cp docs/receipts/2026-12-02-h200-full-size-hf-reference.json "$out/hf-reference.json"
	cp docs/receipts/2026-12-02-h200-full-size-hf-timings.json "$out/hf-timings.json"
else
	log "transformers: checkpoint, references, speeds"
fi
PYTHONUNBUFFERED=1 timeout "$(allow 360 120)" python3 tools/oracle/full_size.py "${args[@]}" 2>&1 | tee -a "$out/run.log"
rc=${PIPESTATUS[0]}
log "full_size.py reference: exit $rc"

ckpt=$work/checkpoint
case_field() { # $1 case, $2 field: from hf-reference.json
	python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))["cases"][sys.argv[2]][sys.argv[3]]; print(v if isinstance(v,str) else "\n".join(v))' \
		"$out/hf-reference.json" "$1" "$2"
}
for c in text image; do
	rm -f "$work/tfc-$c.json" "$work/tfc-$c.err" "$work/tfc-$c.rc"
	if [ ! -f "$out/hf-reference.json" ]; then
		echo "no reference" >"$work/tfc-$c.err"
		echo skipped >"$work/tfc-$c.rc"
		continue
	fi
	gen=(--model "$ckpt" --prompt "$(case_field $c user_text)" --max-tokens 64 --ignore-eos --json --backend "$backend" "${precision[@]}")
	while read -r img; do [ -n "$img" ] && gen+=(--image "$work/$img"); done < <(case_field $c images)
	log "tfc generate: $c"
	timeout "$(allow 120 100)" bin/tfc generate "${gen[@]}" >"$work/tfc-$c.json" 2>"$work/tfc-$c.err"
	echo $? >"$work/tfc-$c.rc"
	log "tfc generate $c: exit $(cat "$work/tfc-$c.rc"); $(tail -c 300 "$work/tfc-$c.err" | tr '\n' ' ')"
done

rm -f "$out/tfc-bench.json"
if [ -d "$ckpt" ]; then
	log "tfc bench: batch 1 and 8, 512 prompt tokens, 128 new tokens; vision on the 1000x1400 page"
	timeout "$(allow 200 20)" bin/tfc bench "$ckpt" --backend "$backend" "${precision[@]}" --batch 1,8 --prompt-tokens 512 --new-tokens 128 \
		--image "$work/images/page-1000x1400.png" --repeat 5 --out "$out/tfc-bench.json" 2>&1 >/dev/null | tee -a "$out/run.log"
	log "tfc bench: exit ${PIPESTATUS[0]}"
fi

log "report"
python3 tools/oracle/full_size.py report --work "$work" --out "$out" --tfc bin/tfc --backend "$backend"
log "done in $(($(date +%s) - t0)) s"
