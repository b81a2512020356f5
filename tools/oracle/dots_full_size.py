#!/usr/bin/env python3
"""dots.ocr at its published size on the GPU: the model gate of a one-image page prompt.

`reference` builds a random BF16 checkpoint of the publisher's config.json (1.7 B decoder, 1.2 B
vision tower) with the publisher's own code (--publisher, as tools/oracle/dots_ocr.py takes it),
saves it with the published tensor names, and records the publisher's greedy ids for the model
card's layout prompt on one synthetic page: in BF16 (the publisher's default path, the vision tower
casting the pixels to bfloat16) and in float32 on the same BF16 weights (TF32 off), 64 tokens with
no EOS stop, each step's top-5 logits and top-2 margin. `report` compares `tfc generate --json`'s
output with both. Nothing here is committed but the JSON it writes.

usage (GPU machine, repository root, after `make testdata`):
  python3 tools/oracle/dots_full_size.py reference --work /tmp/dots-full --out OUT
  bin/tfc generate --model /tmp/dots-full/checkpoint --image /tmp/dots-full/page.png \
      --prompt "$(python3 -c 'import json;print(json.load(open("OUT/dots-reference.json"))["user_text"])')" \
      --max-tokens 64 --ignore-eos --json --backend cuda > /tmp/dots-full/tfc.json
  python3 tools/oracle/dots_full_size.py report --work /tmp/dots-full --out OUT
"""

import argparse
import copy
import hashlib
import json
import os
import sys
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dots_ocr as tiny  # noqa: E402  (the publisher's code, tokenizer, prompt and weight draw)
import full_size as fs  # noqa: E402  (the page picture and the comparison)

NEW_TOKENS = 64
PAGE = (700, 980)  # the processor keeps it (multiples of 28): 50×70 patches, 875 image rows


def log(*a):
    print(f"[dots-full {time.strftime('%H:%M:%S')}]", *a, flush=True)


def run(model, case, dtype):
    """The publisher's greedy ids (whole sequence each step, no cache), with each step's top-5."""
    import torch

    ids, steps = [], []
    with torch.inference_mode():
        for _ in range(NEW_TOKENS):
            out = model(**tiny.case_inputs(case, dtype, "cuda", ids), use_cache=False, return_dict=True, logits_to_keep=1)
            row = out.logits[0, -1].double()
            v, i = torch.topk(row, 5)
            ids.append(int(i[0]))
            steps.append({"ids": [int(x) for x in i.tolist()], "logits": [float(x) for x in v.tolist()],
                          "margin": float(v[0] - v[1])})
    return {"output_ids": ids, "steps": steps, "margins": [s["margin"] for s in steps],
            "min_margin": min(s["margin"] for s in steps)}


def restore_inv_freq(model, saved):
    """Puts the float32 rotary frequencies back into the named buffers of model."""
    for name, buf in saved.items():
        owner, _, attr = name.rpartition(".")
        mod = model.get_submodule(owner)
        mod._buffers[attr] = buf.to(device=next(model.parameters()).device, dtype=buf.dtype)
    if not saved:
        sys.exit("dots-full: found no inv_freq buffers to keep in float32")


