#!/usr/bin/env python3
"""Image front-end oracle: what transformers' Qwen2-VL image processor computes for testdata/images.

Run from the repository root on a machine with torch, torchvision, transformers and Pillow:

    python3 tools/oracle/image_reference.py --out OUTDIR

Writes into OUTDIR (copy the first two to testdata/images/):
  reference.json       versions, CPU count, processor classes; per config and image: PIL mode,
                       sha256 of convert("RGB"), grid_thw, shape, sha256 of float32 LE pixel_values
                       (default and PIL backends), or the error the processor raised
  reference.safetensors  pixel_values of the small images ("<config>/<image>") and PIL's decoded
                       RGB of the JPEG and WebP files ("rgb/<image>", HWC uint8)
  debug.safetensors    the uint8 image after resize ("resized/<config>/<image>", HWC), to locate mismatches
  sources.txt          source of the functions that decide the arithmetic, as installed
  bench.json           pages/s of the processors on the same images
  lossy_q80_517x389.webp  a lossy WebP made with Pillow's libwebp from odd_rgb_517x389.png
"""
import argparse
import glob
import hashlib
import inspect
import json
import os
import platform
import time
import traceback

import numpy as np
import PIL
import torch
import torchvision
import transformers
from PIL import Image
from safetensors.numpy import save_file
from transformers import AutoImageProcessor
from transformers.image_processing_backends import TorchvisionBackend
from transformers.image_utils import SizeDict
from torchvision.transforms.v2 import functional as tvF

IMAGES = "testdata/images"
CONFIGS = {"default": IMAGES, "small_max": os.path.join(IMAGES, "small_max")}
SMALL_FLOATS = 150_000  # pixel_values at most this many floats are written out
DEBUG_PIXELS = 400_000  # resized images at most this many pixels are written to debug


def sha256_bytes(b):
    return hashlib.sha256(b).hexdigest()


def image_files():
    out = []
    for ext in ("png", "jpg", "webp"):
        out += glob.glob(os.path.join(IMAGES, "*." + ext))
    return sorted(p for p in out if not os.path.basename(p).startswith("bad_"))


def pil_processor(config_dir):
    try:
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
        return Qwen2VLImageProcessorPil.from_pretrained(config_dir)
    except Exception:
        pass
    try:
        return AutoImageProcessor.from_pretrained(config_dir, backend="pil")
    except Exception:
        return AutoImageProcessor.from_pretrained(config_dir, use_fast=False)


def sources():
    parts = []
    from transformers.models.qwen2_vl import image_processing_qwen2_vl as q
    import transformers.image_transforms as it
    objs = [q.smart_resize, q.Qwen2VLImageProcessor]
    try:
        from transformers import image_processing_backends as ib
        objs += [ib.TorchvisionBackend]
    except Exception as e:
        parts.append(f"# no image_processing_backends: {e}")
    objs += [it.convert_to_rgb]
    from torchvision.transforms.v2.functional import _geometry as g, _misc as m
    objs += [g.resize_image, g._do_native_uint8_resize_on_cpu, m.normalize_image]
    for o in objs:
        try:
            parts.append(f"# ---- {getattr(o, '__module__', '')}.{getattr(o, '__qualname__', o)}\n" + inspect.getsource(o))
        except Exception as e:
            parts.append(f"# ---- {o}: {e}")
    return "\n".join(parts)


def run_one(proc, img):
    out = proc(images=img, return_tensors="pt")
    pv = out["pixel_values"].numpy().astype("<f4")
    grid = [int(v) for v in out["image_grid_thw"][0].tolist()]
    return pv, grid


def reference(report, arrays, debug):
    for cname, cdir in CONFIGS.items():
        fast = AutoImageProcessor.from_pretrained(cdir)
        slow = pil_processor(cdir)
        report["processors"][cname] = {
            "default": type(fast).__module__ + "." + type(fast).__name__,
            "pil": type(slow).__module__ + "." + type(slow).__name__,
            "size": str(getattr(fast, "size", None)),
        }
        entries = {}
        for path in image_files():
            name = os.path.basename(path)
            e, pv = {}, None
            try:
                img = Image.open(path)
                img.load()
                e["pil_mode"] = img.mode
                e["pil_size"] = list(img.size)
                e["pil_info"] = sorted(k for k in img.info.keys())
                rgb = np.asarray(img.convert("RGB"))
                e["rgb_sha256"] = sha256_bytes(np.ascontiguousarray(rgb).tobytes())
                if cname == "default" and not name.endswith(".png"):
                    arrays[f"rgb/{name}"] = np.ascontiguousarray(rgb)
                pv, grid = run_one(fast, img)
                e["grid_thw"] = grid
                e["shape"] = list(pv.shape)
                e["sha256"] = sha256_bytes(pv.tobytes())
                if pv.size <= SMALL_FLOATS:
                    arrays[f"{cname}/{name}"] = pv
            except Exception as ex:
                e["error"] = f"{type(ex).__name__}: {ex}"
            try:
                h, w = e["grid_thw"][1] * fast.patch_size, e["grid_thw"][2] * fast.patch_size
                if h * w <= DEBUG_PIXELS:
                    t = tvF.pil_to_tensor(img.convert("RGB")).unsqueeze(0)
                    r = TorchvisionBackend.resize(fast, t, size=SizeDict(height=h, width=w), resample=fast.resample)
                    debug[f"resized/{cname}/{name}"] = np.ascontiguousarray(r[0].permute(1, 2, 0).numpy())
            except Exception as ex:
                e["debug_error"] = f"{type(ex).__name__}: {ex}"
            try:
                pv2, grid2 = run_one(slow, Image.open(path))
                e["pil_backend_sha256"] = sha256_bytes(pv2.tobytes())
                if pv is not None and pv2.shape == pv.shape:
                    e["pil_backend_max_abs_diff"] = float(np.abs(pv2.astype(np.float64) - pv).max())
            except Exception as ex:
                e["pil_backend_error"] = f"{type(ex).__name__}: {ex}"
            entries[name] = e
            print(cname, name, e.get("grid_thw"), e.get("error", ""), e.get("pil_backend_max_abs_diff", ""), flush=True)
        report["configs"][cname] = entries


