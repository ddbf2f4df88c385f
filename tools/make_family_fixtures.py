#!/usr/bin/env python3
"""Make tiny random-weight checkpoints of the dense families beyond Qwen3 and Llama, with greedy
references from Hugging Face transformers: Qwen2/Qwen2.5 (q/k/v biases, yarn RoPE), Mistral (sliding
window, explicit head_dim, linear RoPE), Phi-3 (fused qkv_proj and gate_up_proj, partial RoPE) and Gemma 3 (text and the language model inside a
Gemma3ForConditionalGeneration checkpoint; per-layer sliding/full attention with their own RoPE,
zero-centred norms, GELU-tanh, soft-capping).

Run on the GPU machine (torch, transformers 5.x, safetensors; no network), on its CPU so the output
is deterministic:

    python3 tools/make_family_fixtures.py --out tests/fixtures/models [--only NAME ...]

Writes tests/fixtures/models/<name>/ (config.json and model.safetensors as save_pretrained writes
them, generation_config.json, reference.json in the format of tools/make_fixtures.py: per prompt
prompt_ids, generated_ids (greedy, eos ignored) and prompt_last_logits).

The reference is the model class reloaded from the SAVED directory in fp32 with eager attention; the
greedy loop recomputes the whole sequence each step (use_cache=False). Prompts run from 1 to 300
tokens, past every sliding window here.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402  (blocks optional kernel packages, imports torch)
from make_fixtures import torch, transformers  # noqa: E402

PROMPT_LENGTHS = [1, 7, 40, 130, 300]
NEW_TOKENS = 16


def gemma_layers(n, full_every):
    return ["full_attention" if (i + 1) % full_every == 0 else "sliding_attention" for i in range(n)]


def spec_list():
    return [
        # Qwen2.5: q/k/v biases (o_proj none), tied, GQA 2:1.
        {"name": "qwen2-tiny-bias", "cls": "Qwen2ForCausalLM", "seed": 41, "vocab": 384,
         "config": dict(hidden_size=64, intermediate_size=112, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True,
                        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
                        rms_norm_eps=1e-6, max_position_embeddings=4096)},
        # Qwen2.5 with yarn (its long-context setting), untied, GQA 3:1.
        {"name": "qwen2-tiny-yarn", "cls": "Qwen2ForCausalLM", "seed": 42, "vocab": 320,
         "config": dict(hidden_size=96, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=6, num_key_value_heads=2, tie_word_embeddings=False,
                        rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                         "original_max_position_embeddings": 64},
                        rms_norm_eps=1e-6, max_position_embeddings=256)},
        # Mistral: sliding window 24 (prompts reach 300), explicit head_dim 24 != 64/4, GQA 4:1.
        {"name": "mistral-tiny-swa", "cls": "MistralForCausalLM", "seed": 51, "vocab": 352,
         "config": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                        num_attention_heads=4, num_key_value_heads=1, head_dim=24,
                        sliding_window=24, tie_word_embeddings=False,
                        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                        rms_norm_eps=1e-5, max_position_embeddings=4096)},
        # Mistral with linear RoPE scaling, tied, GQA 3:1, window 50.
        {"name": "mistral-tiny-linear", "cls": "MistralForCausalLM", "seed": 52, "vocab": 320,
         "config": dict(hidden_size=72, intermediate_size=96, num_hidden_layers=2,
                        num_attention_heads=6, num_key_value_heads=2, head_dim=20,
                        sliding_window=50, tie_word_embeddings=True,
                        rope_parameters={"rope_type": "linear", "rope_theta": 10000.0,
                                         "factor": 2.0},
                        rms_norm_eps=1e-5, max_position_embeddings=4096)},
        # Gemma 3 text: window 20, full layers every 3rd with linear x8 RoPE at theta 1e6, sliding
        # layers at 1e4; query_pre_attn_scalar 24 (not head_dim 32); GQA 2:1.
        {"name": "gemma3-tiny-text", "cls": "Gemma3ForCausalLM", "seed": 61, "vocab": 384,
         "config": dict(hidden_size=96, intermediate_size=160, num_hidden_layers=4,
                        num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                        query_pre_attn_scalar=24, sliding_window=20,
                        layer_types=gemma_layers(4, 3),
                        rope_parameters={
                            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                            "full_attention": {"rope_type": "linear", "rope_theta": 1000000.0,
                                               "factor": 8.0}},
                        rms_norm_eps=1e-6, max_position_embeddings=4096,
                        tie_word_embeddings=True)},
        # Gemma 3 with attention and final soft-capping that bite, MQA, head_dim 40.
        {"name": "gemma3-tiny-softcap", "cls": "Gemma3ForCausalLM", "seed": 62, "vocab": 320,
         "config": dict(hidden_size=80, intermediate_size=96, num_hidden_layers=3,
                        num_attention_heads=4, num_key_value_heads=1, head_dim=40,
                        query_pre_attn_scalar=40, sliding_window=33,
                        layer_types=gemma_layers(3, 2),
                        attn_logit_softcapping=1.5, final_logit_softcapping=2.0,
                        rope_parameters={
                            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                            "full_attention": {"rope_type": "default", "rope_theta": 1000000.0}},
                        rms_norm_eps=1e-6, max_position_embeddings=4096,
                        tie_word_embeddings=True)},
        # The language model inside a Gemma3ForConditionalGeneration checkpoint (a tiny SigLIP
        # tower beside it, unused by text prompts).
        {"name": "gemma3-tiny-mm", "cls": "Gemma3ForConditionalGeneration", "seed": 63,
         "vocab": 288,
         "config": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                        num_attention_heads=2, num_key_value_heads=1, head_dim=32,
                        query_pre_attn_scalar=32, sliding_window=16,
                        layer_types=gemma_layers(2, 2),
                        rope_parameters={
                            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                            "full_attention": {"rope_type": "linear", "rope_theta": 1000000.0,
                                               "factor": 8.0}},
                        rms_norm_eps=1e-6, max_position_embeddings=4096,
                        tie_word_embeddings=True)},
        # Phi-3 (Phi-4-mini's layout): q | k | v stored as one qkv_proj and gate | up as one
        # gate_up_proj (pagoda loads them as parts lists), partial RoPE 0.75, GQA 3:1, window 40.
        {"name": "phi3-tiny-fused", "cls": "Phi3ForCausalLM", "seed": 71, "vocab": 352,
         "config": dict(hidden_size=96, intermediate_size=160, num_hidden_layers=2,
                        num_attention_heads=6, num_key_value_heads=2, partial_rotary_factor=0.75,
                        sliding_window=40, tie_word_embeddings=False,
                        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                        rms_norm_eps=1e-5, max_position_embeddings=4096,
                        original_max_position_embeddings=4096)},
    ]


def make_config(spec):
    c = dict(spec["config"], vocab_size=spec["vocab"], bos_token_id=1, eos_token_id=2,
             pad_token_id=0)
    if spec["cls"] == "Qwen2ForCausalLM":
        return transformers.Qwen2Config(**c)
    if spec["cls"] == "MistralForCausalLM":
        return transformers.MistralConfig(**c)
    if spec["cls"] == "Phi3ForCausalLM":
        return transformers.Phi3Config(**c)
    text = transformers.Gemma3TextConfig(**c)
    if spec["cls"] == "Gemma3ForCausalLM":
        return text
    vision = transformers.SiglipVisionConfig(hidden_size=16, intermediate_size=32,
                                             num_hidden_layers=1, num_attention_heads=2,
                                             image_size=28, patch_size=14)
    return transformers.Gemma3Config(text_config=text.to_dict(), vision_config=vision.to_dict(),
                                     mm_tokens_per_image=4, tie_word_embeddings=True)


def reinit_(model, seed, zero_centred):
    """Weights large enough that every part of the block moves the logits."""
    g = torch.Generator().manual_seed(seed)
    for name, p in model.named_parameters():
        if "vision_tower" in name or "multi_modal_projector" in name:
            continue  # not on the text path
        d = p.data
        if zero_centred and ("post_attention_layernorm" in name or "post_feedforward" in name):
            # Gemma's post-norms set the size of what each sublayer adds to the residual: (1 + w)
            # near 3 lets the layers, not the token's own tied embedding, pick the next token.
            d.normal_(2.0, 0.5, generator=g)
        elif name.endswith("norm.weight"):
            d.normal_(0.0 if zero_centred else 1.0, 0.25, generator=g)
        elif name.endswith(".bias"):
            d.normal_(0.0, 0.3, generator=g)
        elif name.endswith("embed_tokens.weight") or name == "lm_head.weight":
            # Gemma multiplies embeddings by sqrt(hidden): keep them at rms 0.3 after that, or the
            # residual stream is mostly the token's own (tied) embedding and every prompt just
            # repeats its last token.
            d.normal_(0.0, 0.3 / math.sqrt(d.shape[1]) if zero_centred else 0.5, generator=g)
        elif name.endswith(".weight") and d.dim() == 2:
            d.normal_(0.0, 1.5 / math.sqrt(d.shape[1]), generator=g)
        else:
            raise AssertionError(f"no init rule for {name}")


def greedy(model, prompt):
    seq, gen, first, margins = list(prompt), [], None, []
    for step in range(NEW_TOKENS):
        lg = mf.hf_logits(model, seq, "cpu")[-1]
        if step == 0:
            first = lg.clone()
        top = torch.topk(lg, 2)
        margins.append(float(top.values[0] - top.values[1]))
        gen.append(int(top.indices[0]))
        seq.append(gen[-1])
    return gen, first, min(margins)


def build(spec, out_dir):
    cls = getattr(transformers, spec["cls"])
    torch.manual_seed(spec["seed"])
    model = cls(make_config(spec)).eval()
    reinit_(model, spec["seed"], zero_centred=spec["cls"].startswith("Gemma3"))
    tied = spec["config"]["tie_word_embeddings"]
    mf.check_tied(model, tied)
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    model.save_pretrained(out_dir)
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 1, "eos_token_id": 2, "do_sample": False,
                   "transformers_version": transformers.__version__}, f, indent=2)
        f.write("\n")
    model = cls.from_pretrained(out_dir, dtype=torch.float32, attn_implementation="eager").eval()
    mf.check_tied(model, tied)
    cases = greedy_cases(model, spec["seed"], spec["vocab"], PROMPT_LENGTHS)
    with open(os.path.join(out_dir, "config.json")) as f:
        cfg = json.load(f)
    ref = {"model": spec["name"], "architecture": spec["cls"],
           "made_by": "tools/make_family_fixtures.py", "reference_dtype": "float32",
           "reference_method": ("HF from_pretrained(saved dir, dtype=float32, eager); greedy loop "
                                "over the full sequence, use_cache=False; eos NOT applied"),
           "max_new_tokens": NEW_TOKENS, "eos_ignored": True,
           "torch_version": torch.__version__, "transformers_version": transformers.__version__,
           "config": cfg, "cases": cases}
    mf.write_reference(os.path.join(out_dir, "reference.json"), ref)


def greedy_cases(model, seed, vocab, lengths):
    """One reference case per prompt length: a seeded prompt whose greedy run keeps its top-2 margin
    (reseeded until it does), the tokens, and the last prompt position's logits."""
    cases = []
    for idx, length in enumerate(lengths):
        for attempt in range(mf.MAX_ATTEMPTS):
            prompt = mf.make_prompt(seed, idx, attempt, length, vocab)
            gen, first, margin = greedy(model, prompt)
            if margin >= mf.MIN_MARGIN:
                break
            print(f"    prompt len {length}: margin {margin:.2e}, reseeding")
        else:
            raise AssertionError(f"no usable prompt of length {length}")
        cases.append({"prompt_len": length, "prompt_ids": prompt, "generated_ids": gen,
                      "prompt_last_logits": mf.f32_list(first), "min_top2_margin": margin})
        print(f"    prompt len {length:3d}: margin {margin:.3f} gen {gen[:6]}")
    return cases


