#!/usr/bin/env python3
"""Pages per second on a dots.ocr-shaped checkpoint: the checkpoint, the pages, and transformers.

Builds the random BF16 checkpoint of the publisher's config.json under WORK/checkpoint (as
dots_full_size.py does, without its greedy references), writes PAGES synthetic pages of WxH under
WORK/pages and the model card's layout prompt as WORK/prompt.txt, then times the publisher's model
under transformers' `generate` on those pages: batches of B pages (text attention sdpa, vision
attention sdpa, BF16 as the publisher runs it), NEW greedy tokens a page with EOS ignored
(min_new_tokens = max_new_tokens). Writes OUT/hf-pages.json. tools/gpu/pages.sh then serves the
same checkpoint with tfc and sends it the same pages and prompt.

usage (GPU machine, repository root, after `make testdata`; needs tools/oracle/publisher/dots_ocr):
  python3 tools/oracle/pages.py --work /tmp/tfc-pages --out OUT [--pages 8] [--size 1000x1400]
      [--batches 1,8] [--new-tokens 1000]
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dots_ocr as tiny  # noqa: E402  (the publisher's code, tokenizer, prompt and rendering)
import dots_full_size as dfs  # noqa: E402  (the full-size checkpoint)
import full_size as fs  # noqa: E402  (the page picture)


def log(*a):
    print(f"[pages {time.strftime('%H:%M:%S')}]", *a, flush=True)


def drop_pixels_after_prefill(cls):
    """The publisher's prepare_inputs_for_generation passes the pixels again on decode steps under
    transformers 5 (it reads a cache_position generate no longer gives); they belong to the prefill."""
    orig = cls.prepare_inputs_for_generation

    def prepare(self, input_ids, past_key_values=None, **kwargs):  # "kwargs": generate then checks forward's names
        inputs = orig(self, input_ids, past_key_values=past_key_values, **kwargs)
        if past_key_values is not None and past_key_values.get_seq_length() > 0:
            inputs["pixel_values"] = None
        return inputs

    cls.prepare_inputs_for_generation = prepare


def batch_inputs(cases):
    """One batch of same-sized pages: their prompts have the same length, so no padding."""
    import torch

    ids = torch.cat([c["inputs"]["input_ids"] for c in cases]).to("cuda")
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids),
            "pixel_values": torch.cat([c["inputs"]["pixel_values"] for c in cases]).to(torch.bfloat16).to("cuda"),
            "image_grid_thw": torch.cat([c["inputs"]["image_grid_thw"] for c in cases]).to("cuda")}


def generate(model, inputs, new_tokens):
    import torch

    torch.cuda.synchronize()
    t = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(**inputs, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                             use_cache=True)
    torch.cuda.synchronize()
    return time.perf_counter() - t, out[:, inputs["input_ids"].shape[1]:]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--publisher", default="tools/oracle/publisher/dots_ocr")
    ap.add_argument("--tokenizer", default="testdata/tokenizer/qwen/tokenizer.json")
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=20261205)
    ap.add_argument("--pages", type=int, default=8)
    ap.add_argument("--size", default="1000x1400")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--new-tokens", type=int, default=1000)
    args = ap.parse_args()
    import torch
    from PIL import Image

    t0 = time.time()
    w, h = (int(x) for x in args.size.split("x"))
    batches = [int(x) for x in args.batches.split(",") if x]
    tiny.VISION_ATTENTION = "sdpa"  # the speed peer: SDPA in the tower as in the decoder
    # the end-of-text row as quiet as the other added tokens: with EOS ignored, a loud one would
    # make most outputs a run of EOS, which streams no text and which copy drafts would predict
    b = dfs.build(args, dict(tiny.CANDIDATES[0], eos_scale=0.1))
    ctx, model = b["ctx"], b["model"]
    drop_pixels_after_prefill(type(model))
    pages = os.path.join(args.work, "pages")
    os.makedirs(pages, exist_ok=True)
    names = []
    for i in range(args.pages):
        name = f"page-{i:02d}.png"
        Image.fromarray(fs.make_page(w, h, args.seed + i)).save(os.path.join(pages, name))
        names.append(name)
    with open(os.path.join(args.work, "prompt.txt"), "w") as fh:
        fh.write(ctx["layout_prompt"])
    ctx["image_dir"] = pages
    cases = [tiny.prepare_case(ctx, n, [n], None) for n in names]
    prompt_len = cases[0]["inputs"]["input_ids"].shape[1]
    log("pages", len(cases), "prompt", prompt_len, "ids,", cases[0]["counts"], "image rows; setup", round(time.time() - t0), "s")

    warm, _ = generate(model, batch_inputs(cases[:1]), 4)
    log("warm-up", round(warm, 2), "s")
    runs = []
    for bs in batches:
        if bs > len(cases):
            continue
        try:
            secs, out = generate(model, batch_inputs(cases[:bs]), args.new_tokens)
        except Exception as e:  # recorded: a batch that fails (memory) leaves the others
            runs.append({"batch": bs, "error": repr(e)[:500]})
            log(runs[-1])
            torch.cuda.empty_cache()
            continue
        toks = int(out.numel())
        runs.append({"batch": bs, "seconds": round(secs, 3), "pages_per_second": round(bs / secs, 4),
                     "output_tokens": toks, "output_tok_per_second": round(toks / secs, 1),
                     "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 1)})
        log(runs[-1])
    rec = {"generator": "tools/oracle/pages.py", "seed": args.seed,
           "versions": {"torch": torch.__version__, "transformers": __import__("transformers").__version__},
           "device": torch.cuda.get_device_name(0), "checkpoint": b["saved"],
           "page": [w, h], "pages": names, "prompt_ids": prompt_len, "image_rows": cases[0]["counts"],
           "new_tokens": args.new_tokens,
           "peer": "the publisher's DotsOCRForCausalLM in BF16 under transformers generate (greedy, "
                   "DynamicCache, sdpa text and vision attention, min_new_tokens = max_new_tokens)",
           "runs": runs, "seconds": round(time.time() - t0, 1)}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "hf-pages.json"), "w") as fh:
        json.dump(rec, fh, indent=1)
    log("wrote", os.path.join(args.out, "hf-pages.json"))


if __name__ == "__main__":
    main()
