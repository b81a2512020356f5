#!/usr/bin/env python3
"""A full-size random Qwen2-VL (Qwen2-VL-2B-Instruct's shape, BF16) and transformers' references
and speeds on it, for tfc's model gate and first speed figures on the GPU machine.

  full_size.py reference --work DIR --out DIR
      Writes under --work: checkpoint/ (config, BF16 safetensors with published tensor names,
      tokenizer, chat template, preprocessor config) and images/ (two synthetic pages). Writes under
      --out: hf-reference.json (per prompt: prompt ids, 64 greedy ids, every step's top-5 ids and
      logits and top-2 margin; in BF16 and in float32 on the BF16 weights) and hf-timings.json
      (decode tok/s at batch 1 and 8, device copy bandwidth and the weight-streaming floor, the
      vision tower on a 1000x1400 page). --no-gpu writes the images, config and side files only.

  full_size.py report --work DIR --out DIR [--tfc bin/tfc]
      Reads what tools/gpu/full-size.sh left (tfc-<case>.json/.err/.rc under --work, tfc-bench.json
      under --out) and the two files above; writes tfc-generate.json, summary.json and receipt.md
      under --out. Needs only the standard library.

The weights come from one seeded CPU generator in parameter-name order, rounded to BF16, so the
checkpoint is byte-identical on every run (its sha256 is printed and recorded).
"""

import argparse
import copy
import hashlib
import json
import math
import os
import shutil
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import qwen2_vl as tiny  # noqa: E402  (the tiny oracle: versions, renames, processor helpers)

IMAGE_TOKEN_ID = tiny.IMAGE_TOKEN_ID
VIDEO_TOKEN_ID = tiny.VIDEO_TOKEN_ID
VISION_START_TOKEN_ID = tiny.VISION_START_TOKEN_ID
VISION_END_TOKEN_ID = tiny.VISION_END_TOKEN_ID
BOS_TOKEN_ID = tiny.BOS_TOKEN_ID
EOS_TOKEN_IDS = tiny.EOS_TOKEN_IDS
PAD_TOKEN_ID = tiny.PAD_TOKEN_ID
VOCAB_SIZE = tiny.VOCAB_SIZE
FIRST_ADDED_TOKEN_ID = tiny.FIRST_ADDED_TOKEN_ID

NEW_TOKENS = 64
TOP_K = 5

# Qwen2-VL-2B-Instruct's shape.
TEXT_CONFIG = dict(
    vocab_size=VOCAB_SIZE,
    hidden_size=1536,
    intermediate_size=8960,
    num_hidden_layers=28,
    num_attention_heads=12,
    num_key_value_heads=2,
    hidden_act="silu",
    max_position_embeddings=32768,
    rms_norm_eps=1e-6,
    use_sliding_window=False,
    tie_word_embeddings=True,
    bos_token_id=BOS_TOKEN_ID,
    eos_token_id=EOS_TOKEN_IDS[0],
)
ROPE = {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [16, 24, 24]}
VISION_CONFIG = dict(
    depth=32,
    embed_dim=1280,
    hidden_size=1536,
    hidden_act="quick_gelu",
    mlp_ratio=4,
    num_heads=16,
    in_channels=3,
    patch_size=14,
    spatial_merge_size=2,
    temporal_patch_size=2,
)
# Qwen2-VL-2B-Instruct's preprocessor_config.json values.
PREPROCESSOR_CONFIG = dict(tiny.PREPROCESSOR_CONFIG, min_pixels=3136, max_pixels=12845056,
                           size={"shortest_edge": 3136, "longest_edge": 12845056})

# (file, width, height, seed): the prompt's page (multiples of 28, so no resize) and the page the
# vision tower is timed on (the processor resizes it).
PROMPT_IMAGE = ("page-448x616.png", 448, 616, 1)
BENCH_IMAGE = ("page-1000x1400.png", 1000, 1400, 2)

CASES = [
    ("text", [], "Write a detailed report about the history of printing and how books are made."),
    ("image", [PROMPT_IMAGE[0]], "Read all the text on this page and describe its layout."),
]

# Weight draws tried in order when --candidate is -1; the first whose greedy outputs pass
# non_degenerate is kept. The final text norm of random sign keeps a token's own (tied) embedding
# from winning the next step. With the default seed no draw passes on the image prompt (runs of
# 13, 12 and 9 equal tokens); CHOSEN, the least repetitive, is the default and the one recorded in
# docs/receipts/2026-12-02-h200-full-size-hf-reference.json.
CANDIDATES = [
    dict(seed_offset=0, embed_std=1.0, o_gain=2.0, down_gain=4.0, merger_gain=1.5, final_norm="signed"),
    dict(seed_offset=1, embed_std=1.0, o_gain=1.0, down_gain=1.0, merger_gain=1.0, final_norm="signed"),
    dict(seed_offset=2, embed_std=1.0, o_gain=3.0, down_gain=6.0, merger_gain=2.0, final_norm="signed"),
]
CHOSEN = 2
MAX_RUN = 3
MIN_DISTINCT = 0.5
RECORDED = "docs/receipts/2026-12-02-h200-full-size-hf-reference.json"

# Speed settings (as ../shared facts measured them): decode-only rate from a 16-token run
# subtracted from a 272-token run, 512-token random prompts, no torch.compile, dynamic cache.
SPEED_PROMPT = 512
SPEED_SHORT, SPEED_LONG = 16, 272
SPEED_BATCHES = (1, 8)
VISION_REPEAT = 5
COPY_BYTES = 1 << 30

