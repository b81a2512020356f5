#!/usr/bin/env python3
"""Builds the tiny random Qwen2.5-VL checkpoint and transformers' reference outputs on it.

Writes, under --out (default testdata/qwen2.5-vl-tiny), what qwen2_vl.py writes for Qwen2-VL, in
the same layout and formats (oraclelib.py is the shared code):
  config.json, generation_config.json, model-*.safetensors + model.safetensors.index.json (BF16,
  tensor names as published: model.*, visual.*, lm_head.weight), preprocessor_config.json,
  chat_template.json, tokenizer_config.json, tokenizer.json (copied, not committed), README.md,
  oracle/images/*.png, oracle/<case>.json, oracle/<case>.safetensors, oracle/manifest.json.

The reference is transformers' Qwen2_5_VLForConditionalGeneration (model_type qwen2_5_vl) on the
BF16-rounded weights, run in float64 on the CPU; the same greedy run is repeated in float32 on the
CPU and, when a GPU is present, in float32 on the GPU with TF32 off.

Config (what Qwen2.5-VL adds over Qwen2-VL is in the vision tower):
  text: hidden 32, 2 layers, 2 heads of 16, 1 KV head, FFN 128, rope_theta 1e6, mrope_section
    [2,3,3], RMS eps 1e-6, untied lm_head (as the 7B and its OCR fine-tunes; hidden 32 keeps the
    two 151936-row tables at 19 MB together).
  vision: depth 4, hidden 40, 2 heads of 20 (not a power of two, as the published 80), RMSNorm,
    SwiGLU MLP with biases (intermediate_size 76, hidden_act silu), patch 14, temporal 2, merge 2,
    window_size 112 (4x4 merge units of 28 px, as published), fullatt_block_indexes [1, 3] (blocks
    0 and 2 attend within windows, 1 and 3 over the whole picture), out_hidden_size 32 (the
    merger: RMSNorm, Linear 160->160, GELU, Linear 160->32), tokens_per_second 2.

Cases (pictures drawn as qwen2_vl.py draws them, some at other sizes):
  text     text only.
  image1   a.png 56x84, no resize: grid 6x4 patches, 3x2 merge units, one window smaller than the
           window size.
  windows  d.png 224x112, no resize: 4x8 units, two whole windows (the grid is a multiple of the
           window; transformers' padding adds empty windows, which are dropped).
  image2   e.png 170x150 (resized to 168x140: 5x6 units, four windows, ragged on the right and the
           bottom) then b.png 112x70 (resized to 112x56: 2x4 units, one window of 2x4): two pictures,
           so window and full spans both restart at the second picture.

Besides what qwen2_vl.py records, each picture case records the window layout (the window order of
the merge units, the windows' and the pictures' spans, which blocks use which), checks it against
what transformers' tower does (its first block's input is the patch embeddings permuted into that
order, and each block's spans), and stores the blocks' output back in raster order together with
the patch embeddings.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import oraclelib  # noqa: E402
from oraclelib import EOS_TOKEN_IDS, FIRST_ADDED_TOKEN_ID, PREPROCESSOR_CONFIG, VOCAB_SIZE, log  # noqa: E402

TEXT_CONFIG = dict(
    vocab_size=VOCAB_SIZE,
    hidden_size=32,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    hidden_act="silu",
    max_position_embeddings=32768,
    rms_norm_eps=1e-6,
    use_sliding_window=False,
    tie_word_embeddings=False,
    bos_token_id=oraclelib.BOS_TOKEN_ID,
    eos_token_id=EOS_TOKEN_IDS[0],
)
ROPE = {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [2, 3, 3]}
VISION_CONFIG = dict(
    depth=4,
    hidden_size=40,
    hidden_act="silu",
    intermediate_size=76,
    num_heads=2,
    in_channels=3,
    patch_size=14,
    spatial_merge_size=2,
    temporal_patch_size=2,
    tokens_per_second=2,
    window_size=112,
    out_hidden_size=32,
    fullatt_block_indexes=[1, 3],
)
# As Qwen2.5-VL-7B-Instruct publishes it: Qwen2-VL's image processor under Qwen2.5-VL's processor.
PREPROCESSOR = dict(PREPROCESSOR_CONFIG, processor_class="Qwen2_5_VLProcessor")

# (file name, make_image pattern, width, height)
IMAGES = [
    ("a.png", "a.png", 56, 84),
    ("b.png", "b.png", 112, 70),
    ("d.png", "b.png", 224, 112),
    ("e.png", "c.png", 170, 150),
]

CASES = [
    ("text", [], "Write a short poem about the sea."),
    ("image1", ["a.png"], "What is in this picture?"),
    ("windows", ["d.png"], "Read the text in this picture."),
    ("image2", ["e.png", "b.png"], "Compare these two pictures."),
]

# What each case exercises, for the README.
CASE_NOTES = {
    "text": "text only",
    "image1": "one picture, no resize; a single window smaller than the window size",
    "windows": "one picture, no resize; merged grid a multiple of the window (two whole windows)",
    "image2": "two pictures, both resized; ragged windows on the right and bottom edges, spans restart per picture",
}


def make_config():
    return oraclelib.make_config("Qwen2_5_VLConfig", TEXT_CONFIG, ROPE, VISION_CONFIG, tie=False)


def untied_rows(emb, head, loud_row, loud):
    """draw_weights' embedding_rows for an untied embedding and head: both drawn like the tied
    table of qwen2_vl.py, added and padding rows small; loud_row is loud in the head only."""

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
    from transformers import Qwen2_5_VLForConditionalGeneration

    torch.manual_seed(seed)
    model = Qwen2_5_VLForConditionalGeneration(config)
    model.to(torch.float32)
    emb, head = model.get_input_embeddings().weight, model.lm_head.weight
    if head.data_ptr() == emb.data_ptr():
        raise SystemExit("oracle: lm_head is tied to embed_tokens; tie_word_embeddings false did not take")
    rows = untied_rows(emb, head, EOS_TOKEN_IDS[0], candidate["eos_scale"])
    oraclelib.draw_weights(model, seed + candidate["seed_offset"], candidate, rows)
    model.generation_config = oraclelib.generation_config()
    model.eval()
    return model


# ---------------------------------------------------------------- windows


def window_layout(grids, merge, window_size, patch_size):
    """The window order of transformers' Qwen2.5-VL tower, recomputed. Each picture's (t, h, w)
    patch grid is a (h/merge, w/merge) grid of merge units per frame, cut from the top left into
    windows of window_size/merge/patch_size units a side (the last row and column of windows
    ragged); windows go in raster order, units in raster order inside each. Returns window_index
    (for each position in window order, the unit's raster index over all pictures) and
    cu_window_seqlens (the windows' ends, in patch rows, from 0; no empty windows)."""
    unit = merge * merge
    side = window_size // merge // patch_size
    index, cu, offset = [], [0], 0
    for t, h, w in grids:
        gh, gw = h // merge, w // merge
        for f in range(t):
            base = offset + f * gh * gw
            for r0 in range(0, gh, side):
                for c0 in range(0, gw, side):
                    n = 0
                    for r in range(r0, min(r0 + side, gh)):
                        for c in range(c0, min(c0 + side, gw)):
                            index.append(base + r * gw + c)
                            n += 1
                    cu.append(cu[-1] + n * unit)
        offset += t * gh * gw
    return index, cu


def picture_spans(grids):
    """The full-attention spans: one per frame of each picture, in patch rows, from 0."""
    cu = [0]
    for t, h, w in grids:
        for _ in range(t):
            cu.append(cu[-1] + h * w)
    return cu


def dedup(xs):
    out = []
    for x in xs:
        if not out or out[-1] != x:
            out.append(x)
    return out


def run_tower(visual, px, grid):
    """The tower on px with hooks: its output, the patch embeddings, the first block's input, and
    the spans (cu_seqlens) each block was given."""
    import torch

    seen = {"cu": {}}

    def on_patch(_m, _args, output):
        seen["patch"] = output.detach().clone()

    def pre_block(i):
        def hook(_m, args, kwargs):
            cu = kwargs.get("cu_seqlens", args[1] if len(args) > 1 else None)
            seen["cu"][i] = None if cu is None else [int(x) for x in cu.tolist()]
            if i == 0:
                h = kwargs.get("hidden_states", args[0] if args else None)
                seen["block0_in"] = h.detach().clone()

        return hook

    handles = [visual.patch_embed.register_forward_hook(on_patch)]
    handles += [b.register_forward_pre_hook(pre_block(i), with_kwargs=True) for i, b in enumerate(visual.blocks)]
    try:
        with torch.inference_mode():
            out = visual(px, grid_thw=grid)
    finally:
        for h in handles:
            h.remove()
    merged = out if torch.is_tensor(out) else getattr(out, "pooler_output", None)
    return merged, seen


def window_extra(model, case, record, tensors, rows, pre):
    """Records the window layout of a picture case and checks it against transformers' tower;
    stores the blocks' output in raster order and the patch embeddings."""
    import torch

    inputs = case["inputs"]
    if rows is None:
        return
    vc = model.config.vision_config
    merge, depth = vc.spatial_merge_size, vc.depth
    unit = merge * merge
    full = [int(i) for i in vc.fullatt_block_indexes]
    grids = [tuple(int(x) for x in g) for g in inputs["image_grid_thw"].tolist()]
    index, cu_window = window_layout(grids, merge, vc.window_size, vc.patch_size)
    cu_full = picture_spans(grids)
    want_spans = [cu_full if i in full else cu_window for i in range(depth)]

    visual = oraclelib.visual_module(model)
    px = inputs["pixel_values"].to(torch.float64)
    grid = inputs["image_grid_thw"]
    merged, seen = run_tower(visual, px, grid)
    n = px.shape[0]
    units = n // unit
    if sorted(index) != list(range(units)):
        raise SystemExit(f"oracle {case['name']}: window_index is not a permutation of {units} units")
    idx = torch.tensor(index, dtype=torch.int64)
    patch = seen["patch"]
    width = patch.shape[-1]
    permuted = patch.reshape(units, unit, width)[idx].reshape(n, width)
    block0_ok = bool(torch.equal(seen["block0_in"], permuted))
    got_spans = [seen["cu"].get(i) for i in range(depth)]
    spans_ok = all(g is not None and dedup(g) == w for g, w in zip(got_spans, want_spans))
    if not block0_ok or not spans_ok:
        raise SystemExit(f"oracle {case['name']}: transformers' tower does not use the window layout recomputed here "
                         f"(first block input in window order: {block0_ok}; spans {got_spans} want {want_spans})")
    if not torch.equal(merged, rows):
        raise SystemExit(f"oracle {case['name']}: a second tower run gave other merged rows")

    # The blocks' output back in raster order; merging it must give the tower's rows.
    inverse = torch.argsort(idx)
    raster = pre.reshape(units, unit, width)[inverse].reshape(n, width) if pre is not None else None
    remerge = None
    if raster is not None:
        with torch.inference_mode():
            remerge = float((visual.merger(raster) - rows).abs().max())
        tensors["vision_blocks_out"] = raster.float().contiguous()

    # A control: the same tower with every block attending over the whole picture (None if the
    # tower does not take its full-attention blocks from this attribute).
    effect = None
    saved = getattr(visual, "fullatt_block_indexes", None)
    if saved is not None:
        visual.fullatt_block_indexes = list(range(depth))
        try:
            all_full, control_seen = run_tower(visual, px, grid)
        finally:
            visual.fullatt_block_indexes = saved
        if all(dedup(control_seen["cu"].get(i) or []) == cu_full for i in range(depth)):
            effect = float((all_full - rows).abs().max())

    sizes = [(cu_window[k + 1] - cu_window[k]) // unit for k in range(len(cu_window) - 1)]
    record["vision_window"] = {
        "window_size": vc.window_size,
        "window_units": vc.window_size // merge // vc.patch_size,
        "fullatt_block_indexes": full,
        "block_attention": ["full" if i in full else "window" for i in range(depth)],
        "merged_grids": [[t, h // merge, w // merge] for t, h, w in grids],
        "window_index": index,
        "cu_window_seqlens": cu_window,
        "cu_seqlens": cu_full,
        "window_unit_counts": sizes,
        "transformers_spans_raw": got_spans,
        "first_block_input_is_window_order": block0_ok,
        "block_spans_equal": spans_ok,
        "blocks_out_raster_merged_max_abs_diff": remerge,
        "all_full_attention_rows_max_abs_diff": effect,
    }
    tensors["vision_patch_embeds"] = patch.float().contiguous()
    tensors["vision_window_index"] = idx.contiguous()
    tensors["vision_cu_window_seqlens"] = torch.tensor(cu_window, dtype=torch.int64)
    log(f"{case['name']}: units {[[t, h // merge, w // merge] for t, h, w in grids]}, windows {sizes}, "
        f"raster re-merge diff {remerge}, all-full-attention diff {effect}")


def manifest_extra(model):
    vc = model.config.vision_config
    return {"vision": {"window_size": vc.window_size, "fullatt_block_indexes": list(vc.fullatt_block_indexes),
                       "vision_attn_implementation": getattr(vc, "_attn_implementation", None)}}


# ---------------------------------------------------------------- README


def readme(manifest, results):
    t, v = TEXT_CONFIG, VISION_CONFIG
    lines = [
        "# qwen2.5-vl-tiny",
        "",
        "A tiny random Qwen2.5-VL checkpoint written by transformers 5.17 (`tools/oracle/qwen2_5_vl.py`),",
        "in the layout of a published Hugging Face checkpoint, with transformers' outputs on it. The",
        "layout and formats are those of `testdata/qwen2-vl-tiny/` (see its README); this file says what",
        "differs. Written by the oracle; regenerate with it (see `tools/oracle/README.md`), never edit by hand.",
        "",
        "## Config",
        "",
        f"- text: hidden {t['hidden_size']}, {t['num_hidden_layers']} layers, {t['num_attention_heads']} heads of "
        f"{t['hidden_size'] // t['num_attention_heads']}, {t['num_key_value_heads']} KV head, FFN {t['intermediate_size']}, "
        f"rope_theta {ROPE['rope_theta']:g}, mrope_section {ROPE['mrope_section']}, RMS eps {t['rms_norm_eps']:g}; "
        "`tie_word_embeddings` false, so `lm_head.weight` is saved beside `model.embed_tokens.weight`.",
        f"- vision: depth {v['depth']}, hidden {v['hidden_size']}, {v['num_heads']} heads of "
        f"{v['hidden_size'] // v['num_heads']}, RMSNorm (eps 1e-6), SwiGLU MLP with biases (`intermediate_size` "
        f"{v['intermediate_size']}, `hidden_act` {v['hidden_act']}), patch {v['patch_size']}, temporal "
        f"{v['temporal_patch_size']}, merge {v['spatial_merge_size']}, `window_size` {v['window_size']} "
        f"({v['window_size'] // v['spatial_merge_size'] // v['patch_size']}x"
        f"{v['window_size'] // v['spatial_merge_size'] // v['patch_size']} merge units), "
        f"`fullatt_block_indexes` {v['fullatt_block_indexes']} (the other blocks attend within windows), "
        f"`out_hidden_size` {v['out_hidden_size']} (merger: RMSNorm, Linear, GELU, Linear to the text width).",
        "- `preprocessor_config.json`: as `qwen2-vl-tiny`'s (Qwen2-VL's image processor, `max_pixels` 200704) with "
        "`processor_class` `Qwen2_5_VLProcessor`; the chat template is `testdata/templates/qwen2_vl.jinja`, "
        "which Qwen2.5-VL publishes unchanged.",
        f"- {manifest['checkpoint']['tensors']} BF16 tensors in {len(manifest['checkpoint']['shards'])} shards, names as "
        "published (`model.embed_tokens.weight`, `model.layers.N.*`, `model.norm.weight`, `lm_head.weight`, "
        "`visual.blocks.N.{norm1,norm2,attn.qkv,attn.proj,mlp.gate_proj,mlp.up_proj,mlp.down_proj}.*`, "
        "`visual.patch_embed.proj.weight`, `visual.merger.{ln_q,mlp.0,mlp.2}.*`).",
        "",
        "## Cases",
        "",
        "| case | pictures (file, size as drawn) | merged grids | windows (units each) | output | exercises |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    sizes = {name: (w, h) for name, _, w, h in IMAGES}
    for name, images, _ in CASES:
        r = results[name]
        win = r.get("vision_window")
        pics = ", ".join(f"`{n}` {sizes[n][0]}x{sizes[n][1]}" for n in images) or "none"
        grids = ", ".join(f"{g[1]}x{g[2]}" for g in win["merged_grids"]) if win else "-"
        wins = str(win["window_unit_counts"]) if win else "-"
        out = f"{len(r['output_ids'])} ids, {r['finish_reason']}"
        lines.append(f"| `{name}` | {pics} | {grids} | {wins} | {out} | {CASE_NOTES[name]} |")
    lines += [
        "",
        "## Beyond `qwen2-vl-tiny`'s format",
        "",
        "`<case>.json` of a picture case has `vision_window`:",
        "",
        "| key | what |",
        "| --- | --- |",
        "| `window_units`, `fullatt_block_indexes`, `block_attention` | window side in merge units; per block `window` or `full` |",
        "| `merged_grids` | per picture [t, h/2, w/2] |",
        "| `window_index` | for each position in window order, the raster index (over all pictures) of its merge unit; "
        "the tower permutes its rows into this order after the patch embedding and back after the merger |",
        "| `cu_window_seqlens`, `cu_seqlens` | the window spans and the picture spans, in patch rows from 0 (empty windows dropped) |",
        "| `first_block_input_is_window_order`, `block_spans_equal` | the layout above is the one transformers' tower used |",
        "| `blocks_out_raster_merged_max_abs_diff` | the merger on `vision_blocks_out` (raster order) against `vision_rows` |",
        "| `all_full_attention_rows_max_abs_diff` | how far the rows move if every block attended over the whole picture "
        "(0 where one window covers each picture) |",
        "",
        "`<case>.safetensors` of a picture case (N patches):",
        "",
        "| tensor | dtype, shape | what |",
        "| --- | --- | --- |",
        f"| `vision_patch_embeds` | F32 [N, {v['hidden_size']}] | the patch embedding, raster order |",
        f"| `vision_blocks_out` | F32 [N, {v['hidden_size']}] | the last block's output, put back in raster order "
        "(transformers keeps it in window order) |",
        "| `vision_window_index` | I64 [N/4] | `window_index` |",
        "| `vision_cu_window_seqlens` | I64 [windows+1] | `cu_window_seqlens` |",
        f"| `vision_rows`, `vision_rows_f64` | F32 / F64 [N/4, {v['out_hidden_size']}] | the merged rows, raster order |",
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
        "All outputs come from transformers' float64 model on the CPU with the BF16 weights. Float32 runs "
        f"({runs}) give {'the same ids' if equal else 'OTHER ids in some case (see each f32_* record)'}, top-5 logits "
        f"within {worst_logit:.1g}" + (f" and vision rows within {max(rows):.1g}." if rows else "."),
        "",
    ]
    return "\n".join(lines)


def finish(out, manifest, results):
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write(readme(manifest, results))


FAMILY = oraclelib.Family(
    generator="tools/oracle/qwen2_5_vl.py",
    out="testdata/qwen2.5-vl-tiny",
    seed=20261202,
    images=IMAGES,
    cases=CASES,
    make_config=make_config,
    build_model=build_model,
    preprocessor_config=PREPROCESSOR,
    doc=__doc__,
    shard_size="10MB",
    case_extra=window_extra,
    manifest_extra=manifest_extra,
    finish=finish,
)


def main():
    oraclelib.main(FAMILY)


if __name__ == "__main__":
    main()
