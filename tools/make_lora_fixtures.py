#!/usr/bin/env python3
"""Make tiny random LoRA adapters for the family fixtures with Hugging Face `peft`, and PEFT's own
greedy references for them.

For each base fixture (tests/fixtures/models/NAME) an adapter is made with peft.LoraConfig on every
decoder projection the family has (q/k/v/o, gate/up/down; Qwen3.5's in_proj_qkv, in_proj_z,
out_proj too), initialised randomly (init_lora_weights=False, so B is not zero), saved with
save_pretrained (adapter_config.json + adapter_model.safetensors, PEFT's own names), and run as a
PeftModel in fp32 on the CPU with eager attention: reference.json beside the adapter holds each
seeded prompt's greedy tokens and last-prompt logits, as the family fixtures' reference.json does.
The tests hold pagoda's base model + adapter to it on the CPU, and on the GPU machine in fp32.

Run on the GPU machine (torch, transformers 5.x, peft; no network):

    python3 tools/make_lora_fixtures.py --out tests/fixtures/lora [--only NAME ...]
"""

from __future__ import annotations

import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_family_fixtures as fam  # noqa: E402
import make_fixtures as mf  # noqa: E402
from make_fixtures import torch, transformers  # noqa: E402

PROMPT_LENGTHS = [1, 7, 40]
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
           "in_proj_qkv", "in_proj_z", "out_proj"]

SPECS = [
    dict(name="qwen3-tiny-tied-lora", base="qwen3-tiny-tied", r=4, alpha=8, rslora=False, seed=4101),
    dict(name="qwen3_5-tiny-text-lora", base="qwen3_5-tiny-text", r=8, alpha=16, rslora=True, seed=4102),
    dict(name="llama3-tiny-tied-bias-lora", base="llama3-tiny-tied-bias", r=4, alpha=4, rslora=False, seed=4103),
    dict(name="gemma3-tiny-text-lora", base="gemma3-tiny-text", r=2, alpha=8, rslora=False, seed=4104),
    # A second adapter on the test server's model (tests/server/lora_server_test.cpp serves both).
    dict(name="qwen3-tiny-tied-lora-attn", base="qwen3-tiny-tied", r=8, alpha=16, rslora=True, seed=4105,
         targets=["q_proj", "k_proj", "v_proj", "o_proj"]),
]


def build(spec, out_root):
    import peft

    base_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "models",
                            spec["base"])
    model = transformers.AutoModelForCausalLM.from_pretrained(base_dir, torch_dtype=torch.float32,
                                                              attn_implementation="eager")
    present = {n.split(".")[-1] for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    targets = [t for t in spec.get("targets", TARGETS) if t in present]
    torch.manual_seed(spec["seed"])
    config = peft.LoraConfig(r=spec["r"], lora_alpha=spec["alpha"], use_rslora=spec["rslora"],
                             target_modules=targets, init_lora_weights=False, lora_dropout=0.0, bias="none")
    pm = peft.get_peft_model(model, config)
    pm.eval()
    out_dir = os.path.join(out_root, spec["name"])
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    pm.save_pretrained(out_dir, safe_serialization=True)
    os.remove(os.path.join(out_dir, "README.md"))  # PEFT's empty model card
    vocab = model.config.get_text_config().vocab_size
    cases = fam.greedy_cases(pm, spec["seed"], vocab, PROMPT_LENGTHS)
    with open(os.path.join(out_dir, "reference.json"), "w") as f:
        json.dump({"base": spec["base"], "made_by": "tools/make_lora_fixtures.py",
                   "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                                "peft": peft.__version__},
                   "cases": cases}, f)
    print(f"== {spec['name']}: targets {targets}")


def main():
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="tests/fixtures/lora")
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()
    for spec in SPECS:
        if args.only and spec["name"] not in args.only:
            continue
        build(spec, args.out)


if __name__ == "__main__":
    main()
