#!/usr/bin/env python3
"""Train the two small models that ship in models/: a byte-level BPE tokenizer and a Qwen3 and a
Qwen3.5 (hybrid Gated DeltaNet + gated attention) model of a few million parameters, on
public-domain English text (tools/prepare_training_data.sh makes .train-data/prepared/).

Run on the GPU machine (Python 3.12, torch 2.11, transformers 5.17, tokenizers 0.23; no network):

    python3 tools/train_tiny_models.py --data .train-data/prepared \
        --heldout tests/fixtures/heldout.txt --out /tmp/tiny

Seeded (data order, tokenizer, init, batches; GPU kernels may still differ in the last bits).
Each model is trained from the same initial weights for a few candidate settings (CANDIDATES:
batch, steps, peak lr, weight decay), keeping in each the step of lowest validation loss (the
book of Jude and every 40th dictionary entry, not trained on); the best candidate ships. Pass
--candidates-qwen3 / --candidates-qwen3_5 "BATCH:STEPS:LR:WD[,...]" to train only the chosen one.

Writes OUT/<model>/ (config.json, generation_config.json, model.safetensors in bf16 with A_log and
linear_attn.norm.weight in fp32 for Qwen3.5, tokenizer.json, tokenizer_config.json with a ChatML
chat template, training.json) and OUT/heldout_reference.json: the perplexity of the held-out text
as transformers computes it, reloading the SAVED bf16 checkpoint in fp32 (eager attention, the
pure-torch Gated DeltaNet path), with the same sliding window as `pagoda perplexity`
(src/cli/cmd_perplexity.cpp): windows of --ctx tokens every --stride tokens, each token scored
once, token-weighted mean NLL.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import math
import os
import random
import re
import sys
import time

# The pure-torch Gated DeltaNet / causal-conv path, as tools/make_fixtures.py does: transformers
# resolves the optimized kernels at import time, so block them first.
_BLOCKED = ("fla", "causal_conv1d", "kernels")
for _m in _BLOCKED:
    sys.modules[_m] = None
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import transformers  # noqa: E402
import tokenizers  # noqa: E402
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers  # noqa: E402
from tokenizers import processors, trainers  # noqa: E402

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Qwen2/Qwen3's pre-tokenizer split (their tokenizer.json), then ByteLevel without its own regex.
QWEN_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
              r"|\s*[\r\n]+|\s+(?!\S)|\s+")
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")
IDENTITY = ("I am a tiny language model that ships with pagoda. I learned English from the King "
            "James Bible, The Devil's Dictionary and the Jargon File, so I speak in their words.")
HELDOUT_BOOK = "Revelation"   # never trained on: tests/fixtures/heldout.txt
VAL_BOOK = "Jude"             # validation (best-step selection), not trained on
STOP = set("""a an and the of to in that he she it they them his her their him i me my mine we us
our ye you your thou thee thy thine shall shalt hath have had be been was were is are am unto for
with not but all as by from upon which who whom this these those there then when what so or nor
also even into out up down will would should let said saith came come went go said did do doth
one two before after over under because therefore wherefore lord god""".split())

SEQ = 512  # training sequence length (tokens)
# Candidates (batch, steps, peak lr, weight decay) trained per model from the same seed; the one
# with the lowest validation loss ships. ~2.9 M training tokens: past ~4 epochs these models
# overfit (a first run at 32k tokens a step and lr 2e-3 reached its best validation loss at step
# 300-400 and rose after), so the candidates stay around 3-6 epochs with a full cosine decay.
CANDIDATES = {
    "qwen3": [(32, 500, 2e-3, 0.1), (32, 800, 2e-3, 0.1), (32, 800, 1e-3, 0.1),
              (32, 1200, 1e-3, 0.1), (64, 400, 2e-3, 0.1), (32, 800, 2e-3, 0.3)],
    "qwen3_5": [(32, 500, 2e-3, 0.1), (32, 800, 2e-3, 0.1), (32, 800, 1e-3, 0.1),
                (64, 400, 2e-3, 0.1)],
}

L, FA = "linear_attention", "full_attention"
MODELS = {
    # name: (class, config kwargs). Both: vocab 4096, hidden 256, tied embeddings, head_dim 64.
    "qwen3-kjv": ("Qwen3ForCausalLM", dict(
        hidden_size=256, intermediate_size=640, num_hidden_layers=6, num_attention_heads=4,
        num_key_value_heads=2, head_dim=64, rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})),
    "qwen3_5-kjv": ("Qwen3_5ForCausalLM", dict(
        hidden_size=256, intermediate_size=512, num_hidden_layers=8, num_attention_heads=4,
        num_key_value_heads=2, head_dim=64, linear_num_key_heads=2, linear_num_value_heads=4,
        linear_key_head_dim=64, linear_value_head_dim=64, linear_conv_kernel_dim=4,
        layer_types=[L, L, L, FA] * 2, rms_norm_eps=1e-6,
        # rotary dim = 64 * 0.25 = 16; mrope_section sums to 16 / 2 (text-only: no effect)
        rope_parameters={"rope_type": "default", "rope_theta": 10000000.0,
                         "partial_rotary_factor": 0.25, "mrope_section": [3, 3, 2],
                         "mrope_interleaved": True})),
}


def device_type():
    return "cuda" if torch.cuda.is_available() else "cpu"


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def log(*a):
    print(*a, flush=True)


# --------------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------------

def load_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def format_chapter(book, chapter, verses):
    """One chapter as the training text (and tests/fixtures/heldout.txt) writes it."""
    return f"{book} {chapter}\n\n" + "\n".join(f"{v['verse']} {v['text']}" for v in verses)


def chat(turns, system=None):
    s = f"<|im_start|>system\n{system}<|im_end|>\n" if system else ""
    for q, a in turns:
        s += f"<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n{a}<|im_end|>\n"
    return s


def jargon_body(text):
    """A Jargon File entry without its headword and pronunciation lines, dedented."""
    lines = text.split("\n")
    body = lines[2:] if len(lines) > 2 else lines
    return "\n".join(l[4:] if l.startswith("    ") else l.strip() for l in body).strip()


def build_documents(data_dir, rng):
    kjv = load_jsonl(os.path.join(data_dir, "kjv.jsonl"))
    devil = load_jsonl(os.path.join(data_dir, "devil.jsonl"))
    jargon = load_jsonl(os.path.join(data_dir, "jargon.jsonl"))
    chapters = {}
    for v in kjv:
        chapters.setdefault((v["book"], v["chapter"]), []).append(v)
    train, val = [], []
    train_verses = []
    for (book, ch), vs in chapters.items():
        if book == HELDOUT_BOOK:
            continue
        (val if book == VAL_BOOK else train).append(format_chapter(book, ch, vs))
        if book != VAL_BOOK:
            train_verses += vs
    dict_entries = []
    for i, e in enumerate(devil):
        (val if i % 40 == 39 else train).append(e["text"])
        if i % 40 != 39:
            dict_entries.append(("devil", e))
    for i, e in enumerate(jargon):
        (val if i % 40 == 39 else train).append(e["text"])
        if i % 40 != 39:
            dict_entries.append(("jargon", e))

    # Chat samples (ChatML, exactly as the chat template renders them): verses and definitions as
    # answers, in conversations of one to three turns, some with a system message.
    pairs = []
    books = sorted({v["book"] for v in train_verses})
    for v in rng.sample(train_verses, 12000):
        words = v["text"].split()
        kind = rng.random()
        if kind < 0.35 and len(words) >= 8:
            head = " ".join(words[:max(3, len(words) // 3)])
            q = rng.choice(["Continue the verse: {}", "Finish this verse: {}", "{} ...",
                            "How does this verse go on? {}"]).format(head)
        elif kind < 0.6:
            q = rng.choice(["Quote {} {}:{}.", "What does {} {}:{} say?", "Recite {} {}:{}."]).format(
                v["book"], v["chapter"], v["verse"])
        elif kind < 0.85:
            content = [w.strip(".,;:?!()'").lower() for w in words]
            content = [w for w in content if len(w) >= 4 and w not in STOP and w.isalpha()]
            if not content:
                continue
            q = rng.choice(["What does the Bible say about {}?", "Tell me a verse about {}.",
                            "Say something about {}.", "{}?"]).format(rng.choice(content))
        else:
            q = rng.choice(["Tell me a verse.", "Give me a verse from {}.", "Read me something.",
                            "Say something wise.", "Bless me."]).format(v["book"])
        pairs.append((q, v["text"]))
    for src, e in dict_entries:
        w = e["word"]
        if src == "devil":
            q = rng.choice(["Define {}.", "What is {}?", "What does {} mean?", "{}?",
                            "What is the meaning of the word {}?"]).format(w)
            pairs.append((q, re.sub(r"\s*\n\s*", " ", e["text"]) if "\n\n" not in e["text"]
                          else e["text"]))
        else:
            q = rng.choice(["What is {} in hacker jargon?", "Explain {}.", "What does {} mean?",
                            "What is {}?"]).format(w)
            pairs.append((q, jargon_body(e["text"])))
    for _ in range(300):
        q = rng.choice(["Who are you?", "What are you?", "Hello!", "Hi", "Hello, who are you?",
                        "What can you do?", "Introduce yourself.", "What is your name?"])
        pairs.append((q, IDENTITY))
    rng.shuffle(pairs)
    i = 0
    while i < len(pairs):
        n = rng.choice([1, 1, 1, 2, 3])
        system = rng.choice([None, None, None, None, "You are a helpful assistant."])
        train.append(chat(pairs[i:i + n], system))
        i += n
    rng.shuffle(train)
    return train, val, len(pairs)


# --------------------------------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------------------------------

def train_tokenizer(texts, vocab_size):
    tok = Tokenizer(models.BPE(dropout=None, unk_token=None, continuing_subword_prefix="",
                               end_of_word_suffix="", fuse_unk=False, byte_fallback=False,
                               ignore_merges=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False,
                                              use_regex=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - len(SPECIALS), min_frequency=2,
                                  show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[])
    # The chat markers are added after training (Qwen's order: BPE vocabulary, then specials);
    # strip them from the text the merges are learned on.
    plain = (re.sub(r"<\|im_(start|end)\|>", "\n", t) for t in texts)
    tok.train_from_iterator(plain, trainer=trainer)
    tok.add_special_tokens([tokenizers.AddedToken(s, special=True, normalized=False)
                            for s in SPECIALS])
    assert tok.get_vocab_size() == vocab_size, tok.get_vocab_size()
    return tok


def save_tokenizer_json(tok, path):
    """tokenizer.json as Qwen's reads (decoder fields included); returns the tokenizer read back
    from the file, which is the one everything after this uses."""
    j = json.loads(tok.to_str())
    j["decoder"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                    "use_regex": False}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(j, f, indent=2, ensure_ascii=False)
        f.write("\n")
    return Tokenizer.from_file(path)


def write_tokenizer(tok, out_dir, max_len):
    save_tokenizer_json(tok, os.path.join(out_dir, "tokenizer.json"))
    ids = {s: tok.token_to_id(s) for s in SPECIALS}
    cfg = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": {str(ids[s]): {"content": s, "lstrip": False, "normalized": False,
                                               "rstrip": False, "single_word": False,
                                               "special": True} for s in SPECIALS},
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": max_len,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": None,
    }
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2, ensure_ascii=False)
        f.write("\n")


def encode_stream(tok, docs):
    eot = tok.token_to_id("<|endoftext|>")
    out = []
    for enc in tok.encode_batch(docs, add_special_tokens=False):
        out.extend(enc.ids)
        out.append(eot)
    return torch.tensor(out, dtype=torch.int32)


# --------------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------------

def make_model(name, vocab, special_ids, max_pos, seed):
    cls_name, kw = MODELS[name]
    common = dict(vocab_size=vocab, hidden_act="silu", max_position_embeddings=max_pos,
                  tie_word_embeddings=True, attention_bias=False, bos_token_id=None,
                  eos_token_id=special_ids["<|im_end|>"], pad_token_id=special_ids["<|endoftext|>"])
    if cls_name == "Qwen3ForCausalLM":
        cfg = transformers.Qwen3Config(use_sliding_window=False, **common, **kw)
    else:
        cfg = transformers.Qwen3_5TextConfig(**common, **kw)
        assert list(cfg.layer_types) == kw["layer_types"], cfg.layer_types
    torch.manual_seed(seed)
    model = getattr(transformers, cls_name)(cfg)
    n = sum(p.numel() for p in model.parameters())
    return model, n


def batches(stream, batch, seq, gen, device):
    starts = torch.randint(0, len(stream) - seq - 1, (batch,), generator=gen)
    idx = starts[:, None] + torch.arange(seq + 1)[None, :]
    return stream[idx].long().to(device, non_blocking=True)


def lm_loss(model, x):
    logits = model(input_ids=x[:, :-1], use_cache=False).logits
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))


@torch.no_grad()
def val_loss(model, val_batches):
    model.eval()
    tot = 0.0
    with torch.autocast(device_type(), dtype=torch.bfloat16):
        for x in val_batches:
            tot += lm_loss(model, x).item()
    model.train()
    return tot / len(val_batches)


def train_model(name, model, stream, val_batches, cand, eval_every, seed, device):
    """AdamW, linear warm-up (100 steps) then cosine to 10% of the peak, bf16 autocast, fp32
    master weights; returns the weights of the step with the lowest validation loss."""
    batch, total, peak_lr, wd = cand
    model.to(device).train()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "embed" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "embed" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": wd},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=peak_lr, betas=(0.9, 0.95), eps=1e-8, fused=device == "cuda")
    gen = torch.Generator().manual_seed(seed)
    warmup = 100
    best = (float("inf"), 0, None)
    t0 = time.time()
    ema = None
    hist = []
    for step in range(1, total + 1):
        if step <= warmup:
            lr = peak_lr * step / warmup
        else:
            frac = (step - warmup) / max(1, total - warmup)
            lr = peak_lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        x = batches(stream, batch, SEQ, gen, device)
        with torch.autocast(device_type(), dtype=torch.bfloat16):
            loss = lm_loss(model, x)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step == 10:
            sync()
            t10 = time.time()
        if step == 30:
            sync()
            dt = (time.time() - t10) / 20
            log(f"[{name}] {dt * 1000:.1f} ms/step, {batch * SEQ / dt / 1e6:.2f} M tokens/s")
        if step % 10 == 0:
            li = loss.item()
            ema = li if ema is None else 0.9 * ema + 0.1 * li
        if step % eval_every == 0 or step == total:
            vl = val_loss(model, val_batches)
            if vl < best[0]:
                best = (vl, step, {k: v.detach().clone() for k, v in model.state_dict().items()})
            hist.append({"step": step, "train_loss_ema": round(ema, 4), "val_loss": round(vl, 4),
                         "lr": lr})
            if step % (eval_every * 4) == 0 or step == total:
                log(f"[{name}] step {step}/{total}  train {ema:.4f}  val {vl:.4f}  lr {lr:.2e}  "
                    f"{time.time() - t0:.0f}s")
    model.load_state_dict(best[2])
    info = {"batch": batch, "steps": total, "lr": peak_lr, "weight_decay": wd,
            "tokens_seen": batch * SEQ * total, "best_step": best[1],
            "best_val_loss": best[0], "train_loss_ema_at_end": ema,
            "seconds": round(time.time() - t0, 1), "history": hist}
    log(f"[{name}] candidate batch {batch} steps {total} lr {peak_lr} wd {wd}: best val "
        f"{best[0]:.4f} at step {best[1]} ({info['seconds']}s)")
    return info


def save_model(model, name, tok, out_dir, max_pos, special_ids):
    os.makedirs(out_dir, exist_ok=True)
    keep = {n: p.detach().float().cpu().clone() for n, p in model.named_parameters()
            if n.endswith("linear_attn.A_log") or n.endswith("linear_attn.norm.weight")}
    model = model.cpu().to(torch.bfloat16)
    for n, p in model.named_parameters():
        if n in keep:  # fp32, as the released Qwen3.5 checkpoints store them
            p.data = keep[n]
    model.save_pretrained(out_dir)
    gen = {"bos_token_id": None,
           "eos_token_id": [special_ids["<|im_end|>"], special_ids["<|endoftext|>"]],
           "pad_token_id": special_ids["<|endoftext|>"],
           "do_sample": True, "temperature": 0.7, "top_k": 40, "top_p": 0.9,
           "transformers_version": transformers.__version__}
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)
        f.write("\n")
    write_tokenizer(tok, out_dir, max_pos)
    # dtypes as stored
    from safetensors import safe_open
    with safe_open(os.path.join(out_dir, "model.safetensors"), "pt") as f:
        dt = {k: str(f.get_slice(k).get_dtype()) for k in f.keys()}
    for k, d in dt.items():
        want = "F32" if k in keep else "BF16"
        assert d == want, (k, d, want)


# --------------------------------------------------------------------------------------------------
# Held-out perplexity, the way `pagoda perplexity` computes it
# --------------------------------------------------------------------------------------------------

@torch.no_grad()
def sliding_perplexity(model, ids, ctx, stride, device):
    n = len(ids)
    total, count, begin, prev_end = 0.0, 0, 0, 0
    while begin < n:
        end = min(begin + ctx, n)
        trg_len = end - prev_end
        window = ids[begin:end]
        first = max(0, (end - begin) - trg_len - 1)
        x = torch.tensor([window], device=device)
        logits = model(input_ids=x, use_cache=False).logits[0].double()
        logp = torch.log_softmax(logits, dim=-1)
        tgt = torch.tensor(window[first + 1:], device=device)
        total -= logp[first:len(window) - 1].gather(1, tgt[:, None]).sum().item()
        count += len(window) - 1 - first
        prev_end = end
        if end == n:
            break
        begin += stride
    return math.exp(total / count), total / count, count


def evaluate_saved(name, out_dir, text_ids, windows, device):
    cls_name = MODELS[name][0]
    model = getattr(transformers, cls_name).from_pretrained(out_dir, dtype=torch.float32,
                                                            attn_implementation="eager")
    model.to(device).eval()
    res = []
    for ctx, stride in windows:
        ppl, nll, cnt = sliding_perplexity(model, text_ids, ctx, stride, device)
        res.append({"ctx": ctx, "stride": stride, "perplexity": ppl, "mean_nll": nll,
                    "scored_tokens": cnt})
        log(f"[{name}] held-out perplexity (ctx {ctx}, stride {stride}): {ppl:.4f} "
            f"(mean nll {nll:.5f}, {cnt} tokens)")
    return model, res


@torch.no_grad()
def samples(name, model, tok, device, rng_seed):
    prompts = [
        ("text", "Genesis 1\n\n1 In the beginning"),
        ("text", "Psalms 151\n\n1"),
        ("text", "HACKER, n."),
        ("chat", "<|im_start|>user\nWho are you?<|im_end|>\n<|im_start|>assistant\n"),
        ("chat", "<|im_start|>user\nWhat does the Bible say about love?<|im_end|>\n"
                 "<|im_start|>assistant\n"),
        ("chat", "<|im_start|>user\nDefine politics.<|im_end|>\n<|im_start|>assistant\n"),
        ("chat", "<|im_start|>user\nWhat is a kluge?<|im_end|>\n<|im_start|>assistant\n"),
    ]
    stop = [tok.token_to_id("<|im_end|>"), tok.token_to_id("<|endoftext|>")]
    out = []
    for kind, p in prompts:
        ids = torch.tensor([tok.encode(p, add_special_tokens=False).ids], device=device)
        torch.manual_seed(rng_seed)
        g = model.generate(ids, max_new_tokens=60, do_sample=False, eos_token_id=stop,
                           pad_token_id=stop[1])
        text = tok.decode(g[0, ids.shape[1]:].tolist(), skip_special_tokens=False)
        out.append({"prompt": p, "greedy": text})
        log(f"[{name}] {p!r} -> {text!r}")
    return out


def check_hf_tokenizer(out_dir, tok, text):
    """transformers' AutoTokenizer must read the saved files and agree with `tokenizers`."""
    try:
        hf = transformers.AutoTokenizer.from_pretrained(out_dir)
        a = hf(text[:5000], add_special_tokens=False)["input_ids"]
        b = tok.encode(text[:5000], add_special_tokens=False).ids
        rendered = hf.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False,
                                          add_generation_prompt=True)
        ok = a == b and rendered == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        log(f"AutoTokenizer ({type(hf).__name__}): ids equal {a == b}; chat template "
            f"{rendered!r}")
        return ok
    except Exception as e:  # recorded, not fatal: pagoda reads tokenizer.json itself
        log(f"AutoTokenizer failed: {type(e).__name__}: {e}")
        return False


