#!/usr/bin/env python3
"""Make a tiny random-weight multimodal Qwen3.5 checkpoint (vision tower included), its images and
transformers' own references for them: tests/fixtures/vision/qwen3_5-tiny-vision/.

Run on the GPU machine (torch, transformers 5.17, PIL, torchvision; no network), on the CPU:

    python3 tools/make_vision_fixtures.py --out tests/fixtures/vision [--moe]

--moe makes qwen3_5_moe-tiny-vision instead: the same tower, images and prompts over a Qwen3.5-MoE
decoder (Qwen3_5MoeForConditionalGeneration: routed experts and the gated shared expert).

What it writes:
  * the checkpoint (save_pretrained of Qwen3_5ForConditionalGeneration: model.visual.*,
    model.language_model.*, lm_head), generation_config.json, and preprocessor_config.json (the
    image processor's save_pretrained: patch 16, merge 2, temporal patch 2, mean/std, min/max
    pixels chosen so that the images below are resized up, down and not at all);
  * images/: PNG (RGB and RGBA), JPEG and lossless WebP files of different sizes and aspect
    ratios, drawn from a seeded generator;
  * pixels.safetensors: for every image, the processor's pixel_values [patches, 3·2·16·16] and
    image_grid_thw, and the vision tower's merged output [tokens, text hidden] (fp32);
  * reference.json: for prompts holding 1-3 images between text, the prompt ids (one
    <|image_pad|> per merged token between <|vision_start|> and <|vision_end|>, as the processor
    expands them), the greedy tokens (fp32, eager attention, eos ignored) and the logits of the
    last prompt position; each image's grid, the sha256 of the RGB bytes PIL decoded, and whether
    the image processor resized it.

The reference loop runs the whole sequence through the model at every step (use_cache=False), so
the multimodal rotary positions come from get_rope_index each time; it is checked against
model.generate() with the cache.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import math
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402  (blocks fla / causal_conv1d before transformers loads)
from make_fixtures import torch, transformers  # noqa: E402

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

NAME = "qwen3_5-tiny-vision"
SEED = 3401
VOCAB = 512
VISION_START, VISION_END, IMAGE_PAD, VIDEO_PAD = 507, 508, 509, 510
NEW_TOKENS = 16
MIN_PIXELS, MAX_PIXELS = 64 * 64, 256 * 256

# (file name, height, width, PIL mode, format): sizes picked so smart_resize keeps the first as it
# is, scales the second up (50x75 -> 64x64), the third down (200x300 -> 192x288) and gives the
# fourth a wide aspect (40x130 -> 32x128).
IMAGES = [
    ("a_64x96.png", 64, 96, "RGB", "PNG"),
    ("b_50x75.jpg", 50, 75, "RGB", "JPEG"),
    ("c_200x300.webp", 200, 300, "RGB", "WEBP"),
    ("d_40x130_rgba.png", 40, 130, "RGBA", "PNG"),
]
# Prompts: text ids around image placeholders; each entry is a list of ("text", n) / ("image", i).
PROMPTS = [
    [("text", 5), ("image", 0), ("text", 4)],
    [("text", 3), ("image", 1), ("text", 6)],
    [("text", 2), ("image", 2), ("text", 3), ("image", 3), ("text", 2)],
    [("image", 3), ("text", 1), ("image", 0), ("text", 2), ("image", 1), ("text", 4)],
    # Text of capital letters only (ids 65-90, each one byte of a byte-level tokenizer without
    # merges): the server test writes them as message text and gets exactly these prompt ids.
    [("letters", 5), ("image", 0), ("letters", 4)],
    [("letters", 3), ("image", 1), ("letters", 2), ("image", 3), ("letters", 3)],
]


def draw_image(idx, h, w, mode):
    """A smooth gradient plus noise: resampling has something to do, JPEG something to lose."""
    rng = np.random.default_rng([SEED, idx])
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    base = np.stack([127 + 100 * np.sin(x / (7 + idx) + c) * np.cos(y / (5 + c + idx)) for c in range(3)], -1)
    img = np.clip(base + rng.normal(0, 25, size=base.shape), 0, 255).astype(np.uint8)
    if mode == "RGBA":
        alpha = np.clip(rng.normal(200, 60, size=(h, w, 1)), 0, 255).astype(np.uint8)
        img = np.concatenate([img, alpha], -1)
    return Image.fromarray(img, mode)


def save_image(img, path, fmt):
    if fmt == "JPEG":
        img.save(path, "JPEG", quality=90)
    elif fmt == "WEBP":
        img.save(path, "WEBP", lossless=True)
    else:
        img.save(path, "PNG")


def make_moe_config():
    import make_moe_fixtures as moe

    L, F = "linear_attention", "full_attention"
    text = moe.qwen3_5_moe_text(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
                                num_key_value_heads=2, head_dim=32, linear_num_key_heads=2, linear_num_value_heads=4,
                                linear_key_head_dim=16, linear_value_head_dim=16, layer_types=[L, F, L, L],
                                num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                                shared_expert_intermediate_size=48, tie_word_embeddings=False, eos_token_id=2)
    vision = dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, in_channels=3, patch_size=16,
                  temporal_patch_size=2, spatial_merge_size=2, out_hidden_size=64,
                  num_position_embeddings=64, hidden_act="gelu_pytorch_tanh")
    return transformers.Qwen3_5MoeConfig(text_config=text, vision_config=vision, tie_word_embeddings=False,
                                         image_token_id=IMAGE_PAD, video_token_id=VIDEO_PAD,
                                         vision_start_token_id=VISION_START, vision_end_token_id=VISION_END)


def make_config():
    # rotary_dim = 32 * 0.25 = 8: four pairs; mrope_section [2, 1, 1] interleaved puts pair 1 on the
    # height position, pair 2 on the width and pairs 0, 3 on the temporal one: all three rows matter.
    text = mf.qwen3_5_text_kwargs(4, 64, 128, 4, 2, 32, 2, 4, 16, 16, VOCAB, False, 2, None)
    vision = dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, in_channels=3, patch_size=16,
                  temporal_patch_size=2, spatial_merge_size=2, out_hidden_size=64,
                  num_position_embeddings=64, hidden_act="gelu_pytorch_tanh")
    return transformers.Qwen3_5Config(text_config=text, vision_config=vision, tie_word_embeddings=False,
                                      image_token_id=IMAGE_PAD, video_token_id=VIDEO_PAD,
                                      vision_start_token_id=VISION_START, vision_end_token_id=VISION_END)


def reinit_vision_(model, seed):
    """The tower's weights large enough that every part of it moves the merged output."""
    g = torch.Generator().manual_seed(seed + 17)
    for name, p in model.named_parameters():
        if ".visual." not in name and not name.startswith("visual."):
            continue
        d = p.data
        if "pos_embed" in name:
            d.normal_(0.0, 0.5, generator=g)
        elif "norm" in name and name.endswith(".weight"):
            d.normal_(1.0, 0.25, generator=g)
        elif name.endswith(".bias"):
            d.normal_(0.0, 0.2, generator=g)
        elif "patch_embed.proj.weight" in name:
            d.normal_(0.0, 1.5 / math.sqrt(d[0].numel()), generator=g)
        elif name.endswith(".weight") and d.dim() == 2:
            d.normal_(0.0, 1.5 / math.sqrt(d.shape[1]), generator=g)
        else:
            raise AssertionError(f"no init rule for {name} {tuple(d.shape)}")