def build(args, candidate=None):
    """The random BF16 checkpoint of the publisher's config.json under WORK/checkpoint, and the
    publisher's model on the GPU in BF16 (float32 rotary frequencies), with what rendering needs;
    candidate is the weight draw's settings (default the oracle's first)."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    t0 = time.time()
    pub = args.publisher
    files = tiny.read_publisher(pub)
    mods, note = tiny.import_publisher(pub)
    cfg = tiny.load_json(os.path.join(pub, "config.json"))
    # the published sizes: dots_ocr.py's checks then compare the config with itself
    tiny.TEXT_SIZES = {k: cfg[k] for k in tiny.TEXT_SIZES}
    tiny.VISION_SIZES = {k: cfg["vision_config"][k] for k in tiny.VISION_SIZES}
    ckpt = os.path.join(args.work, "checkpoint")
    os.makedirs(ckpt, exist_ok=True)
    tiny.write_side_files(pub, ckpt, cfg)
    decoder = tiny.load_json(os.path.join(ckpt, "tokenizer_config.json"))["added_tokens_decoder"]
    tok_text, _ = tiny.derive_tokenizer_json(args.tokenizer, decoder)
    with open(os.path.join(ckpt, "tokenizer.json"), "w", encoding="utf-8") as fh:
        fh.write(tok_text)
    ref_tok = tiny.published_tokenizer(tok_text, decoder)
    from transformers import PreTrainedTokenizerFast

    config = tiny.make_config(mods, cfg)
    gen = tiny.load_json(os.path.join(ckpt, "generation_config.json"))
    ctx = dict(mods=mods, config=config, eos_ids=gen["eos_token_id"], ip=tiny.image_processor(ckpt), ref_tok=ref_tok,
               hf_tok=None, renderer=PreTrainedTokenizerFast(tokenizer_object=ref_tok),
               template=tiny.load_json(os.path.join(ckpt, "chat_template.json"))["chat_template"],
               image_dir=args.work, merge=cfg["vision_config"]["spatial_merge_size"],
               image_token_id=cfg["image_token_id"], layout_prompt=tiny.layout_prompt(pub))
    model = tiny.build_model(ctx, args.seed, candidate or tiny.CANDIDATES[0], torch.float32)
    # Loading a checkpoint in BF16 keeps the rotary frequencies the modules compute in float32;
    # casting the built model would round them to BF16, so they are put back after the cast.
    inv_freq = {n: b.clone() for n, b in model.named_buffers() if n.endswith("inv_freq")}
    log("float32 rotary buffers kept:", sorted(inv_freq))
    model = model.to(torch.bfloat16).to("cuda")
    restore_inv_freq(model, inv_freq)
    del model.vision_tower.forward  # the publisher's own forward: bf16=True casts the pixels
    log("model built,", sum(p.numel() for p in model.parameters()), "parameters;", round(time.time() - t0), "s")
    saved = tiny.save_checkpoint(model, ckpt, 2 * 1024**3)
    h = hashlib.sha256()
    for name in saved["shards"]:
        with open(os.path.join(ckpt, name), "rb") as fh:
            for block in iter(lambda: fh.read(1 << 24), b""):
                h.update(block)
    log("saved", saved["shards"], round(time.time() - t0), "s")
    return dict(ctx=ctx, model=model, inv_freq=inv_freq, files=files, note=note, cfg=cfg,
                saved=dict(saved, sha256_of_shards=h.hexdigest()))


def reference(args):
    import torch
    from PIL import Image

    t0 = time.time()
    b = build(args)
    ctx, model, inv_freq, cfg, saved = b["ctx"], b["model"], b["inv_freq"], b["cfg"], b["saved"]
    page = os.path.join(args.work, "page.png")
    Image.fromarray(fs.make_page(*PAGE, args.seed)).save(page)
    case = tiny.prepare_case(ctx, "page", ["page.png"], None)
    log("prompt", case["inputs"]["input_ids"].shape[1], "ids,", case["counts"], "image rows")

    bf16 = run(model, case, torch.bfloat16)
    log("bf16 ids", bf16["output_ids"], "min margin", bf16["min_margin"], round(time.time() - t0), "s")
    model32 = copy.deepcopy(model).float()
    restore_inv_freq(model32, inv_freq)
    model32.vision_tower.forward = types.MethodType(tiny.vision_forward_without_bf16, model32.vision_tower)
    del model
    f32 = run(model32, case, torch.float32)
    log("f32 ids", f32["output_ids"], "min margin", f32["min_margin"], round(time.time() - t0), "s")
    rec = {"generator": "tools/oracle/dots_full_size.py", "seed": args.seed,
           "versions": {"torch": torch.__version__, "transformers": __import__("transformers").__version__},
           "device": torch.cuda.get_device_name(0), "publisher": {"files": b["files"], "import_note": b["note"]},
           "checkpoint": dict(saved, parameters_text=cfg["num_hidden_layers"], page=list(PAGE)),
           "user_text": ctx["layout_prompt"], "images": ["page.png"], "prompt_text": case["prompt"],
           "prompt_ids": case["inputs"]["input_ids"][0].tolist(),
           "image_grid_thw": case["inputs"]["image_grid_thw"].tolist(),
           "reference": {"text_attn_implementation": tiny.TEXT_ATTENTION, "vision_attn_implementation": tiny.VISION_ATTENTION,
                         "greedy": "publisher forward over the whole sequence each step, no cache, no EOS stop",
                         "bf16": "model in bfloat16 with float32 rotary frequencies (as loading a BF16 checkpoint gives), vision forward bf16=True (the publisher's default)",
                         "f32": "the same BF16 weights in float32, vision forward bf16=False, TF32 off"},
           "bf16": bf16, "f32": f32, "seconds": round(time.time() - t0, 1)}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "dots-reference.json"), "w") as fh:
        json.dump(rec, fh, indent=1)
    log("wrote", os.path.join(args.out, "dots-reference.json"))


def report(args):
    ref, err = fs.load_json(os.path.join(args.out, "dots-reference.json"))
    got, err2 = fs.load_json(os.path.join(args.work, "tfc.json"))
    lines = ["# dots.ocr at full size on the H200: tfc's greedy ids against the publisher's code", ""]
    summary = {"problems": [e for e in (err, err2) if e]}
    if ref and got:
        lines += [f"- checkpoint: random BF16 of the publisher's config.json, {ref['checkpoint']['total_size']:,} bytes, "
                  f"sha256 of the shards `{ref['checkpoint']['sha256_of_shards']}`; device {ref['device']}; "
                  f"torch {ref['versions']['torch']}, transformers {ref['versions']['transformers']}",
                  f"- prompt: the model card's layout prompt and one {ref['checkpoint']['page'][0]}×{ref['checkpoint']['page'][1]} "
                  f"page, {len(ref['prompt_ids'])} ids (grid {ref['image_grid_thw']}); {NEW_TOKENS} greedy tokens, EOS ignored",
                  f"- prompt ids equal: {got['prompt_ids'] == ref['prompt_ids']}", ""]
        lines += ["| reference | ids equal | first difference | reference margin there | tfc's token's rank | smallest margin |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for name in ("bf16", "f32"):
            c = fs.compare(ref[name], ref["prompt_ids"], got)
            summary[name] = c
            at = c.get("at_difference") or {}
            lines.append(f"| {name} | {c['equal']} | {c['first_difference']} | {at.get('reference_margin', '—')} | "
                         f"{at.get('tfc_token_rank_in_reference', '—')} | {ref[name]['min_margin']:.4g} |")
        lines += ["", f"- tfc: {got['output_ids']}", f"- publisher bf16: {ref['bf16']['output_ids']}",
                  f"- publisher f32: {ref['f32']['output_ids']}"]
    else:
        lines.append("missing: " + "; ".join(summary["problems"]))
    with open(os.path.join(args.out, "dots-receipt.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    with open(os.path.join(args.out, "dots-summary.json"), "w") as fh:
        json.dump(summary, fh, indent=1)
    print("\n".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("reference")
    r.add_argument("--publisher", default="tools/oracle/publisher/dots_ocr")
    r.add_argument("--tokenizer", default="testdata/tokenizer/qwen/tokenizer.json")
    r.add_argument("--work", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--seed", type=int, default=20261202)
    p = sub.add_parser("report")
    p.add_argument("--work", required=True)
    p.add_argument("--out", required=True)
    args = ap.parse_args()
    (reference if args.command == "reference" else report)(args)


if __name__ == "__main__":
    main()
