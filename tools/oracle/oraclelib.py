#!/usr/bin/env python3
"""What the tiny Qwen-family oracles share: qwen2_vl.py and qwen2_5_vl.py each describe a family
(its config, pictures, cases and model class) and call main(family) here, which writes the
checkpoint and transformers' reference outputs on it in one layout and one JSON format.

Also imported by the other oracle scripts (through qwen2_vl.py, which re-exports these names) for
versions, hashing, JSON, the synthetic pictures, the weight draw and the processor helpers.
"""

import argparse
import copy
import dataclasses
import hashlib
import inspect
import json
import math
import os
import platform
import shutil
import sys
import typing

PINNED = {"torch": "2.11", "transformers": "5.17"}

IMAGE_TOKEN_ID = 151655
VIDEO_TOKEN_ID = 151656
VISION_START_TOKEN_ID = 151652
VISION_END_TOKEN_ID = 151653
BOS_TOKEN_ID = 151643
EOS_TOKEN_IDS = [151645, 151643]
PAD_TOKEN_ID = 151643
VOCAB_SIZE = 151936
FIRST_ADDED_TOKEN_ID = 151643

TOP_STEPS = 8
TOP_K = 5
MIN_MARGIN = 1e-3

# Qwen2-VL-2B-Instruct's preprocessor values, but max_pixels 28*28*256.
PREPROCESSOR_CONFIG = {
    "do_convert_rgb": True,
    "do_normalize": True,
    "do_rescale": True,
    "do_resize": True,
    "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_std": [0.26862954, 0.26130258, 0.27577711],
    "image_processor_type": "Qwen2VLImageProcessor",
    "processor_class": "Qwen2VLProcessor",
    "min_pixels": 3136,
    "max_pixels": 28 * 28 * 256,
    "size": {"shortest_edge": 3136, "longest_edge": 28 * 28 * 256},
    "patch_size": 14,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "resample": 3,
    "rescale_factor": 1 / 255,
}
TOKENIZER_CONFIG = {
    "tokenizer_class": "Qwen2Tokenizer",
    "add_bos_token": False,
    "add_prefix_space": False,
    "bos_token": None,
    "eos_token": "<|im_end|>",
    "pad_token": "<|endoftext|>",
    "unk_token": None,
    "errors": "replace",
    "model_max_length": 32768,
    "split_special_tokens": False,
    "clean_up_tokenization_spaces": False,
}

