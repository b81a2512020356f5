#!/usr/bin/env python3
"""The config sweep's references: the publisher's code on the checkpoints `tfc sweep` writes.

`tfc sweep --out DIR` writes one tiny random checkpoint a config of testdata/sweep/sweep.json
(weights from a seeded generator written by Go, the same bytes on any machine) with a sweep.json
of its chats. For each, this script checks the files' sha256, loads the checkpoint with the
publisher's code (transformers' Qwen2VLForConditionalGeneration, Qwen2_5_VLForConditionalGeneration,
LightOnOcrForConditionalGeneration or GlmOcrForConditionalGeneration; dots.ocr's own remote code
from --publisher, as tools/oracle/dots_ocr.py runs it), and records per chat: the prompt ids, the
pixels' sha256, the greedy ids through EOS or the cap, every step's top-5 logits and top-2 margin,
all in float64 on the CPU, and whether float32 on the CPU gives the same ids. Pictures go to the
processor as they were opened (grey and RGBA too), as a user's would.

With --bf16 it records the publisher's BF16 run on CUDA instead (F32 and F16 weights rounded to
BF16 by .to(bfloat16), as tfc's BF16 precision loads them):
transformers' generate with its cache (dots.ocr: its forward over the whole sequence a step),
the greedy ids and every step's top-5 logits and top-2 margin as that run computed them, into
testdata/sweep/refs-bf16 (cmd/tfc's TestSweepBF16CUDA gates tfc's BF16 ids against them).

Writes --refs/<config>.json (committed) and, under --debug, each chat's pixel values, vision rows
and decoder hidden states as safetensors (for finding a difference, never committed).
"""

import argparse
import hashlib
import json
import os
import sys
import time
import traceback
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qwen2_vl as common  # noqa: E402

TOP_K = 5
# what a run loads: float64 and float32 on the CPU (the default), or bfloat16 on CUDA (--bf16)
RUN = {"dtypes": ("float64", "float32"), "device": "cpu"}


def log(*a):
    print("sweep:", *a, flush=True)


def sha256_bytes(b):
    return hashlib.sha256(b).hexdigest()


def check_files(d, sums):
    bad = []
    for name, want in sums.items():
        got = common.sha256_file(os.path.join(d, name))
        if got != want:
            bad.append(f"{name}: {got} != {want}")
    if bad:
        raise SystemExit(f"sweep: {d}: files differ from what tfc sweep recorded: {bad}")


def open_images(d, names):
    from PIL import Image

    out = []
    for n in names:
        im = Image.open(os.path.join(d, "images", n))
        im.load()
        out.append(im)
    return out


def pixel_record(px):
    import numpy as np

    a = px.detach().to("cpu").float().contiguous().numpy().astype(np.float32)
    return {"shape": list(a.shape), "sha256": sha256_bytes(a.astype("<f4").tobytes())}


def steps_record(rows):
    """rows[s] are the float64 logits after prompt + output[:s]: top-5 and top-2 margin of each."""
    import torch

    top, margins = [], []
    for s in range(rows.shape[0]):
        v, i = torch.topk(rows[s].double(), TOP_K)
        top.append({"step": s, "ids": [int(x) for x in i.tolist()], "logits": [float(x) for x in v.tolist()]})
        margins.append(float(v[0] - v[1]))
    return top, margins


# ---------------------------------------------------------------- Qwen2-VL (transformers)

# the transformers class of each family its Qwen2VL runner drives
TRANSFORMERS_CLASS = {"qwen2_vl": "Qwen2VLForConditionalGeneration", "qwen2_5_vl": "Qwen2_5_VLForConditionalGeneration",
                      "glm_ocr": "GlmOcrForConditionalGeneration"}


