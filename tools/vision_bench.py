#!/usr/bin/env python3
"""Speed of images in, against a running `pagoda serve` (tools/device/vision_gpu.sh runs it on the GPU).

    python3 tools/vision_bench.py prepare CKPT TOKENIZER_DIR   # tokenizer + template for a random checkpoint
    python3 tools/vision_bench.py measure PORT [--images N] [--size 1024]

prepare: the random multimodal checkpoint (tools/make_random_checkpoint.py --vision) gets Qwen3's
tokenizer padded to its vocabulary (Qwen3's tokenizer carries <|vision_start|>, <|vision_end|> and
<|image_pad|>; config.json's image token ids are pointed at them) and a chat template that renders
image parts as Qwen's do.

measure: one request at a time, max_tokens 1 (so the latency is the time to the first token), each
with a new random image of SIZE x SIZE (no encoder-cache or prefix-cache hit), then text-only
requests of the same prompt length; prints the medians, the difference (the image's encoding and
its extra work), the same image again (the encoder cache holds it: the encoder's time is the
difference) and the encoder's merged tokens per second.
"""
import base64
import gzip
import io
import json
import os
import random
import statistics
import sys
import time
import urllib.request

TEMPLATE = ("{%- for message in messages -%}<|im_start|>{{ message.role }}\n{%- if message.content is string -%}"
            "{{ message.content }}{%- else -%}{%- for item in message.content -%}"
            "{%- if item.type == 'image' -%}<|vision_start|><|image_pad|><|vision_end|>"
            "{%- elif item.type == 'text' -%}{{ item.text }}{%- endif -%}{%- endfor -%}{%- endif -%}"
            "<|im_end|>\n{%- endfor -%}<|im_start|>assistant\n")


def prepare(ckpt, tok):
    cfg = json.load(open(f"{ckpt}/config.json"))
    vocab_size = cfg["text_config"]["vocab_size"]
    src = f"{tok}/tokenizer.json"
    t = json.load(open(src, encoding="utf-8") if os.path.exists(src) else gzip.open(src + ".gz", "rt", encoding="utf-8"))
    ids = {a["content"]: a["id"] for a in t["added_tokens"]}
    for a in t["added_tokens"]:
        t["model"]["vocab"][a["content"]] = a["id"]
    used = set(t["model"]["vocab"].values())
    for i in range(vocab_size):
        if i not in used:
            t["model"]["vocab"][f"<|placeholder_{i}|>"] = i
    json.dump(t, open(f"{ckpt}/tokenizer.json", "w", encoding="utf-8"), ensure_ascii=False)
    json.dump({"chat_template": TEMPLATE, "eos_token": "<|im_end|>", "bos_token": None},
              open(f"{ckpt}/tokenizer_config.json", "w"))
    cfg["image_token_id"] = ids["<|image_pad|>"]
    cfg["vision_start_token_id"] = ids["<|vision_start|>"]
    cfg["vision_end_token_id"] = ids["<|vision_end|>"]
    json.dump(cfg, open(f"{ckpt}/config.json", "w"), indent=2)
    print("prepared", ckpt, "image token", cfg["image_token_id"])


def post(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=600) as r:
        out = json.loads(r.read())
    return time.perf_counter() - t0, out


def png(size, seed):
    from PIL import Image
    import numpy as np
    rng = np.random.default_rng(seed)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, size=(size, size, 3), dtype=np.uint8)).save(buf, "PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def measure(port, n, size):
    def ask(content):
        return post(port, {"model": "m", "messages": [{"role": "user", "content": content}], "max_tokens": 1,
                           "temperature": 0, "ignore_eos": True})
    # Warm-up: one image and one text request (first launches, graph capture done at start).
    dt, out = ask([{"type": "text", "text": "Describe."}, {"type": "image_url", "image_url": {"url": png(size, 999)}}])
    prompt_tokens = out["usage"]["prompt_tokens"]
    image_t = []
    for i in range(n):
        url = png(size, i)
        dt, out = ask([{"type": "text", "text": "Describe."}, {"type": "image_url", "image_url": {"url": url}}])
        image_t.append(dt)
    # The last image again: the encoder cache has it (the prefix cache is off on the server), so the
    # difference from a new image is the encoder's own time; what remains over text is the request's
    # reading, decoding and preprocessing of the image.
    again_t = []
    for i in range(n):
        dt, out = ask([{"type": "text", "text": "Describe."}, {"type": "image_url", "image_url": {"url": url}}])
        again_t.append(dt)
    # Text of the same length: " a" is one token of Qwen3's tokenizer; trimmed to the same count.
    words = prompt_tokens - 8
    text_t = []
    for i in range(n):
        text = " ".join(random.Random(i).choice(["a", "b", "c", "d"]) for _ in range(words))
        dt, out = ask(text)
        text_t.append(dt)
    text_tokens = out["usage"]["prompt_tokens"]
    merged = (size // 32) ** 2
    mi, mt, ma = statistics.median(image_t), statistics.median(text_t), statistics.median(again_t)
    print(json.dumps({"image_size": size, "merged_tokens": merged, "patches": merged * 4,
                      "prompt_tokens_image": prompt_tokens, "prompt_tokens_text": text_tokens,
                      "ttft_image_s": round(mi, 4), "ttft_text_s": round(mt, 4),
                      "ttft_same_image_again_s": round(ma, 4),
                      "image_extra_s": round(mi - mt, 4),
                      "encoder_s": round(mi - ma, 4),
                      "host_image_handling_s": round(ma - mt, 4),
                      "encoder_merged_tok_per_s": round(merged / (mi - ma), 1) if mi > ma else None,
                      "runs": n}, indent=1))


if __name__ == "__main__":
    if sys.argv[1] == "prepare":
        prepare(sys.argv[2], sys.argv[3])
    else:
        args = sys.argv[2:]
        port = int(args[0])
        n = int(args[args.index("--images") + 1]) if "--images" in args else 5
        size = int(args[args.index("--size") + 1]) if "--size" in args else 1024
        measure(port, n, size)