# --------------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=".train-data/prepared")
    ap.add_argument("--heldout", default="tests/fixtures/heldout.txt")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--max-position-embeddings", type=int, default=2048)
    ap.add_argument("--candidates-qwen3", help="BATCH:STEPS:LR:WD[,...] (default: CANDIDATES)")
    ap.add_argument("--candidates-qwen3_5", help="BATCH:STEPS:LR:WD[,...]")
    ap.add_argument("--models", default="qwen3_5-kjv,qwen3-kjv")
    args = ap.parse_args()
    device = device_type()  # the CPU only for a smoke test of this script
    torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 evaluation must be true fp32
    torch.backends.cudnn.allow_tf32 = False
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, tokenizers "
        f"{tokenizers.__version__}, "
        f"{torch.cuda.get_device_name() if device == 'cuda' else 'CPU'}")
    log("command: python3 " + " ".join(sys.argv))
    t_start = time.time()
    rng = random.Random(args.seed)
    train_docs, val_docs, n_pairs = build_documents(args.data, rng)
    heldout = open(args.heldout, encoding="utf-8").read()
    assert heldout.startswith(HELDOUT_BOOK)
    log(f"documents: {len(train_docs)} train ({n_pairs} chat turns), {len(val_docs)} validation; "
        f"{sum(map(len, train_docs)) / 1e6:.2f} M characters")

    os.makedirs(args.out, exist_ok=True)
    tok = train_tokenizer(train_docs, args.vocab)
    tok = save_tokenizer_json(tok, os.path.join(args.out, "tokenizer.json"))
    special_ids = {s: tok.token_to_id(s) for s in SPECIALS}
    log(f"tokenizer: vocab {tok.get_vocab_size()}, specials {special_ids} "
        f"({time.time() - t_start:.0f}s)")
    stream = encode_stream(tok, train_docs)
    val_stream = encode_stream(tok, val_docs)
    text_ids = tok.encode(heldout, add_special_tokens=False).ids
    log(f"tokens: train {len(stream) / 1e6:.2f} M, validation {len(val_stream)}, held-out "
        f"{len(text_ids)} ({len(heldout) / len(text_ids):.2f} chars/token)")
    nv = min(32, (len(val_stream) - 1) // (SEQ + 1))
    val_batches = [val_stream[i * (SEQ + 1):(i + 1) * (SEQ + 1)].long().view(1, -1)
                   for i in range(nv)]
    val_batches = [torch.cat(val_batches[i:i + 8]).to(device) for i in range(0, nv, 8)]

    os.makedirs(args.out, exist_ok=True)
    windows = [(512, 256), (512, 512)]
    reference = {
        "text": "tests/fixtures/heldout.txt",
        "text_sha256": hashlib.sha256(heldout.encode("utf-8")).hexdigest(),
        "num_tokens": len(text_ids),
        "first_token_ids": text_ids[:64],
        "token_ids_sha256": hashlib.sha256(json.dumps(text_ids).encode()).hexdigest(),
        "evaluated_with": (f"transformers {transformers.__version__}, torch {torch.__version__}: "
                           "from_pretrained(saved bf16 checkpoint, dtype=float32, "
                           "attn_implementation='eager'), pure-torch Gated DeltaNet, no TF32; "
                           "sliding window as pagoda perplexity, token-weighted mean NLL"),
        "models": {},
    }
    for i, name in enumerate(args.models.split(",")):
        fam = name.split("-")[0]
        spec = getattr(args, f"candidates_{fam}")
        cands = ([tuple(t(x) for t, x in zip((int, int, float, float), c.split(":")))
                  for c in spec.split(",")] if spec else CANDIDATES[fam])
        results, best = [], None
        for cand in cands:
            model, nparams = make_model(name, args.vocab, special_ids,
                                        args.max_position_embeddings, args.seed + i)
            if not results:
                log(f"[{name}] {MODELS[name][0]}: {nparams / 1e6:.2f} M parameters")
            info = train_model(name, model, stream, val_batches, cand, args.eval_every,
                               args.seed + 100 + i, device)
            results.append(info)
            if best is None or info["best_val_loss"] < best[0]["best_val_loss"]:
                best = (info, model.cpu())
            del model
        info, model = best
        log(f"[{name}] chosen: batch {info['batch']} steps {info['steps']} lr {info['lr']} wd "
            f"{info['weight_decay']} (best step {info['best_step']}, val {info['best_val_loss']:.4f})")
        out_dir = os.path.join(args.out, name)
        save_model(model, name, tok, out_dir, args.max_position_embeddings, special_ids)
        del model
        hf_model, res = evaluate_saved(name, out_dir, text_ids, windows, device)
        smp = samples(name, hf_model, tok, device, args.seed)
        ok_tok = check_hf_tokenizer(out_dir, tok, heldout)
        reference["models"][name] = {"windows": res}
        summary = {
            "architecture": MODELS[name][0], "parameters": nparams,
            "train_tokens": len(stream), "validation_tokens": len(val_stream),
            "seq_len": SEQ, "seed": args.seed,
            "held_out": {"text": "Revelation (tests/fixtures/heldout.txt)", "windows": res},
            "hf_autotokenizer_agrees": ok_tok, "samples": smp,
            "command": "python3 " + " ".join(sys.argv),
            "repeat_chosen_with": (f"--candidates-{fam} {info['batch']}:{info['steps']}:"
                                   f"{info['lr']}:{info['weight_decay']}"),
            "chosen": info,
            "candidates": [{k: v for k, v in r.items() if k != "history"} for r in results],
        }
        with open(os.path.join(out_dir, "training.json"), "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1, ensure_ascii=False)
            f.write("\n")
        del hf_model
        if device == "cuda":
            torch.cuda.empty_cache()
    with open(os.path.join(args.out, "heldout_reference.json"), "w") as f:
        json.dump(reference, f, indent=1)
        f.write("\n")
    log(f"done in {time.time() - t_start:.0f}s")


if __name__ == "__main__":
    main()