class Qwen2VL:
    """A transformers Qwen2-VL-style class: Qwen2VLForConditionalGeneration, or another with its
    interface (Qwen2_5_VLForConditionalGeneration), by name."""

    def __init__(self, d, cfg, cls="Qwen2VLForConditionalGeneration"):
        import torch
        import transformers

        Qwen2VLForConditionalGeneration = getattr(transformers, cls)
        self.d, self.cfg = d, cfg
        self.proc = self.load_processor(d)
        gen = json.load(open(os.path.join(d, "generation_config.json")))
        self.eos = gen["eos_token_id"] if isinstance(gen["eos_token_id"], list) else [gen["eos_token_id"]]
        self.models = {}
        for dtype in (getattr(torch, n) for n in RUN["dtypes"]):
            m, info = Qwen2VLForConditionalGeneration.from_pretrained(d, dtype=dtype, output_loading_info=True)
            missing = [k for k in info.get("missing_keys", []) if not k.endswith("lm_head.weight")]
            if missing or info.get("unexpected_keys") or info.get("mismatched_keys"):
                raise SystemExit(f"sweep: {d}: loading info {info}")
            m.eval()
            self.models[dtype] = m.to(RUN["device"])
        m = next(iter(self.models.values()))
        self.tied = m.lm_head.weight.data_ptr() == m.get_input_embeddings().weight.data_ptr()

    def load_processor(self, d):
        from transformers import AutoProcessor

        return AutoProcessor.from_pretrained(d)

    def prepare(self, case):
        import torch

        messages = case["messages"]
        prompt = self.proc.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        pil = open_images(self.d, case["images"])
        kwargs = dict(text=[prompt], return_tensors="pt")
        if pil:
            kwargs["images"] = pil
        inputs = dict(self.proc(**kwargs))
        ids = inputs["input_ids"]
        if pil and "mm_token_type_ids" not in inputs:
            mm = torch.zeros_like(ids)
            mm[ids == self.cfg["image_token_id"]] = 1
            inputs["mm_token_type_ids"] = mm
        return prompt, inputs

    def inputs(self, inputs, dtype, extra=None):
        import torch

        out = {}
        for k, v in inputs.items():
            if not torch.is_tensor(v):
                continue
            if k == "pixel_values":
                v = v.to(dtype)
            out[k] = v.to(RUN["device"])
        if extra:
            n = len(extra)
            ids = out["input_ids"]
            for k in list(out):
                v = out[k]
                if k == "input_ids":
                    out[k] = torch.cat([v, torch.tensor([extra], dtype=v.dtype, device=v.device)], dim=1)
                elif k == "attention_mask":
                    out[k] = torch.cat([v, torch.ones((1, n), dtype=v.dtype, device=v.device)], dim=1)
                elif v.shape == ids.shape:
                    out[k] = torch.cat([v, torch.zeros((1, n), dtype=v.dtype, device=v.device)], dim=1)
        return out

    def reset(self, m):
        inner = getattr(m, "model", m)
        if hasattr(inner, "rope_deltas"):
            inner.rope_deltas = None

    def greedy(self, inputs, dtype, max_new):
        import torch

        m = self.models[dtype]
        self.reset(m)
        x = self.inputs(inputs, dtype)
        with torch.inference_mode():
            res = m.generate(**x, max_new_tokens=max_new, do_sample=False, eos_token_id=list(self.eos),
                             pad_token_id=self.eos[-1])
        return res[0, x["input_ids"].shape[1]:].tolist()

    def greedy_steps(self, inputs, dtype, max_new):
        """generate's greedy ids and each step's logits as it computed them (its cache)."""
        import torch

        m = self.models[dtype]
        self.reset(m)
        x = self.inputs(inputs, dtype)
        with torch.inference_mode():
            res = m.generate(**x, max_new_tokens=max_new, do_sample=False, eos_token_id=list(self.eos),
                             pad_token_id=self.eos[-1], output_logits=True, return_dict_in_generate=True)
        ids = res.sequences[0, x["input_ids"].shape[1]:].tolist()
        return ids, torch.stack([r[0] for r in res.logits])

    def forward(self, inputs, dtype, output_ids):
        """Logits after prompt + output[:s] for s = 0..len(output), hidden states, vision rows."""
        import torch

        m = self.models[dtype]
        self.reset(m)
        x = self.inputs(inputs, dtype, output_ids)
        with torch.inference_mode():
            out = m(**x, use_cache=False, output_hidden_states=True, return_dict=True)
        T = inputs["input_ids"].shape[1]
        rows = out.logits[0, T - 1:]
        vis = self.vision_rows(m, inputs, dtype) if "pixel_values" in inputs else None
        return rows, torch.stack([h[0] for h in out.hidden_states]), vis

    def vision_rows(self, m, inputs, dtype):
        """The tower's merged rows, as the decoder takes them."""
        import torch

        inner = getattr(m, "model", m)
        visual = getattr(inner, "visual", None) or getattr(m, "visual")
        with torch.inference_mode():
            o = visual(inputs["pixel_values"].to(dtype), grid_thw=inputs["image_grid_thw"])
        cands = [o] if torch.is_tensor(o) else [getattr(o, k, None) for k in ("pooler_output", "last_hidden_state")]
        n = inputs["pixel_values"].shape[0] // 4
        for t in cands:
            if torch.is_tensor(t) and t.shape[0] == n:
                return t
        return None


