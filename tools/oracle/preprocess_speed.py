#!/usr/bin/env python3
"""Times transformers' Qwen2-VL image processor on images, by stage, as `tfc bench preprocess` times tfc.

Run on the same host as tfc, with torch, torchvision, transformers and Pillow:

    python3 tools/oracle/preprocess_speed.py page.png [more.jpg ...] [--family qwen2_vl|dots_ocr | --model DIR] [--runs 20]
    tfc bench preprocess page.png [more.jpg ...] --model DIR [--max-pixels N] [--runs 20]

Prints JSON, one object per image: the median milliseconds over --runs (after one warm-up) of
decode (bytes to a loaded RGB PIL image), preprocess (the processor call returning torch tensors)
and decode plus preprocess, with the grid, torch's thread count and the versions.
--backend pil times the PIL backend instead of the default (torchvision) one.
"""
import argparse
import io
import json
import os
import statistics
import tempfile
import time

import PIL
import torch
import transformers
from PIL import Image
from transformers import AutoImageProcessor

MEAN = [0.48145466, 0.4578275, 0.40821073]
STD = [0.26862954, 0.26130258, 0.27577711]

# The published checkpoints' preprocessor_config.json (Qwen2-VL-7B-Instruct, dots.ocr), as tfc's --family.
FAMILIES = {
    "qwen2_vl": {"min_pixels": 3136, "max_pixels": 12845056, "temporal_patch_size": 2},
    "dots_ocr": {"min_pixels": 3136, "max_pixels": 11289600, "temporal_patch_size": 1},
}


def processor(family, model, backend):
    kwargs = {"backend": "pil"} if backend == "pil" else {}
    if model:
        return AutoImageProcessor.from_pretrained(model, **kwargs)
    f = FAMILIES[family]
    config = {
        "min_pixels": f["min_pixels"],
        "max_pixels": f["max_pixels"],
        "size": {"shortest_edge": f["min_pixels"], "longest_edge": f["max_pixels"]},
        "patch_size": 14,
        "temporal_patch_size": f["temporal_patch_size"],
        "merge_size": 2,
        "image_mean": MEAN,
        "image_std": STD,
        "image_processor_type": "Qwen2VLImageProcessor",
    }
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "preprocessor_config.json"), "w") as fh:
            json.dump(config, fh)
        return AutoImageProcessor.from_pretrained(d, **kwargs)


def decode(data):
    im = Image.open(io.BytesIO(data))
    return im.convert("RGB")  # convert loads the pixels


def time_image(proc, path, runs):
    data = open(path, "rb").read()
    dec, pre, total = [], [], []
    for i in range(runs + 1):
        t0 = time.perf_counter()
        im = decode(data)
        t1 = time.perf_counter()
        out = proc(images=im, return_tensors="pt")
        t2 = time.perf_counter()
        if i == 0:  # warm-up
            grid = [int(x) for x in out["image_grid_thw"][0]]
            shape = list(out["pixel_values"].shape)
            width, height = im.size
            continue
        dec.append((t1 - t0) * 1e3)
        pre.append((t2 - t1) * 1e3)
        total.append((t2 - t0) * 1e3)
    return {
        "image": os.path.basename(path),
        "width": width,
        "height": height,
        "grid_thw": grid,
        "shape": shape,
        "runs": runs,
        "threads": torch.get_num_threads(),
        "decode_ms": statistics.median(dec),
        "preprocess_ms": statistics.median(pre),
        "decode_preprocess_ms": statistics.median(total),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("images", nargs="+")
    ap.add_argument("--family", choices=sorted(FAMILIES), default="qwen2_vl")
    ap.add_argument("--model", help="a checkpoint directory whose preprocessor_config.json is used instead of --family")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--backend", choices=("default", "pil"), default="default")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    proc = processor(args.family, args.model, args.backend)
    report = {
        "versions": {"transformers": transformers.__version__, "torch": torch.__version__, "Pillow": PIL.__version__},
        "processor": type(proc).__name__,
        "images": [time_image(proc, p, args.runs) for p in args.images],
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
