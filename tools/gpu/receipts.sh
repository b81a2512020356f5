#!/usr/bin/env bash
# Every check that needs the GPU machine, in two parts that fit one call each, writing logs and
# receipts under OUT. From the repository root, with bin/ holding CGO_ENABLED=0 builds of tfc and
# of the gpu-tagged test binaries (gatetest: ./cmd/tfc, compilertest: ./compiler) and `make
# testdata` done (testdata/tokenizer/qwen, and testdata/dots-ocr-tiny/tokenizer.json).
#   tools/gpu/receipts.sh tiny OUT   kernel contracts of every family, the tiny model gates, a
#                                    changed-shape checkpoint against the CPU, serving over HTTP
#   tools/gpu/receipts.sh qwen OUT   Qwen2-VL-2B-shaped gate and speeds (tools/gpu/full-size.sh)
#   tools/gpu/receipts.sh dots OUT   dots.ocr at full size against the publisher's code
#                                    (tools/oracle/dots_full_size.py; needs tools/oracle/publisher)
#   tools/gpu/receipts.sh decode OUT decode speed on the Qwen2-VL-2B-shaped checkpoint alone (no
#                                    transformers run), and each kernel's device time in a decode
#                                    round (Nsight Compute, tools/gpu/kernel_times.py)
#   tools/gpu/receipts.sh backend OUT the device backend's gpu-tagged tests (bin/cudatest, built
#                                    from ./runtime/device/cuda), graph replay against plain launches
#   tools/gpu/receipts.sh sweep OUT  the config sweep's references: bin/tfc sweep writes the
#                                    checkpoints, tools/oracle/sweep.py runs the publisher's code on
#                                    them (OUT/refs, OUT/debug; needs tools/oracle/publisher;
#                                    SWEEP_NAMES limits it to some configs)
#   tools/gpu/receipts.sh sweep-gpu OUT every sweep config on the GPU: TestSweepCUDA (and the tiny
#                                    gates) against testdata/sweep/refs, and tfc contract --model on
#                                    each config's checkpoint, six at a time
#   tools/gpu/receipts.sh sweep-bf16 OUT the publisher's BF16 run of each sweep config on this
#                                    card (OUT/refs-bf16; copy to testdata/sweep/refs-bf16), then
#                                    TestSweepBF16CUDA against it (SWEEP_NAMES limits both)
#   tools/gpu/receipts.sh bf16 OUT   kernel contracts of every family in BF16 precision, and every
#                                    tiny checkpoint's BF16 ids on the GPU against the CPU's
#   FAMILY=F tools/gpu/receipts.sh family OUT  one family's gates on the GPU: its kernel contracts
#                                    in both precisions, its fixture and sweep gates, its BF16 ids
#                                    against the CPU's, and serving its fixture over HTTP
#   tools/gpu/receipts.sh published OUT LightOnOCR-2-1B, GLM-OCR and Qwen2.5-VL-3B dimensions with
#                                    random BF16 weights: tfc generate against transformers, 64 greedy
#                                    ids each (tools/gpu/published.sh; FAMILIES limits it)
#   tools/gpu/receipts.sh pages OUT  pages per second on a dots.ocr-shaped random BF16 checkpoint:
#                                    tfc serve at concurrency 1-64 and transformers' generate on the
#                                    same pages (tools/gpu/pages.sh; needs tools/oracle/publisher),
#                                    then a page's decode and preprocessing, tfc against
#                                    transformers' processor (tools/oracle/preprocess_speed.py)
#   tools/gpu/receipts.sh tapes OUT  decode rounds played from tapes against plain launches
#                                    (TFC_GPU_TAPES=0) on the Qwen2-VL-2B-shaped checkpoint in BF16:
#                                    tok/s and host_ms_per_round at batch 1 and 8, and 64 greedy ids
#                                    of a text prompt both ways, which must be equal
#   tools/gpu/receipts.sh speed OUT  decode speed on the Qwen2-VL-2B-shaped checkpoint with graph
#                                    replay, without it (TFC_GPU_GRAPHS=0), and profiled (--profile)
#   tools/gpu/receipts.sh paged-mma OUT the tensor-core cached attention (the default in BF16, on
#                                    its own grid): every family's BF16 contracts with it, decode
#                                    (batch 1-64) and prompt fill against the CUDA-core kernel
#                                    (TFC_PAGED_MMA=0) and against it on the CUDA-core kernel's grid
#                                    (TFC_NVCC_FLAGS=-DTFC_PAGED_MMA=1), and Nsight Compute on one
#                                    prompt launch and one decode launch of it
#   tools/gpu/receipts.sh fill OUT   the linears' fill layout (TFC_GPU_FILL=1) and the tensor-core
#                                    cached attention (the default in BF16): every family's BF16
#                                    contracts with both, decode at batch 1/16/64, a 2,048-token
#                                    fill and the tower on the CUDA-core attention (A,
#                                    TFC_PAGED_MMA=0), on the default (B), and on the fill layout
#                                    too in rounds of 2,048 rows (C), the contracts in F32
#                                    and the default's tower kernel by kernel (QUICK=1 stops there),
#                                    then a prompt fill's kernel table with both, the 2B-shaped
#                                    checkpoint's BF16 contracts with both, and Nsight Compute on
#                                    one gate/up launch of the fill layout
set -uo pipefail
part=${1:?tiny, bf16, sweep-bf16, family, published, pages, qwen, dots, decode, backend, sweep, sweep-gpu, tapes, speed, paged-mma or fill}
out=${2:-${OUT:-out/receipts}}
backend=${BACKEND:-cuda}
mkdir -p "$out"
t0=$(date +%s)
log() { printf '[%s +%3ds] %s\n' "$(date -u +%H:%M:%S)" $(($(date +%s) - t0)) "$*" | tee -a "$out/$part.log" >&2; }
step() { # $1 seconds, $2 name, rest: command; its output goes to OUT/<name>.log
	local limit=$1 name=$2
	shift 2
	log "$name"
	timeout "$limit" "$@" >"$out/$name.log" 2>&1
	local rc=$?
	log "$name: exit $rc; $(grep -E '^(SUMMARY|RESULT|--- FAIL|FAIL|ok|PASS)' "$out/$name.log" | head -5 | tr '\n' ' ')"
}
side() { # $1 side, $2 environment (NAME=VALUE ...), rest: arguments after the caller's: writes
	# OUT/bin/tfc-<side>, which runs bin/tfc so for tools/gpu/ab-speed.sh
	local name=$1 env=$2
	shift 2
	mkdir -p "$out/bin"
	local args=""
	[ $# -gt 0 ] && args=$(printf ' %q' "$@")
	printf '#!/bin/sh\n%sexec %q "$@"%s\n' "${env:+$env }" "$(realpath bin/tfc)" "$args" >"$out/bin/tfc-$name"
	chmod +x "$out/bin/tfc-$name"
}
# The copy the GPU machine receives may bring the binaries and the Qwen tokenizer xz-compressed
# under out/ (tfc.xz, gatetest.xz, compilertest.xz, tokenizer.json.xz) to stay small.
python3 - <<'PY'
import json, lzma, os, sys
sys.path.insert(0, "tools/oracle")
for name, dst in [("tfc", "bin/tfc"), ("gatetest", "bin/gatetest"), ("compilertest", "bin/compilertest"), ("cudatest", "bin/cudatest"),
                  ("tokenizer.json", "testdata/tokenizer/qwen/tokenizer.json")]:
    src = f"out/{name}.xz"
    if os.path.exists(src) and not os.path.exists(dst):
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with lzma.open(src) as f, open(dst, "wb") as g:
            g.write(f.read())
        os.chmod(dst, 0o755)
# every tiny checkpoint gets tokenizer.json as tools/testdata.sh gives it: the Qwen file, less the
# added tokens a tokenizer_config.json gives other ids (dots.ocr's)
import glob, shutil
for cfg in sorted(glob.glob("testdata/*/config.json")):
    d = os.path.dirname(cfg)
    dst = os.path.join(d, "tokenizer.json")
    if os.path.exists(dst):
        continue
    tc = os.path.join(d, "tokenizer_config.json")
    decoder = json.load(open(tc)).get("added_tokens_decoder") if os.path.exists(tc) else None
    if decoder:
        import dots_ocr
        text, _ = dots_ocr.derive_tokenizer_json("testdata/tokenizer/qwen/tokenizer.json", decoder)
        open(dst, "w", encoding="utf-8").write(text)
    else:
        shutil.copyfile("testdata/tokenizer/qwen/tokenizer.json", dst)
PY
log "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null); tfc $(sha256sum bin/tfc | cut -c1-16)"

case $part in
sweep)
	step 60 sweep-write bin/tfc sweep --out /tmp/tfc-sweep
	step 570 sweep-oracle python3 tools/oracle/sweep.py --dir /tmp/tfc-sweep --refs "$out/refs" --debug "$out/debug" \
		--budget "${SWEEP_BUDGET:-450}" ${SWEEP_NAMES:-}
	;;