def write_quantized_fixture(spec, model, out_dir, replaced, quantization_config, made_by, method, lengths):
    """A quantized fixture: `model` (its weights already the dequantized values) saved, each weight in
    `replaced` swapped for its checkpoint tensors (name -> {tensor name: tensor}), config.json given
    `quantization_config`, and reference.json of greedy cases run on the dequantized model."""
    from safetensors.torch import load_file, save_file

    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    model.save_pretrained(out_dir)
    st = os.path.join(out_dir, "model.safetensors")
    sd = load_file(st)
    for name, tensors in replaced.items():
        assert name in sd, name
        del sd[name]
        sd.update(tensors)
    save_file(sd, st, metadata={"format": "pt"})
    with open(os.path.join(out_dir, "config.json")) as f:
        config = json.load(f)
    config["quantization_config"] = quantization_config
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump({"eos_token_id": 2, "do_sample": False, "transformers_version": transformers.__version__}, f,
                  indent=2)
        f.write("\n")
    cases = greedy_cases(model, spec["seed"], model.config.vocab_size, lengths)
    ref = {"model": spec["name"], "architecture": spec["arch"], "made_by": made_by,
           "reference_dtype": "float32", "quantized_tensors": sorted(replaced), "reference_method": method,
           "max_new_tokens": NEW_TOKENS, "eos_ignored": True, "torch_version": torch.__version__,
           "transformers_version": transformers.__version__, "config": config, "cases": cases}
    mf.write_reference(os.path.join(out_dir, "reference.json"), ref)


def fixture_main(description, specs, build_one):
    """The fixture tools' command line: --out DIR, --only NAME..., then build_one(spec, DIR/name) for
    each spec, going on past a failure (one family's must not hide the others) and exiting non-zero
    naming the failed ones."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--out", default="tests/fixtures/models")
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args()
    torch.set_num_threads(8)
    torch.use_deterministic_algorithms(True, warn_only=True)
    print(f"torch {torch.__version__} transformers {transformers.__version__}")
    failed = []
    for spec in specs:
        if args.only and spec["name"] not in args.only:
            continue
        print(f"== {spec['name']}")
        try:
            build_one(spec, os.path.join(args.out, spec["name"]))
        except Exception:  # noqa: BLE001
            import traceback
            traceback.print_exc()
            failed.append(spec["name"])
    if failed:
        sys.exit("failed: " + ", ".join(failed))


def main():
    fixture_main(__doc__.split("\n")[0], spec_list(), build)


if __name__ == "__main__":
    main()
