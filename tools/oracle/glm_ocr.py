#!/usr/bin/env python3
"""Builds the tiny random GLM-OCR checkpoint and transformers' reference outputs on it.

Writes, under --out (default testdata/glm-ocr-tiny), what lighton_ocr.py writes, in the same
layout and formats (oraclelib.py is the shared code):
  config.json, generation_config.json, model-*.safetensors + model.safetensors.index.json (BF16,
  tensor names as transformers 5 saves GlmOcrForConditionalGeneration: model.visual.*,
  model.language_model.*, lm_head.weight; no multi-token-prediction layer), preprocessor_config.json,
  processor_config.json, chat_template.json, tokenizer_config.json, tokenizer.json (copied, not
  committed), README.md, oracle/images/*.png, oracle/<case>.json, oracle/<case>.safetensors,
  oracle/manifest.json.

The reference is transformers' GlmOcrForConditionalGeneration (model_type glm_ocr) on the
BF16-rounded weights, run in float64 on the CPU; the same greedy run is repeated in float32 on the
CPU and, when a GPU is present, in float32 on the GPU with TF32 off. Nothing is downloaded: the
config, tokenizer and processor are built from local files.

Config:
  text (GLM): hidden 24, 2 layers, 2 heads of 16 (q width 32, not the hidden size, as the published
    16 heads of 128 over 1536), 1 KV head, FFN 64 (fused gate_up_proj), M-RoPE sections [2,3,3]
    applied to adjacent pairs, rope_theta 10000, RMS eps 1e-5, post-attention and post-MLP norms
    (post_self_attn_layernorm, post_mlp_layernorm), untied lm_head (as published; hidden 24 keeps
    the two 151936-row tables at 14.6 MB together).
  vision: depth 2, hidden 40, 2 heads of 20 (divisible by 4, not a power of two), per-head q/k
    RMSNorm, biased qkv/proj and SwiGLU MLP (intermediate 64), patch 14, temporal 2, merge 2; then
    post_layernorm, the 2x2 `downsample` convolution (40 -> 24) and the merger (Linear 24->24,
    LayerNorm, GELU, SwiGLU 24->72->24), whose rows feed the decoder (out_hidden_size 24).
  preprocessor: transformers' Glm4vImageProcessor (torchvision backend), glm4v's smart_resize with
    size {shortest_edge 4704, longest_edge 37632}: pixel budgets counted over the 2 frames the
    processor stacks, i.e. 3 to 24 merge units of 28x28 a picture.

Cases (sizes as width x height):
  text     text only.
  image1   a.png 56x84, no resize: 6x4 patches, 3x2 merged.
  resize   e.png 170x150, over the budget (2*140*168 = 47040 > 37632): scaled down to 140x112,
           8x10 patches, 4x5 merged.
  upscale  f.png 90x20, under 28 px tall: scaled up by 28/20 first (to 125x28: 90*1.4 is
           125.99999999999999 in float64 and int() truncates), then rounded to 112x28: 2x8
           patches, 1x4 merged.
  image2   b.png 112x70 (70/28 = 2.5 rounds half to even: 112x56, 4x8 patches, 2x4 merged) then
           g.png 50x30 (56x28 after rounding is under the minimum: scaled up to 84x56, 4x6 patches,
           2x3 merged): two pictures of different sizes in one prompt.

The chat template (testdata/templates/glm_ocr.jinja) is a GLM-shaped stand-in: [gMASK]<sop>, then
<|role|> and a newline before each message, a picture as <|vision_start|><|image_pad|><|vision_end|>
(the Qwen tokenizer's tokens: GLM's own tokenizer is not available offline), and <|assistant|> and
a newline as the generation prompt (manifest: chat_template_source). The ids come from transformers'
Qwen2VLProcessor over the Glm4vImageProcessor, which expands each <|image_pad|> to t*h*w/4 copies.

Each picture case records, besides what qwen2_vl.py records: the pictures' sizes as drawn and after
the processor, this script's transcription of glm4v's smart_resize and of GLM's M-RoPE positions
(and whether transformers agreed), and the tower's stages: the patch embeddings, the last block's
output, the downsample convolution's output (all in the processor's row order: 2x2 merge windows
one after another, windows in raster order) and the merger's rows.
"""

import copy
import json
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import oraclelib  # noqa: E402
from oraclelib import (  # noqa: E402
    EOS_TOKEN_IDS,
    FIRST_ADDED_TOKEN_ID,
    IMAGE_TOKEN_ID,
    TOKENIZER_CONFIG,
    VIDEO_TOKEN_ID,
    VISION_END_TOKEN_ID,
    VISION_START_TOKEN_ID,
    VOCAB_SIZE,
    log,
    write_json,
)