T0 = time.time()


def log(*a):
    print(f"full_size [{time.strftime('%H:%M:%S', time.gmtime())} +{time.time() - T0:5.1f}s]:", *a, flush=True)


# ---------------------------------------------------------------- images


def make_page(w, h, seed):
    """A synthetic document page: a title, paragraphs of word-like marks, a table and a bar figure."""
    import numpy as np

    rng = np.random.default_rng(seed)
    img = np.full((h, w, 3), 248, dtype=np.uint8)
    s = w / 1000.0
    margin = int(70 * s)
    right = w - margin

    def words(y, height, x0, x1, lo, hi, colour=(25, 25, 25)):
        x = x0
        while True:
            n = int(rng.integers(lo, hi) * s)
            if x + n > x1:
                return
            img[y:y + height, x:x + n] = colour
            x += n + max(2, int(10 * s))

    y = margin
    words(y, int(30 * s), margin, int(right * 0.8), 60, 180, (10, 10, 60))  # title
    y += int(70 * s)
    section = 0
    while y < h - margin - int(60 * s):
        kind = section % 4
        if kind in (0, 2):  # a paragraph
            for _ in range(int(rng.integers(4, 9))):
                if y > h - margin - int(20 * s):
                    break
                end = right if rng.random() > 0.2 else int(margin + (right - margin) * rng.uniform(0.3, 0.8))
                words(y, max(3, int(11 * s)), margin, end, 20, 110)
                y += int(24 * s)
            y += int(22 * s)
        elif kind == 1:  # a table
            rows, cols = int(rng.integers(4, 7)), int(rng.integers(3, 5))
            rh, cw = int(30 * s), (right - margin) // cols
            top = y
            for r in range(rows + 1):
                yy = min(top + r * rh, h - 1)
                img[yy:yy + max(1, int(2 * s)), margin:margin + cols * cw] = (90, 90, 90)
            for c in range(cols + 1):
                xx = min(margin + c * cw, w - 2)
                img[top:min(top + rows * rh, h), xx:xx + max(1, int(2 * s))] = (90, 90, 90)
            for r in range(rows):
                for c in range(cols):
                    yy = top + r * rh + int(10 * s)
                    if yy + int(10 * s) < h:
                        words(yy, max(3, int(10 * s)), margin + c * cw + int(8 * s), margin + (c + 1) * cw - int(8 * s), 15, 60,
                              (120, 20, 20) if r == 0 else (25, 25, 25))
            y = top + rows * rh + int(40 * s)
        else:  # a bar figure with a caption
            fh = int(160 * s)
            if y + fh > h - margin:
                break
            bars = int(rng.integers(5, 10))
            bw = (right - margin) // (2 * bars)
            for b in range(bars):
                bh = int(fh * rng.uniform(0.2, 1.0))
                colour = tuple(int(v) for v in rng.integers(40, 220, size=3))
                x0 = margin + (2 * b) * bw + bw // 2
                img[y + fh - bh:y + fh, x0:x0 + bw] = colour
            img[y + fh:y + fh + max(1, int(2 * s)), margin:right] = (40, 40, 40)
            y += fh + int(16 * s)
            words(y, max(3, int(9 * s)), margin + int(100 * s), right - int(100 * s), 15, 70, (80, 80, 80))
            y += int(40 * s)
        section += 1
    return img


def write_images(image_dir):
    from PIL import Image

    os.makedirs(image_dir, exist_ok=True)
    out = {}
    for name, w, h, seed in (PROMPT_IMAGE, BENCH_IMAGE):
        path = os.path.join(image_dir, name)
        Image.fromarray(make_page(w, h, seed)).save(path, format="PNG")
        out[name] = {"width": w, "height": h, "sha256": tiny.sha256_file(path)}
    return out


# ---------------------------------------------------------------- checkpoint


def make_config():
    from transformers import Qwen2VLConfig

    legacy_rope = {"rope_scaling": {"type": "mrope", "mrope_section": ROPE["mrope_section"]},
                   "rope_theta": ROPE["rope_theta"]}
    variants = [dict(TEXT_CONFIG, rope_parameters=dict(ROPE)), dict(TEXT_CONFIG, **legacy_rope)]
    config, errors = None, []
    for text in variants:
        try:
            config = Qwen2VLConfig(
                text_config=text,
                vision_config=dict(VISION_CONFIG),
                image_token_id=IMAGE_TOKEN_ID,
                video_token_id=VIDEO_TOKEN_ID,
                vision_start_token_id=VISION_START_TOKEN_ID,
                vision_end_token_id=VISION_END_TOKEN_ID,
                tie_word_embeddings=True,
            )
            break
        except (TypeError, ValueError, KeyError) as e:
            errors.append(repr(e))
            log("Qwen2VLConfig refused a variant:", repr(e))
    if config is None:
        raise SystemExit("full_size: Qwen2VLConfig refused every variant: " + "; ".join(errors))
    tc = config.text_config
    for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
              "num_key_value_heads", "rms_norm_eps"):
        if getattr(tc, k) != TEXT_CONFIG[k]:
            raise SystemExit(f"full_size: text_config.{k} is {getattr(tc, k)}, want {TEXT_CONFIG[k]}")
    rp = getattr(tc, "rope_parameters", None) or getattr(tc, "rope_scaling", None) or {}
    if list(rp.get("mrope_section", [])) != ROPE["mrope_section"]:
        raise SystemExit(f"full_size: text_config rope parameters {rp} lack mrope_section {ROPE['mrope_section']}")
    for k, v in VISION_CONFIG.items():
        if getattr(config.vision_config, k) != v:
            raise SystemExit(f"full_size: vision_config.{k} is {getattr(config.vision_config, k)}, want {v}")
    return config


