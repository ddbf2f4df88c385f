#!/usr/bin/env python3
"""Train a multi-token-prediction head (Qwen3.5's `mtp.*`) for the shipped Qwen3.5 model, the main
model frozen, so that `--speculative-config '{"method": "mtp", ...}'` has a head that predicts.

Run on the GPU machine (torch 2.11, transformers 5.17; tools/device/train_mtp_head.sh):

    python3 tools/train_mtp_head.py --model models/qwen3_5-kjv --data .train-data/prepared --out OUT

The head is built from transformers' own Qwen3.5 pieces, wired as vLLM's qwen3_5_mtp (and
pagoda's model/mtp_head.cpp) run it: for position t, x = fc([norm_e(embed(x[t+1])); norm_h(h[t])])
with h the main model's final-norm hidden states, one full-attention decoder layer at position t,
then norm and the main model's lm_head give token t + 2. Its decoder layer starts as a copy of the
model's last full-attention layer, fc as [0 | I] (the hidden state passed through). Trained on the
same documents as the main model (tools/train_tiny_models.py's build_documents and seed), it keeps
the step of lowest validation loss. Writes OUT/model.safetensors (the model's tensors unchanged,
plus mtp.* in bf16), OUT/config.json (mtp_num_hidden_layers: 1) and OUT/mtp_training.json.
"""
import argparse
import importlib.util
import json
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("ttm", os.path.join(HERE, "train_tiny_models.py"))
ttm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ttm)  # blocks the optional fla / causal_conv1d kernels, as training did

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402
from transformers.models.qwen3_5 import modeling_qwen3_5 as m  # noqa: E402


class MtpHead(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        cfg = model.config
        H = cfg.hidden_size
        full = [i for i, t in enumerate(cfg.layer_types) if t == "full_attention"][-1]
        self.norm_e = m.Qwen3_5RMSNorm(H, eps=cfg.rms_norm_eps)
        self.norm_h = m.Qwen3_5RMSNorm(H, eps=cfg.rms_norm_eps)
        self.norm = m.Qwen3_5RMSNorm(H, eps=cfg.rms_norm_eps)
        self.fc = torch.nn.Linear(2 * H, H, bias=False)
        with torch.no_grad():
            self.fc.weight.zero_()
            self.fc.weight[:, H:] = torch.eye(H)
        self.layer = m.Qwen3_5DecoderLayer(cfg, layer_idx=full)
        self.layer.load_state_dict(model.model.layers[full].state_dict())
        self.norm.load_state_dict(model.model.norm.state_dict())

    def forward(self, model, h, next_ids):
        B, S, _ = h.shape
        e = model.model.embed_tokens(next_ids)
        x = self.fc(torch.cat([self.norm_e(e), self.norm_h(h)], dim=-1))
        pos = torch.arange(S, device=h.device)[None].expand(B, S)
        pe = model.model.rotary_emb(x, pos[None].expand(3, B, S))
        mask = torch.full((S, S), float("-inf"), device=h.device).triu(1)[None, None]
        y = self.layer(x, position_embeddings=pe, attention_mask=mask, position_ids=pos)
        y = y[0] if isinstance(y, tuple) else y
        return model.lm_head(self.norm(y))

    def state_dict_as_checkpoint(self):
        out = {"mtp.fc.weight": self.fc.weight, "mtp.pre_fc_norm_embedding.weight": self.norm_e.weight,
               "mtp.pre_fc_norm_hidden.weight": self.norm_h.weight, "mtp.norm.weight": self.norm.weight}
        for k, v in self.layer.state_dict().items():
            out["mtp.layers.0." + k] = v
        return {k: v.detach().to(torch.bfloat16).contiguous().cpu() for k, v in out.items()}


def mtp_loss(head, model, x):
    """x [B, S + 2]: the head at t reads h[t] and x[t + 1] and predicts x[t + 2]."""
    S = x.shape[1] - 2
    with torch.no_grad():
        h = model(input_ids=x[:, :S + 1], output_hidden_states=True, use_cache=False).hidden_states[-1][:, :S]
    logits = head(model, h, x[:, 1:S + 1]).float()
    target = x[:, 2:]
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))
    acc = (logits.argmax(-1) == target).float().mean()
    return loss, acc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="models/qwen3_5-kjv")
    ap.add_argument("--data", default=".train-data/prepared")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--lr", type=float, default=1e-3)
    args = ap.parse_args()
    device = ttm.device_type()
    t0 = time.time()
    train_docs, val_docs, _ = ttm.build_documents(args.data, random.Random(args.seed))
    tok = Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))
    stream, val_stream = ttm.encode_stream(tok, train_docs), ttm.encode_stream(tok, val_docs)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).to(device).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    torch.manual_seed(args.seed)
    head = MtpHead(model).to(device).train()
    opt = torch.optim.AdamW(head.parameters(), lr=args.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=args.steps, pct_start=0.05)
    gen = torch.Generator().manual_seed(args.seed)
    nv = min(16, (len(val_stream) - 1) // (args.seq + 2))
    val = torch.stack([val_stream[i * (args.seq + 2):(i + 1) * (args.seq + 2)].long() for i in range(nv)]).to(device)
    best = (float("inf"), 0.0, 0, None)
    log = []
    for step in range(1, args.steps + 1):
        x = ttm.batches(stream, args.batch, args.seq + 1, gen, device)
        with torch.autocast(device, dtype=torch.bfloat16):
            loss, acc = mtp_loss(head, model, x)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % 100 == 0 or step == args.steps:
            head.eval()
            with torch.no_grad(), torch.autocast(device, dtype=torch.bfloat16):
                vl, va = mtp_loss(head, model, val)
            head.train()
            log.append({"step": step, "train_loss": loss.item(), "val_loss": vl.item(), "val_top1": va.item()})
            print(json.dumps(log[-1]), flush=True)
            if vl.item() < best[0]:
                best = (vl.item(), va.item(), step, head.state_dict_as_checkpoint())
    weights = load_file(os.path.join(args.model, "model.safetensors"))
    weights = {k: v for k, v in weights.items() if not k.startswith("mtp.")}
    weights.update(best[3])
    os.makedirs(args.out, exist_ok=True)
    save_file(weights, os.path.join(args.out, "model.safetensors"), metadata={"format": "pt"})
    cfg = json.load(open(os.path.join(args.model, "config.json")))
    cfg["mtp_num_hidden_layers"] = 1
    json.dump(cfg, open(os.path.join(args.out, "config.json"), "w"), indent=2)
    json.dump({"command": "python3 " + " ".join(sys.argv), "torch": torch.__version__,
               "transformers": __import__("transformers").__version__, "steps": args.steps,
               "batch": args.batch, "seq": args.seq, "lr": args.lr, "best_step": best[2],
               "best_val_loss": best[0], "best_val_top1_next_next_token": best[1], "log": log,
               "seconds": round(time.time() - t0, 1)},
              open(os.path.join(args.out, "mtp_training.json"), "w"), indent=1)
    print(f"best step {best[2]}: val loss {best[0]:.3f}, top-1 of token t+2 {best[1]:.3f}; {time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