TEXT_CONFIG = dict(
    vocab_size=VOCAB_SIZE,
    hidden_size=24,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=16,
    hidden_act="silu",
    max_position_embeddings=131072,
    rms_norm_eps=1e-5,
    attention_bias=False,
    attention_dropout=0.0,
)
ROPE = {"rope_type": "default", "mrope_section": [2, 3, 3], "partial_rotary_factor": 1.0, "rope_theta": 10000.0}
VISION_CONFIG = dict(
    depth=2,
    hidden_size=40,
    hidden_act="silu",
    attention_bias=True,
    num_heads=2,
    in_channels=3,
    image_size=336,
    patch_size=14,
    rms_norm_eps=1e-5,
    spatial_merge_size=2,
    temporal_patch_size=2,
    out_hidden_size=24,
    intermediate_size=64,
)
# The Qwen tokenizer's ids stand in for GLM's: images as Qwen2-VL frames them; videos (unused
# here) with Qwen's <|video_pad|> between the same start and end tokens.
TOKEN_IDS = dict(
    image_token_id=IMAGE_TOKEN_ID,
    video_token_id=VIDEO_TOKEN_ID,
    image_start_token_id=VISION_START_TOKEN_ID,
    image_end_token_id=VISION_END_TOKEN_ID,
    video_start_token_id=VISION_START_TOKEN_ID,
    video_end_token_id=VISION_END_TOKEN_ID,
)
MERGE = VISION_CONFIG["spatial_merge_size"]
PATCH = VISION_CONFIG["patch_size"]
TEMPORAL = VISION_CONFIG["temporal_patch_size"]
FACTOR = PATCH * MERGE
# glm4v's smart_resize budgets count the 2 frames the processor stacks: 3 to 24 merge units a picture.
MIN_PIXELS = TEMPORAL * FACTOR * FACTOR * 3  # 4704
MAX_PIXELS = TEMPORAL * FACTOR * FACTOR * 24  # 37632