def write_side_files(ckpt, template_path, tokenizer_path):
    with open(template_path) as f:
        template = f.read()
    tiny.write_json(os.path.join(ckpt, "preprocessor_config.json"), PREPROCESSOR_CONFIG)
    tiny.write_json(os.path.join(ckpt, "chat_template.json"), {"chat_template": template})
    tiny.write_json(os.path.join(ckpt, "tokenizer_config.json"), dict(tiny.TOKENIZER_CONFIG, chat_template=template))
    shutil.copyfile(tokenizer_path, os.path.join(ckpt, "tokenizer.json"))
    return template


def build_model(config, device):
    """The model on device in float32 with transformers' own initialisation (every parameter is drawn again)."""
    import torch
    from transformers import Qwen2VLForConditionalGeneration

    torch.manual_seed(0)
    with torch.device(device):
        try:
            model = Qwen2VLForConditionalGeneration._from_config(config, attn_implementation="sdpa")
        except (TypeError, ValueError) as e:
            log("_from_config with sdpa refused:", repr(e), "; using the constructor")
            model = Qwen2VLForConditionalGeneration(config)
    model.to(torch.float32)
    if model.lm_head.weight.data_ptr() != model.get_input_embeddings().weight.data_ptr():
        raise SystemExit("full_size: lm_head is not tied to embed_tokens; tie_word_embeddings did not take")
    model.eval()
    return model


def draw_weights(model, seed, c):
    """The tiny oracle's draw; the embedding's added and padding rows (EOS, image and template
    tokens) stay small so greedy rarely picks them."""
    tiny.draw_weights(model, seed, c, tiny.small_added_rows(model.get_input_embeddings().weight))


def generation_config(eos):
    from transformers import GenerationConfig

    return GenerationConfig(bos_token_id=BOS_TOKEN_ID, eos_token_id=eos, pad_token_id=PAD_TOKEN_ID, do_sample=False)


