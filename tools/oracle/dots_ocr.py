#!/usr/bin/env python3
"""Builds the tiny random dots.ocr checkpoint and the publisher's own model code's outputs on it.

dots.ocr (model_type dots_ocr, DotsOCRForCausalLM) ships as remote code with its checkpoint:
configuration_dots.py, modeling_dots_vision.py and modeling_dots_ocr.py. --publisher names a folder
holding those three files and the checkpoint's small files (config.json, chat_template.json,
tokenizer_config.json, generation_config.json, preprocessor_config.json, special_tokens_map.json)
and prompts.py from the dots.ocr repository (for the layout prompt). Nothing of it is committed;
the script imports the three .py files as a package, as transformers' trust_remote_code does.

Writes, under --out (default testdata/dots-ocr-tiny):
  config.json (the publisher's, with tiny sizes), generation_config.json, preprocessor_config.json,
  chat_template.json, tokenizer_config.json, special_tokens_map.json (the publisher's, unchanged),
  model-*.safetensors + model.safetensors.index.json (BF16, the published tensor names),
  tokenizer.json (derived from --tokenizer, not committed), oracle/images/*.png,
  oracle/<case>.json, oracle/<case>.safetensors, oracle/manifest.json.

The reference is the publisher's DotsOCRForCausalLM on the bf16-rounded weights, run in float64 on
the CPU with the vision tower called with bf16=False (its default casts the pixels to bfloat16).
For comparison the same greedy run is repeated in float32 on the CPU and, when a GPU is present,
in float32 on the GPU with TF32 off.
"""

import argparse
import importlib
import json
import os
import re
import shutil
import sys
import tempfile
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qwen2_vl as common  # noqa: E402  (versions, hashing, json and picture helpers)

PUBLISHER_CODE = ("configuration_dots.py", "modeling_dots_vision.py", "modeling_dots_ocr.py")
PUBLISHER_DATA = ("config.json", "chat_template.json", "tokenizer_config.json", "generation_config.json",
                  "preprocessor_config.json", "special_tokens_map.json", "prompts.py")
COPIED_UNCHANGED = ("chat_template.json", "tokenizer_config.json", "generation_config.json",
                    "preprocessor_config.json", "special_tokens_map.json")
PACKAGE = "dots_ocr_publisher"

IMAGE_PAD = "<|imgpad|>"
FIRST_ADDED_TOKEN_ID = 151643

# The published config.json with these sizes substituted. The text width is 32, not 64: the
# published checkpoint has untied embeddings, so embed_tokens and lm_head (151936 rows each) are
# both saved, and at width 64 they alone would be 39 MB.
TEXT_SIZES = dict(hidden_size=32, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_window_layers=2)
VISION_SIZES = dict(embed_dim=32, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2)
TEXT_ATTENTION = "sdpa"
VISION_ATTENTION = "eager"  # the publisher's VisionAttention; its sdpa class forces a CUDA-only backend

TOP_STEPS = 8
TOP_K = 5
MIN_MARGIN = 1e-3
MAX_RUN = 2

# (file name, width, height); a, b and c are the qwen2-vl-tiny pictures, page is a document page.
IMAGES = [("a.png", 56, 84), ("b.png", 112, 70), ("c.png", 90, 60), ("page.png", 112, 140)]
LAYOUT_PROMPT = "prompt_layout_all_en"

# (name, images, text); text None means the layout prompt from the publisher's prompts.py. The text
# case passes its content as a string (the template's <|user|>...<|endofuser|> branch), the others
# as a list of image and text parts (the branch the publisher's demos use).
CASES = [
    ("text", [], "Write a short poem about the sea."),
    ("image1", ["a.png"], "What is in this picture?"),
    ("image2", ["b.png", "c.png"], "Compare these two pictures."),
    ("layout", ["page.png"], None),
]