# Weight draws tried in order; the first whose greedy outputs pass the checks in pick_candidate is kept.
# A final norm weight of random sign keeps a token's own (tied) embedding from winning the next step,
# which otherwise makes random models repeat their last token.
CANDIDATES = [
    dict(seed_offset=i, embed_std=1.0, o_gain=(2.0, 3.0)[i % 2], down_gain=(4.0, 6.0)[(i // 2) % 2],
         merger_gain=(1.5, 2.0)[(i // 4) % 2], eos_scale=(3.0, 2.5)[(i // 8) % 2], final_norm="signed")
    for i in range(32)
]
MAX_RUN = 2


@dataclasses.dataclass
class Family:
    """What one tiny checkpoint's oracle has of its own; main(family) does the rest."""

    generator: str  # the script, as the manifest names it
    out: str  # default --out
    seed: int  # default --seed
    images: list  # (file name, make_image pattern, width, height)
    cases: list  # (name, image file names, text)
    make_config: typing.Callable  # () -> the transformers config
    build_model: typing.Callable  # (config, seed, candidate) -> float32 model with the drawn weights, in eval mode
    preprocessor_config: dict
    doc: str = ""
    shard_size: str = "4MB"
    candidates: list = dataclasses.field(default_factory=lambda: list(CANDIDATES))
    # (model64, case, record, tensors, rows, pre): adds the family's own entries to a case's record and tensors
    case_extra: typing.Callable = None
    # (model64) -> dict: the family's own manifest entries
    manifest_extra: typing.Callable = None
    # (out, manifest, results): runs last (writes the fixture's README, say)
    finish: typing.Callable = None

def log(*a):
    print("oracle:", *a, flush=True)


def major_minor(v):
    return ".".join(v.split("+")[0].split(".")[:2])


def check_versions(force):
    import tokenizers
    import torch
    import transformers

    got = {"torch": torch.__version__, "transformers": transformers.__version__}
    bad = [f"{k} {got[k]} (want {PINNED[k]}.x)" for k in PINNED if major_minor(got[k]) != PINNED[k]]
    if bad and not force:
        sys.exit("oracle: refusing to run on " + ", ".join(bad) + "; pass --force to run anyway")
    got["tokenizers"] = tokenizers.__version__
    import PIL
    import safetensors

    got["safetensors"] = safetensors.__version__
    got["pillow"] = PIL.__version__
    got["python"] = platform.python_version()
    try:
        import torchvision

        got["torchvision"] = torchvision.__version__
    except ImportError:
        got["torchvision"] = None
    return got


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1, ensure_ascii=False)
        f.write("\n")


# ---------------------------------------------------------------- images


def make_image(name, w, h):
    """Deterministic synthetic pictures: gradients, shapes and text-like stripes."""
    import numpy as np

    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.zeros((h, w, 3), dtype=np.float64)
    if name == "a.png":
        img[..., 0] = 255 * y / (h - 1)
        img[..., 1] = 255 * (1 - y / (h - 1))
        img[..., 2] = 128 + 100 * np.sin(x / 5.0)
        disk = (x - 0.55 * w) ** 2 + (y - 0.4 * h) ** 2 < (0.3 * w) ** 2
        img[disk] = [230, 40, 40]
        img[int(0.8 * h) : int(0.8 * h) + 6, 6 : w - 6] = [20, 20, 20]
    elif name == "b.png":
        img[...] = 245
        for row in range(6):
            top = 6 + row * 10
            length = int((0.35 + 0.1 * ((row * 7) % 5)) * w)
            for start in range(4, length, 9):
                img[top : top + 5, start : start + 6] = [15, 15, 15]
        img[40:64, 70:100] = [30, 60, 220]
        img[..., 1] += 10 * np.cos(x / 9.0)
    elif name == "c.png":
        checker = ((x // 10 + y // 10) % 2).astype(bool)
        img[..., 0] = 255 * x / (w - 1)
        img[..., 1] = 255 * (x + y) / (w + h - 2)
        img[..., 2] = 60
        img[checker] *= 0.5
        tri = (y > 0.2 * h) & (y < 0.9 * h) & (np.abs(x - 0.5 * w) < (y - 0.2 * h) * 0.6)
        img[tri] = [250, 220, 40]
    else:
        raise ValueError(name)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def write_images(image_dir, images):
    """images: (file name, make_image pattern, width, height)."""
    from PIL import Image

    os.makedirs(image_dir, exist_ok=True)
    for name, pattern, w, h in images:
        Image.fromarray(make_image(pattern, w, h)).save(os.path.join(image_dir, name), format="PNG")


# ---------------------------------------------------------------- checkpoint files


def make_config(class_name, text_config, rope, vision_config, tie):
    """transformers' class_name (Qwen2VLConfig, Qwen2_5_VLConfig) over these text and vision values,
    rope under text_config.rope_parameters as transformers 5 spells it or, if refused, the older
    ways; checks that the values took."""
    import transformers

    config_class = getattr(transformers, class_name)
    legacy_rope = {"rope_scaling": {"type": "mrope", "mrope_section": rope["mrope_section"]},
                   "rope_theta": rope["rope_theta"]}
    variants = [
        dict(text_config, rope_parameters=dict(rope)),
        {k: v for k, v in dict(text_config, rope_parameters=dict(rope)).items() if k != "tie_word_embeddings"},
        dict(text_config, **legacy_rope),
    ]
    config, errors = None, []
    for text in variants:
        try:
            config = config_class(
                text_config=text,
                vision_config=dict(vision_config),
                image_token_id=IMAGE_TOKEN_ID,
                video_token_id=VIDEO_TOKEN_ID,
                vision_start_token_id=VISION_START_TOKEN_ID,
                vision_end_token_id=VISION_END_TOKEN_ID,
                tie_word_embeddings=tie,
            )
            break
        except (TypeError, ValueError, KeyError) as e:
            errors.append(repr(e))
            log(f"{class_name} refused a variant:", repr(e))
    if config is None:
        raise SystemExit(f"oracle: {class_name} refused every variant: " + "; ".join(errors))
    tc = config.text_config
    for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
              "num_key_value_heads", "rms_norm_eps"):
        if getattr(tc, k) != text_config[k]:
            raise SystemExit(f"oracle: text_config.{k} is {getattr(tc, k)}, want {text_config[k]}")
    rp = getattr(tc, "rope_parameters", None) or getattr(tc, "rope_scaling", None) or {}
    if list(rp.get("mrope_section", [])) != rope["mrope_section"]:
        raise SystemExit(f"oracle: text_config rope parameters {rp} lack mrope_section {rope['mrope_section']}")
    theta = rp.get("rope_theta", getattr(tc, "rope_theta", None))
    if theta != rope["rope_theta"]:
        raise SystemExit(f"oracle: rope_theta is {theta}, want {rope['rope_theta']}")
    for k, v in vision_config.items():
        got = getattr(config.vision_config, k)
        if (list(got) if isinstance(got, (list, tuple)) else got) != v:
            raise SystemExit(f"oracle: vision_config.{k} is {got}, want {v}")
    return config


def write_side_files(out, template_path, tokenizer_path, preprocessor_config=PREPROCESSOR_CONFIG):
    with open(template_path) as f:
        template = f.read()
    write_json(os.path.join(out, "preprocessor_config.json"), preprocessor_config)
    write_json(os.path.join(out, "chat_template.json"), {"chat_template": template})
    write_json(os.path.join(out, "tokenizer_config.json"), dict(TOKENIZER_CONFIG, chat_template=template))
    shutil.copyfile(tokenizer_path, os.path.join(out, "tokenizer.json"))
    return template


def generation_config():
    from transformers import GenerationConfig

    return GenerationConfig(
        bos_token_id=BOS_TOKEN_ID, eos_token_id=list(EOS_TOKEN_IDS), pad_token_id=PAD_TOKEN_ID, do_sample=False
    )


# ---------------------------------------------------------------- weights


def is_final_text_norm(name):
    return name.endswith(".norm.weight") and "visual" not in name and ".layers." not in name


def small_added_rows(emb, loud_row=None, loud=1.0):
    """draw_weights' embedding_rows for the table emb: added and padding rows stay small so greedy
    rarely picks them; loud_row, when given, is scaled by loud instead."""

    def embedding_rows(name, p):
        if p is not emb:
            return None

        def rows(w):
            w[FIRST_ADDED_TOKEN_ID:] *= 0.1
            if loud_row is not None:
                w[loud_row] *= loud / 0.1

        return rows

    return embedding_rows


def draw_weights(model, seed, c, embedding_rows=None, is_final_norm=is_final_text_norm):
    """Fills every parameter from one CPU generator, in name order, each rounded to BF16: the draw
    of every oracle checkpoint (its order fixes their sha256). embedding_rows(name, p) is None for a
    parameter that is not an embedding table, else what shapes its drawn rows; is_final_norm(name)
    tells the text decoder's final norm, drawn signed when c["final_norm"] says so."""
    import torch

    if embedding_rows is None:
        # the first EOS is loud enough that some prompts stop before the cap
        embedding_rows = small_added_rows(model.get_input_embeddings().weight, EOS_TOKEN_IDS[0], c["eos_scale"])

    g = torch.Generator().manual_seed(seed)
    finals = 0
    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            shape = tuple(p.shape)
            rows = embedding_rows(name, p)
            if rows is not None:
                w = torch.randn(shape, generator=g) * c["embed_std"]
                rows(w)
            elif p.dim() == 1 and name.endswith("weight"):
                w = 1.0 + 0.1 * torch.randn(shape, generator=g)
                if c["final_norm"] == "signed" and is_final_norm(name):
                    w = torch.randn(shape, generator=g)
                    finals += 1
            elif p.dim() == 1 and name.endswith("bias"):
                w = 0.2 * torch.randn(shape, generator=g)
            else:
                fan_in = math.prod(shape[1:])
                gain = 1.0
                if name.endswith("o_proj.weight"):
                    gain = c["o_gain"]
                elif name.endswith("down_proj.weight"):
                    gain = c["down_gain"]
                elif "merger.mlp.2." in name:
                    gain = c["merger_gain"]
                w = torch.randn(shape, generator=g) * (gain / math.sqrt(fan_in))
            p.copy_(w.to(torch.bfloat16).to(p.dtype))
    if c["final_norm"] == "signed" and finals != 1:
        raise SystemExit(f"oracle: found {finals} final text norms, want 1")


def visual_module(model):
    inner = getattr(model, "model", model)
    return getattr(inner, "visual", None) or getattr(model, "visual")


def text_rotary_module(model):
    for name, m in model.named_modules():
        if name.endswith("rotary_emb") and "visual" not in name:
            return m
    raise SystemExit("oracle: no text rotary embedding module found")


def reset_rope_state(model):
    inner = getattr(model, "model", model)
    if hasattr(inner, "rope_deltas"):
        inner.rope_deltas = None


# ---------------------------------------------------------------- cases


def load_processor(out, template):
    from transformers import AutoProcessor

    proc = AutoProcessor.from_pretrained(out)
    loaded = getattr(proc, "chat_template", None) == template
    if not loaded:
        log("WARNING: processor did not load chat_template.json; setting it explicitly")
        proc.chat_template = template
    return proc, loaded


def messages_for(images, text):
    content = [{"type": "image", "image": "images/" + n} for n in images]
    content.append({"type": "text", "text": text})
    return [{"role": "user", "content": content}]


def prepare_case(proc, image_dir, name, images, text):
    import torch
    from PIL import Image

    messages = messages_for(images, text)
    prompt = proc.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    pil = [Image.open(os.path.join(image_dir, n)).convert("RGB") for n in images]
    kwargs = dict(text=[prompt], return_tensors="pt")
    if pil:
        kwargs["images"] = pil
    inputs = dict(proc(**kwargs))
    ids = inputs["input_ids"]
    mm_source = "none"
    if pil:
        if "mm_token_type_ids" in inputs:
            mm_source = "processor"
        else:
            mm = torch.zeros_like(ids)
            mm[ids == IMAGE_TOKEN_ID] = 1
            mm[ids == VIDEO_TOKEN_ID] = 2
            inputs["mm_token_type_ids"] = mm
            mm_source = "computed"
    return dict(name=name, messages=messages, prompt=prompt, images=images, inputs=inputs, mm_source=mm_source)


def model_inputs(case, dtype, device):
    import torch

    out = {}
    for k, v in case["inputs"].items():
        if not torch.is_tensor(v):
            continue
        if k == "pixel_values":
            v = v.to(dtype)
        out[k] = v.to(device)
    return out


def greedy(model, case, dtype, device, max_new_tokens):
    import torch

    reset_rope_state(model)
    inputs = model_inputs(case, dtype, device)
    with torch.inference_mode():
        res = model.generate(
            **inputs,
            max_new_tokens=max_new_tokens,
            do_sample=False,
            eos_token_id=list(EOS_TOKEN_IDS),
            pad_token_id=PAD_TOKEN_ID,
            return_dict_in_generate=True,
            output_logits=True,
        )
    prompt_len = inputs["input_ids"].shape[1]
    ids = res.sequences[0, prompt_len:].tolist()
    finish = "stop" if ids and ids[-1] in EOS_TOKEN_IDS else "length"
    margins = []
    for step in res.logits:
        top2 = torch.topk(step[0].double(), 2).values
        margins.append(float(top2[0] - top2[1]))
    return ids, finish, margins


def full_forward(model, case, output_ids, dtype, device):
    """One forward over prompt + output without a cache: logits and hidden states for every position."""
    import torch

    reset_rope_state(model)
    inputs = model_inputs(case, dtype, device)
    prompt_ids = inputs["input_ids"]
    extra = torch.tensor([output_ids], dtype=prompt_ids.dtype, device=device)
    n = extra.shape[1]
    for k in list(inputs):
        v = inputs[k]
        if k == "input_ids":
            inputs[k] = torch.cat([v, extra], dim=1)
        elif k == "attention_mask":
            inputs[k] = torch.cat([v, torch.ones((1, n), dtype=v.dtype, device=device)], dim=1)
        elif torch.is_tensor(v) and v.shape == prompt_ids.shape:
            inputs[k] = torch.cat([v, torch.zeros((1, n), dtype=v.dtype, device=device)], dim=1)

    rotary = text_rotary_module(model)
    seen = []

    def grab(_m, args, kwargs):
        pos = kwargs.get("position_ids", args[1] if len(args) > 1 else None)
        if pos is not None and not seen:
            seen.append(pos.detach().clone())

    handle = rotary.register_forward_pre_hook(grab, with_kwargs=True)
    try:
        with torch.inference_mode():
            out = model(**inputs, use_cache=False, output_hidden_states=True, return_dict=True)
    finally:
        handle.remove()
    pos = seen[0] if seen else None
    if pos is not None and pos.dim() == 2:
        pos = pos[None].expand(3, -1, -1)
    if pos is not None and pos.dim() == 3 and pos.shape[0] == 4:
        pos = pos[1:]
    inner = getattr(model, "model", model)
    return out.logits[0], [h[0] for h in out.hidden_states], pos, getattr(inner, "rope_deltas", None)


def rope_index(model, case):
    """transformers' get_rope_index on the prompt, called with the arguments its signature takes."""
    inner = getattr(model, "model", model)
    fn = getattr(inner, "get_rope_index", None) or getattr(model, "get_rope_index", None)
    if fn is None:
        return None, None
    inputs = case["inputs"]
    params = inspect.signature(fn).parameters
    kwargs = {}
    for k in ("image_grid_thw", "video_grid_thw", "attention_mask", "mm_token_type_ids"):
        if k in params and k in inputs:
            kwargs[k] = inputs[k]
    try:
        pos, deltas = fn(inputs["input_ids"], **kwargs)
    except Exception as e:  # recorded, not fatal: the hook on the rotary module is the primary record
        log(f"get_rope_index failed on {case['name']}: {e!r}")
        return None, None
    return pos, deltas


def vision_widths(config):
    """(merge size, merged row width, width inside the tower) of a Qwen2-VL or Qwen2.5-VL vision config."""
    vc = config.vision_config
    if getattr(vc, "out_hidden_size", None) is not None:  # Qwen2.5-VL: hidden_size is the tower's own width
        return vc.spatial_merge_size, vc.out_hidden_size, vc.hidden_size
    return vc.spatial_merge_size, vc.hidden_size, vc.embed_dim


def vision_rows(model, case, dtype, device):
    """The vision tower's merged rows and, when it gives them, its blocks' output (in the order the
    tower keeps its rows: Qwen2.5-VL's is window order)."""
    import torch

    inputs = case["inputs"]
    if "pixel_values" not in inputs:
        return None, None
    visual = visual_module(model)
    px = inputs["pixel_values"].to(dtype).to(device)
    grid = inputs["image_grid_thw"].to(device)
    with torch.inference_mode():
        out = visual(px, grid_thw=grid)
    merge, width, inner = vision_widths(model.config)
    n_patches = px.shape[0]
    merged_rows = n_patches // (merge ** 2)
    cands = [out] if torch.is_tensor(out) else [getattr(out, k, None) for k in ("pooler_output", "last_hidden_state")]
    if not torch.is_tensor(out) and isinstance(out, (tuple, list)):
        cands += list(out)
    merged = pre = None
    for t in cands:
        if not torch.is_tensor(t):
            continue
        if tuple(t.shape) == (merged_rows, width):
            merged = t
        elif tuple(t.shape) == (n_patches, inner):
            pre = t
    if merged is None:
        raise SystemExit(f"oracle: vision tower output has no [{merged_rows}, {width}] tensor")
    return merged, pre


# ---------------------------------------------------------------- candidate choice


def pick_candidate(family, config, seed, cases, max_new_tokens):
    import torch

    tried = []
    fallback = None
    for i, c in enumerate(family.candidates):
        model = family.build_model(config, seed, c).to(torch.float64)
        runs = [greedy(model, case, torch.float64, "cpu", max_new_tokens) for case in cases]
        outs = [r[0] for r in runs]
        min_margin = min(min(r[2]) for r in runs)
        problems = []
        for case, (ids, finish, _) in zip(cases, runs):
            distinct = len(set(ids))
            run = longest_run(ids)
            if len(ids) < 6:
                problems.append(f"{case['name']}: only {len(ids)} tokens")
            if run > MAX_RUN or distinct < 0.6 * len(ids):
                problems.append(f"{case['name']}: repetitive (run {run}, {distinct} distinct) {ids}")
        if len({tuple(o) for o in outs}) < len(outs):
            problems.append("two cases gave the same output")
        if min_margin < MIN_MARGIN:
            problems.append(f"min top-2 margin {min_margin:.3g} < {MIN_MARGIN}")
        finishes = [r[1] for r in runs]
        mixed = "stop" in finishes and "length" in finishes
        summary = dict(index=i, candidate=c, finishes=finishes, min_margin=min_margin, problems=problems,
                       lengths=[len(o) for o in outs])
        tried.append(summary)
        log(f"candidate {i}: finishes={finishes} lengths={summary['lengths']} min_margin={min_margin:.4g} "
            f"problems={problems}")
        if not problems and mixed:
            return i, tried, True
        if not problems and fallback is None:
            fallback = i
    if fallback is not None:
        log("no candidate had both a stop and a length finish; keeping the first clean one")
        return fallback, tried, True
    best = min(tried, key=lambda t: (len(t["problems"]), -t["min_margin"]))["index"]
    log(f"WARNING: no candidate passed the non-degeneracy checks; keeping the least bad, {best}")
    return best, tried, False


def longest_run(ids):
    best = cur = 0
    for i, t in enumerate(ids):
        cur = cur + 1 if i and ids[i - 1] == t else 1
        best = max(best, cur)
    return best


# ---------------------------------------------------------------- saving


def published_key(k):
    if k.startswith("model.language_model."):
        return "model." + k[len("model.language_model."):]
    if k.startswith("model.visual."):
        return k[len("model."):]
    return k


def save_checkpoint(model, out, shard_size):
    """save_pretrained in BF16, then tensor names as published Qwen2-VL and Qwen2.5-VL checkpoints
    spell them (model.*, visual.*, lm_head.*)."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file

    bf16 = copy.deepcopy(model).to(torch.bfloat16)
    bf16.save_pretrained(out, max_shard_size=shard_size)
    index_path = os.path.join(out, "model.safetensors.index.json")
    if not os.path.exists(index_path):
        raise SystemExit("oracle: save_pretrained wrote no index; lower --shard-size so the weights shard")
    with open(index_path) as f:
        index = json.load(f)
    renamed = False
    for shard in sorted(set(index["weight_map"].values())):
        path = os.path.join(out, shard)
        with safe_open(path, framework="pt") as f:
            meta = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}
        if any(published_key(k) != k for k in tensors):
            renamed = True
            save_file({published_key(k): v.contiguous() for k, v in tensors.items()}, path, metadata=meta)
    if renamed:
        index["weight_map"] = {published_key(k): v for k, v in sorted(index["weight_map"].items())}
        write_json(index_path, index)
    odd = [k for k in index["weight_map"]
           if not k.startswith(("model.", "visual.", "lm_head.")) or k.startswith(("model.language_model.", "model.visual."))]
    if odd:
        raise SystemExit(f"oracle: tensor names not as published: {odd[:8]}")
    shards = sorted(set(index["weight_map"].values()))
    if len(shards) < 2:
        raise SystemExit(f"oracle: weights landed in {len(shards)} shard; lower --shard-size")
    return dict(shards=shards, renamed_to_published=renamed, tensors=len(index["weight_map"]))


# ---------------------------------------------------------------- oracle


def topk_steps(logits, start, n_steps, k):
    import torch

    steps = []
    for s in range(n_steps):
        row = logits[start + s]
        v, i = torch.topk(row, k)
        steps.append({"step": s, "ids": [int(x) for x in i.tolist()], "logits": [float(x) for x in v.tolist()]})
    return steps


def compare_run(model_ref_steps, ref_ids, ref_rows, model, case, dtype, device, max_new_tokens):
    """Greedy and full-forward of one case at another precision, compared with the float64 record."""
    import torch

    ids, finish, _ = greedy(model, case, dtype, device, max_new_tokens)
    logits, _, _, _ = full_forward(model, case, ref_ids, dtype, device)
    prompt_len = case["inputs"]["input_ids"].shape[1]
    worst = 0.0
    for st in model_ref_steps:
        row = logits[prompt_len - 1 + st["step"]].double().cpu()
        got = row[torch.tensor(st["ids"])]
        worst = max(worst, float((got - torch.tensor(st["logits"], dtype=torch.float64)).abs().max()))
    rec = {"output_ids": ids, "finish_reason": finish, "output_ids_equal": ids == ref_ids,
           "max_abs_top5_logit_diff": worst}
    if ref_rows is not None:
        rows, _ = vision_rows(model, case, dtype, device)
        rec["max_abs_vision_row_diff"] = float((rows.double().cpu() - ref_rows).abs().max())
    return rec


def run_case(model64, case, tokenizer, max_new_tokens, extra=None):
    import torch

    name = case["name"]
    prompt_ids = case["inputs"]["input_ids"][0].tolist()
    T = len(prompt_ids)
    ids, finish, gen_margins = greedy(model64, case, torch.float64, "cpu", max_new_tokens)
    logits, hidden, pos, deltas = full_forward(model64, case, ids, torch.float64, "cpu")
    argmax = [int(logits[T - 1 + s].argmax()) for s in range(len(ids))]
    if argmax != ids:
        log(f"WARNING {name}: full-forward argmax {argmax} differs from generate {ids}")
    margins = []
    for s in range(len(ids)):
        top2 = torch.topk(logits[T - 1 + s], 2).values
        margins.append(float(top2[0] - top2[1]))
    steps = topk_steps(logits, T - 1, min(TOP_STEPS, len(ids)), TOP_K)

    pos_prompt = pos[:, 0, :T] if pos is not None else None
    direct_pos, direct_deltas = rope_index(model64, case)
    direct_equal = None
    if direct_pos is not None and pos_prompt is not None:
        dp = direct_pos[1:] if direct_pos.shape[0] == 4 else direct_pos
        direct_equal = bool(torch.equal(dp[:, 0, :T].to(pos_prompt.dtype).cpu(), pos_prompt.cpu()))
    if deltas is None:
        deltas = direct_deltas
    rope_deltas = int(deltas.reshape(-1)[0]) if deltas is not None else 0
    if pos_prompt is None and "pixel_values" not in case["inputs"]:
        pos_prompt = torch.arange(T).unsqueeze(0).expand(3, T)

    rows, pre = vision_rows(model64, case, torch.float64, "cpu")
    scatter_equal = None
    if rows is not None:
        embeds = hidden[0][:T]
        mask = torch.tensor(prompt_ids) == IMAGE_TOKEN_ID
        scatter_equal = bool(torch.equal(embeds[mask], rows))
        if not scatter_equal:
            log(f"WARNING {name}: image rows in inputs_embeds differ from the vision tower output")

    grid = case["inputs"].get("image_grid_thw")
    record = {
        "case": name,
        "messages": case["messages"],
        "images": ["images/" + n for n in case["images"]],
        "prompt_text": case["prompt"],
        "prompt_ids": prompt_ids,
        "image_grid_thw": grid.tolist() if grid is not None else [],
        "mm_token_type_ids": case["mm_source"],
        "max_new_tokens": max_new_tokens,
        "eos_token_ids": list(EOS_TOKEN_IDS),
        "output_ids": ids,
        "output_text": tokenizer.decode(ids, skip_special_tokens=False),
        "finish_reason": finish,
        "top5": steps,
        "margins": margins,
        "min_margin": min(margins) if margins else None,
        "generate_margins_f32_logits": gen_margins,
        "full_forward_argmax_equals_generate": argmax == ids,
        "position_ids": pos_prompt.tolist() if pos_prompt is not None else None,
        "position_ids_from": "text rotary embedding input during the forward",
        "get_rope_index_equal": direct_equal,
        "rope_deltas": rope_deltas,
        "vision_rows_shape": list(rows.shape) if rows is not None else None,
        "vision_rows_equal_scattered_embeds": scatter_equal,
        "reference": {"dtype": "float64", "device": "cpu",
                      "attn_implementation": getattr(model64.config, "_attn_implementation", None)},
    }
    tensors = {"hidden_states": torch.stack([h.float() for h in hidden]).contiguous()}
    if rows is not None:
        tensors["pixel_values"] = case["inputs"]["pixel_values"].float().contiguous()
        tensors["image_grid_thw"] = grid.to(torch.int64).contiguous()
        tensors["vision_rows"] = rows.float().contiguous()
        tensors["vision_rows_f64"] = rows.double().contiguous()
        if pre is not None:
            tensors["vision_blocks_out"] = pre.float().contiguous()
    if extra is not None:
        extra(model64, case, record, tensors, rows, pre)
    return record, tensors, rows


def main(family):
    """The oracle of one family: pictures, side files, config, the weight draw kept, the checkpoint,
    every case's float64 record and its float32 comparisons, the manifest."""
    ap = argparse.ArgumentParser(description=family.doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=family.out)
    ap.add_argument("--tokenizer", default="testdata/tokenizer/qwen/tokenizer.json")
    ap.add_argument("--template", default="testdata/templates/qwen2_vl.jinja")
    ap.add_argument("--seed", type=int, default=family.seed)
    ap.add_argument("--max-new-tokens", type=int, default=24)
    ap.add_argument("--shard-size", default=family.shard_size)
    ap.add_argument("--no-gpu", action="store_true", help="skip the float32 GPU comparison")
    ap.add_argument("--force", action="store_true", help="run on torch/transformers versions other than the pinned ones")
    args = ap.parse_args()

    versions = check_versions(args.force)
    log("versions", versions)
    for p in (args.tokenizer, args.template):
        if not os.path.exists(p):
            sys.exit(f"oracle: {p} is missing; run `make testdata` (tools/testdata.sh) first")

    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")

    out = args.out
    oracle_dir = os.path.join(out, "oracle")
    image_dir = os.path.join(oracle_dir, "images")
    os.makedirs(image_dir, exist_ok=True)
    for f in os.listdir(out):
        if f.startswith("model") and (f.endswith(".safetensors") or f.endswith(".index.json")):
            os.remove(os.path.join(out, f))

    write_images(image_dir, family.images)
    template = write_side_files(out, args.template, args.tokenizer, family.preprocessor_config)
    config = family.make_config()
    config.save_pretrained(out)
    proc, template_loaded = load_processor(out, template)
    log("processor", type(proc).__name__, type(proc.image_processor).__name__, type(proc.tokenizer).__name__)
    cases = [prepare_case(proc, image_dir, *c) for c in family.cases]
    for c in cases:
        log(c["name"], "prompt tokens", c["inputs"]["input_ids"].shape[1],
            "grid", c["inputs"].get("image_grid_thw", torch.empty(0)).tolist(), "mm", c["mm_source"])

    chosen, tried, clean = pick_candidate(family, config, args.seed, cases, args.max_new_tokens)
    candidate = family.candidates[chosen]
    model = family.build_model(config, args.seed, candidate)
    saved = save_checkpoint(model, out, args.shard_size)
    log("saved", saved)

    model64 = copy.deepcopy(model).to(torch.float64)
    model32 = copy.deepcopy(model).to(torch.float32)
    gpu = None
    if not args.no_gpu and torch.cuda.is_available():
        gpu = copy.deepcopy(model).to(torch.float32).to("cuda")

    results = {}
    for case in cases:
        record, tensors, rows = run_case(model64, case, proc.tokenizer, args.max_new_tokens, family.case_extra)
        ref_rows = rows.double() if rows is not None else None
        record["f32_cpu"] = compare_run(record["top5"], record["output_ids"], ref_rows, model32, case,
                                        torch.float32, "cpu", args.max_new_tokens)
        if gpu is not None:
            rec = compare_run(record["top5"], record["output_ids"], ref_rows, gpu, case, torch.float32, "cuda",
                              args.max_new_tokens)
            rec["device_name"] = torch.cuda.get_device_name(0)
            rec["tf32"] = False
            record["f32_gpu"] = rec
        else:
            record["f32_gpu"] = None
        from safetensors.torch import save_file

        write_json(os.path.join(oracle_dir, case["name"] + ".json"), record)
        save_file(tensors, os.path.join(oracle_dir, case["name"] + ".safetensors"),
                  metadata={"case": case["name"], "source": "transformers float64 cpu"})
        results[case["name"]] = record
        log(f"{case['name']}: prompt {len(record['prompt_ids'])} ids, output {record['output_ids']} "
            f"({record['finish_reason']}), min margin {record['min_margin']:.4g}, "
            f"f32 cpu equal {record['f32_cpu']['output_ids_equal']}, "
            f"f32 gpu equal {None if gpu is None else record['f32_gpu']['output_ids_equal']}")

    files = {}
    for root, _, names in os.walk(out):
        for n in sorted(names):
            p = os.path.join(root, n)
            rel = os.path.relpath(p, out)
            if rel in (os.path.join("oracle", "manifest.json"), "README.md"):
                continue
            files[rel] = sha256_file(p)
    manifest = {
        "generator": family.generator,
        "versions": versions,
        "pinned": PINNED,
        "seed": args.seed,
        "candidate": dict(candidate, index=chosen),
        "candidate_checks_passed": clean,
        "candidates_tried": tried,
        "max_new_tokens": args.max_new_tokens,
        "checkpoint": saved,
        "chat_template_loaded_from_checkpoint": template_loaded,
        "processor": {"processor": type(proc).__name__, "image_processor": type(proc.image_processor).__name__,
                      "image_processor_module": type(proc.image_processor).__module__,
                      "tokenizer": type(proc.tokenizer).__name__},
        "not_committed": ["tokenizer.json"],
        "cases": {k: {"output_ids": v["output_ids"], "finish_reason": v["finish_reason"],
                      "min_margin": v["min_margin"], "f32_cpu_equal": v["f32_cpu"]["output_ids_equal"],
                      "f32_gpu_equal": None if v["f32_gpu"] is None else v["f32_gpu"]["output_ids_equal"]}
                  for k, v in results.items()},
    }
    if family.manifest_extra is not None:
        manifest.update(family.manifest_extra(model64))
    manifest["sha256"] = files
    write_json(os.path.join(oracle_dir, "manifest.json"), manifest)
    if family.finish is not None:
        family.finish(out, manifest, results)
    log("done:", json.dumps(manifest["cases"]))