def save_checkpoint(model16, ckpt):
    """save_pretrained in BF16 (2 GB shards), tensor names as published Qwen2-VL checkpoints spell them."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    model16.generation_config = generation_config(list(EOS_TOKEN_IDS))
    model16.save_pretrained(ckpt, max_shard_size="2GB")
    index_path = os.path.join(ckpt, "model.safetensors.index.json")
    if not os.path.exists(index_path):
        raise SystemExit("full_size: save_pretrained wrote no index")
    with open(index_path) as f:
        index = json.load(f)
    renamed = False
    for shard in sorted(set(index["weight_map"].values())):
        path = os.path.join(ckpt, shard)
        with safe_open(path, framework="pt") as f:
            meta = f.metadata() or {}
            keys = list(f.keys())
            if all(tiny.published_key(k) == k for k in keys):
                continue
            tensors = {tiny.published_key(k): f.get_tensor(k).contiguous() for k in keys}
        renamed = True
        save_file(tensors, path, metadata=meta)
        del tensors
    if renamed:
        index["weight_map"] = {tiny.published_key(k): v for k, v in sorted(index["weight_map"].items())}
        tiny.write_json(index_path, index)
    shards = sorted(set(index["weight_map"].values()))
    files = {s: tiny.sha256_file(os.path.join(ckpt, s)) for s in shards}
    whole = hashlib.sha256("".join(f"{files[s]}  {s}\n" for s in shards).encode()).hexdigest()
    sizes = sum(os.path.getsize(os.path.join(ckpt, s)) for s in shards)
    return dict(shards=shards, sha256=files, sha256_of_shard_list=whole, bytes_on_disk=sizes,
                renamed_to_published=renamed, tensors=len(index["weight_map"]))


# ---------------------------------------------------------------- references


def greedy(model, case, dtype, n):
    """transformers' greedy generate of n tokens with no EOS stop: ids, and every step's top-k and margin."""
    import torch

    tiny.reset_rope_state(model)
    inputs = tiny.model_inputs(case, dtype, "cuda")
    gc = generation_config(None)
    gc.max_new_tokens = n
    model.generation_config = copy.deepcopy(gc)
    how = "eos_token_id None"
    with torch.inference_mode():
        res = model.generate(**inputs, generation_config=gc, return_dict_in_generate=True, output_logits=True)
    prompt_len = inputs["input_ids"].shape[1]
    ids = res.sequences[0, prompt_len:].tolist()
    if len(ids) < n:
        log(f"WARNING {case['name']}: generate stopped after {len(ids)} tokens with eos None; forcing min_new_tokens={n}")
        tiny.reset_rope_state(model)
        gc.min_new_tokens = n
        how = f"min_new_tokens {n} (eos None stopped early)"
        with torch.inference_mode():
            res = model.generate(**inputs, generation_config=gc, return_dict_in_generate=True, output_logits=True)
        ids = res.sequences[0, prompt_len:].tolist()
    steps = []
    for s, step in enumerate(res.logits):
        row = step[0].double()
        v, i = torch.topk(row, TOP_K)
        steps.append({"ids": [int(x) for x in i.tolist()], "logits": [float(x) for x in v.tolist()],
                      "margin": float(v[0] - v[1])})
    # greedy takes the first index of the largest logit; a tie with a lower index is still a top-1 pick
    picked_top1 = all(float(step[0][t]) == st["logits"][0] for step, st, t in zip(res.logits, steps, ids))
    return {"output_ids": ids, "eos_handling": how, "steps": steps,
            "margins": [st["margin"] for st in steps],
            "min_margin": min(st["margin"] for st in steps) if steps else None,
            "picked_is_top1": picked_top1,
            "longest_run": tiny.longest_run(ids), "distinct": len(set(ids))}


def non_degenerate(runs):
    problems = []
    for name, r in runs.items():
        ids = r["output_ids"]
        if len(ids) != NEW_TOKENS:
            problems.append(f"{name}: {len(ids)} tokens")
        if r["longest_run"] > MAX_RUN:
            problems.append(f"{name}: a run of {r['longest_run']} equal tokens")
        if r["distinct"] < MIN_DISTINCT * len(ids):
            problems.append(f"{name}: only {r['distinct']} distinct tokens")
    outs = [tuple(r["output_ids"]) for r in runs.values()]
    if len(set(outs)) < len(outs):
        problems.append("two prompts gave the same output")
    return problems


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def case_record(case):
    ids = case["inputs"]["input_ids"][0].tolist()
    grid = case["inputs"].get("image_grid_thw")
    return {
        "user_text": case["text"],
        "images": ["images/" + n for n in case["images"]],
        "prompt_text": case["prompt"],
        "prompt_ids": ids,
        "prompt_tokens": len(ids),
        "image_grid_thw": grid.tolist() if grid is not None else [],
        "mm_token_type_ids": case["mm_source"],
        "max_new_tokens": NEW_TOKENS,
    }


# ---------------------------------------------------------------- speed


def cuda_time(fn):
    import torch

    torch.cuda.synchronize()
    t = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t, out


def text_decoder(model16):
    """A Qwen2 decoder of the checkpoint's text shape holding its text weights (dots.ocr's decoder size)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    base = {k: v for k, v in TEXT_CONFIG.items() if k not in ("bos_token_id", "eos_token_id")}
    cfg, errors = None, []
    for extra in ({"rope_parameters": {"rope_type": "default", "rope_theta": ROPE["rope_theta"]}},
                  {"rope_theta": ROPE["rope_theta"]}):
        try:
            cfg = Qwen2Config(**base, **extra)
            break
        except (TypeError, ValueError, KeyError) as e:
            errors.append(repr(e))
    if cfg is None:
        raise RuntimeError("Qwen2Config refused every variant: " + "; ".join(errors))
    with torch.device("cuda"):
        lm = Qwen2ForCausalLM(cfg)
    lm.to(torch.bfloat16).eval()
    src = model16.model.language_model.state_dict() if hasattr(model16.model, "language_model") else None
    loaded = {"from": None}
    if src is not None:
        res = lm.model.load_state_dict(src, strict=False)
        loaded = {"from": "the checkpoint's language model", "missing": list(res.missing_keys),
                  "unexpected": list(res.unexpected_keys)}
    params = sum(p.numel() for p in lm.parameters())
    return lm, {"params": params, "attn_implementation": getattr(lm.config, "_attn_implementation", None),
                "weights": loaded}


def decode_speed(lm, batch):
    import torch

    g = torch.Generator().manual_seed(1000 + batch)
    ids = torch.randint(0, FIRST_ADDED_TOKEN_ID, (batch, SPEED_PROMPT), generator=g).cuda()
    mask = torch.ones_like(ids)
    lm.generation_config = generation_config(None)

    def run(n):
        with torch.inference_mode():
            out = lm.generate(input_ids=ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                              pad_token_id=PAD_TOKEN_ID)
        if out.shape[1] != SPEED_PROMPT + n:
            raise RuntimeError(f"generate gave {out.shape[1] - SPEED_PROMPT} tokens, not {n}")
        return out

    cuda_time(lambda: run(SPEED_SHORT))  # warm-up
    short, _ = cuda_time(lambda: run(SPEED_SHORT))
    long, _ = cuda_time(lambda: run(SPEED_LONG))
    rounds = SPEED_LONG - SPEED_SHORT
    rate = batch * rounds / (long - short)
    return {"batch": batch, "prompt_tokens": SPEED_PROMPT, "seconds": {str(SPEED_SHORT): short, str(SPEED_LONG): long},
            "tok_s": rate, "tok_s_per_stream": rate / batch, "ms_per_round": 1000 * (long - short) / rounds,
            "end_to_end_tok_s_272": batch * SPEED_LONG / long}


