#!/usr/bin/env python3
"""Full-size checks of LightOnOCR, GLM-OCR and Qwen2.5-VL: a random BF16 checkpoint of the published
model's dimensions, transformers' greedy ids on it in BF16 on the GPU, and (with tools/gpu/published.sh)
`tfc generate` on the same prompt in BF16 on CUDA, compared.

  published.py config --family F --out DIR
      Writes DIR/config.json (the fixture's config.json with the published dimensions) and the
      fixture's side files, with the published image-size bounds. No torch needed; `tfc inspect`
      cannot read it (no weights), the binding is checked on the GPU machine by `tfc generate`.

  published.py reference --family F --work DIR --out DIR
      Writes WORK/F/checkpoint (config, BF16 safetensors as transformers 5.17 saves them, the
      fixture's side files), WORK/F/page.png and WORK/F/prompt.txt (the user text, no newline;
      empty for LightOnOCR), and OUT/F-hf.json: prompt ids, image grid, 64 greedy ids with EOS
      ignored, each step's top-5 ids and logits, top-2 margin and the BF16 spacing of the top logit,
      the checkpoint's shard sha256s and the weight draw kept.

  published.py report --family F --work DIR --out DIR
      Reads OUT/F-hf.json and OUT/F-tfc.json (`tfc generate --json`; with F-tfc.err and F-tfc.rc),
      writes OUT/F-summary.json and appends a section to OUT/receipt.md. Standard library only.

What is published and what is not: only the DIMENSIONS are the published checkpoint's (widths,
depths, heads, head sizes, FFN sizes, vision tower, rotary values, eps, tying) and its image-size
bounds (preprocessor `size`/pixels: the fixtures' bounds keep pictures to a few dozen tokens). The
vocabulary (151936, the Qwen tokenizer), the token ids, the tokenizer, the chat template and every
other preprocessor and processor value are the tiny fixture's (testdata/<fixture>), which stand in
for the published ones (GLM's own tokenizer and the published templates are not available
offline). GLM-OCR's published multi-token-prediction layer (one past its 16 layers), which
transformers ignores, is not made.

Weights: the model is built from the config in BF16 on the GPU, then every parameter is drawn again
from one seeded CUDA generator in parameter-name order (float32 draws rounded to BF16): linear and
convolution weights N(0, gain/sqrt(fan_in)) (gain on o_proj, down_proj and the merger's last layer),
norm weights 1 + 0.1 N (the text decoder's final norm N(0, 1): random signs keep a token's own
embedding from winning the next step), biases 0.2 N, embedding tables (and an untied lm_head) N(0, 1)
with the added-token rows (ids >= 151643) x0.1. Up to three draws are tried (CANDIDATES); the first
whose 64 greedy ids are not degenerate is kept and recorded with the others' outcomes. The draw
depends on the CUDA generator, so the sha256s are recorded, not promised across GPUs or torch builds.
"""

import argparse
import copy
import hashlib
import json
import math
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import full_size  # noqa: E402  (make_page, bf16_spacing, compare, first_difference)
import glm_ocr  # noqa: E402
import lighton_ocr  # noqa: E402
import oraclelib  # noqa: E402

NEW_TOKENS = 64
TOP_K = 5
TIE_SPACINGS = 2  # a difference is at a tie when transformers' gap to tfc's token is within this many BF16 spacings
F32_TIE = 1e-4  # in float32, a tie is a gap within this fraction of the top logit (plus F32_TIE itself)
PAGE = ("page.png", 700, 900, 3)  # file, width, height, make_page seed: 800 image tokens in every family
SIDE_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.json", "chat_template.jinja",
              "preprocessor_config.json", "processor_config.json", "generation_config.json")

# Weight draws tried in order (the tiny oracles' draw, oraclelib.draw_weights, on the GPU).
CANDIDATES = [
    dict(seed_offset=0, embed_std=1.0, o_gain=3.0, down_gain=6.0, merger_gain=2.0, final_norm="signed"),
    dict(seed_offset=1, embed_std=1.0, o_gain=2.0, down_gain=4.0, merger_gain=1.5, final_norm="signed"),
    dict(seed_offset=2, embed_std=1.0, o_gain=1.0, down_gain=1.0, merger_gain=1.0, final_norm="signed"),
]
MIN_DISTINCT = 8  # a kept draw's 64 ids hold at least this many distinct tokens
MAX_RUN = 16  # and no run of one token longer than this

