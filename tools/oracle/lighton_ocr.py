#!/usr/bin/env python3
"""Builds the tiny random LightOnOCR checkpoint and transformers' reference outputs on it.

Writes, under --out (default testdata/lighton-ocr-tiny), what qwen2_5_vl.py writes, in the same
layout and formats (oraclelib.py is the shared code):
  config.json, generation_config.json, model-*.safetensors + model.safetensors.index.json (BF16,
  tensor names as transformers 5 saves LightOnOcrForConditionalGeneration: model.vision_encoder.*,
  model.vision_projection.*, model.language_model.*; lm_head is tied and not saved),
  preprocessor_config.json, processor_config.json, chat_template.json, tokenizer_config.json,
  tokenizer.json (copied, not committed), README.md, oracle/images/*.png, oracle/<case>.json,
  oracle/<case>.safetensors, oracle/manifest.json.

The reference is transformers' LightOnOcrForConditionalGeneration (model_type lighton_ocr) on the
BF16-rounded weights, run in float64 on the CPU; the same greedy run is repeated in float32 on the
CPU and, when a GPU is present, in float32 on the GPU with TF32 off. Nothing is downloaded: the
config, tokenizer and processor are built from local files.

Config:
  text (Qwen3): hidden 48, 2 layers, 2 heads of 16 (q width 32, not the hidden size, as the
    published 16 heads of 128 over 1024), 1 KV head, FFN 96, rope_theta 1e6, RMS eps 1e-6, q_norm
    and k_norm per head, tied lm_head (as published; one 151936-row table of 14.6 MB).
  vision (Pixtral): 2 layers, hidden 40, 2 heads of 20 (not a power of two), SwiGLU FFN 64, patch
    14, image_size 1540, rope_theta 10000.
  projector: RMSNorm (the text eps), 2x2 patch merger (unfold order, Linear 160->40 no bias),
    Linear 40->48, GELU, Linear 48->48 (no biases).
  preprocessor: Pixtral's, patch 14, longest_edge 112 (the published 1540 would make pictures too
    big for a fixture; the rule is the same).

Cases:
  text    text only.
  image1  a.png 56x84, no resize: 6x4 patches, 3x2 merged.
  odd     c.png 90x60, sides rounded up to the patch: 98x70, 5x7 patches (odd both ways: the
          merger drops the last row and column), 2x3 merged.
  image2  e.png 170x150 (longest edge to 112: 112x98, 7x8 patches, odd rows) then b.png 112x70
          (no resize, 5x8 patches, odd rows): two pictures of different sizes, padded into one
          batch by the processor.

The chat template (testdata/templates/lighton_ocr.jinja) is ChatML with one <|image_pad|> a
picture, which the processor expands to one token a merged row; it stands in for the published
checkpoint's template, which this script does not have (manifest: chat_template_source).

Each picture case stores, besides what qwen2_vl.py records: pixel_values as the tower reads them
(one row a patch, [C, P, P] values, raster order, pictures one after another), the processor's
padded batch as pixel_values_padded, image_sizes, and the tower's output before the projector in
raster order (vision_blocks_out).
"""

import copy
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import oraclelib  # noqa: E402
from oraclelib import EOS_TOKEN_IDS, IMAGE_TOKEN_ID, TOKENIZER_CONFIG, VOCAB_SIZE, log, write_json  # noqa: E402

TEXT_CONFIG = dict(
    model_type="qwen3",
    vocab_size=VOCAB_SIZE,
    hidden_size=48,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=16,
    hidden_act="silu",
    max_position_embeddings=40960,
    rms_norm_eps=1e-6,
    attention_bias=False,
    use_sliding_window=False,
    sliding_window=None,
    tie_word_embeddings=True,
    bos_token_id=oraclelib.BOS_TOKEN_ID,
    eos_token_id=EOS_TOKEN_IDS[0],
)
TEXT_ROPE = {"rope_type": "default", "rope_theta": 1000000.0}
VISION_CONFIG = dict(
    model_type="pixtral",
    hidden_size=40,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=2,
    head_dim=20,
    num_channels=3,
    image_size=1540,
    patch_size=14,
    hidden_act="silu",
    attention_dropout=0.0,
)
VISION_ROPE = {"rope_type": "default", "rope_theta": 10000.0}
MERGE = 2
LONGEST_EDGE = 112

