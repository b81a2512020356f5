#!/usr/bin/env python3
"""Builds the tiny random Qwen2-VL checkpoint and transformers' reference outputs on it.

Writes, under --out (default testdata/qwen2-vl-tiny):
  config.json, generation_config.json, model-*.safetensors + model.safetensors.index.json (BF16),
  preprocessor_config.json, chat_template.json, tokenizer_config.json, tokenizer.json (copied, not committed),
  oracle/images/*.png, oracle/<case>.json, oracle/<case>.safetensors, oracle/manifest.json.

The reference is transformers itself: Qwen2VLForConditionalGeneration on the bf16-rounded weights,
run in float64 on the CPU. For comparison the same greedy run is repeated in float32 on the CPU and,
when a GPU is present, in float32 on the GPU with TF32 off.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import oraclelib  # noqa: E402
# Re-exported: the other oracle scripts take these from here.
from oraclelib import (  # noqa: E402,F401
    BOS_TOKEN_ID, CANDIDATES, EOS_TOKEN_IDS, FIRST_ADDED_TOKEN_ID, IMAGE_TOKEN_ID, MAX_RUN, MIN_MARGIN,
    PAD_TOKEN_ID, PINNED, PREPROCESSOR_CONFIG, TOKENIZER_CONFIG, TOP_K, TOP_STEPS, VIDEO_TOKEN_ID,
    VISION_END_TOKEN_ID, VISION_START_TOKEN_ID, VOCAB_SIZE, check_versions, draw_weights, generation_config,
    greedy, load_processor, log, longest_run, make_image, model_inputs, prepare_case, published_key,
    reset_rope_state, sha256_file, small_added_rows, text_rotary_module, vision_rows, visual_module, write_json,
)

TEXT_CONFIG = dict(
    vocab_size=VOCAB_SIZE,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    hidden_act="silu",
    max_position_embeddings=32768,
    rms_norm_eps=1e-6,
    use_sliding_window=False,
    tie_word_embeddings=True,
    bos_token_id=BOS_TOKEN_ID,
    eos_token_id=EOS_TOKEN_IDS[0],
)
ROPE = {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [2, 3, 3]}
VISION_CONFIG = dict(
    depth=2,
    embed_dim=32,
    hidden_size=64,
    hidden_act="quick_gelu",
    mlp_ratio=4,
    num_heads=2,
    in_channels=3,
    patch_size=14,
    spatial_merge_size=2,
    temporal_patch_size=2,
)

# (file name, width, height): the first is a multiple of 28 on both sides (no resize), the others are resized.
IMAGES = [("a.png", 56, 84), ("b.png", 112, 70), ("c.png", 90, 60)]

CASES = [
    ("text", [], "Write a short poem about the sea."),
    ("image1", ["a.png"], "What is in this picture?"),
    ("image2", ["b.png", "c.png"], "Compare these two pictures."),
]


def make_config():
    return oraclelib.make_config("Qwen2VLConfig", TEXT_CONFIG, ROPE, VISION_CONFIG, tie=True)


def build_model(config, seed, candidate):
    import torch
    from transformers import Qwen2VLForConditionalGeneration

    torch.manual_seed(seed)
    model = Qwen2VLForConditionalGeneration(config)
    model.to(torch.float32)
    if model.lm_head.weight.data_ptr() != model.get_input_embeddings().weight.data_ptr():
        raise SystemExit("oracle: lm_head is not tied to embed_tokens; tie_word_embeddings did not take")
    draw_weights(model, seed + candidate["seed_offset"], candidate)
    model.generation_config = generation_config()
    model.eval()
    return model


FAMILY = oraclelib.Family(
    generator="tools/oracle/qwen2_vl.py",
    out="testdata/qwen2-vl-tiny",
    seed=20261202,
    images=[(name, name, w, h) for name, w, h in IMAGES],
    cases=CASES,
    make_config=make_config,
    build_model=build_model,
    preprocessor_config=PREPROCESSOR_CONFIG,
    doc=__doc__,
)


def main():
    oraclelib.main(FAMILY)


if __name__ == "__main__":
    main()