PROCESSOR_CLASS = "Qwen2VLProcessor"
IMAGE_PROCESSOR_CLASS = "Glm4vImageProcessor"
PREPROCESSOR = {
    "image_processor_type": IMAGE_PROCESSOR_CLASS,
    "processor_class": PROCESSOR_CLASS,
    "do_convert_rgb": True,
    "do_normalize": True,
    "do_rescale": True,
    "do_resize": True,
    "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_std": [0.26862954, 0.26130258, 0.27577711],
    "patch_size": PATCH,
    "temporal_patch_size": TEMPORAL,
    "merge_size": MERGE,
    "resample": 3,
    "rescale_factor": 1 / 255,
    "size": {"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS},
}
PROCESSOR = {"processor_class": PROCESSOR_CLASS}
CHAT_TEMPLATE_SOURCE = ("testdata/templates/glm_ocr.jinja: a GLM-shaped stand-in ([gMASK]<sop>, <|role|> tags) "
                        "over the Qwen tokenizer's vision tokens, not the published template")

# (file name, make_image pattern, width, height)
IMAGES = [
    ("a.png", "a.png", 56, 84),
    ("e.png", "c.png", 170, 150),
    ("f.png", "b.png", 90, 20),
    ("b.png", "b.png", 112, 70),
    ("g.png", "c.png", 50, 30),
]

CASES = [
    ("text", [], "Write a short poem about the sea."),
    ("image1", ["a.png"], "What is in this picture?"),
    ("resize", ["e.png"], "Read the text in this picture."),
    ("upscale", ["f.png"], "Read this line of text."),
    ("image2", ["b.png", "g.png"], "Compare these two pictures."),
]

CASE_NOTES = {
    "text": "text only",
    "image1": "one picture, no resize",
    "resize": "one picture over the pixel budget, scaled down (floor to 28)",
    "upscale": "one picture under 28 px tall: scaled up by 28/20 first (int() truncates 125.999... to 125), "
               "then rounded to 28",
    "image2": "two pictures of different sizes: the first rounded half to even (70/28 = 2.5 -> 2), "
              "the second under the minimum, scaled up (ceil to 28)",
}


# ---------------------------------------------------------------- plain-Python transcriptions


def smart_resize(num_frames, height, width, temporal_factor=TEMPORAL, factor=FACTOR, min_pixels=MIN_PIXELS,
                 max_pixels=MAX_PIXELS):
    """glm4v's smart_resize as transformers 5.17 writes it (image_processing_glm4v.py), returning
    (height, width). The processor calls it with num_frames = temporal_factor, so the budgets count
    two frames. Python's round() rounds halves to even and int() truncates; both matter."""
    if num_frames < temporal_factor:
        raise ValueError(f"t:{num_frames} must be larger than temporal_factor:{temporal_factor}")
    if height < factor or width < factor:
        scale = max(factor / height, factor / width)
        height = int(height * scale)
        width = int(width * scale)
    if max(height, width) / min(height, width) > 200:
        raise ValueError(f"absolute aspect ratio must be smaller than 200, got {max(height, width) / min(height, width)}")
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    t_bar = round(num_frames / temporal_factor) * temporal_factor
    if t_bar * h_bar * w_bar > max_pixels:
        beta = math.sqrt((num_frames * height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif t_bar * h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (num_frames * height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def image_grid(width, height):
    """[t, h, w] in patches of a picture drawn width x height, as the processor gives it."""
    h, w = smart_resize(TEMPORAL, height, width)
    return [1, h // PATCH, w // PATCH]


def mrope_positions(mm_token_type_ids, grids, merge=MERGE):
    """GlmOcrModel.get_rope_index for one unpadded prompt: ([t], [h], [w]) positions and rope delta.
    A run of text tokens counts on from the current position on all three axes; a run of image
    tokens takes the next grid [t, h, w] (patches) and gives its merged cells (t, y, x) in raster
    order the positions (start + t, start + y, start + x); the current position then moves on by
    max(h, w) / merge."""
    pos = [[], [], []]
    grids = list(grids)
    cur, i, n, used = 0, 0, len(mm_token_type_ids), 0
    while i < n:
        kind = mm_token_type_ids[i]
        j = i
        while j < n and mm_token_type_ids[j] == kind:
            j += 1
        if kind == 0:
            for k in range(j - i):
                for axis in pos:
                    axis.append(cur + k)
            cur += j - i
        else:
            t, h, w = grids[used]
            used += 1
            gh, gw = h // merge, w // merge
            if t * gh * gw != j - i:
                raise ValueError(f"{j - i} image tokens at {i} for a grid of {t * gh * gw} merged cells")
            for tt in range(t):
                for y in range(gh):
                    for x in range(gw):
                        pos[0].append(cur + tt)
                        pos[1].append(cur + y)
                        pos[2].append(cur + x)
            cur += max(h, w) // merge
        i = j
    if used != len(grids):
        raise ValueError(f"{used} image runs for {len(grids)} grids")
    delta = (max(max(a) for a in pos) + 1 - n) if n else 0
    return pos, delta


def expected_tensor_shapes(t=TEXT_CONFIG, v=VISION_CONFIG):
    """{name: shape} of the tensors GlmOcrForConditionalGeneration's state dict holds (untied head,
    no multi-token-prediction layer), from the modeling code's module shapes."""
    c, d, f = v["hidden_size"], v["out_hidden_size"], v["intermediate_size"]
    hd = c // v["num_heads"]
    k = (v["temporal_patch_size"], v["patch_size"], v["patch_size"])
    m = v["spatial_merge_size"]
    shapes = {"model.visual.patch_embed.proj.weight": [c, v["in_channels"], *k],
              "model.visual.patch_embed.proj.bias": [c]}
    for i in range(v["depth"]):
        b = f"model.visual.blocks.{i}."
        shapes.update({b + "norm1.weight": [c], b + "norm2.weight": [c], b + "attn.q_norm.weight": [hd],
                       b + "attn.k_norm.weight": [hd], b + "attn.qkv.weight": [3 * c, c], b + "attn.qkv.bias": [3 * c],
                       b + "attn.proj.weight": [c, c], b + "attn.proj.bias": [c],
                       b + "mlp.gate_proj.weight": [f, c], b + "mlp.gate_proj.bias": [f],
                       b + "mlp.up_proj.weight": [f, c], b + "mlp.up_proj.bias": [f],
                       b + "mlp.down_proj.weight": [c, f], b + "mlp.down_proj.bias": [c]})
    shapes.update({"model.visual.post_layernorm.weight": [c], "model.visual.downsample.weight": [d, c, m, m],
                   "model.visual.downsample.bias": [d], "model.visual.merger.proj.weight": [d, d],
                   "model.visual.merger.post_projection_norm.weight": [d],
                   "model.visual.merger.post_projection_norm.bias": [d],
                   "model.visual.merger.gate_proj.weight": [d * v["in_channels"], d],
                   "model.visual.merger.up_proj.weight": [d * v["in_channels"], d],
                   "model.visual.merger.down_proj.weight": [d, d * v["in_channels"]]})
    h, ff = t["hidden_size"], t["intermediate_size"]
    q, kv = t["num_attention_heads"] * t["head_dim"], t["num_key_value_heads"] * t["head_dim"]
    shapes["model.language_model.embed_tokens.weight"] = [t["vocab_size"], h]
    for i in range(t["num_hidden_layers"]):
        b = f"model.language_model.layers.{i}."
        shapes.update({b + n + ".weight": [h] for n in ("input_layernorm", "post_self_attn_layernorm",
                                                         "post_attention_layernorm", "post_mlp_layernorm")})
        shapes.update({b + "self_attn.q_proj.weight": [q, h], b + "self_attn.k_proj.weight": [kv, h],
                       b + "self_attn.v_proj.weight": [kv, h], b + "self_attn.o_proj.weight": [h, q],
                       b + "mlp.gate_up_proj.weight": [2 * ff, h], b + "mlp.down_proj.weight": [h, ff]})
    shapes["model.language_model.norm.weight"] = [h]
    shapes["lm_head.weight"] = [t["vocab_size"], h]
    return dict(sorted(shapes.items()))


def name_patterns(shapes):
    """{name: shape} -> [(pattern, shape)] with layer and block indices as N, first shape kept."""
    out = {}
    for name in sorted(shapes):
        pat = re.sub(r"\.\d+\.", ".N.", name)
        out.setdefault(pat, list(shapes[name]))
    return sorted(out.items())


# ---------------------------------------------------------------- config and model


def make_config():
    import transformers

    errors = []
    # rope as the published config.json spells it, then without partial_rotary_factor (1.0 either way)
    for rope in (dict(ROPE), {k: v for k, v in ROPE.items() if k != "partial_rotary_factor"}):
        try:
            config = transformers.GlmOcrConfig(text_config=dict(TEXT_CONFIG, rope_parameters=rope),
                                               vision_config=dict(VISION_CONFIG), tie_word_embeddings=False,
                                               **TOKEN_IDS)
            break
        except (TypeError, ValueError, KeyError) as e:
            errors.append(repr(e))
            log("GlmOcrConfig refused a variant:", repr(e))
    else:
        raise SystemExit("oracle: GlmOcrConfig refused every variant: " + "; ".join(errors))
    tc, vc = config.text_config, config.vision_config
    for k, v in TEXT_CONFIG.items():
        if getattr(tc, k, None) != v:
            raise SystemExit(f"oracle: text_config.{k} is {getattr(tc, k, None)}, want {v}")
    rp = getattr(tc, "rope_parameters", None) or {}
    for k in ("rope_type", "rope_theta", "mrope_section"):
        got = rp.get(k)
        if (list(got) if isinstance(got, (list, tuple)) else got) != ROPE[k]:
            raise SystemExit(f"oracle: text_config.rope_parameters {rp} has {k} {got}, want {ROPE[k]}")
    if rp.get("partial_rotary_factor", 1.0) != 1.0:
        raise SystemExit(f"oracle: partial_rotary_factor {rp.get('partial_rotary_factor')}, want 1.0")
    for k, v in VISION_CONFIG.items():
        if getattr(vc, k, None) != v:
            raise SystemExit(f"oracle: vision_config.{k} is {getattr(vc, k, None)}, want {v}")
    for k, v in TOKEN_IDS.items():
        if getattr(config, k, None) != v:
            raise SystemExit(f"oracle: {k} is {getattr(config, k, None)}, want {v}")
    if config.tie_word_embeddings:
        raise SystemExit("oracle: tie_word_embeddings is true; want the untied head published")
    return config


def is_final_norm(name):
    return name == "model.language_model.norm.weight"


def untied_rows(emb, head, loud_row, loud):
    """draw_weights' embedding_rows for the untied embedding and head, as qwen2_5_vl.py draws them:
    added and padding rows small in both, loud_row loud in the head only."""

    def embedding_rows(name, p):
        if p is not emb and p is not head:
            return None

        def rows(w):
            w[FIRST_ADDED_TOKEN_ID:] *= 0.1
            if p is head:
                w[loud_row] *= loud / 0.1

        return rows

    return embedding_rows


def build_model(config, seed, candidate):
    import torch
    from transformers import GlmOcrForConditionalGeneration

    torch.manual_seed(seed)
    model = GlmOcrForConditionalGeneration(config)
    model.to(torch.float32)
    emb, head = model.get_input_embeddings().weight, model.lm_head.weight
    if head.data_ptr() == emb.data_ptr():
        raise SystemExit("oracle: lm_head is tied to embed_tokens; tie_word_embeddings false did not take")
    t = TEXT_CONFIG
    q = model.model.language_model.layers[0].self_attn.q_proj.weight
    if tuple(q.shape) != (t["num_attention_heads"] * t["head_dim"], t["hidden_size"]):
        raise SystemExit(f"oracle: q_proj is {tuple(q.shape)}; head_dim {t['head_dim']} did not take")
    rows = untied_rows(emb, head, EOS_TOKEN_IDS[0], candidate["eos_scale"])
    oraclelib.draw_weights(model, seed + candidate["seed_offset"], candidate, rows, is_final_norm=is_final_norm)
    model.generation_config = oraclelib.generation_config()
    model.eval()
    return model


# ---------------------------------------------------------------- processor and cases


def processor_mismatch(proc, pp=PREPROCESSOR):
    """Why proc is not the Qwen2VLProcessor over the Glm4vImageProcessor with the values of pp (a
    preprocessor_config.json), or None."""
    ip = getattr(proc, "image_processor", None)
    if type(proc).__name__ != PROCESSOR_CLASS or type(ip).__name__ != IMAGE_PROCESSOR_CLASS:
        return f"got {type(proc).__name__} over {type(ip).__name__}, want {PROCESSOR_CLASS} over {IMAGE_PROCESSOR_CLASS}"
    size = ip.size
    got = {}
    for k in ("shortest_edge", "longest_edge"):
        try:
            got[k] = size[k]
        except (KeyError, TypeError):
            got[k] = getattr(size, k, None)
    if got != pp["size"]:
        return f"image processor size {got}, want {pp['size']}"
    for k in ("patch_size", "temporal_patch_size", "merge_size"):
        if getattr(ip, k, None) != pp[k]:
            return f"image processor {k} {getattr(ip, k, None)}, want {pp[k]}"
    return None


def load_processor(out, template):
    """AutoProcessor from the checkpoint folder; if that fails or gives another class, Qwen2VLProcessor
    built from the same local files (its preprocessor_config.json, its tokenizer). Returns (processor,
    how it was built, what failed first)."""
    import transformers

    with open(os.path.join(out, "preprocessor_config.json")) as f:
        pp = json.load(f)
    proc, how, errors = None, None, []
    try:
        proc = transformers.AutoProcessor.from_pretrained(out)
        how = "AutoProcessor"
        bad = processor_mismatch(proc, pp)
        if bad:
            errors.append("AutoProcessor: " + bad)
            log("AutoProcessor:", bad, "; building the processor from the files")
            proc = None
    except Exception as e:  # recorded: the explicit build below uses the same files
        errors.append(f"AutoProcessor: {e!r}")
        log(f"AutoProcessor failed ({e!r}); building the processor from the files")
    if proc is None:
        tok = transformers.AutoTokenizer.from_pretrained(out)
        ip = getattr(transformers, IMAGE_PROCESSOR_CLASS)(
            **{k: v for k, v in pp.items() if k not in ("image_processor_type", "processor_class")})
        cls = getattr(transformers, PROCESSOR_CLASS)
        try:
            proc = cls(image_processor=ip, tokenizer=tok, chat_template=template)
            how = f"{PROCESSOR_CLASS}({IMAGE_PROCESSOR_CLASS}, AutoTokenizer)"
        except Exception as e:  # a video processor may be required
            errors.append(f"{PROCESSOR_CLASS} without a video processor: {e!r}")
            vp = transformers.Glm4vVideoProcessor()
            proc = cls(image_processor=ip, tokenizer=tok, video_processor=vp, chat_template=template)
            how = f"{PROCESSOR_CLASS}({IMAGE_PROCESSOR_CLASS}, AutoTokenizer, Glm4vVideoProcessor)"
        bad = processor_mismatch(proc, pp)
        if bad:
            raise SystemExit("oracle: the processor built from the files: " + bad)
    if getattr(proc, "chat_template", None) != template:
        log("WARNING: processor did not load chat_template.json; setting it explicitly")
        proc.chat_template = template
    if proc.image_token_id != IMAGE_TOKEN_ID:
        raise SystemExit(f"oracle: processor image_token_id {proc.image_token_id}, want {IMAGE_TOKEN_ID}")
    return proc, how, errors


def prepare_case(proc, image_dir, name, images, text):
    """oraclelib.prepare_case, then the checks: one image token a merged cell, grids as smart_resize here."""
    case = oraclelib.prepare_case(proc, image_dir, name, images, text)
    inputs = case["inputs"]
    drawn = {n: (w, h) for n, _, w, h in IMAGES}
    case["checks"] = {}
    if images:
        grids = [[int(x) for x in g] for g in inputs["image_grid_thw"].tolist()]
        cells = sum(t * h * w for t, h, w in grids) // (MERGE * MERGE)
        n_tokens = int((inputs["input_ids"] == IMAGE_TOKEN_ID).sum())
        if n_tokens != cells:
            raise SystemExit(f"oracle {name}: {n_tokens} image tokens for {cells} merged cells of {grids}")
        want = [image_grid(*drawn[n]) for n in images]
        case["checks"]["smart_resize_port_grids"] = want
        case["checks"]["smart_resize_port_equal"] = grids == want
        if grids != want:
            log(f"WARNING {name}: processor grids {grids}, this script's smart_resize gives {want}")
        rows = TEMPORAL * 3 * PATCH * PATCH
        if tuple(inputs["pixel_values"].shape) != (cells * MERGE * MERGE, rows):
            raise SystemExit(f"oracle {name}: pixel_values {tuple(inputs['pixel_values'].shape)}, "
                             f"want ({cells * MERGE * MERGE}, {rows})")
    return case


# ---------------------------------------------------------------- the vision tower


def run_tower(visual, px, grid):
    """The tower on px with hooks: its output and the patch embeddings, the last block's output and
    the post-norm output."""
    import torch

    seen = {}

    def keep(key):
        def hook(_m, _args, output):
            seen[key] = (output[0] if isinstance(output, tuple) else output).detach().clone()

        return hook

    handles = [visual.patch_embed.register_forward_hook(keep("patch")),
               visual.blocks[-1].register_forward_hook(keep("blocks")),
               visual.post_layernorm.register_forward_hook(keep("post_norm"))]
    try:
        with torch.inference_mode():
            out = visual(px, grid_thw=grid)
    finally:
        for h in handles:
            h.remove()
    return out, seen


def vision_rows(model, case, dtype, device):
    """The merger's rows (pooler_output: the rows the decoder scatters in, in the processor's order)
    and the last block's output. The tower's last_hidden_state is the downsample output, the same
    shape as the rows, so the rows are taken by name."""
    import torch

    inputs = case["inputs"]
    if "pixel_values" not in inputs:
        return None, None
    visual = model.model.visual
    px = inputs["pixel_values"].to(dtype).to(device)
    grid = inputs["image_grid_thw"].to(device)
    out, seen = run_tower(visual, px, grid)
    rows = out[1] if isinstance(out, tuple) else out.pooler_output
    if isinstance(rows, (tuple, list)):
        rows = torch.cat(list(rows), dim=0)
    want = (px.shape[0] // (MERGE * MERGE), VISION_CONFIG["out_hidden_size"])
    if tuple(rows.shape) != want:
        raise SystemExit(f"oracle {case['name']}: the tower's pooler_output is {tuple(rows.shape)}, want {want}")
    return rows, seen.get("blocks")


def case_extra(model, case, record, tensors, rows, pre):
    """Sizes, the transcriptions' agreement, and the tower's stages with checks of their layout."""
    import torch

    inputs = case["inputs"]
    record["checks"] = dict(case.get("checks", {}))
    ids = inputs["input_ids"][0].tolist()
    mm = inputs["mm_token_type_ids"][0].tolist() if "mm_token_type_ids" in inputs else [
        1 if t == IMAGE_TOKEN_ID else 0 for t in ids]
    grids = [[int(x) for x in g] for g in inputs["image_grid_thw"].tolist()] if "image_grid_thw" in inputs else []
    try:
        pos, delta = mrope_positions(mm, grids)
    except ValueError as e:
        log(f"WARNING {case['name']}: M-RoPE transcription failed: {e}")
        pos, delta = None, None
    record["checks"]["mrope_port_equal"] = pos is not None and record["position_ids"] == pos
    record["checks"]["rope_deltas_port_equal"] = delta == record["rope_deltas"]
    if not record["checks"]["mrope_port_equal"] or not record["checks"]["rope_deltas_port_equal"]:
        log(f"WARNING {case['name']}: M-RoPE transcription differs from transformers' (delta {delta} vs "
            f"{record['rope_deltas']})")
    if rows is None:
        return

    drawn = {n: (w, h) for n, _, w, h in IMAGES}
    record["image_sizes_drawn"] = [[drawn[n][1], drawn[n][0]] for n in case["images"]]
    record["image_sizes_resized"] = [[h * PATCH, w * PATCH] for _, h, w in grids]
    record["merged_grids"] = [[t, h // MERGE, w // MERGE] for t, h, w in grids]

    visual = model.model.visual
    px = inputs["pixel_values"].to(torch.float64)
    out, seen = run_tower(visual, px, inputs["image_grid_thw"])
    down = out[0] if isinstance(out, tuple) else out.last_hidden_state
    n, cin = px.shape[0], VISION_CONFIG["hidden_size"]
    with torch.inference_mode():
        # the Conv3d patch embedding is one matrix product over a pixel row ([C, T, P, P] values)
        w = visual.patch_embed.proj.weight.reshape(cin, -1)
        patch_diff = float((px @ w.T + visual.patch_embed.proj.bias - seen["patch"]).abs().max())
        # the downsample convolution over rows 4k..4k+3: (dy, dx) = (0,0), (0,1), (1,0), (1,1)
        x = seen["post_norm"].reshape(n // 4, MERGE, MERGE, cin)
        wd = visual.downsample.weight  # [out, in, dy, dx]
        manual = torch.einsum("kabc,ocab->ko", x, wd) + visual.downsample.bias
        down_diff = float((manual - down).abs().max())
        merger_diff = float((visual.merger(down) - rows).abs().max())
    record["checks"]["patch_embed_as_matmul_max_abs_diff"] = patch_diff
    record["checks"]["downsample_as_window_sum_max_abs_diff"] = down_diff
    record["checks"]["merger_on_downsample_max_abs_diff"] = merger_diff
    record["vision_row_order"] = ("the processor's: 2x2 merge windows one after another (rows 4k..4k+3 are "
                                  "(dy, dx) = (0,0), (0,1), (1,0), (1,1)), windows in raster order, pictures in turn")
    for k, v in (("patch", patch_diff), ("downsample", down_diff), ("merger", merger_diff)):
        if v > 1e-9:
            log(f"WARNING {case['name']}: {k} check differs by {v}")
    tensors["vision_patch_embeds"] = seen["patch"].float().contiguous()
    tensors["vision_blocks_out"] = seen["blocks"].float().contiguous()
    tensors["vision_downsample_out"] = down.float().contiguous()
    if pre is not None and not torch.equal(pre, seen["blocks"]):
        log(f"WARNING {case['name']}: a second tower run gave another last-block output")


def save_checkpoint(model, out, shard_size):
    """save_pretrained in BF16, tensor names as transformers 5 writes them (checked against
    expected_tensor_shapes)."""
    import torch

    bf16 = copy.deepcopy(model).to(torch.bfloat16)
    shapes = {k: list(v.shape) for k, v in bf16.state_dict().items()}
    bf16.save_pretrained(out, max_shard_size=shard_size)
    index_path = os.path.join(out, "model.safetensors.index.json")
    if not os.path.exists(index_path):
        raise SystemExit("oracle: save_pretrained wrote no index; lower --shard-size so the weights shard")
    with open(index_path) as f:
        index = json.load(f)
    names = sorted(index["weight_map"])
    odd = [k for k in names if not k.startswith(("model.visual.", "model.language_model.", "lm_head."))]
    if odd:
        raise SystemExit(f"oracle: unexpected tensor names: {odd[:8]}")
    mtp = [k for k in names if k.startswith(f"model.language_model.layers.{TEXT_CONFIG['num_hidden_layers']}.")]
    if mtp:
        raise SystemExit(f"oracle: a multi-token-prediction layer was saved: {mtp[:4]}")
    want = expected_tensor_shapes()
    differ = {"missing": sorted(set(want) - set(names)), "extra": sorted(set(names) - set(want)),
              "shape": sorted(k for k in names if k in want and shapes.get(k) != want[k])}
    if any(differ.values()):
        log("WARNING: saved tensors differ from expected_tensor_shapes:", differ)
    shards = sorted(set(index["weight_map"].values()))
    if len(shards) < 2:
        raise SystemExit(f"oracle: weights landed in {len(shards)} shard; lower --shard-size")
    return dict(shards=shards, renamed_to_published=False, tensors=len(names), names=names,
                shapes={k: shapes.get(k) for k in names},
                as_expected=not any(differ.values()), differ_from_expected=differ)


# ---------------------------------------------------------------- README


def readme(manifest, results):
    t, v = TEXT_CONFIG, VISION_CONFIG
    ck = manifest["checkpoint"]
    lines = [
        "# glm-ocr-tiny",
        "",
        "A tiny random GLM-OCR checkpoint written by transformers 5.17 (`tools/oracle/glm_ocr.py`), with",
        "transformers' outputs on it, in the layout of `testdata/qwen2-vl-tiny/` (see its README); this file says",
        "what differs. Written by the oracle; regenerate with it, never edit by hand.",
        "",
        "## Config",
        "",
        f"- text (`glm_ocr_text`): hidden {t['hidden_size']}, {t['num_hidden_layers']} layers, "
        f"{t['num_attention_heads']} heads of {t['head_dim']} (q width {t['num_attention_heads'] * t['head_dim']}, "
        f"not the hidden size), {t['num_key_value_heads']} KV head, FFN {t['intermediate_size']} (fused "
        f"`gate_up_proj`, gate rows first), M-RoPE sections {ROPE['mrope_section']} on adjacent pairs, rope_theta "
        f"{ROPE['rope_theta']:g}, RMS eps {t['rms_norm_eps']:g}, `post_self_attn_layernorm` and `post_mlp_layernorm` "
        "on the attention and MLP outputs before each residual add; untied `lm_head`.",
        f"- vision (`glm_ocr_vision`): depth {v['depth']}, hidden {v['hidden_size']}, {v['num_heads']} heads of "
        f"{v['hidden_size'] // v['num_heads']}, q/k RMSNorm per head, biased qkv/proj and SwiGLU MLP "
        f"({v['intermediate_size']}), patch {v['patch_size']}, temporal {v['temporal_patch_size']}, merge "
        f"{v['spatial_merge_size']}; `post_layernorm`, `downsample` Conv2d {v['hidden_size']}->{v['out_hidden_size']} "
        f"(kernel and stride 2), merger: Linear, LayerNorm, GELU, SwiGLU {v['out_hidden_size']}->"
        f"{v['out_hidden_size'] * v['in_channels']}->{v['out_hidden_size']} (no biases but the LayerNorm's).",
        f"- token ids: the Qwen tokenizer's: image {TOKEN_IDS['image_token_id']} (`<|image_pad|>`), image start/end "
        f"{TOKEN_IDS['image_start_token_id']}/{TOKEN_IDS['image_end_token_id']} (`<|vision_start|>`/`<|vision_end|>`), "
        f"video {TOKEN_IDS['video_token_id']}; EOS {EOS_TOKEN_IDS} in `generation_config.json`.",
        f"- preprocessor: `{IMAGE_PROCESSOR_CLASS}` (torchvision backend), size {{shortest_edge {MIN_PIXELS}, "
        f"longest_edge {MAX_PIXELS}}} (glm4v's smart_resize counts two frames: 3 to 24 merge units a picture); "
        f"the prompt ids come from `{manifest['processor']['processor']}` "
        f"({manifest['processor']['built_by']}); chat template `testdata/templates/glm_ocr.jinja`, a GLM-shaped "
        "stand-in for the published one.",
        f"- {ck['tensors']} BF16 tensors in {len(ck['shards'])} shards, names as transformers 5 saves them (below); "
        "no multi-token-prediction layer (the published checkpoint's `model.language_model.layers.16.*`, one past "
        "its 16 layers, which transformers ignores).",
        "",
        "## Cases",
        "",
        "| case | pictures (file, size as drawn) | after the processor | patch grids | merged | output | exercises |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    drawn = {name: (w, h) for name, _, w, h in IMAGES}
    for name, images, _ in CASES:
        r = results[name]
        pics = ", ".join(f"`{n}` {drawn[n][0]}x{drawn[n][1]}" for n in images) or "none"
        sizes = ", ".join(f"{w}x{h}" for h, w in r.get("image_sizes_resized", [])) or "-"
        grids = ", ".join(f"{h}x{w}" for _, h, w in r.get("image_grid_thw", [])) or "-"
        merged = ", ".join(f"{h}x{w}" for _, h, w in r.get("merged_grids", [])) or "-"
        out = f"{len(r['output_ids'])} ids, {r['finish_reason']}"
        lines.append(f"| `{name}` | {pics} | {sizes} | {grids} | {merged} | {out} | {CASE_NOTES[name]} |")
    lines += [
        "",
        "Sizes are width x height, grids rows x columns.",
        "",
        "## Tensors",
        "",
        "| name (N: layer or block) | shape |",
        "| --- | --- |",
    ]
    for pat, shape in name_patterns(ck.get("shapes") or {}):
        lines.append(f"| `{pat}` | {shape} |")
    lines += [
        "",
        "## Beyond `qwen2-vl-tiny`'s format",
        "",
        "`<case>.json` of a picture case adds `image_sizes_drawn` and `image_sizes_resized` ([height, width] a "
        "picture), `merged_grids` ([t, h/2, w/2]), `vision_row_order`, and `checks`: whether this script's "
        "transcriptions of smart_resize and of the M-RoPE positions agree with transformers (every case), and "
        "how far the patch embedding as one matrix product and the downsample as a sum over the window's four "
        "rows are from transformers' modules.",
        "",
        "`<case>.safetensors` of a picture case (N patches): `pixel_values` F32 [N, 1176] (a row a patch, "
        "[C, T, P, P] values, the two frames equal), `vision_patch_embeds` and `vision_blocks_out` F32 "
        f"[N, {v['hidden_size']}] (the patch embedding and the last block's output, before `post_layernorm`), "
        f"`vision_downsample_out` F32 [N/4, {v['out_hidden_size']}], `vision_rows`/`vision_rows_f64` [N/4, "
        f"{v['out_hidden_size']}] (the merger's rows, which the decoder takes in this order). Every row order is "
        "the processor's: 2x2 merge windows one after another, windows in raster order.",
        "",
        f"`hidden_states` is F32 [3, T_full, {t['hidden_size']}]; with the head untied, the logits are "
        "`hidden_states[2] @ lm_head^T`.",
    ]
    worst_logit = max(max(r[k]["max_abs_top5_logit_diff"] for k in ("f32_cpu", "f32_gpu") if r.get(k))
                      for r in results.values())
    rows = [r[k].get("max_abs_vision_row_diff") for r in results.values() for k in ("f32_cpu", "f32_gpu") if r.get(k)]
    rows = [x for x in rows if x is not None]
    equal = all(r[k]["output_ids_equal"] for r in results.values() for k in ("f32_cpu", "f32_gpu") if r.get(k))
    runs = "CPU and GPU" if any(r.get("f32_gpu") for r in results.values()) else "CPU"
    lines += [
        "",
        "All outputs come from transformers' float64 model on the CPU with the BF16 weights; transformers computes "
        "its RMSNorms (text, vision and q/k), the text rotary's cos/sin and the vision rotary in float32 even "
        f"there. Float32 runs ({runs}) give {'the same ids' if equal else 'OTHER ids in some case (see each f32_* record)'}, "
        f"top-5 logits within {worst_logit:.1g}" + (f" and vision rows within {max(rows):.1g}." if rows else "."),
        "",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------- main


FAMILY = oraclelib.Family(
    generator="tools/oracle/glm_ocr.py",
    out="testdata/glm-ocr-tiny",
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
    ap.add_argument("--template", default="testdata/templates/glm_ocr.jinja")
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

    import shutil

    import torch
    from safetensors.torch import save_file

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    # run_case and compare_run in oraclelib call this by name
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
    write_json(os.path.join(out, "tokenizer_config.json"),
               dict(TOKENIZER_CONFIG, chat_template=template, processor_class=PROCESSOR_CLASS))
    shutil.copyfile(args.tokenizer, os.path.join(out, "tokenizer.json"))
    config = make_config()
    config.save_pretrained(out)
    proc, proc_how, proc_errors = load_processor(out, template)
    log("processor", proc_how, type(proc).__name__, type(proc.image_processor).__name__, type(proc.tokenizer).__name__)
    cases = [prepare_case(proc, image_dir, *c) for c in CASES]
    for c in cases:
        log(c["name"], "prompt tokens", c["inputs"]["input_ids"].shape[1],
            "grid", c["inputs"].get("image_grid_thw", torch.empty(0)).tolist(), "mm", c["mm_source"])

    chosen, tried, clean = oraclelib.pick_candidate(FAMILY, config, args.seed, cases, args.max_new_tokens)
    candidate = FAMILY.candidates[chosen]
    model = build_model(config, args.seed, candidate)
    saved = save_checkpoint(model, out, args.shard_size)
    log("saved", {k: v for k, v in saved.items() if k not in ("names", "shapes")})

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
            f"f32 cpu equal {record['f32_cpu']['output_ids_equal']}, checks {record.get('checks')}")

    files = {}
    for root, _, names in os.walk(out):
        for n in sorted(names):
            p = os.path.join(root, n)
            rel = os.path.relpath(p, out)
            if rel in (os.path.join("oracle", "manifest.json"), "README.md"):
                continue
            files[rel] = oraclelib.sha256_file(p)
    checks = {k: v.get("checks", {}) for k, v in results.items()}
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
        "chat_template_source": CHAT_TEMPLATE_SOURCE,
        "processor": {"built_by": proc_how, "processor": type(proc).__name__,
                      "image_processor": type(proc.image_processor).__name__,
                      "image_processor_module": type(proc.image_processor).__module__,
                      "tokenizer": type(proc.tokenizer).__name__, "autoprocessor_errors": proc_errors,
                      "note": "Qwen2VLProcessor expands <|image_pad|> with the Qwen tokenizer; Glm46VProcessor "
                              "looks for <|image|>, which this tokenizer lacks"},
        "vision": {"min_pixels": MIN_PIXELS, "max_pixels": MAX_PIXELS, "spatial_merge_size": MERGE,
                   "attn_implementation": getattr(config.vision_config, "_attn_implementation", None)},
        "transcriptions_agree": all(all(x for k, x in c.items() if k.endswith("_equal")) for c in checks.values()),
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
    if not manifest["transcriptions_agree"]:
        log("WARNING: a transcription (smart_resize or M-RoPE) differs from transformers; see each case's checks")
    log("done:", json.dumps(manifest["cases"]))


if __name__ == "__main__":
    main()
