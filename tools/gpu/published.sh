#!/usr/bin/env bash
# Full-size checks of LightOnOCR-2-1B, GLM-OCR and Qwen2.5-VL-3B on the GPU machine: for each family,
# a random BF16 checkpoint of the published dimensions and transformers' 64 greedy ids on a synthetic
# page with the family's OCR prompt (tools/oracle/published.py reference, in BF16 and in float32 on
# the same weights), `tfc generate` on the same page and prompt in BF16 and in float32 on CUDA, EOS
# ignored, and the comparisons (published.py report: equal, differs at a tie, or DIFFERS). Each checkpoint is deleted after use.
#
# usage, from the repository root with bin/tfc built (CGO_ENABLED=0) and `make testdata` done (or the
# tokenizer brought as tools/gpu/receipts.sh brings it):
#   tools/gpu/published.sh [OUTDIR]          (OUTDIR defaults to $OUT, else out/published)
# environment: FAMILIES (lighton_ocr glm_ocr qwen2_5_vl), PUBLISHED_WORK (scratch, /tmp/tfc-published),
#   PUBLISHED_BUDGET (seconds for the whole run, 540), BACKEND (cuda), TFC_PRECISION (bf16), KEEP
#   (families whose checkpoint stays under PUBLISHED_WORK/<family>/checkpoint).
# Writes under OUTDIR: <family>-hf.json, <family>-tfc.json/.err/.rc, <family>-summary.json,
# receipt.md and run.log.
#
# An empty prompt (LightOnOCR's) reaches `tfc generate --prompt ""` as a user message of the image
# and an empty text part; the fixture's chat template renders that exactly as the image alone, which
# is what transformers gets here (the report checks the prompt ids are equal either way).
set -uo pipefail
out=${1:-${OUT:-out/published}}
work=${PUBLISHED_WORK:-/tmp/tfc-published}
budget=${PUBLISHED_BUDGET:-540}
backend=${BACKEND:-cuda}
precision=${TFC_PRECISION:-bf16}
families=${FAMILIES:-lighton_ocr glm_ocr qwen2_5_vl}
t0=$(date +%s)
mkdir -p "$out" "$work"
: >"$out/run.log"
rm -f "$out/receipt.md"

log() { printf '[%s +%3ds] %s\n' "$(date -u +%H:%M:%S)" $(($(date +%s) - t0)) "$*" | tee -a "$out/run.log" >&2; }
# seconds a step may take: at most $1, leaving $2 (default 20) for the steps after it
allow() {
	local left=$((budget - ($(date +%s) - t0) - ${2:-20}))
	((left > $1)) && left=$1
	((left < 5)) && left=5
	echo $left
}

[ -x bin/tfc ] || { log "bin/tfc is missing: build it first (CGO_ENABLED=0 go build -o bin/tfc ./cmd/tfc)"; exit 2; }
[ -f testdata/tokenizer/qwen/tokenizer.json ] || { log "testdata/tokenizer/qwen/tokenizer.json is missing: run make testdata"; exit 2; }
log "device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo none)"
log "tfc: $(sha256sum bin/tfc | cut -c1-64); work $work; out $out; budget ${budget}s; families $families; precision $precision"

n=$(wc -w <<<"$families")
i=0
for fam in $families; do
	i=$((i + 1))
	left=$((n - i)) # families after this one
	fw=$work/$fam
	rm -rf "$fw"
	rm -f "$out/$fam-hf.json" "$out/$fam-tfc.json" "$out/$fam-tfc.err" "$out/$fam-tfc.rc"
	log "$fam: transformers reference (checkpoint, 64 greedy ids)"
	PYTHONUNBUFFERED=1 timeout "$(allow 150 $((40 + left * 150)))" python3 tools/oracle/published.py reference \
		--family "$fam" --work "$work" --out "$out" 2>&1 | tee -a "$out/run.log"
	log "$fam reference: exit ${PIPESTATUS[0]}"
	if [ -f "$out/$fam-hf.json" ] && [ -d "$fw/checkpoint" ]; then
		log "$fam: tfc generate"
		timeout "$(allow 120 $((15 + left * 150)))" bin/tfc generate --model "$fw/checkpoint" --image "$fw/page.png" \
			--prompt "$(cat "$fw/prompt.txt")" --max-tokens 64 --ignore-eos --json --backend "$backend" --precision "$precision" \
			>"$out/$fam-tfc.json" 2>"$out/$fam-tfc.err"
		echo $? >"$out/$fam-tfc.rc"
		log "$fam tfc generate: exit $(cat "$out/$fam-tfc.rc"); $(tail -c 300 "$out/$fam-tfc.err" | tr '\n' ' ')"
		# the same in float32, against transformers' float32 run on the same BF16 weights
		timeout "$(allow 90 $((15 + left * 150)))" bin/tfc generate --model "$fw/checkpoint" --image "$fw/page.png" \
			--prompt "$(cat "$fw/prompt.txt")" --max-tokens 64 --ignore-eos --json --backend "$backend" --precision f32 \
			>"$out/$fam-tfc-f32.json" 2>"$out/$fam-tfc-f32.err"
		log "$fam tfc generate f32: exit $?"
	else
		echo "no reference" >"$out/$fam-tfc.err"
		echo skipped >"$out/$fam-tfc.rc"
	fi
	python3 tools/oracle/published.py report --family "$fam" --work "$work" --out "$out" >/dev/null 2>>"$out/run.log"
	log "$fam: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["verdict"])' "$out/$fam-summary.json" 2>/dev/null || echo 'no summary')"
	[[ " ${KEEP:-} " == *" $fam "* ]] || rm -rf "$fw/checkpoint" # 2 to 8 GB a family; KEEP names families to keep
done
log "done in $(($(date +%s) - t0)) s"
cat "$out/receipt.md"