# The published dimensions, merged into the fixture's config.json (dicts merge key by key, anything
# else replaces). Every value names where it was read.
FAMILIES = {
    "lighton_ocr": dict(
        fixture="testdata/lighton-ocr-tiny",
        published="lightonai/LightOnOCR-2-1B",
        graph="graphs/lighton_ocr.graph",
        # the graph's ocr_prompt "": the page alone, a user message with only the image
        prompt="",
        # Sources: LightOnOCR-1B-1025's config.json (a public copy of the Hub file; the -2-1B card
        # gives the same architecture: Pixtral ViT 24 layers, 1024 wide; Qwen3 decoder 28 layers,
        # 1024 wide, GQA 16/8) and transformers 5's LightOnOcrConfig defaults, which are these values.
        # The -2-1B config.json itself was not found; where the sources agree it is taken as these.
        overrides={
            "tie_word_embeddings": True,
            "spatial_merge_size": 2,
            "text_config": {
                "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
                "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
                "rms_norm_eps": 1e-6, "hidden_act": "silu", "attention_bias": False,
                "tie_word_embeddings": True,
                "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
            },
            "vision_config": {
                "hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24,
                "num_attention_heads": 16, "head_dim": 64, "image_size": 1540, "patch_size": 14,
                "hidden_act": "silu", "num_channels": 3,
                "rope_parameters": {"rope_theta": 10000.0, "rope_type": "axial"},
            },
        },
        # LightOnOCR's preprocessor_config.json: longest_edge 1540 (the model card: "trained at
        # 1540px maximum longest edge")
        preprocessor={"size": {"longest_edge": 1540}},
    ),
    "glm_ocr": dict(
        fixture="testdata/glm-ocr-tiny",
        published="zai-org/GLM-OCR",
        graph="graphs/glm_ocr.graph",
        prompt="Text Recognition:",  # the graph's ocr_prompt text
        # Source: zai-org/GLM-OCR's config.json as published (public copies of the Hub file written by
        # transformers 5.3 and 5.9, identical in these values). Its num_nextn_predict_layers 1 (the
        # MTP layer) is left out: transformers 5.17 does not build it.
        overrides={
            "tie_word_embeddings": False,
            "text_config": {
                "hidden_size": 1536, "intermediate_size": 4608, "num_hidden_layers": 16,
                "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
                "rms_norm_eps": 1e-5, "hidden_act": "silu", "attention_bias": False,
                "max_position_embeddings": 131072,
                "rope_parameters": {"rope_type": "default", "mrope_section": [16, 24, 24],
                                    "partial_rotary_factor": 1.0, "rope_theta": 10000.0},
            },
            "vision_config": {
                "hidden_size": 1024, "depth": 24, "num_heads": 16, "intermediate_size": 4096,
                "out_hidden_size": 1536, "attention_bias": True, "hidden_act": "silu",
                "image_size": 336, "patch_size": 14, "in_channels": 3, "rms_norm_eps": 1e-5,
                "spatial_merge_size": 2, "temporal_patch_size": 2,
            },
        },
        # zai-org/GLM-OCR's preprocessor_config.json: size {shortest_edge 12544, longest_edge 9633792}
        # (its Glm46VImageProcessor; the fixture's Glm4vImageProcessor computes the same rule)
        preprocessor={"size": {"shortest_edge": 12544, "longest_edge": 9633792}},
    ),
    "qwen2_5_vl": dict(
        fixture="testdata/qwen2.5-vl-tiny",
        published="Qwen/Qwen2.5-VL-3B-Instruct",
        graph="graphs/qwen2_5_vl.graph",
        prompt="Read all the text in this image.",  # the graph's ocr_prompt
        # Source: Qwen/Qwen2.5-VL-3B-Instruct's config.json (public copies of the Hub file, written by
        # transformers 4.41: rope under rope_scaling {type mrope}, here under rope_parameters as
        # transformers 5 writes it; the 3B ties its head, unlike the 7B the fixture follows).
        overrides={
            "tie_word_embeddings": True,
            "text_config": {
                "hidden_size": 2048, "intermediate_size": 11008, "num_hidden_layers": 36,
                "num_attention_heads": 16, "num_key_value_heads": 2, "rms_norm_eps": 1e-6,
                "hidden_act": "silu", "max_position_embeddings": 128000, "tie_word_embeddings": True,
                "use_sliding_window": False,
                "rope_parameters": {"rope_type": "default", "mrope_section": [16, 24, 24], "rope_theta": 1000000.0},
            },
            "vision_config": {
                "depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16,
                "out_hidden_size": 2048, "hidden_act": "silu", "in_channels": 3, "patch_size": 14,
                "spatial_merge_size": 2, "temporal_patch_size": 2, "window_size": 112,
                "fullatt_block_indexes": [7, 15, 23, 31], "tokens_per_second": 2,
            },
        },
        # Qwen2.5-VL's preprocessor_config.json: min_pixels 3136, max_pixels 12845056 (Qwen2-VL's, as
        # tools/oracle/full_size.py uses them)
        preprocessor={"min_pixels": 3136, "max_pixels": 12845056,
                      "size": {"shortest_edge": 3136, "longest_edge": 12845056}},
    ),
}

T0 = time.time()


def log(*a):
    print(f"published [{time.strftime('%H:%M:%S', time.gmtime())} +{time.time() - T0:5.1f}s]:", *a, flush=True)


# ---------------------------------------------------------------- config (no torch)


def merge(base, over):
    """base with over merged in: dicts key by key, anything else replaced."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def read_json(path):
    with open(path) as f:
        return json.load(f)


def published_config(family, fixture_config):
    """The fixture's config.json dict with the published dimensions; layer_types follows the depth."""
    fam = FAMILIES[family]
    cfg = merge(fixture_config, fam["overrides"])
    tc = cfg["text_config"]
    if "layer_types" in tc:
        tc["layer_types"] = ["full_attention"] * tc["num_hidden_layers"]
    if "max_window_layers" in tc:  # Qwen's sliding-window layer count, unused (no sliding window)
        tc["max_window_layers"] = max(tc["max_window_layers"], tc["num_hidden_layers"])
    return cfg


def published_preprocessor(family, fixture_pp):
    return merge(fixture_pp, FAMILIES[family]["preprocessor"])


def dims(family, cfg):
    """The published values the overrides set, flattened ("text_config.hidden_size"), as cfg has them."""
    out = {}
    for k, v in FAMILIES[family]["overrides"].items():
        if isinstance(v, dict):
            for kk in v:
                out[f"{k}.{kk}"] = cfg[k][kk]
        else:
            out[k] = cfg[k]
    return out