def copy_bandwidth():
    import torch

    src = torch.ones(COPY_BYTES, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    n = 20
    torch.cuda.synchronize()
    start.record()
    for _ in range(n):
        dst.copy_(src)
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / n
    del src, dst
    torch.cuda.empty_cache()
    return {"bytes": COPY_BYTES, "ms": ms, "gb_s_read_plus_write": 2 * COPY_BYTES / (ms / 1e3) / 1e9,
            "method": "torch device-to-device copy_ of 1 GiB, 3 warm-ups, mean of 20 between CUDA events; "
                      "bytes read plus bytes written over the time"}


def vision_speed(model16, proc, image_dir):
    import torch
    from PIL import Image

    name, w, h, _ = BENCH_IMAGE
    pil = Image.open(os.path.join(image_dir, name)).convert("RGB")
    pre = []
    for _ in range(VISION_REPEAT):
        t = time.perf_counter()
        feats = proc.image_processor(images=[pil], return_tensors="pt")
        pre.append(1000 * (time.perf_counter() - t))
    px = feats["pixel_values"].to(torch.bfloat16).cuda()
    grid = feats["image_grid_thw"].cuda()
    visual = tiny.visual_module(model16)

    def run():
        with torch.inference_mode():
            return visual(px, grid_thw=grid)

    cuda_time(run)  # warm-up
    runs = [1000 * cuda_time(run)[0] for _ in range(VISION_REPEAT)]
    g = grid[0].tolist()
    return {"image": "images/" + name, "width": w, "height": h, "grid_thw": g, "patches": int(px.shape[0]),
            "resized": [g[2] * VISION_CONFIG["patch_size"], g[1] * VISION_CONFIG["patch_size"]],
            "rows": int(px.shape[0]) // VISION_CONFIG["spatial_merge_size"] ** 2,
            "preprocess_ms": statistics.median(pre), "ms": statistics.median(runs), "runs_ms": runs,
            "dtype": "bfloat16",
            "attn_implementation": getattr(getattr(model16.config, "vision_config", model16.config), "_attn_implementation", None),
            "image_processor": type(proc.image_processor).__name__,
            "method": f"visual(pixel_values, grid_thw) on the GPU, one warm-up then median of {VISION_REPEAT}, "
                      "synchronised; preprocess (the checkpoint's image processor on the CPU) timed apart"}


# ---------------------------------------------------------------- reference command


def reference(args):
    versions = tiny.check_versions(args.force)
    log("versions", versions)
    for p in (args.tokenizer, args.template):
        if not os.path.exists(p):
            sys.exit(f"full_size: {p} is missing; run `make testdata` (tools/testdata.sh) first")
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")

    ckpt = os.path.join(args.work, "checkpoint")
    image_dir = os.path.join(args.work, "images")
    if os.path.isdir(ckpt):
        shutil.rmtree(ckpt)
    os.makedirs(ckpt)
    os.makedirs(args.out, exist_ok=True)
    images = write_images(image_dir)
    log("images", images)
    template = write_side_files(ckpt, args.template, args.tokenizer)
    config = make_config()
    config.save_pretrained(ckpt)
    proc, template_loaded = tiny.load_processor(ckpt, template)
    cases = []
    for name, imgs, text in CASES:
        c = tiny.prepare_case(proc, image_dir, name, imgs, text)
        c["text"] = text
        cases.append(c)
        log(name, "prompt tokens", c["inputs"]["input_ids"].shape[1],
            "grid", c["inputs"].get("image_grid_thw", torch.empty(0)).tolist())
    if args.no_gpu or not torch.cuda.is_available():
        log("no GPU (or --no-gpu): wrote the images, config and side files only")
        return
    device_name = torch.cuda.get_device_name(0)
    log("device", device_name)

    model32 = build_model(config, "cuda")
    log("built", sum(p.numel() for p in model32.parameters()), "parameters;",
        "attn", getattr(model32.config, "_attn_implementation", None))
    if args.checkpoint_only:
        c = CANDIDATES[args.candidate]
        draw_weights(model32, args.seed + c["seed_offset"], c)
        saved = save_checkpoint(model32.to(torch.bfloat16), ckpt)
        log("saved", saved["shards"], "sha256 of the shard list", saved["sha256_of_shard_list"])
        return
    order = [args.candidate] if args.candidate >= 0 else list(range(len(CANDIDATES)))
    tried, chosen, model16, runs16 = [], None, None, None
    for i in order:
        c = CANDIDATES[i]
        draw_weights(model32, args.seed + c["seed_offset"], c)
        model16 = copy.deepcopy(model32).to(torch.bfloat16)
        log(f"candidate {i} drawn")
        runs16 = {case["name"]: greedy(model16, case, torch.bfloat16, NEW_TOKENS) for case in cases}
        problems = non_degenerate(runs16)
        tried.append({"index": i, "candidate": c, "problems": problems,
                      "outputs": {k: v["output_ids"] for k, v in runs16.items()},
                      "min_margin": {k: v["min_margin"] for k, v in runs16.items()}})
        log(f"candidate {i}: problems {problems}; min margins {tried[-1]['min_margin']}")
        if not problems or len(order) == 1:
            chosen = i
            break
        if i != order[-1]:
            del model16
            torch.cuda.empty_cache()
    if chosen is None:
        best = min(tried, key=lambda t: len(t["problems"]))["index"]
        log(f"WARNING: no candidate passed the checks; keeping the least bad, {best}")
        if best != order[-1]:
            c = CANDIDATES[best]
            draw_weights(model32, args.seed + c["seed_offset"], c)
            model16 = copy.deepcopy(model32).to(torch.bfloat16)
            runs16 = {case["name"]: greedy(model16, case, torch.bfloat16, NEW_TOKENS) for case in cases}
        chosen = best

    saved = save_checkpoint(model16, ckpt)
    log("saved", saved["shards"], "sha256 of the shard list", saved["sha256_of_shard_list"])
    for s, h in saved["sha256"].items():
        log(f"sha256 {h}  {s}")

    records = {}
    for case in cases:
        r32 = greedy(model32, case, torch.float32, NEW_TOKENS)
        rec = case_record(case)
        rec["bf16"] = runs16[case["name"]]
        rec["f32"] = r32
        rec["bf16_vs_f32_first_difference"] = first_difference(rec["bf16"]["output_ids"], r32["output_ids"])
        records[case["name"]] = rec
        log(f"{case['name']}: {rec['prompt_tokens']} prompt ids; bf16 {rec['bf16']['output_ids'][:12]}... "
            f"min margin {rec['bf16']['min_margin']:.4g}; f32 min margin {r32['min_margin']:.4g}; "
            f"first bf16/f32 difference at {rec['bf16_vs_f32_first_difference']}")
    text_params = sum(p.numel() for p in model16.model.language_model.parameters())
    lm_head_extra = 0 if model16.lm_head.weight is model16.get_input_embeddings().weight else model16.lm_head.weight.numel()
    decode_bytes = 2 * (text_params + lm_head_extra)
    ref = {
        "generator": "tools/oracle/full_size.py",
        "versions": versions,
        "device": device_name,
        "seed": args.seed,
        "candidate": dict(CANDIDATES[chosen], index=chosen),
        "candidates_tried": tried,
        "config": {"text": TEXT_CONFIG, "rope": ROPE, "vision": VISION_CONFIG, "preprocessor": PREPROCESSOR_CONFIG},
        "checkpoint": saved,
        "images": images,
        "chat_template_loaded_from_checkpoint": template_loaded,
        "processor": {"processor": type(proc).__name__, "image_processor": type(proc.image_processor).__name__},
        "params": sum(p.numel() for p in model16.parameters()),
        "decode_weight_bytes": decode_bytes,
        "decode_weight_bytes_note": "BF16 bytes of the text decoder and lm_head (tied: the embedding matrix, read once a round by lm_head)",
        "new_tokens": NEW_TOKENS,
        "references": {"bf16": "transformers generate, greedy, BF16 weights and activations, sdpa",
                       "f32": "transformers generate, greedy, the BF16 weights upcast to float32, TF32 off"},
        "cases": records,
    }
    tiny.write_json(os.path.join(args.out, "hf-reference.json"), ref)
    log("wrote", os.path.join(args.out, "hf-reference.json"))
    del model32
    torch.cuda.empty_cache()

    timings = {"generator": "tools/oracle/full_size.py", "versions": versions, "device": device_name,
               "checkpoint_sha256_of_shard_list": saved["sha256_of_shard_list"], "decode_weight_bytes": decode_bytes}
    timings_path = os.path.join(args.out, "hf-timings.json")
    try:
        timings["vision"] = vision_speed(model16, proc, image_dir)
        log("vision", {k: timings["vision"][k] for k in ("grid_thw", "patches", "ms", "preprocess_ms")})
    except Exception as e:  # recorded; the other timings still run
        timings["vision"] = {"error": repr(e)}
        log("vision failed:", repr(e))
    tiny.write_json(timings_path, timings)
    try:
        timings["copy"] = copy_bandwidth()
        gbs = timings["copy"]["gb_s_read_plus_write"]
        floor_ms = decode_bytes / (gbs * 1e9) * 1e3
        timings["floor"] = {"decode_weight_bytes": decode_bytes, "ms_per_round": floor_ms,
                            "tok_s": {str(b): b * 1000 / floor_ms for b in SPEED_BATCHES},
                            "method": "decode weight bytes / copy bandwidth (read plus write): one round streams every "
                                      "decoder weight once; the KV cache and activations are left out"}
        log(f"copy {gbs:.0f} GB/s; floor {floor_ms:.3f} ms a round")
    except Exception as e:
        timings["copy"] = {"error": repr(e)}
        log("copy bandwidth failed:", repr(e))
    tiny.write_json(timings_path, timings)
    try:
        lm, info = text_decoder(model16)
        del model16
        torch.cuda.empty_cache()
        timings["decoder"] = info
        timings["decode"] = []
        for b in SPEED_BATCHES:
            d = decode_speed(lm, b)
            timings["decode"].append(d)
            log(f"transformers decode batch {b}: {d['tok_s']:.1f} tok/s ({d['tok_s_per_stream']:.1f} a stream), "
                f"{d['ms_per_round']:.2f} ms a round")
            tiny.write_json(timings_path, timings)
        timings["decode_method"] = (f"generate greedy, {SPEED_PROMPT}-token random prompts, min_new_tokens = max_new_tokens, "
                                    "no torch.compile, dynamic cache, sdpa, BF16; decode-only rate = batch x "
                                    f"({SPEED_LONG} - {SPEED_SHORT}) / (time of the {SPEED_LONG}-token run - time of the "
                                    f"{SPEED_SHORT}-token run), after one {SPEED_SHORT}-token warm-up")
    except Exception as e:
        timings["decode_error"] = repr(e)
        log("decode speed failed:", repr(e))
    tiny.write_json(timings_path, timings)
    log("wrote", timings_path)


# ---------------------------------------------------------------- report command


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f), None
    except (OSError, ValueError) as e:
        return None, f"{path}: {e}"