def make_processor():
    from transformers import Qwen2VLImageProcessor

    return Qwen2VLImageProcessor(patch_size=16, temporal_patch_size=2, merge_size=2,
                                 image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5],
                                 min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS)


def prompt_ids(spec, pidx, grids):
    rng = np.random.default_rng([SEED, 100 + pidx])
    ids, images = [], []
    for kind, n in spec:
        if kind == "text":
            ids += [int(v) for v in rng.integers(mf.FIRST_TOKEN_ID, 500, size=n)]
        elif kind == "letters":
            ids += [int(v) for v in rng.integers(65, 91, size=n)]
        else:
            t, h, w = grids[n]
            ids += [VISION_START] + [IMAGE_PAD] * (t * h * w // 4) + [VISION_END]
            images.append(n)
    return ids, images


def forward_logits(model, ids, pixel_values, grid):
    x = torch.tensor([ids], dtype=torch.long)
    mm = (x == IMAGE_PAD).int()
    out = model(input_ids=x, pixel_values=pixel_values, image_grid_thw=grid, mm_token_type_ids=mm,
                use_cache=False)
    return out.logits[0].float()


def generates_vision_token(model, out_dir):
    """Whether a greedy run of some prompt (no cache, 16 tokens) samples a vision special token."""
    proc = make_processor()
    pixels, grids = [], []
    for i, (fname, h, w, mode, fmt) in enumerate(IMAGES):
        buf = io.BytesIO()
        save_image(draw_image(i, h, w, mode), buf, fmt)
        buf.seek(0)
        feats = proc(images=[Image.open(buf)], return_tensors="pt")
        pixels.append(feats["pixel_values"].float())
        grids.append(tuple(int(v) for v in feats["image_grid_thw"][0]))
    with torch.no_grad():
        for pidx, spec in enumerate(PROMPTS):
            ids, imgs = prompt_ids(spec, pidx, grids)
            pv = torch.cat([pixels[i] for i in imgs], 0)
            grid = torch.tensor([list(grids[i]) for i in imgs], dtype=torch.long)
            seq = list(ids)
            for _ in range(NEW_TOKENS):
                t = int(forward_logits(model, seq, pv, grid)[-1].argmax())
                if VISION_START <= t <= VIDEO_PAD:
                    return True
                seq.append(t)
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--moe", action="store_true", help="the Qwen3.5-MoE decoder (qwen3_5_moe-tiny-vision)")
    args = ap.parse_args()
    name = "qwen3_5_moe-tiny-vision" if args.moe else NAME
    cls = transformers.Qwen3_5MoeForConditionalGeneration if args.moe else transformers.Qwen3_5ForConditionalGeneration
    out_dir = os.path.join(args.out, name)
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(os.path.join(out_dir, "images"))

    def make_model(seed):
        torch.manual_seed(seed)
        m = cls(make_moe_config() if args.moe else make_config()).eval()
        if args.moe:
            import make_moe_fixtures as moe

            moe.reinit_(m, seed)
        else:
            mf.reinit_(m, "qwen3_5", seed)
        reinit_vision_(m, seed)
        return m

    # The MoE decoder: the first seed from SEED whose greedy runs never generate a vision token (a
    # generated <|image_pad|> would be read as a placeholder by get_rope_index on the next step).
    seed = SEED
    model = make_model(seed)
    while args.moe and generates_vision_token(model, out_dir):
        seed += 1
        assert seed < SEED + 20, "no seed without generated vision tokens"
        model = make_model(seed)
    print("seed", seed)
    model.save_pretrained(out_dir)
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 1, "eos_token_id": 2, "do_sample": False,
                   "transformers_version": transformers.__version__}, f, indent=2)
        f.write("\n")
    proc = make_processor()
    proc.save_pretrained(out_dir)
    model = cls.from_pretrained(out_dir, dtype=torch.float32, attn_implementation="eager").eval()
    proc = transformers.AutoImageProcessor.from_pretrained(out_dir)
    print("image processor:", type(proc).__name__)

    tensors, image_info, pixels, grids = {}, [], [], []
    for i, (fname, h, w, mode, fmt) in enumerate(IMAGES):
        path = os.path.join(out_dir, "images", fname)
        save_image(draw_image(i, h, w, mode), path, fmt)
        decoded = Image.open(path)
        decoded.load()
        rgb = decoded.convert("RGB")
        feats = proc(images=[decoded], return_tensors="pt")
        pv, grid = feats["pixel_values"].float(), feats["image_grid_thw"]
        with torch.no_grad():
            merged = model.model.get_image_features(pv, grid, return_dict=True).pooler_output[0].float()
        t, gh, gw = (int(v) for v in grid[0])
        resized = (gh * 16, gw * 16) != (h, w)
        image_info.append({"file": fname, "height": h, "width": w, "mode": mode, "grid_thw": [t, gh, gw],
                           "resized_to": [gh * 16, gw * 16], "resized": resized,
                           "rgb_sha256": hashlib.sha256(np.asarray(rgb).tobytes()).hexdigest()})
        tensors[f"image{i}.pixel_values"] = pv.contiguous()
        tensors[f"image{i}.grid_thw"] = grid.to(torch.int32).contiguous()
        tensors[f"image{i}.merged"] = merged.contiguous()
        pixels.append(pv)
        grids.append((t, gh, gw))
        print(f"  {fname}: {h}x{w} -> grid {t}x{gh}x{gw} (resized: {resized}), {merged.shape[0]} tokens")
    from safetensors.torch import save_file

    save_file(tensors, os.path.join(out_dir, "pixels.safetensors"))

    cases = []
    for pidx, spec in enumerate(PROMPTS):
        ids, imgs = prompt_ids(spec, pidx, grids)
        pv = torch.cat([pixels[i] for i in imgs], 0)
        grid = torch.tensor([list(grids[i]) for i in imgs], dtype=torch.long)
        seq, gen, first, margins = list(ids), [], None, []
        with torch.no_grad():
            for step in range(NEW_TOKENS):
                lg = forward_logits(model, seq, pv, grid)[-1]
                if step == 0:
                    first = lg.clone()
                top = torch.topk(lg, 2)
                margins.append(float(top.values[0] - top.values[1]))
                gen.append(int(top.indices[0]))
                seq.append(gen[-1])
            x = torch.tensor([ids], dtype=torch.long)
            cached = model.generate(input_ids=x, attention_mask=torch.ones_like(x), pixel_values=pv,
                                    image_grid_thw=grid, mm_token_type_ids=(x == IMAGE_PAD).int(),
                                    max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=None,
                                    min_new_tokens=NEW_TOKENS)[0, len(ids):].tolist()
        assert cached == gen, f"prompt {pidx}: generate() {cached} != full-sequence loop {gen}"
        cases.append({"images": imgs, "prompt_ids": ids, "generated_ids": gen,
                      "prompt_last_logits": mf.f32_list(first), "min_top2_margin": min(margins)})
        print(f"  prompt {pidx}: {len(ids)} ids, images {imgs}, margin {min(margins):.3f}, gen {gen[:6]}")

    with open(os.path.join(out_dir, "config.json")) as f:
        cfg = json.load(f)
    ref = {"model": name, "architecture": cls.__name__,
           "made_by": "tools/make_vision_fixtures.py", "reference_dtype": "float32",
           "reference_method": ("HF from_pretrained(saved dir, dtype=float32, eager); greedy loop over the "
                                "full sequence with pixel_values and mm_token_type_ids, use_cache=False; "
                                "equal to generate() with the cache; eos NOT applied"),
           "image_processor": type(proc).__name__, "seed": seed, "max_new_tokens": NEW_TOKENS, "eos_ignored": True,
           "torch_version": torch.__version__, "transformers_version": transformers.__version__,
           "config": cfg, "images": image_info, "cases": cases}
    mf.write_reference(os.path.join(out_dir, "reference.json"), ref)
    print("wrote", out_dir)


if __name__ == "__main__":
    main()
