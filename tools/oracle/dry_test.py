#!/usr/bin/env python3
"""Checks of the oracle scripts that need neither torch nor transformers: the Qwen2.5-VL window
layout against transformers' padded construction (ported here to plain Python) and hand-worked
grids, the README the Qwen2.5-VL oracle writes, that qwen2_vl.py still offers every name the
other oracle scripts take from it, LightOnOCR's resize rule, and GLM-OCR's transcriptions (glm4v's
smart_resize, the M-RoPE positions, the tensor list) against hand-worked values, its chat template
(rendered with jinja2 as transformers renders, when jinja2 is installed) and its README, and
published.py's configs (the published dims over each fixture's config.json, the graphs' requires,
the page's image tokens, the OCR prompts the graphs state) and its comparison and receipt on
synthetic outputs.
Run: python3 tools/oracle/dry_test.py"""

import math
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import glm_ocr  # noqa: E402
import lighton_ocr  # noqa: E402
import qwen2_5_vl  # noqa: E402
import qwen2_vl  # noqa: E402


def padded_layout(grids, merge, window_size, patch_size):
    """transformers' get_window_index as written there: pad each merged grid with -100 up to whole
    windows (a whole extra row and column of windows when it already fits), cut, drop the -100s,
    then unique_consecutive on the cumulative lengths."""
    side = window_size // merge // patch_size
    index, cu, offset = [], [0], 0
    for t, h, w in grids:
        gh, gw = h // merge, w // merge
        nh = (gh + side - gh % side) // side
        nw = (gw + side - gw % side) // side
        for f in range(t):
            for wh in range(nh):
                for ww in range(nw):
                    n = 0
                    for r in range(wh * side, (wh + 1) * side):
                        for c in range(ww * side, (ww + 1) * side):
                            if r < gh and c < gw:
                                index.append(offset + f * gh * gw + r * gw + c)
                                n += 1
                    cu.append(cu[-1] + n * merge * merge)
        offset += t * gh * gw
    return index, qwen2_5_vl.dedup(cu)


def check_windows():
    layout = qwen2_5_vl.window_layout
    # e.png then b.png as the processor sizes them: 10x12 and 4x8 patches
    index, cu = layout([(1, 10, 12), (1, 4, 8)], 2, 112, 14)
    assert cu == [0, 64, 96, 112, 120, 152], cu
    assert index[:16] == [0, 1, 2, 3, 6, 7, 8, 9, 12, 13, 14, 15, 18, 19, 20, 21], index[:16]
    assert index[16:24] == [4, 5, 10, 11, 16, 17, 22, 23], index[16:24]
    assert index[24:30] == [24, 25, 26, 27, 28, 29], index[24:30]
    assert index[30:] == list(range(30, 38)), index[30:]
    # a grid that is a multiple of the window: raster windows, no empty ones
    index, cu = layout([(1, 8, 16)], 2, 112, 14)
    assert cu == [0, 64, 128], cu
    assert index[:4] == [0, 1, 2, 3] and index[4:8] == [8, 9, 10, 11] and index[16] == 4, index[:17]
    # one window smaller than the window size is the identity
    assert layout([(1, 6, 4)], 2, 112, 14) == (list(range(6)), [0, 24])
    grids = [(1, h, w) for h in (2, 4, 6, 8, 10, 16, 18) for w in (2, 4, 8, 12, 14, 16)] + [(2, 6, 10), (3, 8, 8)]
    for g in grids:
        for pair in ([g], [g, (1, 10, 12)], [(1, 4, 8), g]):
            assert layout(pair, 2, 112, 14) == padded_layout(pair, 2, 112, 14), pair
    assert qwen2_5_vl.picture_spans([(1, 10, 12), (2, 4, 8)]) == [0, 120, 152, 184]


