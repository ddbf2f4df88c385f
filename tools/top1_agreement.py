#!/usr/bin/env python3
"""Next-token top-1 agreement between two servers of one model (e.g. tensor-parallel vs one GPU, in
bf16), teacher-forced: the same seeded prompts of random token ids, each asked for one greedy token
with its two most likely tokens, so every prompt gives the top-1 of one position — no drift from
earlier disagreements, as free-running generation would have.

    python3 tools/top1_agreement.py collect --port 8321 --model m --out /tmp/tp1.json
    python3 tools/top1_agreement.py collect --port 8321 --model m --out /tmp/tp2.json
    python3 tools/top1_agreement.py compare /tmp/tp1.json /tmp/tp2.json

compare prints the strict agreement (same argmax), the agreement over the positions where the
reference's top-2 margin is at least 0.05 nats (random weights give many near-ties, where either
answer is right within rounding), and the mean and largest |difference| of the top-1 logprobs.
Standard library only.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import urllib.request


def ask(port: int, model: str, ids: list[int]) -> dict:
    body = {"model": model, "prompt": ids, "max_tokens": 1, "temperature": 0, "logprobs": 2,
            "return_tokens_as_token_ids": True}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        lp = json.load(r)["choices"][0]["logprobs"]
    top = sorted(((v, int(k.split(":")[1])) for k, v in lp["top_logprobs"][0].items()), reverse=True)
    return {"top1": top[0][1], "lp1": top[0][0], "lp2": top[1][0] if len(top) > 1 else None}


def collect(a):
    rng = random.Random(a.seed)
    rows = []
    for i in range(a.prompts):
        ids = [rng.randrange(a.max_id) for _ in range(a.min_len + i % a.len_spread)]
        rows.append(ask(a.port, a.model, ids))
    json.dump(rows, open(a.out, "w"))
    print(f"{len(rows)} positions from port {a.port} -> {a.out}")


def compare(a):
    ref, got = json.load(open(a.reference)), json.load(open(a.compared))
    assert len(ref) == len(got), "the two runs asked different numbers of prompts"
    same = sum(r["top1"] == g["top1"] for r, g in zip(ref, got))
    clear = [(r, g) for r, g in zip(ref, got) if r["lp2"] is None or r["lp1"] - r["lp2"] >= a.margin]
    same_clear = sum(r["top1"] == g["top1"] for r, g in clear)
    diffs = [abs(r["lp1"] - g["lp1"]) for r, g in zip(ref, got) if r["top1"] == g["top1"]]
    print(f"top-1 agreement {same}/{len(ref)} = {same / len(ref):.4f}; over the {len(clear)} positions with a "
          f"reference margin >= {a.margin}: {same_clear}/{len(clear)} = {same_clear / max(1, len(clear)):.4f}")
    if diffs:
        print(f"|top-1 logprob difference| where they agree: mean {sum(diffs) / len(diffs):.5f}, max {max(diffs):.5f}")
    return 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--port", type=int, default=8321)
    c.add_argument("--model", default="m")
    c.add_argument("--out", required=True)
    c.add_argument("--prompts", type=int, default=256)
    c.add_argument("--min-len", type=int, default=16)
    c.add_argument("--len-spread", type=int, default=256, help="prompt i has min_len + i %% spread tokens")
    c.add_argument("--max-id", type=int, default=150000, help="token ids drawn from [0, max_id)")
    c.add_argument("--seed", type=int, default=0)
    m = sub.add_parser("compare")
    m.add_argument("reference")
    m.add_argument("compared")
    m.add_argument("--margin", type=float, default=0.05)
    a = ap.parse_args()
    sys.exit(collect(a) if a.cmd == "collect" else compare(a))


if __name__ == "__main__":
    main()