# Weight draws tried in order, as in qwen2_vl.py; lm_head gets the same scale as the embeddings.
CANDIDATES = [
    dict(seed_offset=i, embed_std=1.0, o_gain=(2.0, 3.0)[i % 2], down_gain=(4.0, 6.0)[(i // 2) % 2],
         merger_gain=(1.5, 2.0)[(i // 4) % 2], eos_scale=(3.0, 2.5)[(i // 8) % 2], final_norm="signed")
    for i in range(32)
]


def log(*a):
    print("oracle:", *a, flush=True)


# ---------------------------------------------------------------- publisher code


def import_publisher(pub):
    """Imports the three files as one package so their relative imports resolve."""
    def load():
        for m in list(sys.modules):
            if m == PACKAGE or m.startswith(PACKAGE + "."):
                del sys.modules[m]
        pkg = types.ModuleType(PACKAGE)
        pkg.__path__ = [os.path.abspath(pub)]
        sys.modules[PACKAGE] = pkg
        return types.SimpleNamespace(
            configuration=importlib.import_module(PACKAGE + ".configuration_dots"),
            vision=importlib.import_module(PACKAGE + ".modeling_dots_vision"),
            ocr=importlib.import_module(PACKAGE + ".modeling_dots_ocr"),
        )

    try:
        return load(), None
    except ValueError as e:
        # configuration_dots.py registers "dots_ocr" with CONFIG_MAPPING; a transformers that has its
        # own dots_ocr refuses the name unless exist_ok is set.
        if "already used" not in str(e):
            raise
        log("publisher import refused its registration:", repr(e), "- retrying with exist_ok=True")
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING

        mapping_type = type(CONFIG_MAPPING)
        original = mapping_type.register

        def register(self, key, value, exist_ok=False):
            return original(self, key, value, exist_ok=True)

        mapping_type.register = register
        return load(), repr(e)


def read_publisher(pub):
    missing = [f for f in PUBLISHER_CODE + PUBLISHER_DATA if not os.path.exists(os.path.join(pub, f))]
    if missing:
        sys.exit(f"oracle: {pub} lacks {', '.join(missing)}; see tools/oracle/README.md (dots.ocr) for the files it needs")
    files = {}
    for f in PUBLISHER_CODE + PUBLISHER_DATA:
        files[f] = {"sha256": common.sha256_file(os.path.join(pub, f))}
    sources_path = os.path.join(pub, "SOURCES.json")
    if os.path.exists(sources_path):
        with open(sources_path) as fh:
            for f, src in json.load(fh).items():
                if f in files:
                    files[f]["source"] = src
    return files


def layout_prompt(pub):
    ns = {}
    with open(os.path.join(pub, "prompts.py")) as fh:
        exec(compile(fh.read(), "prompts.py", "exec"), ns)
    return ns["dict_promptmode_to_prompt"][LAYOUT_PROMPT]


def load_json(path):
    with open(path) as fh:
        return json.load(fh)


# ---------------------------------------------------------------- images


def make_page(w, h):
    """A synthetic document page: a title bar, paragraphs of word blocks and a small table."""
    import numpy as np

    img = np.full((h, w, 3), 250, dtype=np.float64)
    img[6:16, 10 : w - 30] = [30, 30, 120]
    y = 24
    for row in range(7):
        x = 8 + (10 if row % 4 == 0 else 0)
        while x < w - 12:
            word = 6 + (row * 7 + x) % 13
            img[y : y + 4, x : min(x + word, w - 8)] = [25, 25, 25]
            x += word + 4
        y += 8 + (6 if row % 4 == 3 else 0)
    top, left = h - 44, 14
    for i in range(4):
        img[top + 10 * i, left : w - 14] = [60, 60, 60]
    for j in range(4):
        img[top : top + 31, left + j * (w - 28) // 3 - (1 if j == 3 else 0)] = [60, 60, 60]
    img[h - 8 : h - 5, w // 2 - 6 : w // 2 + 6] = [90, 90, 90]
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def write_images(image_dir):
    from PIL import Image

    os.makedirs(image_dir, exist_ok=True)
    for name, w, h in IMAGES:
        pixels = make_page(w, h) if name == "page.png" else common.make_image(name, w, h)
        Image.fromarray(pixels).save(os.path.join(image_dir, name), format="PNG")


# ---------------------------------------------------------------- checkpoint files


def tiny_config(pub):
    """The publisher's config.json with the tiny sizes."""
    cfg = load_json(os.path.join(pub, "config.json"))
    for k in TEXT_SIZES:
        if k not in cfg:
            sys.exit(f"oracle: the publisher's config.json has no {k}")
    cfg.update(TEXT_SIZES)
    vision = dict(cfg["vision_config"])
    vision.update(VISION_SIZES)
    cfg["vision_config"] = vision
    return cfg


def make_config(mods, cfg):
    """DotsOCRConfig as loading config.json builds it, with the reference's attention choices."""
    kwargs = {k: v for k, v in cfg.items()
              if k not in ("architectures", "auto_map", "model_type", "torch_dtype", "transformers_version")}
    if kwargs.get("rope_scaling", 0) is None:
        del kwargs["rope_scaling"]  # null; transformers 5 maps rope_scaling onto rope_parameters
    kwargs["vision_config"] = dict(cfg["vision_config"], attn_implementation=VISION_ATTENTION)
    kwargs["attn_implementation"] = TEXT_ATTENTION
    config = mods.configuration.DotsOCRConfig(**kwargs)
    config.architectures = list(cfg["architectures"])
    for k, v in TEXT_SIZES.items():
        if getattr(config, k) != v:
            sys.exit(f"oracle: DotsOCRConfig.{k} is {getattr(config, k)}, want {v}")
    for k, v in VISION_SIZES.items():
        if getattr(config.vision_config, k) != v:
            sys.exit(f"oracle: vision_config.{k} is {getattr(config.vision_config, k)}, want {v}")
    if config.tie_word_embeddings != cfg["tie_word_embeddings"]:
        sys.exit(f"oracle: tie_word_embeddings is {config.tie_word_embeddings}, config.json says {cfg['tie_word_embeddings']}")
    if config.image_token_id != cfg["image_token_id"]:
        sys.exit(f"oracle: image_token_id is {config.image_token_id}, want {cfg['image_token_id']}")
    if getattr(config, "use_return_dict", None) is None:
        config.use_return_dict = True  # the publisher's forward reads it when return_dict is not given
    return config


def write_side_files(pub, out, cfg):
    common.write_json(os.path.join(out, "config.json"), cfg)
    for f in COPIED_UNCHANGED:
        shutil.copyfile(os.path.join(pub, f), os.path.join(out, f))


def derive_tokenizer_json(base_path, decoder):
    """The Qwen tokenizer.json without the added tokens whose ids the checkpoint's
    tokenizer_config.json gives to other tokens (Qwen3's 151665-151668); tools/testdata.sh makes the
    same file with the same text edit."""
    with open(base_path, encoding="utf-8") as fh:
        text = fh.read()
    drop = [a for a in json.loads(text)["added_tokens"]
            if str(a["id"]) in decoder and decoder[str(a["id"])]["content"] != a["content"]]
    for a in drop:
        pattern = r'(,?)\n    \{\n      "id": %d,\n(?:      .*\n)*?    \}(,?)' % a["id"]
        text, n = re.subn(pattern, lambda m: "," if m.group(1) and m.group(2) else "", text, count=1)
        if n != 1:
            sys.exit(f"oracle: could not remove added token {a['id']} from {base_path}")
    return text, [{"id": a["id"], "content": a["content"]} for a in drop]


# ---------------------------------------------------------------- tokenizers


def published_tokenizer(tokenizer_json, decoder):
    """tokenizers' Tokenizer of tokenizer_json with the config's added tokens at their ids: the
    tokenizer.json a dots.ocr checkpoint ships."""
    from tokenizers import AddedToken, Tokenizer

    tok = Tokenizer.from_str(tokenizer_json)
    for id_, a in sorted(((int(k), v) for k, v in decoder.items())):
        have = tok.id_to_token(id_)
        if have is not None:
            if have != a["content"]:
                sys.exit(f"oracle: tokenizer.json has {have!r} at {id_}, tokenizer_config.json {a['content']!r}")
            continue
        if tok.get_vocab_size(with_added_tokens=True) != id_:
            sys.exit(f"oracle: added token {a['content']!r} would not land at its id {id_}")
        t = AddedToken(a["content"], single_word=a.get("single_word", False), lstrip=a.get("lstrip", False),
                       rstrip=a.get("rstrip", False), normalized=a.get("normalized", False),
                       special=a.get("special", False))
        if a.get("special", False):
            tok.add_special_tokens([t])
        else:
            tok.add_tokens([t])
        if tok.token_to_id(a["content"]) != id_:
            sys.exit(f"oracle: {a['content']!r} got id {tok.token_to_id(a['content'])}, want {id_}")
    return tok


def hf_tokenizer(out):
    """AutoTokenizer from the checkpoint's tokenizer.json and tokenizer_config.json alone."""
    from transformers import AutoTokenizer

    tmp = tempfile.mkdtemp(prefix="dots-tokenizer-")
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copyfile(os.path.join(out, f), os.path.join(tmp, f))
    return AutoTokenizer.from_pretrained(tmp)


def tokenizer_check(hf, decoder):
    bad = []
    for k, a in decoder.items():
        got = hf.convert_tokens_to_ids(a["content"])
        if got != int(k):
            bad.append(f"{a['content']} -> {got}, want {k}")
    return bad


# ---------------------------------------------------------------- cases


def image_processor(out):
    tmp = tempfile.mkdtemp(prefix="dots-preprocessor-")
    shutil.copyfile(os.path.join(out, "preprocessor_config.json"), os.path.join(tmp, "preprocessor_config.json"))
    try:
        from transformers import AutoImageProcessor

        ip = AutoImageProcessor.from_pretrained(tmp)
    except Exception as e:  # recorded: the class is what matters, and it is checked below
        log("AutoImageProcessor failed, building Qwen2VLImageProcessor directly:", repr(e))
        from transformers import Qwen2VLImageProcessor

        cfg = load_json(os.path.join(out, "preprocessor_config.json"))
        ip = Qwen2VLImageProcessor(**{k: v for k, v in cfg.items() if k not in ("image_processor_type", "processor_class")})
    cfg = load_json(os.path.join(out, "preprocessor_config.json"))
    for k in ("temporal_patch_size", "patch_size", "merge_size"):
        if getattr(ip, k, None) != cfg[k]:
            sys.exit(f"oracle: image processor {type(ip).__name__}.{k} is {getattr(ip, k, None)}, want {cfg[k]}")
    return ip


def messages_for(images, text):
    if not images:
        return [{"role": "user", "content": text}]
    content = [{"type": "image", "image": "images/" + n} for n in images]
    content.append({"type": "text", "text": text})
    return [{"role": "user", "content": content}]


def prepare_case(ctx, name, images, text):
    import torch
    from PIL import Image

    if text is None:
        text = ctx["layout_prompt"]
    messages = messages_for(images, text)
    prompt = ctx["renderer"].apply_chat_template(messages, chat_template=ctx["template"], add_generation_prompt=True,
                                               tokenize=False)
    merge = ctx["merge"]
    inputs, counts, pil = {}, [], []
    if images:
        pil = [Image.open(os.path.join(ctx["image_dir"], n)).convert("RGB") for n in images]
        px = ctx["ip"](images=pil, return_tensors="pt")
        inputs["pixel_values"] = px["pixel_values"]
        inputs["image_grid_thw"] = px["image_grid_thw"].to(torch.int64)
        counts = [int(g.prod()) // (merge * merge) for g in inputs["image_grid_thw"]]
    parts = prompt.split(IMAGE_PAD)
    if len(parts) - 1 != len(images):
        sys.exit(f"oracle: {name}: the template wrote {len(parts) - 1} {IMAGE_PAD} for {len(images)} images")
    expanded = parts[0] + "".join(IMAGE_PAD * n + p for n, p in zip(counts, parts[1:]))
    ids = ctx["ref_tok"].encode(expanded, add_special_tokens=False).ids
    hf_equal = None
    if ctx["hf_tok"] is not None:
        hf_equal = ctx["hf_tok"](expanded, add_special_tokens=False)["input_ids"] == ids
        if not hf_equal:
            log(f"WARNING {name}: AutoTokenizer (tokenizer.json + tokenizer_config.json) gives other ids than the "
                "published tokenizer")
    inputs["input_ids"] = torch.tensor([ids], dtype=torch.int64)
    n_pad = ids.count(ctx["image_token_id"])
    if n_pad != sum(counts):
        sys.exit(f"oracle: {name}: {n_pad} image tokens for {sum(counts)} vision rows")
    case = dict(name=name, messages=messages, prompt=prompt, images=images, inputs=inputs, counts=counts, pil=pil,
                hf_tokenizer_equal=hf_equal)
    case["processor_check"] = processor_check(ctx, case)
    return case


def processor_check(ctx, case):
    """The publisher's DotsVLProcessor on the same prompt: its ids and pixels must be the same."""
    import torch

    try:
        proc = ctx["mods"].configuration.DotsVLProcessor(image_processor=ctx["ip"], tokenizer=ctx["renderer"],
                                                         chat_template=ctx["template"])
        kwargs = dict(text=[case["prompt"]], return_tensors="pt")
        if case["pil"]:
            kwargs["images"] = case["pil"]
        got = proc(**kwargs)
    except Exception as e:  # recorded, not fatal: the manual expansion above is the record
        return {"ran": False, "error": repr(e)[:500]}
    rec = {"ran": True, "input_ids_equal": got["input_ids"][0].tolist() == case["inputs"]["input_ids"][0].tolist()}
    if case["pil"]:
        rec["pixel_values_equal"] = bool(torch.equal(got["pixel_values"], case["inputs"]["pixel_values"]))
        rec["image_grid_thw_equal"] = bool(torch.equal(got["image_grid_thw"].to(torch.int64), case["inputs"]["image_grid_thw"]))
    return rec


# ---------------------------------------------------------------- model


def draw_weights(model, seed, c, eos_ids):
    """The Qwen2-VL oracle's draw, over dots.ocr's untied embedding and head: added and padding
    rows stay small so greedy rarely picks them; the assistant's end token is loud enough in
    lm_head that some prompts stop before the cap."""

    def embedding_rows(name, p):
        if name not in ("model.embed_tokens.weight", "lm_head.weight"):
            return None

        def rows(w):
            w[FIRST_ADDED_TOKEN_ID:] *= 0.1
            if name == "lm_head.weight":
                w[eos_ids[-1]] *= c["eos_scale"] / 0.1

        return rows

    common.draw_weights(model, seed, c, embedding_rows, lambda name: name == "model.norm.weight")


def vision_forward_without_bf16(self, hidden_states, grid_thw, bf16=False):
    return type(self).forward(self, hidden_states, grid_thw, bf16=False)


def build_model(ctx, seed, candidate, dtype, device="cpu"):
    import torch

    torch.manual_seed(seed)
    model = ctx["mods"].ocr.DotsOCRForCausalLM(ctx["config"])
    model.to(torch.float32)
    if model.lm_head.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr():
        sys.exit("oracle: lm_head is tied to embed_tokens, but the published config has tie_word_embeddings false")
    draw_weights(model, seed + candidate["seed_offset"], candidate, ctx["eos_ids"])
    # The publisher's DotsVisionTransformer.forward(bf16=True) casts the pixels to bfloat16; the
    # float64 and float32 runs call it with bf16=False.
    model.vision_tower.forward = types.MethodType(vision_forward_without_bf16, model.vision_tower)
    model.requires_grad_(False)
    model.eval()
    return model.to(dtype).to(device)


def attention_classes(model):
    return sorted({type(b.attn).__name__ for b in model.vision_tower.blocks})


def text_rotary(model):
    """The text model's (first) rotary embedding module: model.rotary_emb, or one per attention layer."""
    for name, m in model.named_modules():
        if name.endswith("rotary_emb") and not name.startswith("vision_tower"):
            return name, m
    sys.exit("oracle: no text rotary embedding module found")


def case_inputs(case, dtype, device, extra=None):
    import torch

    ids = case["inputs"]["input_ids"]
    if extra:
        ids = torch.cat([ids, torch.tensor([extra], dtype=ids.dtype)], dim=1)
    out = {"input_ids": ids.to(device), "attention_mask": torch.ones_like(ids).to(device)}
    if "pixel_values" in case["inputs"]:
        out["pixel_values"] = case["inputs"]["pixel_values"].to(dtype).to(device)
        out["image_grid_thw"] = case["inputs"]["image_grid_thw"].to(device)
    return out


def greedy(model, case, dtype, device, max_new_tokens, eos_ids):
    """Greedy decoding with the publisher's forward, the whole sequence each step (no cache)."""
    import torch

    ids, margins = [], []
    with torch.inference_mode():
        for _ in range(max_new_tokens):
            out = model(**case_inputs(case, dtype, device, ids), use_cache=False, return_dict=True, logits_to_keep=1)
            row = out.logits[0, -1].double()
            top2 = torch.topk(row, 2)
            ids.append(int(top2.indices[0]))
            margins.append(float(top2.values[0] - top2.values[1]))
            if ids[-1] in eos_ids:
                break
    finish = "stop" if ids and ids[-1] in eos_ids else "length"
    return ids, finish, margins


def generate_check(model, case, dtype, max_new_tokens, eos_ids, ref_ids):
    """transformers' generate on the same inputs, with its cache: recorded, not fatal."""
    import torch

    try:
        inputs = case_inputs(case, dtype, "cpu")
        with torch.inference_mode():
            seq = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=list(eos_ids),
                                 pad_token_id=eos_ids[0])
        got = seq[0, inputs["input_ids"].shape[1]:].tolist()
        return {"ran": True, "output_ids_equal": got == ref_ids, "output_ids": got}
    except Exception as e:
        return {"ran": False, "error": repr(e)[:500]}


def full_forward(model, case, output_ids, dtype, device):
    """One forward over prompt + output without a cache: the logits of the output steps, the inputs
    embeddings, the decoder layers' outputs, the final norm and the rotary position ids."""
    import torch

    inner = model.model
    grabbed = {"layers": [None] * len(inner.layers)}

    def pre_model(_m, args, kwargs):
        grabbed["embeds"] = kwargs.get("inputs_embeds")

    def pre_layer0(_m, args, kwargs):
        grabbed["layer0_in"] = args[0] if args else kwargs.get("hidden_states")

    def pre_rotary(_m, args, kwargs):
        if "pos" not in grabbed:
            grabbed["pos"] = kwargs.get("position_ids", args[1] if len(args) > 1 else None)

    def on_layer(i):
        def hook(_m, _args, output):
            grabbed["layers"][i] = output[0] if isinstance(output, (tuple, list)) else output
        return hook

    def on_norm(_m, _args, output):
        grabbed["norm"] = output

    handles = [inner.register_forward_pre_hook(pre_model, with_kwargs=True),
               text_rotary(model)[1].register_forward_pre_hook(pre_rotary, with_kwargs=True),
               inner.norm.register_forward_hook(on_norm)]
    handles += [layer.register_forward_hook(on_layer(i)) for i, layer in enumerate(inner.layers)]
    handles.append(inner.layers[0].register_forward_pre_hook(pre_layer0, with_kwargs=True))
    n = len(output_ids)
    try:
        with torch.inference_mode():
            out = model(**case_inputs(case, dtype, device, output_ids), use_cache=False, return_dict=True,
                        logits_to_keep=n + 1)
    finally:
        for h in handles:
            h.remove()
    logits = out.logits[0]  # row s is the logits after prompt + output[:s]
    if grabbed.get("embeds") is None:
        grabbed["embeds"] = grabbed["layer0_in"]
    return logits, grabbed


def vision_parts(model, case, dtype, device):
    """The vision tower's patch embeddings, its blocks' output after post_trunk_norm (the merger's
    input) and the merged rows."""
    import torch

    if "pixel_values" not in case["inputs"]:
        return None
    vt = model.vision_tower
    grabbed = {}

    def on_patch(_m, _args, output):
        grabbed["patch"] = output

    def pre_merger(_m, args):
        grabbed["blocks"] = args[0]

    handles = [vt.patch_embed.register_forward_hook(on_patch), vt.merger.register_forward_pre_hook(pre_merger)]
    try:
        with torch.inference_mode():
            rows = vt(case["inputs"]["pixel_values"].to(dtype).to(device), case["inputs"]["image_grid_thw"].to(device))
    finally:
        for h in handles:
            h.remove()
    return {"rows": rows, "patch": grabbed["patch"], "blocks": grabbed["blocks"]}


def topk_steps(logits, n_steps, k):
    import torch

    steps = []
    for s in range(n_steps):
        v, i = torch.topk(logits[s], k)
        steps.append({"step": s, "ids": [int(x) for x in i.tolist()], "logits": [float(x) for x in v.tolist()]})
    return steps


# ---------------------------------------------------------------- candidate choice


def pick_candidate(ctx, seed, cases, max_new_tokens):
    import torch

    tried, fallback = [], None
    for i, c in enumerate(CANDIDATES):
        model = build_model(ctx, seed, c, torch.float64)
        runs = [greedy(model, case, torch.float64, "cpu", max_new_tokens, ctx["eos_ids"]) for case in cases]
        outs = [r[0] for r in runs]
        min_margin = min(min(r[2]) for r in runs)
        problems = []
        for case, (ids, _, _) in zip(cases, runs):
            run, distinct = common.longest_run(ids), len(set(ids))
            if len(ids) < 6:
                problems.append(f"{case['name']}: only {len(ids)} tokens")
            if run > MAX_RUN or distinct < 0.6 * len(ids):
                problems.append(f"{case['name']}: repetitive (run {run}, {distinct} distinct) {ids}")
        if len({tuple(o) for o in outs}) < len(outs):
            problems.append("two cases gave the same output")
        if min_margin < MIN_MARGIN:
            problems.append(f"min top-2 margin {min_margin:.3g} < {MIN_MARGIN}")
        finishes = [r[1] for r in runs]
        summary = dict(index=i, candidate=c, finishes=finishes, min_margin=min_margin, problems=problems,
                       lengths=[len(o) for o in outs])
        tried.append(summary)
        log(f"candidate {i}: finishes={finishes} lengths={summary['lengths']} min_margin={min_margin:.4g} "
            f"problems={problems}")
        if not problems and "stop" in finishes and "length" in finishes:
            return i, tried, True
        if not problems and fallback is None:
            fallback = i
    if fallback is not None:
        log("no candidate had both a stop and a length finish; keeping the first clean one")
        return fallback, tried, True
    best = min(tried, key=lambda t: (len(t["problems"]), -t["min_margin"]))["index"]
    log(f"WARNING: no candidate passed the non-degeneracy checks; keeping the least bad, {best}")
    return best, tried, False


# ---------------------------------------------------------------- saving


def save_checkpoint(model, out, shard_bytes):
    """The state dict in BF16 under the names transformers gives DotsOCRForCausalLM's modules, which
    are the published checkpoint's (model.*, lm_head.weight, vision_tower.*), in shards."""
    import torch
    from safetensors.torch import load_file, save_file

    state = {k: v.detach().to(torch.bfloat16).contiguous().cpu() for k, v in model.state_dict().items()}
    bad = [k for k in state if not k.startswith(("model.", "lm_head.", "vision_tower."))]
    if bad:
        sys.exit(f"oracle: unexpected tensor names {bad[:5]}")
    shards, cur, size = [], [], 0
    for k in sorted(state):
        n = state[k].numel() * state[k].element_size()
        if cur and size + n > shard_bytes:
            shards.append(cur)
            cur, size = [], 0
        cur.append(k)
        size += n
    shards.append(cur)
    if len(shards) < 2:
        sys.exit("oracle: the weights fit one shard; lower --shard-mb so the index is exercised")
    weight_map, total = {}, 0
    names = []
    for i, keys in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file({k: state[k] for k in keys}, os.path.join(out, fname), metadata={"format": "pt"})
        back = load_file(os.path.join(out, fname))
        for k in keys:
            if not torch.equal(back[k], state[k]):
                sys.exit(f"oracle: {k} did not read back equal from {fname}")
            weight_map[k] = fname
            total += state[k].numel() * state[k].element_size()
        names.append(fname)
    common.write_json(os.path.join(out, "model.safetensors.index.json"),
                      {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))})
    return dict(shards=names, tensors=len(weight_map), total_size=total)


# ---------------------------------------------------------------- oracle


def compare_run(ctx, ref, model, case, dtype, device, max_new_tokens):
    """Greedy and full forward of one case at another precision, compared with the float64 record."""
    import torch

    ids, finish, _ = greedy(model, case, dtype, device, max_new_tokens, ctx["eos_ids"])
    logits, _ = full_forward(model, case, ref["output_ids"], dtype, device)
    worst = 0.0
    for st in ref["top5"]:
        got = logits[st["step"]].double().cpu()[torch.tensor(st["ids"])]
        worst = max(worst, float((got - torch.tensor(st["logits"], dtype=torch.float64)).abs().max()))
    rec = {"output_ids": ids, "finish_reason": finish, "output_ids_equal": ids == ref["output_ids"],
           "max_abs_top5_logit_diff": worst}
    if ref["_rows"] is not None:
        parts = vision_parts(model, case, dtype, device)
        rec["max_abs_vision_row_diff"] = float((parts["rows"].double().cpu() - ref["_rows"]).abs().max())
    return rec


def run_case(ctx, model64, case, max_new_tokens):
    import torch

    name = case["name"]
    prompt_ids = case["inputs"]["input_ids"][0].tolist()
    T = len(prompt_ids)
    ids, finish, greedy_margins = greedy(model64, case, torch.float64, "cpu", max_new_tokens, ctx["eos_ids"])
    logits, grabbed = full_forward(model64, case, ids, torch.float64, "cpu")
    n = len(ids)
    argmax = [int(logits[s].argmax()) for s in range(n)]
    if argmax != ids:
        log(f"WARNING {name}: full-forward argmax {argmax} differs from greedy {ids}")
    margins = []
    for s in range(n):
        top2 = torch.topk(logits[s], 2).values
        margins.append(float(top2[0] - top2[1]))
    steps = topk_steps(logits, min(TOP_STEPS, n), TOP_K)

    final = grabbed["norm"][0]
    head = model64.lm_head.weight
    with torch.no_grad():
        head_diff = float((final[T - 1: T - 1 + n + 1] @ head.T - logits).abs().max()) if n else 0.0
    pos = grabbed.get("pos")
    pos_arange = pos is not None and torch.equal(pos.reshape(-1).cpu(), torch.arange(T + n))

    parts = vision_parts(model64, case, torch.float64, "cpu")
    scatter_equal = None
    if parts is not None:
        mask = torch.tensor(prompt_ids) == ctx["image_token_id"]
        scatter_equal = bool(torch.equal(grabbed["embeds"][0][:T][mask], parts["rows"]))
        if not scatter_equal:
            log(f"WARNING {name}: image rows in inputs_embeds differ from the vision tower output")

    grid = case["inputs"].get("image_grid_thw")
    record = {
        "case": name,
        "messages": case["messages"],
        "images": ["images/" + x for x in case["images"]],
        "prompt_text": case["prompt"],
        "image_token_counts": case["counts"],
        "prompt_ids": prompt_ids,
        "image_grid_thw": grid.tolist() if grid is not None else [],
        "max_new_tokens": max_new_tokens,
        "eos_token_ids": list(ctx["eos_ids"]),
        "output_ids": ids,
        "output_text": ctx["ref_tok"].decode(ids, skip_special_tokens=False),
        "finish_reason": finish,
        "top5": steps,
        "margins": margins,
        "min_margin": min(margins) if margins else None,
        "greedy_margins": greedy_margins,
        "full_forward_argmax_equals_greedy": argmax == ids,
        "position_ids": pos.reshape(-1)[:T].tolist() if pos is not None else None,
        "position_ids_are_arange": bool(pos_arange),
        "final_norm_times_lm_head_max_abs_diff": head_diff,
        "vision_rows_shape": list(parts["rows"].shape) if parts is not None else None,
        "vision_rows_equal_scattered_embeds": scatter_equal,
        "hf_tokenizer_ids_equal": case["hf_tokenizer_equal"],
        "generate_check": generate_check(model64, case, torch.float64, max_new_tokens, ctx["eos_ids"], ids),
        "processor_check": case["processor_check"],
        "reference": {"dtype": "float64", "device": "cpu", "text_attn_implementation": ctx["text_attn"],
                      "vision_attention": attention_classes(model64), "vision_forward_bf16": False},
    }
    layers = [grabbed["embeds"][0]] + [h[0] for h in grabbed["layers"][:-1]] + [final]
    tensors = {"hidden_states": torch.stack([h.float() for h in layers]).contiguous()}
    rows = None
    if parts is not None:
        rows = parts["rows"].double()
        tensors["pixel_values"] = case["inputs"]["pixel_values"].float().contiguous()
        tensors["image_grid_thw"] = grid.to(torch.int64).contiguous()
        tensors["vision_patch_embeds"] = parts["patch"].float().contiguous()
        tensors["vision_blocks_out"] = parts["blocks"].float().contiguous()
        tensors["vision_rows"] = rows.float().contiguous()
        tensors["vision_rows_f64"] = rows.contiguous()
    record["_rows"] = rows
    return record, tensors


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--publisher", default="tools/oracle/publisher/dots_ocr",
                    help="folder with the publisher's configuration_dots.py, modeling_dots_vision.py, "
                         "modeling_dots_ocr.py, its small checkpoint files and prompts.py")
    ap.add_argument("--out", default="testdata/dots-ocr-tiny")
    ap.add_argument("--tokenizer", default="testdata/tokenizer/qwen/tokenizer.json")
    ap.add_argument("--seed", type=int, default=20261202)
    ap.add_argument("--max-new-tokens", type=int, default=24)
    ap.add_argument("--shard-mb", type=float, default=10.0)
    ap.add_argument("--no-gpu", action="store_true", help="skip the float32 GPU comparison")
    ap.add_argument("--force", action="store_true", help="run on torch/transformers versions other than the pinned ones")
    args = ap.parse_args()

    versions = common.check_versions(args.force)
    log("versions", versions)
    if not os.path.exists(args.tokenizer):
        sys.exit(f"oracle: {args.tokenizer} is missing; run `make testdata` (tools/testdata.sh) first")
    pub = args.publisher
    publisher_files = read_publisher(pub)

    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")

    mods, import_note = import_publisher(pub)
    out = args.out
    oracle_dir = os.path.join(out, "oracle")
    image_dir = os.path.join(oracle_dir, "images")
    os.makedirs(image_dir, exist_ok=True)
    for f in os.listdir(out):
        if f.startswith("model") and (f.endswith(".safetensors") or f.endswith(".index.json")):
            os.remove(os.path.join(out, f))

    write_images(image_dir)
    cfg = tiny_config(pub)
    write_side_files(pub, out, cfg)
    decoder = load_json(os.path.join(out, "tokenizer_config.json"))["added_tokens_decoder"]
    tok_text, dropped = derive_tokenizer_json(args.tokenizer, decoder)
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as fh:
        fh.write(tok_text)
    ref_tok = published_tokenizer(tok_text, decoder)
    try:
        hf_tok, bad = hf_tokenizer(out), []
        bad = tokenizer_check(hf_tok, decoder)
    except Exception as e:  # recorded: the published tokenizer above makes the ids either way
        hf_tok, bad = None, ["AutoTokenizer failed: " + repr(e)[:300]]
    if bad:
        log("WARNING: AutoTokenizer from tokenizer.json + tokenizer_config.json disagrees:", bad[:8])
    renderer = hf_tok
    if hf_tok is None or bad:
        from transformers import PreTrainedTokenizerFast

        renderer = PreTrainedTokenizerFast(tokenizer_object=ref_tok)
    log("tokenizer: dropped", dropped, "; AutoTokenizer", type(hf_tok).__name__, "disagreements", len(bad))

    config = make_config(mods, cfg)
    gen = load_json(os.path.join(out, "generation_config.json"))
    eos_ids = gen["eos_token_id"] if isinstance(gen["eos_token_id"], list) else [gen["eos_token_id"]]
    template = load_json(os.path.join(out, "chat_template.json"))["chat_template"]
    ip = image_processor(out)
    ctx = dict(mods=mods, config=config, eos_ids=eos_ids, template=template, ip=ip, ref_tok=ref_tok, hf_tok=hf_tok,
               renderer=renderer,
               image_dir=image_dir, merge=cfg["vision_config"]["spatial_merge_size"],
               image_token_id=cfg["image_token_id"], layout_prompt=layout_prompt(pub))
    if ref_tok.token_to_id(IMAGE_PAD) != ctx["image_token_id"]:
        sys.exit(f"oracle: {IMAGE_PAD} is not image_token_id {ctx['image_token_id']}")
    cases = [prepare_case(ctx, *c) for c in CASES]
    for c in cases:
        log(c["name"], "prompt tokens", c["inputs"]["input_ids"].shape[1], "image tokens", c["counts"],
            "processor check", c["processor_check"])

    probe = build_model(ctx, args.seed, CANDIDATES[0], torch.float64)
    ctx["text_attn"] = getattr(probe.config, "_attn_implementation", None)
    head_dim = cfg["hidden_size"] // cfg["num_attention_heads"]
    want_inv = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    rotary_name, rotary = text_rotary(probe)
    got_inv = rotary.inv_freq.double().cpu()
    if got_inv.shape != want_inv.shape or float((got_inv - want_inv).abs().max()) > 1e-6 * float(want_inv.abs().max()):
        sys.exit(f"oracle: {rotary_name}.inv_freq {got_inv.tolist()} is not rope_theta {cfg['rope_theta']}'s")
    log("text attention", ctx["text_attn"], "vision attention", attention_classes(probe),
        "parameters", sum(p.numel() for p in probe.parameters()))
    del probe

    chosen, tried, clean = pick_candidate(ctx, args.seed, cases, args.max_new_tokens)
    candidate = CANDIDATES[chosen]
    model64 = build_model(ctx, args.seed, candidate, torch.float64)
    saved = save_checkpoint(build_model(ctx, args.seed, candidate, torch.float32), out, int(args.shard_mb * 1e6))
    log("saved", saved)
    model32 = build_model(ctx, args.seed, candidate, torch.float32)
    gpu = None
    if not args.no_gpu and torch.cuda.is_available():
        gpu = build_model(ctx, args.seed, candidate, torch.float32, "cuda")

    from safetensors.torch import save_file

    results = {}
    for case in cases:
        record, tensors = run_case(ctx, model64, case, args.max_new_tokens)
        record["f32_cpu"] = compare_run(ctx, record, model32, case, torch.float32, "cpu", args.max_new_tokens)
        if gpu is not None:
            rec = compare_run(ctx, record, gpu, case, torch.float32, "cuda", args.max_new_tokens)
            rec["device_name"] = torch.cuda.get_device_name(0)
            rec["tf32"] = False
            record["f32_gpu"] = rec
        else:
            record["f32_gpu"] = None
        del record["_rows"]
        common.write_json(os.path.join(oracle_dir, case["name"] + ".json"), record)
        save_file(tensors, os.path.join(oracle_dir, case["name"] + ".safetensors"),
                  metadata={"case": case["name"], "source": "publisher DotsOCRForCausalLM float64 cpu"})
        results[case["name"]] = record
        log(f"{case['name']}: prompt {len(record['prompt_ids'])} ids, output {record['output_ids']} "
            f"({record['finish_reason']}), min margin {record['min_margin']:.4g}, "
            f"f32 cpu equal {record['f32_cpu']['output_ids_equal']}, "
            f"f32 gpu equal {None if gpu is None else record['f32_gpu']['output_ids_equal']}, "
            f"generate {record['generate_check'].get('output_ids_equal', record['generate_check'].get('error'))}")

    files = {}
    for root, _, names in os.walk(out):
        for n in sorted(names):
            p = os.path.join(root, n)
            rel = os.path.relpath(p, out)
            if rel in (os.path.join("oracle", "manifest.json"), "README.md"):
                continue
            files[rel] = common.sha256_file(p)
    manifest = {
        "generator": "tools/oracle/dots_ocr.py",
        "versions": versions,
        "pinned": common.PINNED,
        "seed": args.seed,
        "candidate": dict(candidate, index=chosen),
        "candidate_checks_passed": clean,
        "candidates_tried": tried,
        "max_new_tokens": args.max_new_tokens,
        "checkpoint": saved,
        "publisher": {"files": publisher_files, "import_note": import_note,
                      "tiny_sizes": {"text": TEXT_SIZES, "vision": VISION_SIZES}},
        "reference": {"text_attn_implementation": ctx["text_attn"], "vision_attn_implementation": VISION_ATTENTION,
                      "vision_attention_classes": attention_classes(model64), "vision_forward_bf16": False,
                      "greedy": "publisher forward over the whole sequence each step, no cache"},
        "tokenizer": {"base": args.tokenizer, "base_sha256": common.sha256_file(args.tokenizer),
                      "dropped_added_tokens": dropped, "auto_tokenizer": type(hf_tok).__name__,
                      "auto_tokenizer_disagreements": bad, "added_from_tokenizer_config": len(decoder)},
        "image_processor": {"class": type(ip).__name__, "module": type(ip).__module__,
                            "size": str(getattr(ip, "size", None))},
        "not_committed": ["tokenizer.json"],
        "cases": {k: {"prompt_tokens": len(v["prompt_ids"]), "output_ids": v["output_ids"],
                      "finish_reason": v["finish_reason"], "min_margin": v["min_margin"],
                      "f32_cpu_equal": v["f32_cpu"]["output_ids_equal"],
                      "f32_gpu_equal": None if v["f32_gpu"] is None else v["f32_gpu"]["output_ids_equal"],
                      "generate_equal": v["generate_check"].get("output_ids_equal"),
                      "processor_equal": v["processor_check"].get("input_ids_equal")}
                  for k, v in results.items()},
        "sha256": files,
    }
    common.write_json(os.path.join(oracle_dir, "manifest.json"), manifest)
    log("done:", json.dumps(manifest["cases"]))


if __name__ == "__main__":
    main()