def bench(report):
    out = {"torch_threads": torch.get_num_threads()}
    files = [p for p in image_files() if p.endswith(".png") and "huge" not in p]
    page = os.path.join(IMAGES, "page_rgb_1654x2339.png")
    for kind in ("default", "pil"):
        proc = AutoImageProcessor.from_pretrained(IMAGES) if kind == "default" else pil_processor(IMAGES)
        res = {}
        for label, paths in (("page", [page]), ("set", files)):
            imgs = []
            for p in paths:
                im = Image.open(p)
                im.load()
                imgs.append(im)
            proc(images=imgs[0])
            n, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < 4.0:
                for im in imgs:
                    proc(images=im, return_tensors="pt")
                    n += 1
            dt = time.perf_counter() - t0
            res[label + "_pages_per_s"] = n / dt
            # decode included: bytes in memory to pixel_values
            blobs = [open(p, "rb").read() for p in paths]
            import io
            n, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < 4.0:
                for b in blobs:
                    proc(images=Image.open(io.BytesIO(b)), return_tensors="pt")
                    n += 1
            res[label + "_with_decode_pages_per_s"] = n / (time.perf_counter() - t0)
            print("bench", kind, label, res, flush=True)
        out[kind] = res
    # one thread: the per-core figure, for comparison with a single-core Go run
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        proc = AutoImageProcessor.from_pretrained(IMAGES)
        im = Image.open(page)
        im.load()
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < 4.0:
            proc(images=im, return_tensors="pt")
            n += 1
        out["default_1thread"] = {"page_pages_per_s": n / (time.perf_counter() - t0)}
        print("bench default 1 thread", out["default_1thread"], flush=True)
    finally:
        torch.set_num_threads(threads)
    out["set_images"] = [os.path.basename(p) for p in files]
    report["bench"] = out


def make_lossy_webp(out):
    """Encodes one PNG as lossy WebP with libwebp (Go has no WebP encoder); the file is copied to testdata."""
    name = "lossy_q80_517x389.webp"
    Image.open(os.path.join(IMAGES, "odd_rgb_517x389.png")).convert("RGB").save(
        os.path.join(IMAGES, name), "WEBP", quality=80, method=4)
    with open(os.path.join(IMAGES, name), "rb") as src, open(os.path.join(out, name), "wb") as dst:
        dst.write(src.read())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--skip-bench", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    report = {
        "versions": {
            "python": platform.python_version(), "torch": torch.__version__, "torchvision": torchvision.__version__,
            "transformers": transformers.__version__, "pillow": PIL.__version__, "numpy": np.__version__,
        },
        "cpu_count": os.cpu_count(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpu_model": platform.processor(),
        "processors": {}, "configs": {},
    }
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    report["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    with open(os.path.join(args.out, "sources.txt"), "w") as f:
        try:
            f.write(sources())
        except Exception:
            f.write(traceback.format_exc())
    try:
        make_lossy_webp(args.out)
    except Exception:
        report["lossy_webp_error"] = traceback.format_exc()
    arrays, debug = {}, {}
    try:
        reference(report, arrays, debug)
    except Exception:
        report["reference_error"] = traceback.format_exc()
        print(report["reference_error"], flush=True)
    save_file(arrays, os.path.join(args.out, "reference.safetensors"))
    save_file(debug, os.path.join(args.out, "debug.safetensors"))
    with open(os.path.join(args.out, "reference.json"), "w") as f:
        json.dump(report, f, indent=1, sort_keys=True)
    if not args.skip_bench:
        try:
            bench(report)
        except Exception:
            report["bench_error"] = traceback.format_exc()
        with open(os.path.join(args.out, "bench.json"), "w") as f:
            json.dump({k: report.get(k) for k in ("versions", "cpu_count", "cpu_model", "bench", "bench_error")}, f, indent=1)


if __name__ == "__main__":
    main()