sweep-gpu)
	# every sweep config on the GPU: the model gate (ids and logits against the committed
	# references) beside each config's kernel contract at its real shapes, six at a time
	step 60 sweep-write bin/tfc sweep --out /tmp/tfc-sweep
	mkdir -p "$out/contracts"
	log "sweep-contracts (background)"
	ls /tmp/tfc-sweep | timeout 430 xargs -P 6 -I{} sh -c "timeout 300 bin/tfc contract --backend $backend --model /tmp/tfc-sweep/{} --seed 20261203 >'$out/contracts/{}.log' 2>&1; echo \"{}: exit \$?\" >>'$out/contracts/exits.log'" &
	cpid=$!
	step 430 sweep-gates bash -c "cd cmd/tfc && ../../bin/gatetest -test.v -test.run 'TestSweepCUDA|TestFixtureGatesCUDA'"
	wait $cpid
	log "sweep-contracts: $(grep -c 'exit 0' "$out/contracts/exits.log") of $(ls /tmp/tfc-sweep | wc -l) exit 0; $(grep -h '^SUMMARY' "$out"/contracts/*.log | sort | uniq -c | tr '\n' ' ')"
	;;
sweep-bf16)
	step 60 sweep-write bin/tfc sweep --out /tmp/tfc-sweep
	names=${SWEEP_NAMES:-$(python3 -c "import json; print(' '.join(c['name'] for c in json.load(open('testdata/sweep/sweep.json'))['configs']))")}
	step 330 sweep-oracle-bf16 python3 tools/oracle/sweep.py --bf16 --dir /tmp/tfc-sweep --refs "$out/refs-bf16" --budget 300 $names
	cp "$out"/refs-bf16/*.json testdata/sweep/refs-bf16/
	step 430 sweep-gates-bf16 bash -c "cd cmd/tfc && ../../bin/gatetest -test.v -test.run 'TestSweepBF16CUDA'"
	;;
tiny)
	mkdir -p "$out/receipts"
	step 240 contracts bin/tfc contract --backend "$backend" --receipt "$out/receipts"  # every family
	step 90 gates bash -c "cd cmd/tfc && ../../bin/gatetest -test.v -test.run 'TestFixtureGatesCUDA'"
	step 60 changed bash -c "cd compiler && ../bin/compilertest -test.v -test.run 'OnCUDA'"
	step 60 serve-qwen2_vl bash tools/gpu/serve-receipt.sh "$backend" testdata/qwen2-vl-tiny image1
	step 60 serve-dots_ocr bash tools/gpu/serve-receipt.sh "$backend" testdata/dots-ocr-tiny layout
	;;
family)
	fam=${FAMILY:?FAMILY names the family, e.g. glm_ocr}
	fixture=$(grep -o "\"testdata/[^\"]*\"" <(grep "Name: \"$fam\", Graph" gen/registry/registry.go) | tr -d '"')
	mkdir -p "$out/receipts"
	step 120 "contracts-$fam" bin/tfc contract --backend "$backend" --family "$fam" --receipt "$out/receipts"
	step 120 "contracts-bf16-$fam" bin/tfc contract --backend "$backend" --precision bf16 --family "$fam" --receipt "$out/receipts"
	step 200 "gates-$fam" bash -c "cd cmd/tfc && ../../bin/gatetest -test.v -test.run '^(TestFixtureGatesCUDA|TestSweepCUDA|TestGenerateBF16CUDA)\$/^$fam(-|\$)'"
	case1=$(ls "$fixture/oracle" | grep -v manifest | grep '\.json$' | grep -v '^text' | head -1)
	step 60 "serve-$fam" bash tools/gpu/serve-receipt.sh "$backend" "$fixture" "${case1%.json}"
	;;
bf16)
	mkdir -p "$out/receipts"
	step 240 contracts-bf16 bin/tfc contract --backend "$backend" --precision bf16 --receipt "$out/receipts"
	step 150 generate-bf16 bash -c "cd cmd/tfc && ../../bin/gatetest -test.v -test.run 'TestGenerateBF16CUDA'"
	;;
published)
	step 570 published env PUBLISHED_BUDGET=540 bash tools/gpu/published.sh "$out/published"
	;;
pages)
	step 530 pages env PAGES_BUDGET=510 bash tools/gpu/pages.sh "$out/pages"
	# a page's decode and preprocessing on this host: tfc against transformers' processor
	page=$(ls /tmp/tfc-pages/pages/*.png 2>/dev/null | head -1)
	if [ -n "$page" ]; then
		step 30 preprocess-tfc bin/tfc bench preprocess "$page" --model /tmp/tfc-pages/checkpoint --runs 20
		step 40 preprocess-hf python3 tools/oracle/preprocess_speed.py "$page" --model /tmp/tfc-pages/checkpoint --runs 20
	fi
	;;
qwen)
	step 560 full-size env FULL_SIZE_BUDGET=540 FULL_SIZE_WORK=/tmp/tfc-full-qwen bash tools/gpu/full-size.sh "$out/full-size"
	;;
dots)
	dw=/tmp/tfc-full-dots
	step 420 dots-reference python3 tools/oracle/dots_full_size.py reference --work "$dw" --out "$out"
	if [ -f "$out/dots-reference.json" ]; then
		# the prompt keeps its trailing newline: $(...) would drop it, so it is read up to a final "."
		prompt=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["user_text"], end=".")' "$out/dots-reference.json")
		prompt=${prompt%.}
		step 150 dots-tfc bash -c 'bin/tfc generate --model "$0/checkpoint" --image "$0/page.png" --prompt "$1" --max-tokens 64 --ignore-eos --json --backend "$2" >"$0/tfc.json"' "$dw" "$prompt" "$backend"
		step 20 dots-report python3 tools/oracle/dots_full_size.py report --work "$dw" --out "$out"
	fi
	;;
decode)
	dw=/tmp/tfc-full-qwen
	step 150 checkpoint python3 tools/oracle/full_size.py reference --work "$dw" --out "$out/checkpoint" --checkpoint-only
	step 150 bench bin/tfc bench "$dw/checkpoint" --backend "$backend" --batch 1,8 --prompt-tokens 128 --new-tokens 32 --out "$out/bench.json"
	if command -v ncu >/dev/null; then
		step 200 ncu ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
			bin/tfc generate --model "$dw/checkpoint" --backend "$backend" --prompt "Describe a page." --max-tokens 8 --ignore-eos
		python3 tools/gpu/kernel_times.py "$out/ncu.log" | tee "$out/kernel-times.md"
	fi
	;;
backend)
	step 400 backend-tests bash -c "cd runtime/device/$backend && ../../../bin/${backend}test -test.v -test.run GPU"
	;;
tapes)
	dw=/tmp/tfc-full-qwen
	step 150 checkpoint python3 tools/oracle/full_size.py reference --work "$dw" --out "$out/checkpoint" --checkpoint-only
	for mode in tapes plain; do
		tapes=1
		[ $mode = plain ] && tapes=0
		step 150 "bench-$mode" env TFC_GPU_TAPES=$tapes bin/tfc bench "$dw/checkpoint" --backend "$backend" --precision bf16 \
			--batch 1,8 --prompt-tokens 512 --new-tokens 128 --out "$out/bench-$mode.json"
		step 60 "ids-$mode" env TFC_GPU_TAPES=$tapes bash -c 'bin/tfc generate --model "$0/checkpoint" --backend "$1" --precision bf16 \
			--prompt "Describe a page of a scanned report." --max-tokens 64 --ignore-eos --json >"$2"' "$dw" "$backend" "$out/ids-$mode.json"
	done
	python3 - "$out" <<'PY' | tee "$out/tapes.md"
import json, os, sys
out = sys.argv[1]
ids = {m: json.load(open(os.path.join(out, f"ids-{m}.json"))).get("output_ids") for m in ("tapes", "plain")}
print(f"64 greedy ids equal with and without tapes: {ids['tapes'] is not None and ids['tapes'] == ids['plain']}")
print("| launches | batch | tok/s | ms a round | host ms a round | launches taped |")
print("| --- | --- | --- | --- | --- | --- |")
for m in ("tapes", "plain"):
    for d in json.load(open(os.path.join(out, f"bench-{m}.json"))).get("decode", []):
        print(f"| {m} | {d.get('batch')} | {d.get('tok_s')} | {d.get('ms_per_round')} | {d.get('host_ms_per_round')} | {d.get('taped_launches')} |")
PY
	;;
speed)
	dw=/tmp/tfc-full-qwen
	step 150 checkpoint python3 tools/oracle/full_size.py reference --work "$dw" --out "$out/checkpoint" --checkpoint-only
	step 120 bench-graphs bin/tfc bench "$dw/checkpoint" --backend "$backend" --batch 1,8 --prompt-tokens 128 --new-tokens 32 --out "$out/bench-graphs.json"
	step 120 bench-plain env TFC_GPU_GRAPHS=0 bin/tfc bench "$dw/checkpoint" --backend "$backend" --batch 1,8 --prompt-tokens 128 --new-tokens 32 --out "$out/bench-plain.json"
	step 120 bench-profile bin/tfc bench "$dw/checkpoint" --backend "$backend" --batch 1 --prompt-tokens 128 --new-tokens 16 --profile --out "$out/bench-profile.json"
	;;
paged-mma)
	dw=/tmp/tfc-full-qwen
	mkdir -p "$out/receipts"
	step 150 checkpoint python3 tools/oracle/full_size.py reference --work "$dw" --out "$out/checkpoint" --checkpoint-only
	step 150 contracts-bf16-mma bin/tfc contract --backend "$backend" --precision bf16 --receipt "$out/receipts"
	# A the CUDA-core kernel, B the tensor-core kernel on the CUDA-core kernel's grid, C on its own grid (the default)
	side A TFC_PAGED_MMA=0
	side B "TFC_PAGED_MMA=0 TFC_NVCC_FLAGS=-DTFC_PAGED_MMA=1"
	side C ""
	step 400 ab env AB_ROUNDS=1 AB_BATCH=1,8,16,64 AB_PROMPT=512 AB_NEW=160 AB_FILL="8x512 1x2048" \
		bash tools/gpu/ab-speed.sh "$out/bin/tfc-A" "$out/bin/tfc-B" "$out/bin/tfc-C" "$out/ab"
	rm -rf "$out/bin"
	# one prompt launch (many rows) and one decode launch (the cluster layout) under Nsight Compute
	for k in 'qwen2vl_decode_attention$' 'qwen2vl_decode_attention_rows'; do
		step 60 "ncu-${k%\$}" env TFC_GPU_TAPES=0 ncu -k "regex:$k" -s 60 -c 1 \
			--section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy \
			bin/tfc bench "$dw/checkpoint" --backend "$backend" --batch 1 --prompt-tokens 2048 --new-tokens 8
	done
	;;
fill)
	dw=/tmp/tfc-full-qwen
	mkdir -p "$out/receipts"
	step 150 checkpoint python3 tools/oracle/full_size.py reference --work "$dw" --out "$out/checkpoint" --checkpoint-only
	step 150 contracts-bf16-fill env TFC_GPU_FILL=1 bin/tfc contract --backend "$backend" --precision bf16 --receipt "$out/receipts"
	step 120 contracts-f32 bin/tfc contract --backend "$backend" --precision f32 --receipt "$out/receipts"
	# A the CUDA-core cached attention, B the default (tensor cores), C that and the fill layout in
	# rounds of 2,048 rows; the decode bench fills its 512-token prompts first (prefill_ms)
	side A TFC_PAGED_MMA=0
	side B ""
	side C TFC_GPU_FILL=1 --max-num-batched-tokens 2048
	step 330 ab env AB_ROUNDS=1 AB_BATCH=1,16,64 AB_PROMPT=512 AB_NEW=128 AB_FILL="1x2048" AB_TOWER=1 \
		bash tools/gpu/ab-speed.sh "$out/bin/tfc-A" "$out/bin/tfc-B" "$out/bin/tfc-C" "$out/ab"
	rm -rf "$out/bin"
	# the default's tower, kernel by kernel (the span attention's time a layer)
	step 90 profile-tower bin/tfc bench "$dw/checkpoint" --backend "$backend" --batch "" --image "$dw/images/page-1000x1400.png" \
		--repeat 1 --profile --out "$out/profile-tower.json"
	[ "${QUICK:-0}" = 1 ] && { log "done"; exit 0; }
	step 60 profile-fill env TFC_GPU_FILL=1 bin/tfc bench "$dw/checkpoint" --backend "$backend" --batch 1 --prompt-tokens 2048 \
		--new-tokens 8 --max-num-batched-tokens 2048 --profile --out "$out/profile-fill.json"
	step 120 contracts-full-bf16-fill env TFC_GPU_FILL=1 bin/tfc contract --backend "$backend" --precision bf16 --model "$dw/checkpoint" --receipt "$out/receipts"
	step 60 ncu-fill env TFC_GPU_TAPES=0 TFC_GPU_FILL=1 ncu -k "regex:silu_glu_fill" -s 10 -c 1 \
		--section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy \
		bin/tfc bench "$dw/checkpoint" --backend "$backend" --batch 1 --prompt-tokens 2048 --new-tokens 8
	;;
esac
log "done"