PREPROCESSOR = {
    "image_processor_type": "PixtralImageProcessor",
    "processor_class": "LightOnOcrProcessor",
    "do_convert_rgb": True,
    "do_normalize": True,
    "do_rescale": True,
    "do_resize": True,
    "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_std": [0.26862954, 0.26130258, 0.27577711],
    "patch_size": {"height": 14, "width": 14},
    "resample": 3,
    "rescale_factor": 1 / 255,
    "size": {"longest_edge": LONGEST_EDGE},
}
PROCESSOR = {"processor_class": "LightOnOcrProcessor", "patch_size": 14, "spatial_merge_size": MERGE}
# The image tokens LightOnOcrProcessor reads from the tokenizer (as transformers' processor test expects them).
IMAGE_TOKENS = {"image_token": "<|image_pad|>", "image_break_token": "<|vision_pad|>",
                "image_end_token": "<|vision_end|>"}

# (file name, make_image pattern, width, height)
IMAGES = [
    ("a.png", "a.png", 56, 84),
    ("b.png", "b.png", 112, 70),
    ("c.png", "c.png", 90, 60),
    ("e.png", "c.png", 170, 150),
]

CASES = [
    ("text", [], "Write a short poem about the sea."),
    ("image1", ["a.png"], "What is in this picture?"),
    ("odd", ["c.png"], "Read the text in this picture."),
    ("image2", ["e.png", "b.png"], "Compare these two pictures."),
]

CASE_NOTES = {
    "text": "text only",
    "image1": "one picture, no resize, even patch grid",
    "odd": "one picture, sides rounded up to the patch; odd patch grid both ways (the merger drops a row and a column)",
    "image2": "two pictures, the first resized to the longest edge; odd rows; padded batch",
}


def resized_size(height, width, longest=LONGEST_EDGE, patch=14):
    """Pixtral's get_resize_output_image_size: scale down to the longest edge (floor), then round each
    side up to the patch."""
    ratio = max(height / longest, width / longest)
    if ratio > 1:
        height = int(math.floor(height / ratio))
        width = int(math.floor(width / ratio))
    return ((height - 1) // patch + 1) * patch, ((width - 1) // patch + 1) * patch


# ---------------------------------------------------------------- config and model


def make_config():
    import transformers

    errors = []
    # rope under rope_parameters as transformers 5 spells it, then without tie_word_embeddings in the
    # text config (the top-level one ties), then the older rope_theta
    for rope_key, text_tie in (("rope_parameters", True), ("rope_parameters", False), (None, True)):
        text, vision = dict(TEXT_CONFIG), dict(VISION_CONFIG)
        if not text_tie:
            del text["tie_word_embeddings"]
        if rope_key:
            text[rope_key], vision[rope_key] = dict(TEXT_ROPE), dict(VISION_ROPE)
        else:
            text["rope_theta"], vision["rope_theta"] = TEXT_ROPE["rope_theta"], VISION_ROPE["rope_theta"]
        try:
            config = transformers.LightOnOcrConfig(text_config=text, vision_config=vision, spatial_merge_size=MERGE,
                                                   image_token_id=IMAGE_TOKEN_ID, tie_word_embeddings=True)
            break
        except (TypeError, ValueError, KeyError) as e:
            errors.append(repr(e))
            log("LightOnOcrConfig refused a variant:", repr(e))
    else:
        raise SystemExit("oracle: LightOnOcrConfig refused every variant: " + "; ".join(errors))
    tc, vc = config.text_config, config.vision_config
    for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
              "num_key_value_heads", "head_dim", "rms_norm_eps"):
        if getattr(tc, k) != TEXT_CONFIG[k]:
            raise SystemExit(f"oracle: text_config.{k} is {getattr(tc, k)}, want {TEXT_CONFIG[k]}")
    for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "head_dim",
              "image_size", "patch_size", "hidden_act"):
        if getattr(vc, k) != VISION_CONFIG[k]:
            raise SystemExit(f"oracle: vision_config.{k} is {getattr(vc, k)}, want {VISION_CONFIG[k]}")
    for c, want in ((tc, TEXT_ROPE), (vc, VISION_ROPE)):
        rp = getattr(c, "rope_parameters", None) or {}
        theta = rp.get("rope_theta", getattr(c, "rope_theta", None))
        if theta != want["rope_theta"]:
            raise SystemExit(f"oracle: {c.model_type} rope_theta is {theta}, want {want['rope_theta']}")
    if config.spatial_merge_size != MERGE or config.image_token_id != IMAGE_TOKEN_ID:
        raise SystemExit("oracle: spatial_merge_size or image_token_id did not take")
    return config


