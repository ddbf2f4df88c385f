#!/usr/bin/env python3
"""Make tiny random-weight mixture-of-experts checkpoints with greedy references from Hugging Face
transformers, and transformers' parameter counts of full-size MoE configs:

  qwen3_moe-tiny-dense-layer   Qwen3MoeForCausalLM, norm_topk_prob true, mlp_only_layers [1] (a dense
                               layer between sparse ones), head_dim 24 != hidden/heads, untied;
                               weights as save_pretrained writes them
  qwen3_moe-tiny-raw-topk      norm_topk_prob false, decoder_sparse_step 2 (layers 0 and 2 dense),
                               top-4 of 16, tied; experts rewritten into the OTHER layout
  qwen3_5_moe-tiny-mm          Qwen3_5MoeForConditionalGeneration: hybrid Gated DeltaNet + gated
                               attention, MoE + sigmoid-gated shared expert, the nested multimodal
                               config and a tiny vision tower, as save_pretrained writes them
  qwen3_5_moe-tiny-mm-relayout the same weights with the experts rewritten into the other layout

The two expert layouts: packed (mlp.experts.gate_up_proj [E, 2I, H], mlp.experts.down_proj
[E, H, I]: transformers 5's modules) and one tensor per expert (mlp.experts.{e}.gate_proj /
up_proj / down_proj.weight: the released Qwen3-MoE checkpoints). Whichever transformers saves, the
script writes the other by rewriting the tensors exactly (a reshape, no arithmetic), then reloads
the rewritten directory with from_pretrained: the reference of a rewritten fixture is that reload's
own greedy run where transformers loads it to the same logits, else (recorded in reference.json) the
saved model's, whose weights it holds bit for bit.

Run on the GPU machine (torch, transformers 5.x, safetensors; no network), on its CPU:

    python3 tools/make_moe_fixtures.py --out tests/fixtures/models --counts tests/fixtures/configs

Writes tests/fixtures/models/<name>/ (config.json, model.safetensors, generation_config.json,
reference.json in the format of tools/make_family_fixtures.py, plus the layout and the smallest
router gap of each case) and tests/fixtures/configs/{qwen3-30b-a3b,qwen3_5-35b-a3b}/config.json with
tests/fixtures/configs/moe_param_counts.json: total and per-token active parameters of the text
model as transformers builds it (AutoModelForCausalLM.from_config on the meta device; the vision
tower and the MTP head left out; active = total minus the (E - k) / E of every expert tensor that a
token does not visit).

Routing is discontinuous: a token whose k-th and (k+1)-th router logits nearly tie could pick
another expert under fp32 rounding differences. Every case is checked over every layer and every
position of every greedy step: the k-th/(k+1)-th log-probability gap must be at least
ROUTER_MIN_GAP, else the prompt is reseeded (as for a small top-1/top-2 logit margin).
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
from safetensors.torch import load_file, save_file  # noqa: E402

PROMPT_LENGTHS = [1, 7, 40, 130, 300]
NEW_TOKENS = 16
ROUTER_MIN_GAP = 2e-4  # log-probability units; fp32 noise between implementations is ~1e-6

L, F = "linear_attention", "full_attention"


def qwen3_5_moe_text(**kw):
    hd = kw["head_dim"]
    rope = {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
            "mrope_section": [hd // 16, hd // 32, hd // 32], "mrope_interleaved": True}
    assert sum(rope["mrope_section"]) == hd * 0.25 / 2
    base = dict(hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-6,
                rope_parameters=rope, attention_bias=False, linear_conv_kernel_dim=4)
    base.update(kw)
    return base


VISION = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, in_channels=3, patch_size=2,
              temporal_patch_size=2, spatial_merge_size=2, out_hidden_size=64, num_position_embeddings=16)


def spec_list():
    mm_text = qwen3_5_moe_text(vocab_size=320, hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
                               num_key_value_heads=2, head_dim=32, linear_num_key_heads=2,
                               linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
                               layer_types=[L, F, L, L], num_experts=8, num_experts_per_tok=2,
                               moe_intermediate_size=32, shared_expert_intermediate_size=48,
                               tie_word_embeddings=False)
    return [
        {"name": "qwen3_moe-tiny-dense-layer", "cls": "Qwen3MoeForCausalLM", "seed": 71, "vocab": 320,
         "relayout": False,
         "config": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
                        num_key_value_heads=2, head_dim=24, tie_word_embeddings=False,
                        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
                        rms_norm_eps=1e-6, max_position_embeddings=4096, num_experts=8, num_experts_per_tok=2,
                        moe_intermediate_size=32, norm_topk_prob=True, decoder_sparse_step=1,
                        mlp_only_layers=[1])},
        {"name": "qwen3_moe-tiny-raw-topk", "cls": "Qwen3MoeForCausalLM", "seed": 72, "vocab": 288,
         "relayout": True,
         "config": dict(hidden_size=48, intermediate_size=64, num_hidden_layers=4, num_attention_heads=4,
                        num_key_value_heads=1, head_dim=12, tie_word_embeddings=True,
                        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                        rms_norm_eps=1e-5, max_position_embeddings=4096, num_experts=16, num_experts_per_tok=4,
                        moe_intermediate_size=24, norm_topk_prob=False, decoder_sparse_step=2,
                        mlp_only_layers=[])},
        {"name": "qwen3_5_moe-tiny-mm", "cls": "Qwen3_5MoeForConditionalGeneration", "seed": 73, "vocab": 320,
         "relayout": False, "config": {"text_config": mm_text, "vision_config": VISION,
                                       "tie_word_embeddings": False}},
        {"name": "qwen3_5_moe-tiny-mm-relayout", "cls": "Qwen3_5MoeForConditionalGeneration", "seed": 73,
         "vocab": 320, "relayout": True, "config": {"text_config": mm_text, "vision_config": VISION,
                                                    "tie_word_embeddings": False}},
    ]


def make_config(spec):
    c = dict(spec["config"])
    if spec["cls"] == "Qwen3MoeForCausalLM":
        c.update(vocab_size=spec["vocab"], bos_token_id=1, eos_token_id=2, pad_token_id=0)
        cfg = transformers.Qwen3MoeConfig(**c)
        # Qwen3MoeConfig has no head_dim field; the attention reads getattr(config, "head_dim", ...).
        assert getattr(cfg, "head_dim", None) == c["head_dim"], "head_dim did not reach the config"
        return cfg
    return transformers.Qwen3_5MoeConfig(**c)


def reinit_(model, seed):
    """Weights large enough that routing, every expert and the shared expert move the logits."""
    g = torch.Generator().manual_seed(seed)
    centred = "Qwen3_5" in type(model).__name__
    for name, p in model.named_parameters():
        d = p.data
        if ".visual." in name or name.startswith("visual.") or ".visual" in name:
            d.normal_(0.0, 0.02, generator=g)  # never run on text prompts
        elif name.endswith(".bias"):
            raise AssertionError(f"unexpected bias {name}")
        elif name.endswith("A_log"):
            d.uniform_(-4.0, 0.0, generator=g)
        elif name.endswith("dt_bias"):
            d.normal_(0.0, 0.5, generator=g)
        elif name.endswith("linear_attn.norm.weight"):
            d.normal_(1.0, 0.25, generator=g)
        elif name.endswith("norm.weight"):
            d.normal_(0.0 if centred else 1.0, 0.25, generator=g)
        elif name.endswith("embed_tokens.weight") or name == "lm_head.weight":
            d.normal_(0.0, 0.5, generator=g)
        elif name.endswith("conv1d.weight"):
            d.normal_(0.0, 0.5, generator=g)
        elif name.endswith("in_proj_a.weight") or name.endswith("in_proj_b.weight"):
            d.normal_(0.0, 0.5 / math.sqrt(d.shape[1]), generator=g)
        elif d.dim() == 3:  # packed experts [E, out, in]
            d.normal_(0.0, 1.5 / math.sqrt(d.shape[2]), generator=g)
        elif name.endswith(".weight") and d.dim() == 2:
            d.normal_(0.0, 1.5 / math.sqrt(d.shape[1]), generator=g)
        else:
            raise AssertionError(f"no init rule for {name} {tuple(d.shape)}")


# ---- the two expert layouts -------------------------------------------------------------------

def layout_of(tensors):
    packed = any(k.endswith("mlp.experts.gate_up_proj") for k in tensors)
    per_expert = any(".mlp.experts.0.gate_proj.weight" in k for k in tensors)
    assert packed != per_expert, f"expert layout unclear (packed {packed}, per-expert {per_expert})"
    return "packed" if packed else "per_expert"


def to_per_expert(tensors):
    out = {}
    for k, v in tensors.items():
        if k.endswith("mlp.experts.gate_up_proj"):
            p = k[: -len("gate_up_proj")]
            i = v.shape[1] // 2
            for e in range(v.shape[0]):
                out[f"{p}{e}.gate_proj.weight"] = v[e, :i].clone().contiguous()
                out[f"{p}{e}.up_proj.weight"] = v[e, i:].clone().contiguous()
        elif k.endswith("mlp.experts.down_proj"):
            p = k[: -len("down_proj")]
            for e in range(v.shape[0]):
                out[f"{p}{e}.down_proj.weight"] = v[e].clone().contiguous()
        else:
            out[k] = v
    return out


def to_packed(tensors):
    out, groups = {}, {}
    for k, v in tensors.items():
        if ".mlp.experts." in k and k.endswith("_proj.weight"):
            head, rest = k.split(".mlp.experts.")
            e, proj = rest.split(".", 1)
            groups.setdefault(head, {})[(int(e), proj)] = v
        else:
            out[k] = v
    for head, g in groups.items():
        n = 1 + max(e for e, _ in g)
        gate_up = [torch.cat([g[(e, "gate_proj.weight")], g[(e, "up_proj.weight")]], 0) for e in range(n)]
        out[f"{head}.mlp.experts.gate_up_proj"] = torch.stack(gate_up).contiguous()
        out[f"{head}.mlp.experts.down_proj"] = torch.stack([g[(e, "down_proj.weight")] for e in range(n)]).contiguous()
    return out


def relayout(src_dir, dst_dir):
    if os.path.exists(dst_dir):
        shutil.rmtree(dst_dir)
    shutil.copytree(src_dir, dst_dir)
    path = os.path.join(dst_dir, "model.safetensors")
    tensors = load_file(path)
    saved = layout_of(tensors)
    new = to_packed(tensors) if saved == "per_expert" else to_per_expert(tensors)
    save_file(new, path, metadata={"format": "pt"})
    return saved, layout_of(new)


# ---- references -------------------------------------------------------------------------------

class RouterGaps:
    """Smallest gap between the k-th and (k+1)-th router log-probabilities seen by the hooks."""

    def __init__(self, model, k):
        self.k, self.min_gap, self.calls = k, math.inf, 0
        self.handles = [m.register_forward_hook(self.hook) for n, m in model.named_modules()
                        if n.endswith(".mlp.gate") or n.endswith(".mlp.router")]
        assert self.handles, "no router modules (mlp.gate) found"

    def hook(self, _module, _inp, out):
        # Raw logits (a Linear) or, for the TopKRouter modules, (softmax probabilities, ...).
        y = out[0] if isinstance(out, tuple) else out
        x = y.detach().double().reshape(-1, y.shape[-1])
        probs = bool((x >= 0).all()) and bool(((x.sum(-1) - 1).abs() < 1e-4).all())
        lp = torch.log(x) if probs else torch.log_softmax(x, -1)
        if lp.shape[-1] > self.k:
            top = torch.topk(lp, self.k + 1, dim=-1).values
            self.min_gap = min(self.min_gap, float((top[:, self.k - 1] - top[:, self.k]).min()))
        self.calls += 1

    def reset(self):
        self.min_gap, self.calls = math.inf, 0

    def close(self):
        for h in self.handles:
            h.remove()


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


def load(spec, d):
    """fp32, eager attention and, where this transformers takes the argument, the eager (per-expert
    loop) experts implementation."""
    cls = getattr(transformers, spec["cls"])
    try:
        return cls.from_pretrained(d, dtype=torch.float32, attn_implementation="eager",
                                   experts_implementation="eager").eval()
    except (TypeError, ValueError, KeyError) as e:
        print(f"    from_pretrained(experts_implementation='eager'): {e!r}; loading without it")
        return cls.from_pretrained(d, dtype=torch.float32, attn_implementation="eager").eval()


def experts_implementation(model):
    return str(getattr(model.config.get_text_config(), "_experts_implementation", None))


def reference_cases(spec, model):
    k = model.config.get_text_config().num_experts_per_tok
    gaps = RouterGaps(model, k)
    cases = []
    for idx, length in enumerate(PROMPT_LENGTHS):
        for attempt in range(mf.MAX_ATTEMPTS):
            prompt = mf.make_prompt(spec["seed"], idx, attempt, length, spec["vocab"])
            gaps.reset()
            gen, first, margin = greedy(model, prompt)
            if margin >= mf.MIN_MARGIN and gaps.min_gap >= ROUTER_MIN_GAP:
                break
            print(f"    prompt len {length}: margin {margin:.2e}, router gap {gaps.min_gap:.2e}, reseeding")
        else:
            raise AssertionError(f"no usable prompt of length {length}")
        assert gaps.calls > 0, "the router hooks never ran"
        cases.append({"prompt_len": length, "prompt_ids": prompt, "generated_ids": gen,
                      "prompt_last_logits": mf.f32_list(first), "min_top2_margin": margin,
                      "min_router_gap": gaps.min_gap if math.isfinite(gaps.min_gap) else None})
        print(f"    prompt len {length:3d}: margin {margin:.3f} router gap {gaps.min_gap:.2e} gen {gen[:6]}")
    gaps.close()
    return cases


def write_fixture(spec, out_dir, cases, layout, method, extra):
    with open(os.path.join(out_dir, "config.json")) as f:
        cfg = json.load(f)
    ref = {"model": spec["name"], "architecture": spec["cls"], "made_by": "tools/make_moe_fixtures.py",
           "reference_dtype": "float32", "reference_method": method, "expert_layout": layout,
           "max_new_tokens": NEW_TOKENS, "eos_ignored": True, "router_min_gap_required": ROUTER_MIN_GAP,
           "torch_version": torch.__version__, "transformers_version": transformers.__version__,
           **extra, "config": cfg, "cases": cases}
    mf.write_reference(os.path.join(out_dir, "reference.json"), ref)


def build(spec, out_root, made):
    out_dir = os.path.join(out_root, spec["name"])
    if spec["relayout"] and spec["seed"] in made:
        # The same weights as an earlier fixture, experts rewritten into the other layout.
        src_dir, src_cases = made[spec["seed"]]
        saved, layout = relayout(src_dir, out_dir)
        reload_ok, method = reload_matches(spec, src_dir, out_dir)
        cases = reference_cases(spec, load(spec, out_dir)) if reload_ok else src_cases
        write_fixture(spec, out_dir, cases, layout, method, {"saved_layout": saved})
        return
    cls = getattr(transformers, spec["cls"])
    torch.manual_seed(spec["seed"])
    model = cls(make_config(spec)).eval()
    reinit_(model, spec["seed"])
    tied = bool(model.config.get_text_config().tie_word_embeddings or getattr(model.config, "tie_word_embeddings", False))
    mf.check_tied(model, tied)
    tmp = out_dir + ".saved" if spec["relayout"] else out_dir
    for d in {tmp, out_dir}:
        if os.path.exists(d):
            shutil.rmtree(d)
    model.save_pretrained(tmp)
    with open(os.path.join(tmp, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 1, "eos_token_id": 2, "do_sample": False,
                   "transformers_version": transformers.__version__}, f, indent=2)
        f.write("\n")
    saved = layout_of(load_file(os.path.join(tmp, "model.safetensors")))
    print(f"    save_pretrained wrote the {saved} expert layout")
    reloaded = load(spec, tmp)
    mf.check_tied(reloaded, tied)
    cases = reference_cases(spec, reloaded)
    extra = {"saved_layout": saved, "experts_implementation": experts_implementation(reloaded)}
    if not spec["relayout"]:
        write_fixture(spec, out_dir, cases, saved, "HF from_pretrained(saved dir, dtype=float32, eager); greedy "
                      "loop over the full sequence, use_cache=False; eos NOT applied", extra)
        made[spec["seed"]] = (out_dir, cases)
        return
    _, layout = relayout(tmp, out_dir)
    reload_ok, method = reload_matches(spec, tmp, out_dir)
    if reload_ok:
        cases = reference_cases(spec, load(spec, out_dir))
    write_fixture(spec, out_dir, cases, layout, method, extra)
    shutil.rmtree(tmp)


def reload_matches(spec, src_dir, dst_dir):
    """Whether transformers loads the rewritten directory to the same logits as the saved one."""
    probe = mf.make_prompt(spec["seed"], 99, 0, 23, spec["vocab"])
    want = mf.hf_logits(load(spec, src_dir), probe, "cpu")
    try:
        got = mf.hf_logits(load(spec, dst_dir), probe, "cpu")
        diff = float((got - want).abs().max())
    except Exception as e:  # noqa: BLE001  (a layout transformers cannot load)
        print(f"    transformers cannot load the rewritten layout: {e!r}")
        return False, ("experts rewritten exactly from the saved checkpoint, which transformers cannot "
                       f"reload in this layout ({type(e).__name__}); the saved model's references")
    print(f"    rewritten layout reloads with max |logit diff| {diff:.3g}")
    if diff == 0.0:
        return True, ("HF from_pretrained(the rewritten dir, dtype=float32, eager): identical logits to the "
                      "saved layout; greedy loop over the full sequence, use_cache=False; eos NOT applied")
    return False, (f"experts rewritten exactly from the saved checkpoint; transformers reloads this layout "
                   f"with logits {diff:.3g} away (it does not map it onto its modules), so the references "
                   "are the saved model's")


# ---- parameter counts of full-size configs ------------------------------------------------------

def full_size_configs():
    q3 = transformers.Qwen3MoeConfig(
        vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=48,
        num_attention_heads=32, num_key_value_heads=4, head_dim=128, max_position_embeddings=40960,
        rms_norm_eps=1e-6, tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, decoder_sparse_step=1,
        moe_intermediate_size=768, num_experts_per_tok=8, num_experts=128, norm_topk_prob=True,
        mlp_only_layers=[], bos_token_id=151643, eos_token_id=151645)
    q3.architectures = ["Qwen3MoeForCausalLM"]
    text = qwen3_5_moe_text(vocab_size=248320, hidden_size=2048, num_hidden_layers=40, num_attention_heads=16,
                            num_key_value_heads=2, head_dim=256, linear_num_key_heads=16,
                            linear_num_value_heads=32, linear_key_head_dim=128, linear_value_head_dim=128,
                            layer_types=[L, L, L, F] * 10, num_experts=256, num_experts_per_tok=8,
                            moe_intermediate_size=512, shared_expert_intermediate_size=512,
                            max_position_embeddings=262144, tie_word_embeddings=False)
    q35 = transformers.Qwen3_5MoeConfig(text_config=text, tie_word_embeddings=False)
    q35.architectures = ["Qwen3_5MoeForConditionalGeneration"]
    return {"qwen3-30b-a3b": q3, "qwen3_5-35b-a3b": q35}


def build_on_meta(cfg):
    """AutoModelForCausalLM.from_config; where the auto class refuses a composite config, the
    architecture's own class (recorded)."""
    with torch.device("meta"):
        try:
            return transformers.AutoModelForCausalLM.from_config(cfg), "AutoModelForCausalLM.from_config"
        except Exception as e:  # noqa: BLE001
            print(f"  AutoModelForCausalLM.from_config: {e!r}; using {cfg.architectures[0]}")
            return getattr(transformers, cfg.architectures[0])(cfg), cfg.architectures[0] + "(config)"


