#!/usr/bin/env python3
"""Proves the committed fixtures are the ones the oracle's outputs came from.

Works on the tiny Qwen2-VL and Qwen2.5-VL checkpoints (the family is config.json's model_type).
Checks every sha256 in oracle/manifest.json, reloads the checkpoint from disk with from_pretrained
(float64, CPU) and AutoProcessor, renders and tokenizes each case again, recomputes pixel values,
greedy output ids and the vision tower's rows, and compares them with oracle/<case>.json and
oracle/<case>.safetensors. Exits non-zero on any difference.
"""

import argparse
import importlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import oraclelib as oracle  # noqa: E402

# model_type -> (the oracle script's module, transformers' model class)
FAMILIES = {
    "qwen2_vl": ("qwen2_vl", "Qwen2VLForConditionalGeneration"),
    "qwen2_5_vl": ("qwen2_5_vl", "Qwen2_5_VLForConditionalGeneration"),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="testdata/qwen2-vl-tiny")
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args()
    oracle.check_versions(args.force)

    import torch
    import transformers
    from safetensors.torch import load_file
    from transformers import AutoProcessor

    d = args.dir
    with open(os.path.join(d, "config.json")) as f:
        config = json.load(f)
    model_type = config.get("model_type")
    if model_type not in FAMILIES:
        sys.exit(f"check_reload: {d}/config.json has model_type {model_type!r}; known: {sorted(FAMILIES)}")
    module_name, class_name = FAMILIES[model_type]
    family = importlib.import_module(module_name)
    model_class = getattr(transformers, class_name)
    failures = []

    def fail(msg):
        failures.append(msg)
        print("check_reload: FAIL", msg, flush=True)

    with open(os.path.join(d, "oracle", "manifest.json")) as f:
        manifest = json.load(f)
    for rel, want in manifest["sha256"].items():
        p = os.path.join(d, rel)
        if not os.path.exists(p):
            fail(f"{rel} is missing")
        elif oracle.sha256_file(p) != want:
            fail(f"{rel} sha256 differs from the manifest")

    model, info = model_class.from_pretrained(d, dtype=torch.float64, output_loading_info=True)
    model.eval()
    for k in ("missing_keys", "unexpected_keys", "mismatched_keys"):
        if info.get(k):
            fail(f"from_pretrained {k}: {sorted(info[k])[:8]}")
    tied = model.lm_head.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
    if tied != bool(config.get("tie_word_embeddings", False)):
        fail(f"lm_head tied to embed_tokens after reload: {tied}, config.json says {config.get('tie_word_embeddings')}")
    proc = AutoProcessor.from_pretrained(d)
    if not manifest.get("chat_template_loaded_from_checkpoint", True):
        with open(os.path.join(d, "chat_template.json")) as f:
            proc.chat_template = json.load(f)["chat_template"]
    image_dir = os.path.join(d, "oracle", "images")

    for name, images, text in family.CASES:
        with open(os.path.join(d, "oracle", name + ".json")) as f:
            rec = json.load(f)
        case = oracle.prepare_case(proc, image_dir, name, images, text)
        if case["messages"] != rec["messages"]:
            fail(f"{name}: messages differ")
        got_prompt = case["inputs"]["input_ids"][0].tolist()
        if got_prompt != rec["prompt_ids"]:
            fail(f"{name}: prompt ids differ")
        ids, finish, _ = oracle.greedy(model, case, torch.float64, "cpu", rec["max_new_tokens"])
        if ids != rec["output_ids"] or finish != rec["finish_reason"]:
            fail(f"{name}: reloaded greedy {ids} ({finish}) != oracle {rec['output_ids']} ({rec['finish_reason']})")
        tensors = load_file(os.path.join(d, "oracle", name + ".safetensors"))
        if images:
            if not torch.equal(case["inputs"]["pixel_values"].float(), tensors["pixel_values"]):
                fail(f"{name}: pixel values differ")
            if case["inputs"]["image_grid_thw"].tolist() != rec["image_grid_thw"]:
                fail(f"{name}: image_grid_thw differs")
            rows, _ = oracle.vision_rows(model, case, torch.float64, "cpu")
            diff = float((rows - tensors["vision_rows_f64"]).abs().max())
            if diff > 1e-12:
                fail(f"{name}: vision rows differ by {diff}")
        print(f"check_reload: {name}: output {ids} ({finish}) ok", flush=True)

    if failures:
        sys.exit(f"check_reload: {len(failures)} failure(s)")
    print("check_reload: all cases reproduced from the files on disk", flush=True)


if __name__ == "__main__":
    main()