def is_final_norm(name):
    return name.endswith("language_model.norm.weight")


def build_model(config, seed, candidate):
    import torch
    from transformers import LightOnOcrForConditionalGeneration

    torch.manual_seed(seed)
    model = LightOnOcrForConditionalGeneration(config)
    model.to(torch.float32)
    if model.lm_head.weight.data_ptr() != model.get_input_embeddings().weight.data_ptr():
        raise SystemExit("oracle: lm_head is not tied to embed_tokens; tie_word_embeddings did not take")
    oraclelib.draw_weights(model, seed + candidate["seed_offset"], candidate, is_final_norm=is_final_norm)
    model.generation_config = oraclelib.generation_config()
    model.eval()
    return model


# ---------------------------------------------------------------- what differs from the Qwen oracles

MODEL_KEYS = ("input_ids", "attention_mask", "pixel_values", "image_sizes")


def model_inputs(case, dtype, device):
    """oraclelib.model_inputs, passing only what LightOnOcrForConditionalGeneration takes."""
    import torch

    out = {}
    for k, v in case["inputs"].items():
        if k not in MODEL_KEYS or not torch.is_tensor(v):
            continue
        out[k] = (v.to(dtype) if k == "pixel_values" else v).to(device)
    return out


def vision_rows(model, case, dtype, device):
    """The projector's rows (the image features the decoder scatters in) and the tower's output."""
    import torch

    inputs = case["inputs"]
    if "pixel_values" not in inputs:
        return None, None
    px = inputs["pixel_values"].to(dtype).to(device)
    sizes = inputs["image_sizes"].to(device)
    with torch.inference_mode():
        out = model.model.get_image_features(pixel_values=px, image_sizes=sizes, return_dict=True)
    merged = torch.cat(list(out.pooler_output), dim=0)
    pre = out.last_hidden_state
    if pre.dim() == 3:
        pre = pre[0]
    return merged, pre