def check_config():
    v = qwen2_5_vl.VISION_CONFIG
    full = v["fullatt_block_indexes"]
    assert any(i in full for i in range(v["depth"] - 1)) and any(i not in full for i in range(v["depth"]))
    assert v["hidden_size"] % v["num_heads"] == 0 and (v["hidden_size"] // v["num_heads"]) % 4 == 0
    assert v["out_hidden_size"] == qwen2_5_vl.TEXT_CONFIG["hidden_size"] != v["hidden_size"]
    t = qwen2_5_vl.TEXT_CONFIG
    assert sum(qwen2_5_vl.ROPE["mrope_section"]) * 2 == t["hidden_size"] // t["num_attention_heads"]
    names = {n for n, _, _, _ in qwen2_5_vl.IMAGES}
    assert all(set(imgs) <= names for _, imgs, _ in qwen2_5_vl.CASES)
    assert any(len(imgs) == 0 for _, imgs, _ in qwen2_5_vl.CASES)
    assert any(len(imgs) >= 2 for _, imgs, _ in qwen2_5_vl.CASES)
    assert set(qwen2_5_vl.CASE_NOTES) == {c[0] for c in qwen2_5_vl.CASES}


def check_readme():
    grids = {"image1": [(1, 6, 4)], "windows": [(1, 8, 16)], "image2": [(1, 10, 12), (1, 4, 8)]}
    results = {}
    for name, _, _ in qwen2_5_vl.CASES:
        r = {"output_ids": [1, 2, 3], "finish_reason": "stop",
             "f32_cpu": {"output_ids_equal": True, "max_abs_top5_logit_diff": 1e-5, "max_abs_vision_row_diff": 3e-6},
             "f32_gpu": None}
        if name in grids:
            _, cu = qwen2_5_vl.window_layout(grids[name], 2, 112, 14)
            r["vision_window"] = {"merged_grids": [[t, h // 2, w // 2] for t, h, w in grids[name]],
                                  "window_unit_counts": [(b - a) // 4 for a, b in zip(cu, cu[1:])]}
        results[name] = r
    manifest = {"checkpoint": {"tensors": 99, "shards": ["a", "b"]}}
    text = qwen2_5_vl.readme(manifest, results)
    assert "| `image2` | `e.png` 170x150, `b.png` 112x70 | 5x6, 2x4 | [16, 8, 4, 2, 8] |" in text, text
    assert "`fullatt_block_indexes` [1, 3]" in text


def check_reexports():
    missing = set()
    for f, prefix in (("dots_ocr.py", "common"), ("sweep.py", "common"), ("full_size.py", "tiny")):
        with open(os.path.join(HERE, f)) as fh:
            for name in re.findall(prefix + r"\.([A-Za-z_][A-Za-z0-9_]*)", fh.read()):
                if not hasattr(qwen2_vl, name):
                    missing.add(f"{f}: {name}")
    assert not missing, sorted(missing)
    assert qwen2_vl.FAMILY.candidates == qwen2_vl.CANDIDATES and len(qwen2_vl.CANDIDATES) == 32


def check_lighton():
    size = lighton_ocr.resized_size
    # no resize; rounded up to the patch; longest edge first (floor), then rounded up
    assert size(84, 56) == (84, 56) and size(70, 112) == (70, 112)
    assert size(60, 90) == (70, 98)
    assert size(150, 170) == (98, 112)
    assert size(1, 1) == (14, 14) and size(113, 20, longest=112) == (112, 28)
    grids = {}
    for name, _, w, h in lighton_ocr.IMAGES:
        hh, ww = size(h, w)
        grids[name] = (hh // 14, ww // 14)
    assert grids["c.png"] == (5, 7) and grids["e.png"] == (7, 8) and grids["b.png"] == (5, 8)
    odd = [n for n, (gh, gw) in grids.items() if gh % 2 or gw % 2]
    assert any(n in odd for _, imgs, _ in lighton_ocr.CASES for n in imgs)
    t, v = lighton_ocr.TEXT_CONFIG, lighton_ocr.VISION_CONFIG
    assert v["hidden_size"] == v["num_attention_heads"] * v["head_dim"] and v["head_dim"] % 4 == 0
    assert t["num_attention_heads"] * t["head_dim"] != t["hidden_size"]
    assert set(lighton_ocr.CASE_NOTES) == {c[0] for c in lighton_ocr.CASES}
    # the fixture stays under 20 MB: the tied table dominates
    assert t["vocab_size"] * t["hidden_size"] * 2 < 16e6


def check_glm_resize():
    sr = glm_ocr.smart_resize
    # (num_frames, height, width) -> (height, width), worked by hand with min 4704 and max 37632
    # (both over two frames): a.png fits as it is
    assert sr(2, 84, 56) == (84, 56)
    # e.png: 2*140*168 = 47040 > 37632, beta = sqrt(2*150*170/37632) = 1.16415,
    # floor(150/beta/28) = floor(4.60) = 4, floor(170/beta/28) = floor(5.22) = 5
    assert sr(2, 150, 170) == (112, 140)
    # f.png: 20 < 28, scale 1.4: int(28.0) = 28, int(125.99999999999999) = 125; round(125/28 = 4.46) = 4
    assert int(90 * (28 / 20)) == 125 and int(20 * (28 / 20)) == 28
    assert sr(2, 20, 90) == (28, 112)
    # b.png: round(70/28 = 2.5) = 2 (half to even), 2*56*112 = 12544 fits
    assert round(70 / 28) == 2 and sr(2, 70, 112) == (56, 112)
    # g.png: 2*28*56 = 3136 < 4704, beta = sqrt(4704/3000) = 1.25220, ceil(30*beta/28) = ceil(1.34) = 2,
    # ceil(50*beta/28) = ceil(2.24) = 3
    assert sr(2, 30, 50) == (56, 84)
    # 28x28: 1568 < 4704, beta = sqrt(3): ceil(1.73) = 2
    assert sr(2, 28, 28) == (56, 56)
    # the published defaults (min 112*112, max 14*14*2*2*2*6144): round(1000/28 = 35.7) = 36
    assert sr(2, 1000, 1000, min_pixels=112 * 112, max_pixels=14 * 14 * 2 * 2 * 2 * 6144) == (1008, 1008)
    for bad in ((1, 84, 56), (2, 28, 28 * 201)):
        try:
            sr(*bad)
        except ValueError:
            continue
        raise AssertionError(f"smart_resize{bad} should refuse")
    assert glm_ocr.MIN_PIXELS == 4704 and glm_ocr.MAX_PIXELS == 37632
    assert glm_ocr.PREPROCESSOR["size"] == {"shortest_edge": 4704, "longest_edge": 37632}
    grids = {name: glm_ocr.image_grid(w, h) for name, _, w, h in glm_ocr.IMAGES}
    assert grids == {"a.png": [1, 6, 4], "e.png": [1, 8, 10], "f.png": [1, 2, 8], "b.png": [1, 4, 8],
                     "g.png": [1, 4, 6]}, grids
    # what each case is there for
    drawn = {name: (w, h) for name, _, w, h in glm_ocr.IMAGES}
    cases = {name: imgs for name, imgs, _ in glm_ocr.CASES}
    assert cases["text"] == [] and len(cases["image2"]) == 2
    w, h = drawn[cases["image1"][0]]
    assert glm_ocr.image_grid(w, h) == [1, h // 14, w // 14]
    w, h = drawn[cases["resize"][0]]
    assert 2 * round(h / 28) * 28 * round(w / 28) * 28 > glm_ocr.MAX_PIXELS
    w, h = drawn[cases["upscale"][0]]
    assert min(w, h) < 28
    b, g = (grids[n] for n in cases["image2"])
    assert b != g
    assert set(glm_ocr.CASE_NOTES) == set(cases)
    assert all(set(imgs) <= set(drawn) for imgs in cases.values())


def check_glm_mrope():
    mm = [0, 0, 0] + [1] * 8 + [0, 0] + [1] * 6 + [0]
    pos, delta = glm_ocr.mrope_positions(mm, [[1, 4, 8], [1, 4, 6]])
    # text 0..2; b.png's 2x4 cells from 3 (then 3 + 8/2 = 7); text 7, 8; g.png's 2x3 cells from 9
    # (then 9 + 6/2 = 12); text 12
    assert pos[0] == [0, 1, 2] + [3] * 8 + [7, 8] + [9] * 6 + [12], pos[0]
    assert pos[1] == [0, 1, 2] + [3, 3, 3, 3, 4, 4, 4, 4] + [7, 8] + [9, 9, 9, 10, 10, 10] + [12], pos[1]
    assert pos[2] == [0, 1, 2] + [3, 4, 5, 6, 3, 4, 5, 6] + [7, 8] + [9, 10, 11, 9, 10, 11] + [12], pos[2]
    assert delta == 12 + 1 - 20
    pos, delta = glm_ocr.mrope_positions([0] * 5, [])
    assert pos == [list(range(5))] * 3 and delta == 0
    # a tall picture: the width axis is the shorter one, the move is by the taller
    pos, delta = glm_ocr.mrope_positions([0] + [1] * 6 + [0], [[1, 6, 4]])
    assert pos[1][1:7] == [1, 1, 2, 2, 3, 3] and pos[2][1:7] == [1, 2, 1, 2, 1, 2] and pos[0][7] == 4
    assert delta == 4 + 1 - 8
    for mm, grids in (([0] + [1] * 5, [[1, 4, 8]]), ([0, 1, 1], [[1, 2, 2], [1, 2, 2]])):
        try:
            glm_ocr.mrope_positions(mm, grids)
        except ValueError:
            continue
        raise AssertionError(f"mrope_positions({mm}, {grids}) should refuse")


def check_glm_template():
    with open(os.path.join(HERE, "..", "..", "testdata", "templates", "glm_ocr.jinja")) as f:
        template = f.read()
    try:
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        print("dry_test: jinja2 not installed; the GLM-OCR template is not rendered")
        return
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    t = env.from_string(template)
    messages = glm_ocr.oraclelib.messages_for(["b.png", "g.png"], "Compare these two pictures.")
    got = t.render(messages=messages, add_generation_prompt=True)
    pic = "<|vision_start|><|image_pad|><|vision_end|>"
    assert got == "[gMASK]<sop><|user|>\n" + pic + pic + "Compare these two pictures.<|assistant|>\n", repr(got)
    got = t.render(messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                             {"role": "assistant", "content": "Hello."}], add_generation_prompt=False)
    assert got == "[gMASK]<sop><|system|>\nBe brief.<|user|>\nHi<|assistant|>\nHello.", repr(got)


def check_glm_config():
    t, v, rope = glm_ocr.TEXT_CONFIG, glm_ocr.VISION_CONFIG, glm_ocr.ROPE
    assert sum(rope["mrope_section"]) * 2 == t["head_dim"] and rope["partial_rotary_factor"] == 1.0
    assert t["num_attention_heads"] * t["head_dim"] != t["hidden_size"]
    hd = v["hidden_size"] // v["num_heads"]
    assert hd * v["num_heads"] == v["hidden_size"] and hd % 4 == 0 and hd & (hd - 1) != 0
    assert v["out_hidden_size"] == t["hidden_size"]
    assert glm_ocr.TOKEN_IDS["image_token_id"] == 151655
    assert (glm_ocr.TOKEN_IDS["image_start_token_id"], glm_ocr.TOKEN_IDS["image_end_token_id"]) == (151652, 151653)
    shapes = glm_ocr.expected_tensor_shapes()
    assert len(shapes) == 62, len(shapes)
    assert shapes["model.visual.patch_embed.proj.weight"] == [40, 3, 2, 14, 14]
    assert shapes["model.visual.downsample.weight"] == [24, 40, 2, 2]
    assert shapes["model.visual.merger.gate_proj.weight"] == [72, 24]
    assert shapes["model.language_model.layers.1.self_attn.q_proj.weight"] == [32, 24]
    assert shapes["model.language_model.layers.0.self_attn.o_proj.weight"] == [24, 32]
    assert shapes["model.language_model.layers.0.mlp.gate_up_proj.weight"] == [128, 24]
    assert shapes["lm_head.weight"] == [151936, 24]
    assert not any(k.startswith("model.language_model.layers.2.") for k in shapes)
    # BF16, both vocabulary tables included: the fixture's weights stay well under 20 MB
    assert sum(2 * math.prod(s) for s in shapes.values()) < 16e6
    pats = dict(glm_ocr.name_patterns(shapes))
    assert pats["model.visual.blocks.N.attn.q_norm.weight"] == [20]
    assert pats["model.language_model.layers.N.post_mlp_layernorm.weight"] == [24]
    assert len(pats) == 62 - 14 - 10
    # the config sweep drives GLM-OCR checkpoints with transformers' class, its own processor build
    import sweep

    assert sweep.TRANSFORMERS_CLASS["glm_ocr"] == "GlmOcrForConditionalGeneration"
    assert issubclass(sweep.GlmOcr, sweep.Qwen2VL)


def check_glm_readme():
    shapes = glm_ocr.expected_tensor_shapes()
    drawn = {name: (w, h) for name, _, w, h in glm_ocr.IMAGES}
    results = {}
    for name, imgs, _ in glm_ocr.CASES:
        g = [glm_ocr.image_grid(*drawn[n]) for n in imgs]
        results[name] = {
            "output_ids": [1, 2, 3], "finish_reason": "length", "image_grid_thw": g,
            "f32_cpu": {"output_ids_equal": True, "max_abs_top5_logit_diff": 1e-5, "max_abs_vision_row_diff": 3e-6},
            "f32_gpu": None,
        }
        if g:
            results[name]["image_sizes_resized"] = [[h * 14, w * 14] for _, h, w in g]
            results[name]["merged_grids"] = [[t, h // 2, w // 2] for t, h, w in g]
    manifest = {"checkpoint": {"tensors": len(shapes), "shards": ["a", "b"], "shapes": shapes},
                "processor": {"processor": "Qwen2VLProcessor", "built_by": "AutoProcessor"}}
    text = glm_ocr.readme(manifest, results)
    assert "| `image2` | `b.png` 112x70, `g.png` 50x30 | 112x56, 84x56 | 4x8, 4x6 | 2x4, 2x3 |" in text, text
    assert "| `resize` | `e.png` 170x150 | 140x112 | 8x10 | 4x5 |" in text
    assert "| `upscale` | `f.png` 90x20 | 112x28 | 2x8 | 1x4 |" in text
    assert "| `image1` | `a.png` 56x84 | 56x84 | 6x4 | 3x2 |" in text
    assert "| `text` | none | - | - | - |" in text
    assert "| `model.language_model.layers.N.mlp.gate_up_proj.weight` | [128, 24] |" in text
    assert "2 heads of 16 (q width 32, not the hidden size)" in text


def check_published_configs():
    import json

    import published

    root = os.path.dirname(os.path.dirname(HERE))
    want = {  # (text hidden, layers, heads, KV heads, vision width, vision depth, tied) as published
        "lighton_ocr": (1024, 28, 16, 8, 1024, 24, True),
        "glm_ocr": (1536, 16, 16, 8, 1024, 24, False),
        "qwen2_5_vl": (2048, 36, 16, 2, 1280, 32, True),
    }
    assert sorted(published.FAMILIES) == sorted(want)
    for fam, spec in published.FAMILIES.items():
        graph = os.path.join(root, spec["graph"])
        if os.path.exists(graph):  # the OCR prompt is the graph's first ocr_prompt
            m = re.search(r'^\s*ocr_prompt\s+(?:\w+:\s*)?"([^"]*)"', open(graph).read(), re.M)
            assert m and m.group(1) == spec["prompt"], (fam, m and m.group(1), spec["prompt"])
        path = os.path.join(root, spec["fixture"], "config.json")
        if not os.path.exists(path):
            print(f"dry_test: check_published_configs: {spec['fixture']} absent here; {fam}'s config not checked")
            continue
        fixture = json.load(open(path))
        cfg = published.published_config(fam, fixture)
        t, v = cfg["text_config"], cfg["vision_config"]
        vw = v["hidden_size"]
        vd = v.get("depth", v.get("num_hidden_layers"))
        got = (t["hidden_size"], t["num_hidden_layers"], t["num_attention_heads"], t["num_key_value_heads"], vw, vd,
               cfg["tie_word_embeddings"])
        assert got == want[fam], (fam, got)
        assert published.graph_requires(fam, cfg) == [], (fam, published.graph_requires(fam, cfg))
        # kept from the fixture: vocabulary, token ids, model type
        assert t["vocab_size"] == fixture["text_config"]["vocab_size"] == 151936
        for k in ("image_token_id", "video_token_id", "image_start_token_id", "vision_start_token_id", "model_type"):
            assert cfg.get(k) == fixture.get(k), (fam, k)
        if "layer_types" in t:
            assert t["layer_types"] == ["full_attention"] * t["num_hidden_layers"]
        assert fixture["text_config"]["hidden_size"] < 100  # the fixture itself is untouched
        d = published.dims(fam, cfg)
        assert d["text_config.hidden_size"] == want[fam][0] and d["tie_word_embeddings"] == want[fam][6]
        # the page through the published size bounds: 800 image tokens in every family
        pp = published.published_preprocessor(fam, json.load(open(os.path.join(root, spec["fixture"], "preprocessor_config.json"))))
        grid, tokens = published.expected_image_tokens(fam, pp, published.PAGE[1], published.PAGE[2])
        assert (grid, tokens) == ({"lighton_ocr": [65, 50]}.get(fam, [64, 50]), 800), (fam, grid, tokens)
        # a broken requirement is caught
        bad = published.merge(cfg, {"vision_config": {"hidden_size": 1000}})
        if fam == "lighton_ocr":
            bad["vision_config"]["head_dim"] = 64
        assert published.graph_requires(fam, bad), fam
    glm = published.published_config("glm_ocr", {"text_config": {}, "vision_config": {}})
    assert glm["text_config"]["rope_parameters"]["mrope_section"] == [16, 24, 24]
    assert glm["vision_config"]["out_hidden_size"] == glm["text_config"]["hidden_size"] == 1536
    assert "num_nextn_predict_layers" not in glm["text_config"]  # no MTP layer
    assert published.graph_requires("glm_ocr", published.merge(glm, {"text_config": {"rope_parameters": {"partial_rotary_factor": 0.5}}}))
    assert published.qwen_smart_resize(900, 700) == (896, 700)
    assert published.qwen_smart_resize(4000, 4000) == (3584, 3584)  # over max_pixels: scaled down
    assert published.merge({"a": {"b": 1, "c": [1]}}, {"a": {"c": [2]}}) == {"a": {"b": 1, "c": [2]}}


def check_published_report():
    import json
    import tempfile

    import published

    def step(top, margin, second=None):
        ids = [10, second or 11, 12, 13, 14]
        return {"ids": ids, "logits": [top, top - margin, top - 1, top - 2, top - 3], "margin": margin,
                "bf16_spacing": published.full_size.bf16_spacing(top)}

    n = published.NEW_TOKENS
    out_ids = [10] * n
    steps = [step(40.0, 3.0) for _ in range(n)]
    steps[5] = step(40.0, 0.25)  # spacing at 40 is 0.25: a tie
    steps[9] = step(40.0, 1.5)  # six spacings: not a tie
    ref = {"prompt_ids": [1, 2, 3], "reference": {"output_ids": out_ids, "steps": steps, "min_margin": 0.25,
                                                  "eos_handling": "generate with eos_token_id None"}}
    assert published.full_size.bf16_spacing(40.0) == 0.25 and published.full_size.bf16_spacing(-3.0) == 2 ** -6
    c, v = published.verdict(ref, {"prompt_ids": [1, 2, 3], "output_ids": list(out_ids)})
    assert v == "equal" and c["equal_prefix"] == n, (v, c)
    c, v = published.verdict(ref, {"prompt_ids": [1, 2, 3], "output_ids": out_ids[:5] + [11] + out_ids[6:]})
    assert v == "differs at a tie" and c["first_difference"] == 5 and c["equal_prefix"] == 5, (v, c)
    c, v = published.verdict(ref, {"prompt_ids": [1, 2, 3], "output_ids": out_ids[:9] + [11] + out_ids[10:]})
    assert v == "DIFFERS" and c["first_difference"] == 9, (v, c)
    c, v = published.verdict(ref, {"prompt_ids": [1, 2, 3], "output_ids": out_ids[:5] + [99] + out_ids[6:]})
    assert v == "DIFFERS", v  # outside transformers' top 5
    c, v = published.verdict(ref, {"prompt_ids": [1, 2, 4], "output_ids": list(out_ids)})
    assert v == "DIFFERS" and "prompt" in c["why"], (v, c)
    c, v = published.verdict(ref, {"prompt_ids": [1, 2, 3], "output_ids": out_ids[:40]})
    assert v == "DIFFERS" and c["first_difference"] == 40, (v, c)
    # the report end to end on files: summary, receipt section, a failed tfc run
    with tempfile.TemporaryDirectory() as d:
        full = dict(ref, family="glm_ocr", device="GPU", versions={"transformers": "5.17.0", "torch": "2.11.0"},
                    attn_implementation="sdpa", dims={"text_config.hidden_size": 1536}, fixture="testdata/glm-ocr-tiny",
                    preprocessor_overrides={"size": {}}, kept_from_fixture="tokenizer", seed=1,
                    candidate={"index": 0}, checkpoint={"params": 10, "bytes_on_disk": 20, "shards": ["a"],
                                                        "sha256": {"a": "0" * 64}, "sha256_of_shard_list": "1" * 64},
                    user_text="Text Recognition:", prompt_tokens=3, image_tokens=1, image_grid_thw=[[1, 2, 2]],
                    image={"width": 700, "height": 900}, steps_within_tie_rule=1)
        json.dump(full, open(os.path.join(d, "glm_ocr-hf.json"), "w"))
        json.dump({"prompt_ids": [1, 2, 3], "output_ids": out_ids[:5] + [11] + out_ids[6:], "finish_reason": "length"},
                  open(os.path.join(d, "glm_ocr-tfc.json"), "w"))
        open(os.path.join(d, "glm_ocr-tfc.rc"), "w").write("0\n")
        args = type("A", (), {"family": "glm_ocr", "work": d, "out": d})
        import contextlib
        import io

        with contextlib.redirect_stdout(io.StringIO()):
            s = published.report(args)
            args.family = "qwen2_5_vl"  # no reference, no tfc output
            s2 = published.report(args)
        assert s["verdict"] == "differs at a tie" and s2["verdict"] == "NO REFERENCE", (s["verdict"], s2["verdict"])
        text = open(os.path.join(d, "receipt.md")).read()
        assert text.startswith("# Published dimensions") and text.count("## ") == 2, text
        assert "- verdict: **differs at a tie**" in text and "first difference at step 5" in text, text
        assert json.load(open(os.path.join(d, "glm_ocr-summary.json")))["compare"]["equal_prefix"] == 5


def main():
    for check in (check_windows, check_config, check_readme, check_reexports, check_lighton, check_glm_resize,
                  check_glm_mrope, check_glm_template, check_glm_config, check_glm_readme, check_published_configs,
                  check_published_report):
        check()
        print("dry_test:", check.__name__, "ok")


if __name__ == "__main__":
    main()