def graph_requires(family, cfg):
    """The graph's `require` lines for this family (graphs/<family>.graph), transcribed: a list of
    the ones this config breaks."""
    t, v = cfg["text_config"], cfg["vision_config"]
    rp = t.get("rope_parameters") or {}
    bad = []

    def need(ok, what):
        if not ok:
            bad.append(what)

    D, H = t["hidden_size"], t["num_attention_heads"]
    KV = t.get("num_key_value_heads", H)
    need(H % KV == 0, "H%KV == 0")
    need(t.get("hidden_act", "silu") == "silu", "act == silu")
    need(rp.get("rope_type", "default") == "default", "rtype == default")
    if family == "lighton_ocr":
        HD = t["head_dim"]
        VD, VH, P = v["hidden_size"], v["num_attention_heads"], v["patch_size"]
        need(HD % 2 == 0, "HD%2 == 0")
        need(VD % VH == 0 and (VD // VH) % 4 == 0, "VD%VH == 0, VHD%4 == 0")
        need(v.get("num_channels", 3) == 3, "C == 3")
        need(v["image_size"] % P == 0, "VS%P == 0")
        need(v["head_dim"] == VD // VH, "vhd == VHD")
        need(v.get("hidden_act", "gelu") == "silu", "vact == silu")
        need(not t.get("attention_bias", False) and not t.get("use_sliding_window", False), "!bias, !sliding")
        need((v.get("rope_parameters") or {}).get("rope_type", "axial") == "axial", "vrtype == axial")
    elif family == "glm_ocr":
        HD = t["head_dim"]
        VD, VH = v["hidden_size"], v["num_heads"]
        need(HD % 2 == 0 and sum(rp["mrope_section"]) == HD // 2, "HD%2 == 0, sum(sect) == HD/2")
        need(VD % VH == 0 and (VD // VH) % 4 == 0, "VD%VH == 0, VHD%4 == 0")
        need(v["out_hidden_size"] == D, "VO == D")
        need(v.get("in_channels", 3) == 3, "C == 3")
        need(v.get("hidden_act", "silu") == "silu", "vact == silu")
        need(not t.get("attention_bias", False) and v.get("attention_bias", True), "!bias, vbias")
        need(rp.get("partial_rotary_factor") == 1.0, "partial == 1.0 (stated)")
    elif family == "qwen2_5_vl":
        need(D % H == 0, "D%H == 0")
        HD = D // H
        VD, VH = v["hidden_size"], v["num_heads"]
        P, M, WS = v.get("patch_size", 14), v.get("spatial_merge_size", 2), v.get("window_size", 112)
        need(HD % 2 == 0 and sum(rp["mrope_section"]) == HD // 2, "HD%2 == 0, sum(sect) == HD/2")
        need(VD % VH == 0 and (VD // VH) % 4 == 0, "VD%VH == 0, VHD%4 == 0")
        need(v["out_hidden_size"] == D, "VO == D")
        need(v.get("in_channels", 3) == 3, "C == 3")
        need(WS % (P * M) == 0 and WS // (P * M) >= 1, "WS%(P*M) == 0, WU >= 1")
        need(v.get("hidden_act", "silu") == "silu", "vact == silu")
        need(not t.get("use_sliding_window", False), "!sliding")
        need(all(0 <= i < v["depth"] for i in v["fullatt_block_indexes"]), "fullatt blocks inside the depth")
    return bad


def qwen_smart_resize(height, width, factor=28, min_pixels=3136, max_pixels=12845056):
    """Qwen2-VL's smart_resize (transformers' image_processing_qwen2_vl), returning (height, width)."""
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def expected_image_tokens(family, pp, width, height):
    """(patch grid [rows, cols], image tokens) the family's processor gives a width x height page
    under the preprocessor values pp, by the plain-Python rules here and in the tiny oracles."""
    if family == "lighton_ocr":
        h, w = lighton_ocr.resized_size(height, width, longest=pp["size"]["longest_edge"], patch=14)
        g = [h // 14, w // 14]
        return g, (g[0] // 2) * (g[1] // 2)
    if family == "glm_ocr":
        h, w = glm_ocr.smart_resize(2, height, width, min_pixels=pp["size"]["shortest_edge"],
                                    max_pixels=pp["size"]["longest_edge"])
    else:
        h, w = qwen_smart_resize(height, width, min_pixels=pp["min_pixels"], max_pixels=pp["max_pixels"])
    g = [h // 14, w // 14]
    return g, g[0] * g[1] // 4


def write_config_dir(family, ckpt, tokenizer):
    """config.json and the fixture's side files (published size bounds) into ckpt; returns
    (config dict, preprocessor dict, side files copied, chat template text)."""
    fam = FAMILIES[family]
    fixture = fam["fixture"]
    os.makedirs(ckpt, exist_ok=True)
    cfg = published_config(family, read_json(os.path.join(fixture, "config.json")))
    oraclelib.write_json(os.path.join(ckpt, "config.json"), cfg)
    copied = []
    for name in SIDE_FILES:
        src = os.path.join(fixture, name)
        if name == "tokenizer.json" and not os.path.exists(src):
            src = tokenizer  # tokenizer.json is not committed: the Qwen file, as tools/gpu/receipts.sh copies it
        if os.path.exists(src):
            shutil.copyfile(src, os.path.join(ckpt, name))
            copied.append(name)
    if "tokenizer.json" not in copied:
        raise SystemExit(f"published: no tokenizer.json in {fixture} nor at {tokenizer}; run `make testdata`")
    pp = published_preprocessor(family, read_json(os.path.join(fixture, "preprocessor_config.json")))
    oraclelib.write_json(os.path.join(ckpt, "preprocessor_config.json"), pp)
    template = None
    if os.path.exists(os.path.join(ckpt, "chat_template.json")):
        template = read_json(os.path.join(ckpt, "chat_template.json"))["chat_template"]
    elif os.path.exists(os.path.join(ckpt, "chat_template.jinja")):
        with open(os.path.join(ckpt, "chat_template.jinja")) as f:
            template = f.read()
    return cfg, pp, copied, template


def config_cmd(args):
    cfg, pp, copied, _ = write_config_dir(args.family, args.out, args.tokenizer)
    bad = graph_requires(args.family, cfg)
    log(args.family, "wrote", args.out, "side files", copied, "graph requires broken:", bad or "none")
    if bad:
        sys.exit(1)


# ---------------------------------------------------------------- reference (torch, GPU)


def draw_weights(model, seed, c):
    """oraclelib.draw_weights' scheme on a CUDA generator (a CPU draw of 4 billion values takes minutes)."""
    import torch

    emb = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight if model.get_output_embeddings() is not None else emb
    g = torch.Generator(device="cuda").manual_seed(seed)
    finals = 0
    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            shape = tuple(p.shape)
            w = torch.randn(shape, generator=g, device="cuda", dtype=torch.float32)
            if p is emb or p is head:
                w *= c["embed_std"]
                w[oraclelib.FIRST_ADDED_TOKEN_ID:] *= 0.1
            elif p.dim() == 1 and name.endswith("weight"):
                if c["final_norm"] == "signed" and is_final_norm(name):
                    finals += 1
                else:
                    w = 1.0 + 0.1 * w
            elif p.dim() == 1 and name.endswith("bias"):
                w *= 0.2
            else:
                fan_in = math.prod(shape[1:])
                gain = 1.0
                if name.endswith("o_proj.weight"):
                    gain = c["o_gain"]
                elif name.endswith("down_proj.weight"):
                    gain = c["down_gain"]
                elif "merger.mlp.2." in name or "vision_projection.linear_2" in name:
                    gain = c["merger_gain"]
                w *= gain / math.sqrt(fan_in)
            p.copy_(w.to(torch.bfloat16).to(p.dtype))
            del w
    if c["final_norm"] == "signed" and finals != 1:
        raise SystemExit(f"published: found {finals} final text norms, want 1")


def is_final_norm(name):
    """The text decoder's final norm: model.language_model.norm.weight (transformers 5's module tree)."""
    return name.endswith("language_model.norm.weight") or name == "model.norm.weight"


MODEL_CLASS = {"lighton_ocr": "LightOnOcrForConditionalGeneration", "glm_ocr": "GlmOcrForConditionalGeneration",
               "qwen2_5_vl": "Qwen2_5_VLForConditionalGeneration"}


def build_model(family, config):
    """The family's class (as the tiny oracles build it) from the config, BF16, on the GPU, sdpa attention."""
    import torch
    import transformers

    cls = getattr(transformers, MODEL_CLASS[family])
    model, errors = None, []
    with torch.device("cuda"):
        for kwargs in (dict(dtype=torch.bfloat16, attn_implementation="sdpa"), dict(attn_implementation="sdpa"), {}):
            try:
                model = cls._from_config(config, **kwargs)
                break
            except (TypeError, ValueError) as e:
                errors.append(f"{kwargs}: {e!r}")
                log("_from_config refused", kwargs, repr(e))
    if model is None:
        raise SystemExit("published: could not build the model: " + "; ".join(errors))
    model.to("cuda", torch.bfloat16)
    model.eval()
    return model


def load_processor(family, ckpt, template):
    if family == "lighton_ocr":
        proc, how = lighton_ocr.load_processor(ckpt, template)
        return proc, how
    if family == "glm_ocr":
        proc, how, errors = glm_ocr.load_processor(ckpt, template)
        return proc, how + (f" (first tried: {errors})" if errors else "")
    proc, loaded = oraclelib.load_processor(ckpt, template)
    return proc, "AutoProcessor" + ("" if loaded else " (chat template set explicitly)")


def prepare(proc, family, page_path, text):
    """The page through the processor's chat template: one user message, the image, then the text
    unless it is empty (LightOnOCR's page alone)."""
    import torch
    from PIL import Image

    content = [{"type": "image", "image": os.path.basename(page_path)}]
    if text:
        content.append({"type": "text", "text": text})
    messages = [{"role": "user", "content": content}]
    rendered = proc.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    pil = Image.open(page_path).convert("RGB")
    inputs = dict(proc(text=[rendered], images=[pil], return_tensors="pt"))
    ids = inputs["input_ids"]
    if family == "lighton_ocr":  # as lighton_ocr.prepare_case: a tensor, which model_inputs passes on
        inputs["image_sizes"] = torch.as_tensor(inputs["image_sizes"]).to(torch.int64).reshape(-1, 2)
    if family != "lighton_ocr" and "mm_token_type_ids" not in inputs:
        mm = torch.zeros_like(ids)
        mm[ids == oraclelib.IMAGE_TOKEN_ID] = 1
        inputs["mm_token_type_ids"] = mm
    return messages, rendered, inputs


def model_inputs(family, inputs, dtype=None):
    import torch

    dtype = dtype or torch.bfloat16
    out = {}
    for k, v in inputs.items():
        if not torch.is_tensor(v):
            continue
        if family == "lighton_ocr" and k not in lighton_ocr.MODEL_KEYS:
            continue
        out[k] = (v.to(dtype) if k == "pixel_values" else v).to("cuda")
    return out


def greedy(model, family, inputs, n, dtype=None):
    """transformers' greedy generate of n tokens, EOS not stopping it: ids and each step's top-k."""
    import torch
    from transformers import GenerationConfig

    oraclelib.reset_rope_state(model)
    mi = model_inputs(family, inputs, dtype)
    gc = GenerationConfig(do_sample=False, max_new_tokens=n, eos_token_id=None, pad_token_id=oraclelib.PAD_TOKEN_ID,
                          bos_token_id=oraclelib.BOS_TOKEN_ID)
    model.generation_config = copy.deepcopy(gc)
    how = "generate with eos_token_id None"
    with torch.inference_mode():
        res = model.generate(**mi, generation_config=gc, return_dict_in_generate=True, output_logits=True)
    T = mi["input_ids"].shape[1]
    ids = res.sequences[0, T:].tolist()
    if len(ids) < n:
        log(f"WARNING: generate stopped after {len(ids)} tokens with eos None; forcing min_new_tokens={n}")
        oraclelib.reset_rope_state(model)
        gc.min_new_tokens = n
        how = f"generate with min_new_tokens {n} (eos None stopped early)"
        with torch.inference_mode():
            res = model.generate(**mi, generation_config=gc, return_dict_in_generate=True, output_logits=True)
        ids = res.sequences[0, T:].tolist()
    steps = []
    for s, step in enumerate(res.logits):
        row = step[0].double()
        v, i = torch.topk(row, TOP_K)
        top1 = float(v[0])
        steps.append({"ids": [int(x) for x in i.tolist()], "logits": [float(x) for x in v.tolist()],
                      "margin": float(v[0] - v[1]), "bf16_spacing": full_size.bf16_spacing(top1),
                      "picked_is_top1": float(row[ids[s]]) == top1})
    return {"output_ids": ids, "eos_handling": how, "steps": steps,
            "min_margin": min(st["margin"] for st in steps) if steps else None,
            "longest_run": oraclelib.longest_run(ids), "distinct": len(set(ids))}


def degenerate(run):
    problems = []
    if len(run["output_ids"]) != NEW_TOKENS:
        problems.append(f"{len(run['output_ids'])} tokens")
    if run["distinct"] < MIN_DISTINCT:
        problems.append(f"only {run['distinct']} distinct tokens")
    if run["longest_run"] > MAX_RUN:
        problems.append(f"a run of {run['longest_run']} equal tokens")
    return problems


def save_checkpoint(model, ckpt):
    """save_pretrained in BF16 (2 GB shards), tensor names as transformers 5.17 writes them (each
    graph reads them: model.visual.*/model.language_model.* or model.vision_encoder.*/...); the
    sha256 of every shard."""
    try:
        model.save_pretrained(ckpt, max_shard_size="2GB", safe_serialization=True)
    except TypeError:  # a transformers that always writes safetensors and takes no such argument
        model.save_pretrained(ckpt, max_shard_size="2GB")
    index_path = os.path.join(ckpt, "model.safetensors.index.json")
    if os.path.exists(index_path):
        index = read_json(index_path)
        shards = sorted(set(index["weight_map"].values()))
        tensors = len(index["weight_map"])
    else:
        shards, tensors = ["model.safetensors"], None
    files = {s: oraclelib.sha256_file(os.path.join(ckpt, s)) for s in shards}
    whole = hashlib.sha256("".join(f"{files[s]}  {s}\n" for s in shards).encode()).hexdigest()
    return dict(shards=shards, sha256=files, sha256_of_shard_list=whole, tensors=tensors,
                bytes_on_disk=sum(os.path.getsize(os.path.join(ckpt, s)) for s in shards))


def reference(args):
    fam = FAMILIES[args.family]
    versions = oraclelib.check_versions(args.force)
    log(args.family, "versions", versions)
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if not torch.cuda.is_available():
        sys.exit("published: no CUDA device")

    work = os.path.join(args.work, args.family)
    ckpt = os.path.join(work, "checkpoint")
    if os.path.isdir(ckpt):
        shutil.rmtree(ckpt)
    os.makedirs(ckpt)
    os.makedirs(args.out, exist_ok=True)
    name, w, h, seed = PAGE
    page_path = os.path.join(work, name)
    from PIL import Image

    Image.fromarray(full_size.make_page(w, h, seed)).save(page_path, format="PNG")
    with open(os.path.join(work, "prompt.txt"), "w") as f:
        f.write(fam["prompt"])

    cfg_dict, pp, copied, template = write_config_dir(args.family, ckpt, args.tokenizer)
    bad = graph_requires(args.family, cfg_dict)
    if bad:
        log("WARNING: the published dims break the graph's requires (transcribed):", bad)
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(ckpt)
    took = {}
    for key, want in dims(args.family, cfg_dict).items():
        obj, attr = (config, key) if "." not in key else (getattr(config, key.split(".")[0]), key.split(".")[1])
        got = getattr(obj, attr, None)
        if isinstance(want, dict):
            got = dict(got or {})
            ok = all((list(got.get(k)) if isinstance(got.get(k), (list, tuple)) else got.get(k)) == v
                     for k, v in want.items())
        else:
            ok = (list(got) if isinstance(got, (list, tuple)) else got) == want
        if not ok:
            took[key] = {"want": want, "got": repr(got)}
    if took:
        scalar = {k: v for k, v in took.items() if not isinstance(v["want"], dict)}
        log("WARNING: config values read back otherwise:", took)
        if scalar:
            raise SystemExit(f"published: config values did not take: {scalar}")
    proc, proc_how = load_processor(args.family, ckpt, template)
    messages, rendered, inputs = prepare(proc, args.family, page_path, fam["prompt"])
    prompt_ids = inputs["input_ids"][0].tolist()
    n_image = sum(1 for t in prompt_ids if t == oraclelib.IMAGE_TOKEN_ID)
    grid = inputs.get("image_grid_thw")
    grid = grid.tolist() if grid is not None else [[1] + [int(x) // 14 for x in s] for s in inputs["image_sizes"].tolist()]
    want_grid, want_tokens = expected_image_tokens(args.family, pp, w, h)
    log(f"prompt {len(prompt_ids)} ids, {n_image} image tokens, grid {grid} (rules here: {want_grid}, {want_tokens}); "
        f"processor {proc_how}")
    if n_image != want_tokens or [int(x) for x in grid[0][1:]] != want_grid:
        log(f"WARNING: the processor gave {n_image} image tokens on grid {grid}; the published size rule gives "
            f"{want_tokens} on {want_grid} (was the size bound read from preprocessor_config.json?)")

    model = build_model(args.family, config)
    params = sum(p.numel() for p in model.parameters())
    attn = getattr(model.config, "_attn_implementation", None)
    log(f"built {params:,} parameters, attention {attn}")
    order = [args.candidate] if args.candidate >= 0 else list(range(len(CANDIDATES)))
    tried, chosen, run = [], None, None
    for i in order:
        c = CANDIDATES[i]
        draw_weights(model, args.seed + c["seed_offset"], c)
        run = greedy(model, args.family, inputs, NEW_TOKENS)
        problems = degenerate(run)
        tried.append({"index": i, "candidate": c, "problems": problems, "output_ids": run["output_ids"],
                      "min_margin": run["min_margin"], "distinct": run["distinct"], "longest_run": run["longest_run"]})
        log(f"draw {i}: {run['output_ids'][:16]}... distinct {run['distinct']}, longest run {run['longest_run']}, "
            f"min margin {run['min_margin']:.4g}; problems {problems or 'none'}")
        if not problems:
            chosen = i
            break
    if chosen is None:
        best = max(tried, key=lambda t: (t["distinct"], -t["longest_run"]))["index"]
        log(f"WARNING: no draw passed; keeping the least degenerate, {best}")
        if best != tried[-1]["index"]:
            c = CANDIDATES[best]
            draw_weights(model, args.seed + c["seed_offset"], c)
            run = greedy(model, args.family, inputs, NEW_TOKENS)
        chosen = best
    saved = save_checkpoint(model, ckpt)
    for name_ in copied:  # save_pretrained rewrote generation_config.json: the fixture's goes back
        if name_ == "generation_config.json":
            shutil.copyfile(os.path.join(fam["fixture"], name_), os.path.join(ckpt, name_))
    for s, hsh in saved["sha256"].items():
        log(f"sha256 {hsh}  {s}")
    # the same BF16 weights in float32: the yardstick for how far BF16 arithmetic alone moves the ids
    model.float()
    run32 = greedy(model, args.family, inputs, NEW_TOKENS, torch.float32)
    k32 = full_size.first_difference(run["output_ids"], run32["output_ids"])
    log(f"float32 on the BF16 weights: {run32['output_ids'][:12]}...; BF16 and float32 first differ at "
        f"{'no step' if k32 is None else f'step {k32}'}")
    ties = sum(1 for st in run["steps"] if st["margin"] <= TIE_SPACINGS * st["bf16_spacing"])
    ref = {
        "generator": "tools/oracle/published.py",
        "family": args.family,
        "published_checkpoint": fam["published"],
        "fixture": fam["fixture"],
        "versions": versions,
        "device": torch.cuda.get_device_name(0),
        "seed": args.seed,
        "candidate": dict(CANDIDATES[chosen], index=chosen),
        "candidates_tried": tried,
        "dims": dims(args.family, cfg_dict),
        "graph_requires_broken": bad,
        "preprocessor_overrides": fam["preprocessor"],
        "kept_from_fixture": ("vocab_size and every token id, tokenizer.json, tokenizer_config.json, the chat "
                              "template, every preprocessor value but the size bounds, processor_config.json, "
                              "generation_config.json: " + ", ".join(copied)),
        "checkpoint": dict(saved, params=params),
        "attn_implementation": attn,
        "dtype": "bfloat16 weights and activations on the GPU",
        "processor": {"built_by": proc_how, "processor": type(proc).__name__,
                      "image_processor": type(proc.image_processor).__name__},
        "image": {"file": name, "width": w, "height": h, "sha256": oraclelib.sha256_file(page_path)},
        "user_text": fam["prompt"],
        "messages": messages,
        "prompt_text": rendered,
        "prompt_ids": prompt_ids,
        "prompt_tokens": len(prompt_ids),
        "image_tokens": n_image,
        "image_grid_thw": grid,
        "expected_by_rules_here": {"grid": want_grid, "image_tokens": want_tokens},
        "new_tokens": NEW_TOKENS,
        "reference": run,
        "reference_f32": run32,
        "bf16_f32_first_difference": k32,
        "steps_within_tie_rule": ties,
        "tie_rule": f"top-2 margin <= {TIE_SPACINGS} BF16 spacings of the top logit",
    }
    path = os.path.join(args.out, f"{args.family}-hf.json")
    oraclelib.write_json(path, ref)
    log(f"wrote {path}: {run['output_ids'][:12]}... ({ties} of {len(run['steps'])} steps within the tie rule)")


# ---------------------------------------------------------------- report (standard library)


def verdict(ref, got):
    """Compares tfc's `generate --json` output with the reference record: (summary dict, verdict)."""
    run = ref["reference"]
    want, ids = run["output_ids"][:NEW_TOKENS], got.get("output_ids") or []
    c = full_size.compare(run, ref["prompt_ids"], {"prompt_ids": got.get("prompt_ids") or [], "output_ids": ids[:NEW_TOKENS]})
    k = c["first_difference"]
    c["equal_prefix"] = len(want) if k is None else k
    at = c.get("at_difference")
    if not c["prompt_ids_equal"]:
        v = "DIFFERS"
        c["why"] = f"prompt ids differ from position {c['prompt_first_difference']}"
    elif k is None and len(ids) >= NEW_TOKENS:
        v = "equal"
    elif at and at.get("reference_gap_to_tfc_token") is not None and \
            at["reference_gap_to_tfc_token"] <= TIE_SPACINGS * at["bf16_spacing_at_top_logit"]:
        v = "differs at a tie"
        c["why"] = (f"at step {k} tfc's token is {at['reference_gap_to_tfc_token']:.4g} below transformers' top logit "
                    f"(top-2 margin {at['reference_margin']:.4g}), within {TIE_SPACINGS} BF16 spacings "
                    f"({at['bf16_spacing_at_top_logit']:.4g} each)")
    else:
        v = "DIFFERS"
        if at:
            gap = at.get("reference_gap_to_tfc_token")
            c["why"] = (f"at step {k} tfc's token {at['tfc']} is "
                        + ("outside transformers' top 5" if gap is None else f"{gap:.4g} below the top logit")
                        + f"; margin {at['reference_margin']:.4g}, spacing {at['bf16_spacing_at_top_logit']:.4g}")
        else:
            c["why"] = f"tfc gave {len(ids)} ids, transformers {len(want)}"
    return c, v


def verdict_f32(ref, got):
    """tfc in float32 against transformers in float32 on the same BF16 weights."""
    run = ref["reference_f32"]
    c = full_size.compare(run, ref["prompt_ids"], {"prompt_ids": got.get("prompt_ids") or [],
                                                   "output_ids": (got.get("output_ids") or [])[:NEW_TOKENS]})
    k = c["first_difference"]
    out = {"equal_prefix": len(run["output_ids"]) if k is None else k, "first_difference": k}
    at = c.get("at_difference")
    if k is None:
        out["verdict"] = "equal"
    elif at and at["reference_gap_to_tfc_token"] is not None:
        top, gap = at["reference_top5_logits"][0], at["reference_gap_to_tfc_token"]
        bound = F32_TIE * (1 + abs(top))
        out["verdict"] = "differs at a tie" if gap <= bound else "DIFFERS"
        out["why"] = f"tfc's token is {gap:.3g} below the top logit {top:.5g} (tie bound {bound:.3g})"
    else:
        out["verdict"] = "DIFFERS"
        out["why"] = "tfc's token is outside transformers' top 5"
    return out


def report(args):
    fam = FAMILIES[args.family]
    ref, ref_err = full_size.load_json(os.path.join(args.out, f"{args.family}-hf.json"))
    got, got_err = full_size.load_json(os.path.join(args.out, f"{args.family}-tfc.json"))
    rc = full_size.read_text(os.path.join(args.out, f"{args.family}-tfc.rc")).strip()
    err = full_size.read_text(os.path.join(args.out, f"{args.family}-tfc.err"))[-3000:]
    summary = {"family": args.family, "published_checkpoint": fam["published"], "tfc_rc": rc}
    if ref is None:
        summary.update(verdict="NO REFERENCE", error=ref_err)
    elif got is None:
        summary.update(verdict="TFC FAILED", error=(err.strip().splitlines() or [got_err or "no output"])[-1])
    else:
        cmp, v = verdict(ref, got)
        summary.update(verdict=v, compare=cmp, tfc_finish_reason=got.get("finish_reason"),
                       tfc_output_ids=got.get("output_ids"))
    got32, _ = full_size.load_json(os.path.join(args.out, f"{args.family}-tfc-f32.json"))
    if ref is not None and got32 is not None and ref.get("reference_f32"):
        summary["f32"] = verdict_f32(ref, got32)
    if ref is not None:
        summary.update(checkpoint=ref["checkpoint"], dims=ref["dims"], prompt_tokens=ref["prompt_tokens"],
                       image_tokens=ref["image_tokens"], image_grid_thw=ref["image_grid_thw"],
                       candidate=ref["candidate"], device=ref["device"])
    oraclelib.write_json(os.path.join(args.out, f"{args.family}-summary.json"), summary)

    L = [f"## {args.family}: {fam['published']} dimensions, random BF16 weights", ""]
    if ref is None:
        L.append(f"- no transformers reference: {ref_err}")
    else:
        ck = ref["checkpoint"]
        L.append(f"- device: {ref['device']}; transformers {ref['versions'].get('transformers')}, torch "
                 f"{ref['versions'].get('torch')}; attention {ref['attn_implementation']}; BF16 weights and activations")
        L.append("- published dims used: " + ", ".join(f"{k} {v}" for k, v in ref["dims"].items()))
        L.append(f"- image size bounds (published): {json.dumps(ref['preprocessor_overrides'])}; kept from "
                 f"`{ref['fixture']}`: {ref['kept_from_fixture']}")
        L.append(f"- checkpoint: {ck['params']:,} parameters, {ck['bytes_on_disk']:,} bytes in {len(ck['shards'])} shards, "
                 f"sha256 of the shard list `{ck['sha256_of_shard_list']}` (seed {ref['seed']}, draw {ref['candidate']['index']}); "
                 + "; ".join(f"`{s}` {h}" for s, h in ck["sha256"].items()))
        L.append(f"- prompt: user text {json.dumps(ref['user_text'])}, {ref['prompt_tokens']} ids, {ref['image_tokens']} "
                 f"image tokens, grid {ref['image_grid_thw']} ({ref['image']['width']}x{ref['image']['height']} page)")
        L.append(f"- transformers: {ref['steps_within_tie_rule']} of {len(ref['reference']['steps'])} steps have a top-2 "
                 f"margin within {TIE_SPACINGS} BF16 spacings; min margin {ref['reference']['min_margin']:.4g}; "
                 f"{ref['reference']['eos_handling']}")
    if "compare" in summary:
        c = summary["compare"]
        L.append(f"- tfc (rc {rc}): prompt ids equal: {'yes' if c['prompt_ids_equal'] else 'NO'}; "
                 f"equal prefix {c['equal_prefix']} of {NEW_TOKENS}")
        at = c.get("at_difference")
        if at:
            L.append(f"- first difference at step {c['first_difference']}: tfc {at['tfc']}, transformers {at['reference']}; "
                     f"transformers' top-2 margin {at['reference_margin']:.4g} vs BF16 spacing "
                     f"{at['bf16_spacing_at_top_logit']:.4g}; tfc's token rank "
                     f"{'-' if at['tfc_token_rank_in_reference'] is None else at['tfc_token_rank_in_reference'] + 1} "
                     f"in transformers' top 5")
        if c.get("why"):
            L.append(f"- {c['why']}")
    elif ref is not None:
        L.append(f"- tfc did not give output (rc {rc}): {summary.get('error', '')[:300]}")
    if ref is not None and ref.get("reference_f32"):
        k = ref.get("bf16_f32_first_difference")
        L.append(f"- yardstick: transformers in BF16 and in float32 on the same BF16 weights first differ at "
                 f"{'no step of ' + str(NEW_TOKENS) if k is None else f'step {k}'}")
    if "f32" in summary:
        f = summary["f32"]
        L.append(f"- tfc in float32 against transformers in float32: equal prefix {f['equal_prefix']} of {NEW_TOKENS}"
                 + (f"; at step {f['first_difference']} {f['why']}" if f.get("why") else "")
                 + f"; verdict **{f['verdict']}**")
    L.append(f"- verdict: **{summary['verdict']}**")
    L.append("")
    text = "\n".join(L) + "\n"
    path = os.path.join(args.out, "receipt.md")
    new = not os.path.exists(path)
    with open(path, "a") as f:
        if new:
            f.write("# Published dimensions, random weights: tfc against transformers (BF16, CUDA)\n\n"
                    f"Greedy, {NEW_TOKENS} new tokens, EOS ignored. `equal`: every id; `differs at a tie`: the first "
                    f"difference is a token within {TIE_SPACINGS} BF16 spacings of transformers' top logit at that step; "
                    "`DIFFERS`: anything else. Weights are random, so the text means nothing.\n\n")
        f.write(text)
    print(text)
    return summary


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    c = sub.add_parser("config", help="write config.json and side files with the published dims (no torch)")
    c.add_argument("--family", required=True, choices=sorted(FAMILIES))
    c.add_argument("--out", required=True)
    c.add_argument("--tokenizer", default="testdata/tokenizer/qwen/tokenizer.json")
    r = sub.add_parser("reference", help="build the checkpoint and transformers' greedy ids (GPU)")
    r.add_argument("--family", required=True, choices=sorted(FAMILIES))
    r.add_argument("--work", required=True, help="scratch: WORK/F/checkpoint, page.png, prompt.txt")
    r.add_argument("--out", required=True, help="folder for F-hf.json")
    r.add_argument("--tokenizer", default="testdata/tokenizer/qwen/tokenizer.json",
                   help="tokenizer.json when the fixture has none (it is not committed)")
    r.add_argument("--seed", type=int, default=20261205)
    r.add_argument("--candidate", type=int, default=-1, help="weight draw to use; -1 tries them in order")
    r.add_argument("--force", action="store_true", help="run on torch/transformers versions other than the pinned ones")
    p = sub.add_parser("report", help="compare tfc's ids with the reference; append to receipt.md")
    p.add_argument("--family", required=True, choices=sorted(FAMILIES))
    p.add_argument("--work", required=True)
    p.add_argument("--out", required=True)
    args = ap.parse_args()
    {"config": config_cmd, "reference": reference, "report": report}[args.command](args)


if __name__ == "__main__":
    main()