# ---------------------------------------------------------------- dots.ocr (the publisher's code)


class DotsOCR:
    def __init__(self, d, cfg, pub):
        import torch
        from safetensors.torch import load_file

        import dots_ocr

        self.d, self.cfg, self.dots = d, cfg, dots_ocr
        mods, _ = dots_ocr.import_publisher(pub)
        kwargs = {k: v for k, v in cfg.items()
                  if k not in ("architectures", "auto_map", "model_type", "torch_dtype", "transformers_version")}
        if kwargs.get("rope_scaling", 0) is None:
            del kwargs["rope_scaling"]
        kwargs["vision_config"] = dict(cfg["vision_config"], attn_implementation=dots_ocr.VISION_ATTENTION)
        kwargs["attn_implementation"] = dots_ocr.TEXT_ATTENTION
        config = mods.configuration.DotsOCRConfig(**kwargs)
        config.architectures = list(cfg["architectures"])
        if getattr(config, "use_return_dict", None) is None:
            config.use_return_dict = True
        for k in ("hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size", "num_hidden_layers"):
            if getattr(config, k) != cfg[k]:
                raise SystemExit(f"sweep: DotsOCRConfig.{k} is {getattr(config, k)}, config.json {cfg[k]}")
        self.mods = mods
        state = load_file(os.path.join(d, "model.safetensors"))
        self.models = {}
        for dtype in (getattr(torch, n) for n in RUN["dtypes"]):
            torch.manual_seed(0)
            m = mods.ocr.DotsOCRForCausalLM(config)
            m.to(torch.float32)
            missing, unexpected = m.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)
            missing = [k for k in missing if not (k == "lm_head.weight" and cfg.get("tie_word_embeddings"))]
            if missing or unexpected:
                raise SystemExit(f"sweep: {d}: missing {missing}, unexpected {unexpected}")
            if cfg.get("tie_word_embeddings"):
                m.tie_weights()
                if m.lm_head.weight.data_ptr() != m.get_input_embeddings().weight.data_ptr():
                    raise SystemExit(f"sweep: {d}: tie_word_embeddings is true but lm_head is not tied")
            if dtype != torch.bfloat16:  # the publisher's tower casts to BF16, which is right only there
                m.vision_tower.forward = types.MethodType(dots_ocr.vision_forward_without_bf16, m.vision_tower)
            m.requires_grad_(False)
            m.eval()
            self.models[dtype] = m.to(dtype).to(RUN["device"])
        gen = json.load(open(os.path.join(d, "generation_config.json")))
        self.eos = gen["eos_token_id"] if isinstance(gen["eos_token_id"], list) else [gen["eos_token_id"]]
        decoder = json.load(open(os.path.join(d, "tokenizer_config.json")))["added_tokens_decoder"]
        text = open(os.path.join(d, "tokenizer.json"), encoding="utf-8").read()
        self.ref_tok = dots_ocr.published_tokenizer(text, decoder)
        try:
            self.renderer = dots_ocr.hf_tokenizer(d)
        except Exception as e:
            from transformers import PreTrainedTokenizerFast

            log("AutoTokenizer failed, rendering with the published tokenizer:", repr(e)[:200])
            self.renderer = PreTrainedTokenizerFast(tokenizer_object=self.ref_tok)
        self.template = json.load(open(os.path.join(d, "chat_template.json")))["chat_template"]
        self.ip = dots_ocr.image_processor(d)
        self.tied = bool(cfg.get("tie_word_embeddings"))

    def prepare(self, case):
        import torch

        messages = case["messages"]
        prompt = self.renderer.apply_chat_template(messages, chat_template=self.template, add_generation_prompt=True,
                                                   tokenize=False)
        merge = self.cfg["vision_config"].get("spatial_merge_size", 2)
        pil = open_images(self.d, case["images"])
        inputs, counts = {}, []
        if pil:
            px = self.ip(images=pil, return_tensors="pt")
            inputs["pixel_values"] = px["pixel_values"]
            inputs["image_grid_thw"] = px["image_grid_thw"].to(torch.int64)
            counts = [int(g.prod()) // (merge * merge) for g in inputs["image_grid_thw"]]
        pad = self.dots.IMAGE_PAD
        parts = prompt.split(pad)
        if len(parts) - 1 != len(pil):
            raise SystemExit(f"sweep: the template wrote {len(parts) - 1} {pad} for {len(pil)} pictures")
        expanded = parts[0] + "".join(pad * n + p for n, p in zip(counts, parts[1:]))
        ids = self.ref_tok.encode(expanded, add_special_tokens=False).ids
        inputs["input_ids"] = torch.tensor([ids], dtype=torch.int64)
        return prompt, inputs

    def greedy(self, inputs, dtype, max_new):
        ids, _, _ = self.dots.greedy(self.models[dtype], {"inputs": inputs}, dtype, "cpu", max_new, self.eos)
        return ids

    def greedy_steps(self, inputs, dtype, max_new):
        """Greedy ids and each step's logits, the whole sequence each step (the publisher's forward, no cache)."""
        import torch

        m, ids, rows = self.models[dtype], [], []
        with torch.inference_mode():
            for _ in range(max_new):
                x = self.dots.case_inputs({"inputs": inputs}, dtype, RUN["device"], ids)
                rows.append(m(**x, use_cache=False, return_dict=True, logits_to_keep=1).logits[0, -1])
                ids.append(int(rows[-1].argmax()))
                if ids[-1] in self.eos:
                    break
        return ids, torch.stack(rows)

    def forward(self, inputs, dtype, output_ids):
        import torch

        m = self.models[dtype]
        logits, grabbed = self.dots.full_forward(m, {"inputs": inputs}, output_ids, dtype, "cpu")
        hidden = [grabbed["embeds"][0]] + [h[0] for h in grabbed["layers"]] + [grabbed["norm"][0]]
        vis = None
        if "pixel_values" in inputs:
            with torch.inference_mode():
                vis = m.vision_tower(inputs["pixel_values"].to(dtype), inputs["image_grid_thw"])
        return logits, torch.stack(hidden), vis


# ---------------------------------------------------------------- LightOnOCR (transformers)


class LightOnOCR(Qwen2VL):
    """LightOnOcrForConditionalGeneration: the Pixtral processor's padded batch goes to the model with
    image_sizes; the pixels are recorded as tfc reads them (one row a patch, raster order)."""

    def __init__(self, d, cfg):
        super().__init__(d, cfg, "LightOnOcrForConditionalGeneration")
        self.patch = cfg["vision_config"]["patch_size"]

    def prepare(self, case):
        import torch

        prompt, inputs = super().prepare(case)
        inputs.pop("mm_token_type_ids", None)
        if "pixel_values" in inputs:
            inputs["image_sizes"] = torch.as_tensor(inputs["image_sizes"]).to(torch.int64)
            sizes = inputs["image_sizes"].tolist()
            p = self.patch
            inputs["image_grid_thw"] = torch.tensor([[1, h // p, w // p] for h, w in sizes], dtype=torch.int64)
        return prompt, inputs

    def pixel_rows(self, inputs):
        import lighton_ocr

        return lighton_ocr.patch_rows(inputs["pixel_values"].double(), inputs["image_sizes"].tolist(), self.patch)

    def inputs(self, inputs, dtype, extra=None):
        x = super().inputs(inputs, dtype, extra)
        x.pop("image_grid_thw", None)
        return x

    def forward(self, inputs, dtype, output_ids):
        import torch

        m = self.models[dtype]
        x = self.inputs(inputs, dtype, output_ids)
        with torch.inference_mode():
            out = m(**x, use_cache=False, output_hidden_states=True, return_dict=True)
        T = inputs["input_ids"].shape[1]
        vis = None
        if "pixel_values" in inputs:
            with torch.inference_mode():
                o = m.model.get_image_features(pixel_values=inputs["pixel_values"].to(dtype),
                                               image_sizes=inputs["image_sizes"], return_dict=True)
            vis = torch.cat(list(o.pooler_output), dim=0)
        return out.logits[0, T - 1:], torch.stack([h[0] for h in out.hidden_states]), vis


# ---------------------------------------------------------------- GLM-OCR (transformers)


class GlmOcr(Qwen2VL):
    """GlmOcrForConditionalGeneration: Qwen2-VL's processor layout (Qwen2VLProcessor over the
    Glm4vImageProcessor, built as tools/oracle/glm_ocr.py builds it when AutoProcessor cannot), and
    the merger's rows taken by name (the tower's last_hidden_state, the downsample output, has the
    same shape)."""

    def __init__(self, d, cfg):
        super().__init__(d, cfg, TRANSFORMERS_CLASS["glm_ocr"])

    def load_processor(self, d):
        import glm_ocr

        template = json.load(open(os.path.join(d, "chat_template.json")))["chat_template"]
        proc, how, errors = glm_ocr.load_processor(d, template)
        if errors:
            log(f"{d}: processor built by {how} after {errors}")
        return proc

    def vision_rows(self, m, inputs, dtype):
        import torch

        with torch.inference_mode():
            o = m.model.visual(inputs["pixel_values"].to(dtype), grid_thw=inputs["image_grid_thw"])
        rows = o[1] if isinstance(o, tuple) else o.pooler_output
        n = inputs["pixel_values"].shape[0]
        if rows.shape[0] != n // 4:
            raise SystemExit(f"sweep: the GLM-OCR tower gave {rows.shape[0]} rows for {n} patches")
        return rows


# ---------------------------------------------------------------- the sweep


def run_config(d, pub, debug, only_cases):
    import torch

    spec = json.load(open(os.path.join(d, "sweep.json")))
    check_files(d, spec["sha256"])
    cfg = json.load(open(os.path.join(d, "config.json")))
    c = spec["config"]
    if c["family"] == "dots_ocr":
        fam = DotsOCR(d, cfg, pub)
    elif c["family"] == "lighton_ocr":
        fam = LightOnOCR(d, cfg)
    elif c["family"] == "glm_ocr":
        fam = GlmOcr(d, cfg)
    else:
        fam = Qwen2VL(d, cfg, TRANSFORMERS_CLASS[c["family"]])
    max_new = c["max_new_tokens"]
    if RUN["device"] != "cpu":
        return run_config_bf16(fam, spec, c, only_cases)
    record = {"config": c["name"], "family": c["family"], "sha256": spec["sha256"], "tied": fam.tied,
              "max_new_tokens": max_new, "reference": "float64 on the CPU", "cases": []}
    tensors_out = {}
    for name in c["cases"]:
        if only_cases and name not in only_cases:
            continue
        case = spec["cases"][name]
        t0 = time.time()
        prompt, inputs = fam.prepare(case)
        pixels = inputs.get("pixel_values")
        if pixels is not None and hasattr(fam, "pixel_rows"):
            pixels = fam.pixel_rows(inputs)
        ids = fam.greedy(inputs, torch.float64, max_new)
        rows, hidden, vis = fam.forward(inputs, torch.float64, ids)
        top, margins = steps_record(rows)
        argmax = [int(r.argmax()) for r in rows[: len(ids)]]
        ids32 = fam.greedy(inputs, torch.float32, max_new)
        finish = "stop" if ids and ids[-1] in fam.eos else "length"
        rec = {"case": name, "messages": case["messages"], "images": case["images"], "prompt_text": prompt,
               "prompt_ids": inputs["input_ids"][0].tolist(),
               "image_grid_thw": inputs["image_grid_thw"].tolist() if "image_grid_thw" in inputs else [],
               "pixel_values": pixel_record(pixels) if pixels is not None else None,
               "output_ids": ids, "finish_reason": finish, "top5": top, "margins": margins,
               "min_margin": min(margins[: len(ids)]) if ids else None,
               "full_forward_argmax_equals_greedy": argmax == ids,
               "f32_cpu_output_ids": ids32, "f32_cpu_equal": ids32 == ids}
        record["cases"].append(rec)
        t = {"hidden_states": hidden.float().contiguous()}
        if vis is not None:
            t["vision_rows"] = vis.float().contiguous()
            t["pixel_values"] = pixels.float().contiguous()
        tensors_out[name] = t
        log(f"{c['name']}/{name}: {len(rec['prompt_ids'])} prompt ids, {len(ids)} out ({finish}), "
            f"min margin {rec['min_margin']:.3g}, f32 equal {rec['f32_cpu_equal']}, {time.time() - t0:.1f}s")
    if debug:
        from safetensors.torch import save_file

        os.makedirs(os.path.join(debug, c["name"]), exist_ok=True)
        for name, t in tensors_out.items():
            save_file(t, os.path.join(debug, c["name"], name + ".safetensors"))
    return record


def run_config_bf16(fam, spec, c, only_cases):
    """The publisher's BF16 run on CUDA: generate's greedy ids (dots.ocr: its forward a step) and
    each step's top-5 logits and top-2 margin as that run computed them."""
    import torch

    how = "its forward over the whole sequence a step" if c["family"] == "dots_ocr" else "generate with its cache"
    record = {"config": c["name"], "family": c["family"], "sha256": spec["sha256"], "tied": fam.tied,
              "max_new_tokens": c["max_new_tokens"], "reference": f"bfloat16 on {torch.cuda.get_device_name()}, {how}",
              "cases": []}
    for name in c["cases"]:
        if only_cases and name not in only_cases:
            continue
        t0 = time.time()
        prompt, inputs = fam.prepare(spec["cases"][name])
        ids, rows = fam.greedy_steps(inputs, torch.bfloat16, c["max_new_tokens"])
        top, margins = steps_record(rows.float().cpu())
        finish = "stop" if ids and ids[-1] in fam.eos else "length"
        case = spec["cases"][name]
        record["cases"].append({"case": name, "messages": case["messages"], "images": case["images"],
                                "prompt_ids": inputs["input_ids"][0].tolist(), "output_ids": ids,
                                "finish_reason": finish, "top5": top, "margins": margins,
                                "min_margin": min(margins) if margins else None})
        log(f"{c['name']}/{name} (bf16): {len(ids)} out ({finish}), min margin {record['cases'][-1]['min_margin']}, "
            f"{time.time() - t0:.1f}s")
    return record


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True, help="the folder tfc sweep --out wrote")
    ap.add_argument("--refs", default=None, help="where the records go (testdata/sweep/refs)")
    ap.add_argument("--publisher", default="tools/oracle/publisher/dots_ocr")
    ap.add_argument("--debug", default=None, help="where to write each chat's tensors")
    ap.add_argument("--budget", type=float, default=0, help="seconds; stop starting configs after this")
    ap.add_argument("--case", action="append", default=[], help="only these chats")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--bf16", action="store_true", help="the publisher's BF16 run on CUDA (--refs defaults to testdata/sweep/refs-bf16)")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    versions = common.check_versions(args.force)
    import torch

    if args.bf16:
        RUN.update(dtypes=("bfloat16",), device="cuda")
        torch.backends.cuda.matmul.allow_tf32 = False
    args.refs = args.refs or ("testdata/sweep/refs-bf16" if args.bf16 else "testdata/sweep/refs")
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    os.makedirs(args.refs, exist_ok=True)
    names = args.names or sorted(n for n in os.listdir(args.dir) if os.path.exists(os.path.join(args.dir, n, "sweep.json")))
    t0, failed = time.time(), []
    for n in names:
        if args.budget and time.time() - t0 > args.budget:
            log("budget spent; not started:", n)
            failed.append(n)
            continue
        try:
            rec = run_config(os.path.join(args.dir, n), args.publisher, args.debug, args.case)
        except BaseException as e:  # one config's failure is reported, the others still run
            log(f"{n} FAILED: {e!r}")
            traceback.print_exc()
            failed.append(n)
            continue
        rec["versions"] = versions
        common.write_json(os.path.join(args.refs, n + ".json"), rec)
    log(f"done in {time.time() - t0:.0f}s; failed: {failed}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
