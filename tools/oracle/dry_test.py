#!/usr/bin/env python3
"""Checks of the oracle scripts that need neither torch nor transformers: the Qwen2.5-VL window
layout against transformers' padded construction (ported here to plain Python) and hand-worked
grids, the README the Qwen2.5-VL oracle writes, and that qwen2_vl.py still offers every name the
other oracle scripts take from it. Run: python3 tools/oracle/dry_test.py"""

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

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


def main():
    for check in (check_windows, check_config, check_readme, check_reexports, check_lighton):
        check()
        print("dry_test:", check.__name__, "ok")


if __name__ == "__main__":
    main()