def count_parameters(cfg):
    model, how = build_on_meta(cfg)
    text = cfg.get_text_config()
    E, k = text.num_experts, text.num_experts_per_tok
    total = experts = everything = 0
    skipped = set()
    for name, p in model.named_parameters():
        n = p.numel()
        everything += n
        if "visual" in name or name.startswith("mtp") or ".mtp." in name:
            skipped.add(name.split(".layers.")[0].split(".blocks.")[0])
            continue
        total += n
        if ".mlp.experts." in name:  # packed [E, ...] or one expert's own tensor
            experts += n
    assert experts % E == 0, (experts, E)
    return {"class": type(model).__name__, "built_with": how, "total": total,
            "active": total - experts // E * (E - k), "routed_expert_parameters": experts,
            "all_parameters_of_the_class": everything, "left_out": sorted(skipped)}


def write_counts(out_root):
    counts = {"made_by": "tools/make_moe_fixtures.py", "transformers_version": transformers.__version__,
              "method": ("AutoModelForCausalLM.from_config(config) on the meta device; total = every parameter "
                         "outside the vision tower and MTP head; active = total minus (E - k) / E of every "
                         "mlp.experts.* parameter"), "models": {}}
    for name, cfg in full_size_configs().items():
        d = os.path.join(out_root, name)
        os.makedirs(d, exist_ok=True)
        cfg.save_pretrained(d)
        counts["models"][name] = count_parameters(cfg)
        print(f"  {name}: {counts['models'][name]}")
    with open(os.path.join(out_root, "moe_param_counts.json"), "w") as f:
        json.dump(counts, f, indent=2)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/fixtures/models")
    ap.add_argument("--counts", default="tests/fixtures/configs")
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args()
    torch.set_num_threads(8)
    torch.use_deterministic_algorithms(True, warn_only=True)
    print(f"torch {torch.__version__} transformers {transformers.__version__}")
    failed, made = [], {}
    try:
        write_counts(args.counts)
    except Exception:  # keep going: the fixtures must not wait on the counts
        import traceback
        traceback.print_exc()
        failed.append("param counts")
    for spec in spec_list():
        if args.only and spec["name"] not in args.only:
            continue
        print(f"== {spec['name']}")
        try:
            build(spec, args.out, made)
        except Exception:  # keep going: one fixture's failure must not hide the others
            import traceback
            traceback.print_exc()
            failed.append(spec["name"])
    if failed:
        sys.exit("failed: " + ", ".join(failed))


if __name__ == "__main__":
    main()