def read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def bf16_spacing(x):
    """The gap between adjacent BF16 values at |x| (8 significant bits)."""
    if x == 0:
        return 0.0
    return 2.0 ** (math.floor(math.log2(abs(x))) - 7)


def compare(ref_run, ref_prompt, got):
    """tfc's ids against one reference run: the first difference and the reference's view of it."""
    out = {"prompt_ids_equal": got["prompt_ids"] == ref_prompt,
           "prompt_first_difference": first_difference(got["prompt_ids"], ref_prompt)}
    want, ids = ref_run["output_ids"], got["output_ids"]
    k = first_difference(ids, want)
    out["equal"] = k is None
    out["first_difference"] = k
    out["tokens_compared"] = min(len(ids), len(want))
    if k is not None and k < len(ref_run["steps"]) and k < len(ids):
        st = ref_run["steps"][k]
        top1 = st["logits"][0]
        rank = st["ids"].index(ids[k]) if ids[k] in st["ids"] else None
        out["at_difference"] = {
            "tfc": ids[k], "reference": want[k] if k < len(want) else None,
            "reference_top5_ids": st["ids"], "reference_top5_logits": st["logits"],
            "reference_margin": st["margin"],
            "tfc_token_rank_in_reference": rank,
            "reference_gap_to_tfc_token": top1 - st["logits"][rank] if rank is not None else None,
            "bf16_spacing_at_top_logit": bf16_spacing(top1),
        }
    return out