def patch_rows(padded, sizes, patch):
    """The processor's padded batch [B, C, H, W] as the tower's patch_conv reads it: one row a patch,
    values in (channel, y, x) order, patches in raster order, pictures one after another."""
    import torch

    rows = []
    for img, (h, w) in zip(padded, sizes):
        h, w = int(h), int(w)
        c = img.shape[0]
        x = img[:, :h, :w].reshape(c, h // patch, patch, w // patch, patch)
        rows.append(x.permute(1, 3, 0, 2, 4).reshape((h // patch) * (w // patch), c * patch * patch))
    return torch.cat(rows, dim=0)


def load_processor(out, template):
    """AutoProcessor from the checkpoint folder; if that fails, LightOnOcrProcessor built from the
    same local files."""
    from transformers import AutoProcessor

    try:
        proc = AutoProcessor.from_pretrained(out)
        how = "AutoProcessor"
    except Exception as e:  # recorded: the explicit build below uses the same files
        log(f"AutoProcessor failed ({e!r}); building LightOnOcrProcessor from the files")
        from transformers import AutoTokenizer, LightOnOcrProcessor, PixtralImageProcessor

        tok = AutoTokenizer.from_pretrained(out)
        for k, v in IMAGE_TOKENS.items():
            if getattr(tok, k, None) != v:
                setattr(tok, k, v)
            if getattr(tok, k + "_id", None) is None:
                setattr(tok, k + "_id", tok.convert_tokens_to_ids(v))
        ip = PixtralImageProcessor(**{k: v for k, v in PREPROCESSOR.items()
                                      if k not in ("image_processor_type", "processor_class")})
        proc = LightOnOcrProcessor(image_processor=ip, tokenizer=tok, patch_size=PROCESSOR["patch_size"],
                                   spatial_merge_size=PROCESSOR["spatial_merge_size"], chat_template=template)
        how = "LightOnOcrProcessor"
    if getattr(proc, "chat_template", None) != template:
        log("WARNING: processor did not load chat_template.json; setting it explicitly")
        proc.chat_template = template
    if proc.image_token_id != IMAGE_TOKEN_ID:
        raise SystemExit(f"oracle: processor image_token_id {proc.image_token_id}, want {IMAGE_TOKEN_ID}")
    return proc, how


def prepare_case(proc, image_dir, name, images, text):
    import torch
    from PIL import Image

    messages = oraclelib.messages_for(images, text)
    prompt = proc.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    pil = [Image.open(os.path.join(image_dir, n)).convert("RGB") for n in images]
    kwargs = dict(text=[prompt], return_tensors="pt")
    if pil:
        kwargs["images"] = pil
    inputs = dict(proc(**kwargs))
    if pil:
        sizes = [tuple(int(x) for x in s) for s in torch.as_tensor(inputs["image_sizes"]).tolist()]
        want = [resized_size(im.height, im.width) for im in pil]
        if sizes != want:
            raise SystemExit(f"oracle {name}: processor sizes {sizes}, the Pixtral rule here gives {want}")
        inputs["image_sizes"] = torch.tensor(sizes, dtype=torch.int64)
        p = VISION_CONFIG["patch_size"]
        # not a model input (model_inputs drops it): the patch grid of each picture, for the record
        inputs["image_grid_thw"] = torch.tensor([[1, h // p, w // p] for h, w in sizes], dtype=torch.int64)
        merged = sum((h // p // MERGE) * (w // p // MERGE) for h, w in sizes)
        n_tokens = int((inputs["input_ids"] == IMAGE_TOKEN_ID).sum())
        if n_tokens != merged:
            raise SystemExit(f"oracle {name}: {n_tokens} image tokens, want {merged} merged rows")
    return dict(name=name, messages=messages, prompt=prompt, images=images, inputs=inputs, mm_source="none")


def case_extra(model, case, record, tensors, rows, pre):
    """Pixel rows as the tower reads them, the padded batch, the sizes, the tower's output."""
    inputs = case["inputs"]
    if rows is None:
        return
    p = VISION_CONFIG["patch_size"]
    padded = inputs["pixel_values"]
    sizes = inputs["image_sizes"].tolist()
    px = patch_rows(padded.double(), sizes, p)
    tensors["pixel_values"] = px.float().contiguous()
    tensors["pixel_values_padded"] = padded.float().contiguous()
    tensors["image_sizes"] = inputs["image_sizes"].contiguous()
    if pre is not None:
        if pre.shape[0] != px.shape[0]:
            raise SystemExit(f"oracle {case['name']}: tower gave {pre.shape[0]} rows for {px.shape[0]} patches")
        tensors["vision_blocks_out"] = pre.float().contiguous()
    grids = [[h // p, w // p] for h, w in sizes]
    record["image_sizes"] = sizes
    record["patch_grids"] = grids
    record["merged_grids"] = [[gh // MERGE, gw // MERGE] for gh, gw in grids]
    record["pixel_values_layout"] = "one row a patch, (channel, y, x), raster order; pixel_values_padded is the processor's output"


def save_checkpoint(model, out, shard_size):
    """save_pretrained in BF16, tensor names as transformers 5 writes them."""
    import torch

    bf16 = copy.deepcopy(model).to(torch.bfloat16)
    bf16.save_pretrained(out, max_shard_size=shard_size)
    index_path = os.path.join(out, "model.safetensors.index.json")
    if not os.path.exists(index_path):
        raise SystemExit("oracle: save_pretrained wrote no index; lower --shard-size so the weights shard")
    with open(index_path) as f:
        index = json.load(f)
    names = sorted(index["weight_map"])
    odd = [k for k in names if not k.startswith(("model.vision_encoder.", "model.vision_projection.",
                                                 "model.language_model.", "lm_head."))]
    if odd:
        raise SystemExit(f"oracle: unexpected tensor names: {odd[:8]}")
    shards = sorted(set(index["weight_map"].values()))
    if len(shards) < 2:
        raise SystemExit(f"oracle: weights landed in {len(shards)} shard; lower --shard-size")
    return dict(shards=shards, renamed_to_published=False, tensors=len(names), names=names)


# ---------------------------------------------------------------- main


def readme(manifest, results):
    t, v = TEXT_CONFIG, VISION_CONFIG
    lines = [
        "# lighton-ocr-tiny",
        "",
        "A tiny random LightOnOCR checkpoint written by transformers 5.17 (`tools/oracle/lighton_ocr.py`), with",
        "transformers' outputs on it, in the layout of `testdata/qwen2-vl-tiny/` (see its README); this file says",
        "what differs. Written by the oracle; regenerate with it, never edit by hand.",
        "",
        "## Config",
        "",
        f"- text (Qwen3): hidden {t['hidden_size']}, {t['num_hidden_layers']} layers, {t['num_attention_heads']} heads "
        f"of {t['head_dim']}, {t['num_key_value_heads']} KV head, FFN {t['intermediate_size']}, rope_theta "
        f"{TEXT_ROPE['rope_theta']:g}, RMS eps {t['rms_norm_eps']:g}, q_norm and k_norm, tied head.",
        f"- vision (Pixtral): {v['num_hidden_layers']} layers, hidden {v['hidden_size']}, {v['num_attention_heads']} "
        f"heads of {v['head_dim']}, FFN {v['intermediate_size']}, patch {v['patch_size']}, rope_theta "
        f"{VISION_ROPE['rope_theta']:g}; projector RMSNorm, 2x2 merger, Linear-GELU-Linear.",
        f"- preprocessor: Pixtral's, longest_edge {LONGEST_EDGE}; chat template `testdata/templates/lighton_ocr.jinja`, "
        "a stand-in for the published one.",
        f"- {manifest['checkpoint']['tensors']} BF16 tensors in {len(manifest['checkpoint']['shards'])} shards, "
        "names as transformers 5 saves them.",
        "",
        "## Cases",
        "",
        "| case | pictures (file, size as drawn) | sizes after the processor | patch grids | output | exercises |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    drawn = {name: (w, h) for name, _, w, h in IMAGES}
    for name, images, _ in CASES:
        r = results[name]
        pics = ", ".join(f"`{n}` {drawn[n][0]}x{drawn[n][1]}" for n in images) or "none"
        sizes = ", ".join(f"{w}x{h}" for h, w in r.get("image_sizes", [])) or "-"
        grids = ", ".join(f"{a}x{b}" for a, b in r.get("patch_grids", [])) or "-"
        out = f"{len(r['output_ids'])} ids, {r['finish_reason']}"
        lines.append(f"| `{name}` | {pics} | {sizes} | {grids} | {out} | {CASE_NOTES[name]} |")
    lines += [
        "",
        "`<case>.safetensors` of a picture case (N patches): `pixel_values` F32 [N, 588] (a row a patch, "
        "(channel, y, x), raster order, pictures in turn), `pixel_values_padded` (the processor's batch), "
        "`image_sizes` I64 [pictures, 2] (height, width), `vision_blocks_out` F32 [N, "
        f"{v['hidden_size']}] (the tower's output, raster order), `vision_rows`/`vision_rows_f64` (the projector's "
        "rows, in the order the decoder takes them).",
        "",
    ]
    return "\n".join(lines)


FAMILY = oraclelib.Family(
    generator="tools/oracle/lighton_ocr.py",
    out="testdata/lighton-ocr-tiny",
    seed=20261202,
    images=IMAGES,
    cases=CASES,
    make_config=make_config,
    build_model=build_model,
    preprocessor_config=PREPROCESSOR,
    doc=__doc__,
    shard_size="8MB",
    case_extra=case_extra,
)


def main():
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=FAMILY.out)
    ap.add_argument("--tokenizer", default="testdata/tokenizer/qwen/tokenizer.json")
    ap.add_argument("--template", default="testdata/templates/lighton_ocr.jinja")
    ap.add_argument("--seed", type=int, default=FAMILY.seed)
    ap.add_argument("--max-new-tokens", type=int, default=24)
    ap.add_argument("--shard-size", default=FAMILY.shard_size)
    ap.add_argument("--no-gpu", action="store_true", help="skip the float32 GPU comparison")
    ap.add_argument("--force", action="store_true", help="run on torch/transformers versions other than the pinned ones")
    args = ap.parse_args()

    versions = oraclelib.check_versions(args.force)
    log("versions", versions)
    for p in (args.tokenizer, args.template):
        if not os.path.exists(p):
            sys.exit(f"oracle: {p} is missing; run `make testdata` (tools/testdata.sh) first")

    import torch
    from safetensors.torch import save_file

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    # greedy, full_forward and compare_run in oraclelib call these by name
    oraclelib.model_inputs = model_inputs
    oraclelib.vision_rows = vision_rows

    out = args.out
    oracle_dir = os.path.join(out, "oracle")
    image_dir = os.path.join(oracle_dir, "images")
    os.makedirs(image_dir, exist_ok=True)
    for f in os.listdir(out):
        if f.startswith("model") and (f.endswith(".safetensors") or f.endswith(".index.json")):
            os.remove(os.path.join(out, f))

    oraclelib.write_images(image_dir, IMAGES)
    with open(args.template) as f:
        template = f.read()
    write_json(os.path.join(out, "preprocessor_config.json"), PREPROCESSOR)
    write_json(os.path.join(out, "processor_config.json"), PROCESSOR)
    write_json(os.path.join(out, "chat_template.json"), {"chat_template": template})
    tok_config = dict(TOKENIZER_CONFIG, chat_template=template, processor_class="LightOnOcrProcessor",
                      extra_special_tokens=dict(IMAGE_TOKENS), **IMAGE_TOKENS)
    write_json(os.path.join(out, "tokenizer_config.json"), tok_config)
    import shutil

    shutil.copyfile(args.tokenizer, os.path.join(out, "tokenizer.json"))
    config = make_config()
    config.save_pretrained(out)
    proc, proc_how = load_processor(out, template)
    log("processor", proc_how, type(proc).__name__, type(proc.image_processor).__name__, type(proc.tokenizer).__name__)
    cases = [prepare_case(proc, image_dir, *c) for c in CASES]
    for c in cases:
        log(c["name"], "prompt tokens", c["inputs"]["input_ids"].shape[1],
            "sizes", c["inputs"].get("image_sizes", torch.empty(0)).tolist())

    chosen, tried, clean = oraclelib.pick_candidate(FAMILY, config, args.seed, cases, args.max_new_tokens)
    candidate = FAMILY.candidates[chosen]
    model = build_model(config, args.seed, candidate)
    saved = save_checkpoint(model, out, args.shard_size)
    log("saved", {k: v for k, v in saved.items() if k != "names"})

    model64 = copy.deepcopy(model).to(torch.float64)
    model32 = copy.deepcopy(model).to(torch.float32)
    gpu = None
    if not args.no_gpu and torch.cuda.is_available():
        gpu = copy.deepcopy(model).to(torch.float32).to("cuda")

    results = {}
    for case in cases:
        record, tensors, rows = oraclelib.run_case(model64, case, proc.tokenizer, args.max_new_tokens, case_extra)
        ref_rows = rows.double() if rows is not None else None
        record["f32_cpu"] = oraclelib.compare_run(record["top5"], record["output_ids"], ref_rows, model32, case,
                                                  torch.float32, "cpu", args.max_new_tokens)
        if gpu is not None:
            rec = oraclelib.compare_run(record["top5"], record["output_ids"], ref_rows, gpu, case, torch.float32,
                                        "cuda", args.max_new_tokens)
            rec["device_name"] = torch.cuda.get_device_name(0)
            rec["tf32"] = False
            record["f32_gpu"] = rec
        else:
            record["f32_gpu"] = None
        write_json(os.path.join(oracle_dir, case["name"] + ".json"), record)
        save_file(tensors, os.path.join(oracle_dir, case["name"] + ".safetensors"),
                  metadata={"case": case["name"], "source": "transformers float64 cpu"})
        results[case["name"]] = record
        log(f"{case['name']}: prompt {len(record['prompt_ids'])} ids, output {record['output_ids']} "
            f"({record['finish_reason']}), min margin {record['min_margin']:.4g}, "
            f"f32 cpu equal {record['f32_cpu']['output_ids_equal']}")

    files = {}
    for root, _, names in os.walk(out):
        for n in sorted(names):
            p = os.path.join(root, n)
            rel = os.path.relpath(p, out)
            if rel in (os.path.join("oracle", "manifest.json"), "README.md"):
                continue
            files[rel] = oraclelib.sha256_file(p)
    manifest = {
        "generator": FAMILY.generator,
        "versions": versions,
        "pinned": oraclelib.PINNED,
        "seed": args.seed,
        "candidate": dict(candidate, index=chosen),
        "candidate_checks_passed": clean,
        "candidates_tried": tried,
        "max_new_tokens": args.max_new_tokens,
        "checkpoint": saved,
        "chat_template_source": "testdata/templates/lighton_ocr.jinja: a ChatML stand-in, not the published template",
        "processor": {"built_by": proc_how, "processor": type(proc).__name__,
                      "image_processor": type(proc.image_processor).__name__,
                      "image_processor_module": type(proc.image_processor).__module__,
                      "tokenizer": type(proc.tokenizer).__name__},
        "vision": {"longest_edge": LONGEST_EDGE, "spatial_merge_size": MERGE,
                   "attn_implementation": getattr(config.vision_config, "_attn_implementation", None)},
        "not_committed": ["tokenizer.json"],
        "cases": {k: {"output_ids": v["output_ids"], "finish_reason": v["finish_reason"],
                      "min_margin": v["min_margin"], "f32_cpu_equal": v["f32_cpu"]["output_ids_equal"],
                      "f32_gpu_equal": None if v["f32_gpu"] is None else v["f32_gpu"]["output_ids_equal"]}
                  for k, v in results.items()},
        "sha256": files,
    }
    write_json(os.path.join(oracle_dir, "manifest.json"), manifest)
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write(readme(manifest, results))
    log("done:", json.dumps(manifest["cases"]))


if __name__ == "__main__":
    main()