def same_as_recorded(ref, path):
    """Whether this run's checkpoint and transformers' greedy ids equal an earlier run's."""
    recorded, _ = load_json(path)
    if ref is None or recorded is None:
        return None
    ids = all(ref["cases"][n][p]["output_ids"] == recorded["cases"][n][p]["output_ids"]
              and ref["cases"][n]["prompt_ids"] == recorded["cases"][n]["prompt_ids"]
              for n in ref["cases"] for p in ("bf16", "f32"))
    return {"checkpoint": ref["checkpoint"]["sha256_of_shard_list"] == recorded["checkpoint"]["sha256_of_shard_list"],
            "ids": ids}


def fmt(x, digits=1):
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:,.{digits}f}"
    return str(x)


def report(args):
    ref, ref_err = load_json(os.path.join(args.out, "hf-reference.json"))
    tim, tim_err = load_json(os.path.join(args.out, "hf-timings.json"))
    bench, bench_err = load_json(os.path.join(args.out, "tfc-bench.json"))
    problems = [e for e in (ref_err, tim_err) if e]
    generate, summary = {}, {"cases": {}}
    for name, _, _ in CASES:
        got, err = load_json(os.path.join(args.work, f"tfc-{name}.json"))
        rc = read_text(os.path.join(args.work, f"tfc-{name}.rc")).strip()
        stderr = read_text(os.path.join(args.work, f"tfc-{name}.err"))[-4000:]
        generate[name] = {"rc": rc, "stderr_tail": stderr, "output": got}
        rec = {"tfc_rc": rc}
        if got is None or ref is None:
            rec["error"] = (stderr.strip().splitlines() or [err or "no output"])[-1]
        else:
            rc_ref = ref["cases"][name]
            for prec in ("bf16", "f32"):
                rec[prec] = compare(rc_ref[prec], rc_ref["prompt_ids"], got)
        summary["cases"][name] = rec
    tiny.write_json(os.path.join(args.out, "tfc-generate.json"), generate)

    rows = []
    tfc_dec = {d["batch"]: d for d in (bench or {}).get("decode", [])}
    hf_dec = {d["batch"]: d for d in (tim or {}).get("decode", [])}
    floor = (tim or {}).get("floor", {})
    for b in SPEED_BATCHES:
        t, h = tfc_dec.get(b, {}).get("tok_s"), hf_dec.get(b, {}).get("tok_s")
        f = floor.get("tok_s", {}).get(str(b))
        rows.append({"measure": f"decode tok/s, batch {b}" + (" (total)" if b > 1 else ""), "tfc": t, "transformers": h,
                     "floor": f, "ratio": t / h if t and h else None, "of_floor": t / f if t and f else None})
    tv, hv = (bench or {}).get("vision") or {}, (tim or {}).get("vision") or {}
    rows.append({"measure": f"vision tower ms, {hv.get('width', 1000)}x{hv.get('height', 1400)} page "
                            f"(grid {tv.get('grid_thw') or hv.get('grid_thw')})",
                 "tfc": tv.get("ms"), "transformers": hv.get("ms"), "floor": None,
                 "ratio": hv["ms"] / tv["ms"] if tv.get("ms") and hv.get("ms") else None, "of_floor": None})
    summary["table"] = rows
    summary["copy"] = (tim or {}).get("copy")
    summary["tfc_bench_error"] = bench_err if bench is None else None
    summary["problems"] = problems
    summary["same_as_recorded"] = same_as_recorded(ref, args.recorded)
    tfc_sha = tiny.sha256_file(args.tfc) if os.path.exists(args.tfc) else None
    summary["tfc_sha256"] = tfc_sha
    tiny.write_json(os.path.join(args.out, "summary.json"), summary)

    L = []
    L.append("# Full-size Qwen2-VL-2B-shaped random checkpoint: tfc against transformers")
    L.append("")
    L.append(f"- date: {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC; device: {(ref or tim or {}).get('device', '?')}")
    L.append(f"- command: `tools/gpu/full-size.sh` (tfc backend `{args.backend}`)")
    L.append(f"- tfc binary sha256: `{tfc_sha}`")
    if ref:
        ck = ref["checkpoint"]
        L.append(f"- checkpoint: {ref['params']:,} parameters, BF16, {ck['bytes_on_disk']:,} bytes in {len(ck['shards'])} shards; "
                 f"sha256 of the shard list `{ck['sha256_of_shard_list']}` (seed {ref['seed']}, candidate {ref['candidate']['index']})")
        L.append(f"- transformers {ref['versions'].get('transformers')}, torch {ref['versions'].get('torch')}")
    rec = summary["same_as_recorded"]
    if rec is not None:
        L.append(f"- against the recorded reference `{args.recorded}`: checkpoint identical: {'yes' if rec['checkpoint'] else 'NO'}; "
                 f"transformers' ids identical: {'yes' if rec['ids'] else 'NO'}")
    for p in problems:
        L.append(f"- problem: {p}")
    L.append("")
    L.append(f"## Greedy ids, {NEW_TOKENS} new tokens, EOS ignored")
    L.append("")
    L.append("| prompt | reference | prompt ids equal | first difference | reference top-2 margin there | tfc's token's rank in the reference | BF16 spacing at the top logit |")
    L.append("| --- | --- | --- | --- | --- | --- | --- |")
    for name, rec in summary["cases"].items():
        if "error" in rec:
            L.append(f"| {name} | — | — | tfc did not run (rc {rec['tfc_rc']}): {rec['error'][:200]} | | | |")
            continue
        for prec in ("bf16", "f32"):
            c = rec[prec]
            at = c.get("at_difference") or {}
            diff = "none (all equal)" if c["equal"] else str(c["first_difference"])
            rank = at.get("tfc_token_rank_in_reference")
            L.append(f"| {name} | {prec} | {'yes' if c['prompt_ids_equal'] else 'no, from ' + str(c['prompt_first_difference'])} | {diff} | "
                     f"{fmt(at.get('reference_margin'), 4)} | {fmt(None if rank is None else rank + 1) if at else '—'} | "
                     f"{fmt(at.get('bf16_spacing_at_top_logit'), 4)} |")
    if ref:
        L.append("")
        L.append("Reference margins: " + "; ".join(
            f"{n} bf16 min {fmt(c['bf16']['min_margin'], 4)}, f32 min {fmt(c['f32']['min_margin'], 4)}, "
            f"bf16/f32 first difference {c['bf16_vs_f32_first_difference']}" for n, c in ref["cases"].items()))
    L.append("")
    L.append("## Speed")
    L.append("")
    L.append("| measure | tfc | transformers | floor | ratio (tfc speed / transformers speed) | tfc / floor |")
    L.append("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        L.append(f"| {r['measure']} | {fmt(r['tfc'])} | {fmt(r['transformers'])} | {fmt(r['floor'])} | "
                 f"{fmt(r['ratio'], 2)} | {fmt(r['of_floor'], 3)} |")
    L.append("")
    if tim and tim.get("copy") and "gb_s_read_plus_write" in tim["copy"]:
        L.append(f"Floor: {tim['decode_weight_bytes']:,} decode weight bytes / {tim['copy']['gb_s_read_plus_write']:,.0f} GB/s "
                 f"device copy (read + write) = {floor.get('ms_per_round', 0):.3f} ms a round.")
    if bench is None:
        L.append(f"tfc bench: no report ({bench_err}); see run.log.")
    else:
        L.append(f"tfc bench: load {bench.get('load_seconds', 0):.1f} s on {bench.get('device')}; " + "; ".join(
            f"batch {d['batch']}: {d['ms_per_round']:.2f} ms a round ({d['forward_ms']:.2f} in forward), prefill {d['prefill_ms']:.0f} ms"
            for d in bench.get("decode", [])))
    if tim and tim.get("decode_method"):
        L.append("")
        L.append("transformers decode: " + tim["decode_method"] + ".")
    if bench and bench.get("decode_method"):
        L.append("")
        L.append("tfc decode: " + bench["decode_method"])
    text = "\n".join(L) + "\n"
    with open(os.path.join(args.out, "receipt.md"), "w") as f:
        f.write(text)
    print(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("reference", help="build the checkpoint; transformers' references and timings")
    r.add_argument("--work", required=True, help="scratch folder for the checkpoint and images (about 4.5 GB)")
    r.add_argument("--out", required=True, help="folder for hf-reference.json and hf-timings.json")
    r.add_argument("--tokenizer", default="testdata/tokenizer/qwen/tokenizer.json")
    r.add_argument("--template", default="testdata/templates/qwen2_vl.jinja")
    r.add_argument("--seed", type=int, default=20261202)
    r.add_argument("--candidate", type=int, default=CHOSEN, help="weight draw to use; -1 tries them in order")
    r.add_argument("--no-gpu", action="store_true", help="write the images, config and side files only")
    r.add_argument("--force", action="store_true", help="run on torch/transformers versions other than the pinned ones")
    r.add_argument("--checkpoint-only", action="store_true",
                   help="draw the chosen weights and write the checkpoint, with no references or timings (for profiling)")
    p = sub.add_parser("report", help="compare tfc's outputs with the references; write receipt.md")
    p.add_argument("--work", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--tfc", default="bin/tfc")
    p.add_argument("--backend", default="cuda")
    p.add_argument("--recorded", default=RECORDED, help="an earlier run's hf-reference.json to check this run against")
    args = ap.parse_args()
    if args.command == "reference":
        reference(args)
    else:
        report(args)


if __name__ == "__main__":
    main()
