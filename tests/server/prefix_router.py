#!/usr/bin/python3
"""Prefix-aware routing from pagoda's KV cache events against round robin, over two pagoda replicas
on 127.0.0.1 — what llm-d's KV-cache indexer does, in miniature, with nothing of pagoda's but its
HTTP API and its events (Debian's pyzmq and msgpack).

The router learns each replica's cached blocks from its BlockStored / BlockRemoved events. It does
not know pagoda's hash function: it names a block by its chain of token ids (the parent's chain plus
the block's tokens, both in every BlockStored event), and scores a request by how many of its
prompt's leading full blocks (the prompt tokenized by /tokenize) a replica holds. The workload:
conversations of several turns, each turn's prompt the previous prompt, the answer and a new user
line, the conversations interleaved. Each policy runs on two fresh replicas.

    prefix_router.py PAGODA_BINARY MODEL_DIR TMP_DIR OUT_JSON
"""

import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request

import msgpack
import zmq

# Seven conversations: with an even number, round robin would send each one to the same replica
# every turn by accident.
CONVERSATIONS, TURNS, BLOCK = 7, 4, 16


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def metric(port, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        total = 0.0
        for line in r.read().decode().splitlines():
            if line.startswith(name + "{") or line.startswith(name + " "):
                total += float(line.rsplit(" ", 1)[1])
        return total


def ttft(port, prompt):
    """Seconds to the first streamed chunk, and the whole text."""
    body = {"prompt": prompt, "max_tokens": 16, "ignore_eos": True, "stream": True, "temperature": 0}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    t0 = time.monotonic()
    first, text = None, ""
    with urllib.request.urlopen(req, timeout=120) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if first is None:
                first = time.monotonic() - t0
            text += "".join(c.get("text", "") for c in chunk.get("choices", []))
    return first, text


class Replica:
    def __init__(self, binary, model, tmp, index):
        self.endpoint = f"ipc://{tmp}/events{index}"
        config = {"enable_kv_cache_events": True, "endpoint": self.endpoint, "topic": f"kv@replica{index}"}
        self.log = open(f"{tmp}/replica{index}.log", "w+")
        self.proc = subprocess.Popen([binary, "serve", model, "--port", "0", "--host", "127.0.0.1",
                                      "--kv-events-config", json.dumps(config)],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.port = None
        for _ in range(600):
            self.log.seek(0)
            m = re.search(r"serving .* on http://127\.0\.0\.1:(\d+)", self.log.read())
            if m:
                self.port = int(m.group(1))
                break
            time.sleep(0.05)
        assert self.port, "replica did not start"
        self.chains = {}   # block hash -> chain key
        self.cached = set()  # chain keys
        self.lock = threading.Lock()
        self.stop = False
        ctx = zmq.Context.instance()
        self.sub = ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.SUBSCRIBE, b"")
        self.sub.connect(self.endpoint)
        self.thread = threading.Thread(target=self.listen, daemon=True)
        self.thread.start()
        time.sleep(0.3)

    def listen(self):
        while not self.stop:
            if not self.sub.poll(50):
                continue
            _, _, payload = self.sub.recv_multipart()
            _, events, _ = msgpack.unpackb(payload, raw=False)
            with self.lock:
                for ev in events:
                    if ev[0] == "BlockStored":
                        parent = self.chains.get(ev[2]) if ev[2] is not None else ()
                        if parent is None:
                            continue  # a parent this router never saw stored: unreachable anyway
                        for i, h in enumerate(ev[1]):
                            key = (parent, tuple(ev[3][i * ev[4]:(i + 1) * ev[4]]))
                            self.chains[h] = key
                            self.cached.add(key)
                            parent = key
                    elif ev[0] == "BlockRemoved":
                        for h in ev[1]:
                            key = self.chains.pop(h, None)
                            self.cached.discard(key)
                    elif ev[0] == "AllBlocksCleared":
                        self.chains.clear()
                        self.cached.clear()

    def score(self, tokens):
        """Leading full blocks of `tokens` this replica holds."""
        key, n = (), 0
        with self.lock:
            for i in range(len(tokens) // BLOCK):
                key = (key, tuple(tokens[i * BLOCK:(i + 1) * BLOCK]))
                if key not in self.cached:
                    break
                n += 1
        return n

    def close(self):
        self.stop = True
        self.thread.join()
        self.proc.terminate()
        self.proc.wait(timeout=30)


def run(policy, binary, model, tmp):
    replicas = [Replica(binary, model, tmp, i) for i in range(2)]
    try:
        convs = [f"Conversation {c} about the {['river', 'mountain', 'harvest', 'temple'][c % 4]} of the land. " * 6
                 for c in range(CONVERSATIONS)]
        ttfts, rr, matched = [], 0, 0
        for turn in range(TURNS):
            for c in range(CONVERSATIONS):
                prompt = convs[c] + f" User turn {turn}: tell me more."
                if policy == "round-robin":
                    target = replicas[rr % 2]
                    rr += 1
                else:
                    tokens = post(replicas[0].port, "/tokenize", {"prompt": prompt})["tokens"]
                    scores = [r.score(tokens) for r in replicas]
                    best = max(scores)
                    matched += best
                    # Ties (nothing cached anywhere) alternate, so the load spreads as round robin's does.
                    target = replicas[scores.index(best)] if scores.count(best) == 1 else replicas[rr % 2]
                    rr += 1
                first, text = ttft(target.port, prompt)
                ttfts.append(first)
                convs[c] = prompt + text
                time.sleep(0.05)  # the events of this request reach the router
        queries = sum(metric(r.port, "vllm:prefix_cache_queries_total") for r in replicas)
        hits = sum(metric(r.port, "vllm:prefix_cache_hits_total") for r in replicas)
        return {"policy": policy, "requests": len(ttfts), "hit_rate": hits / queries if queries else 0.0,
                "mean_ttft_ms": 1000 * sum(ttfts) / len(ttfts), "router_matched_blocks": matched}
    finally:
        for r in replicas:
            r.close()


def main():
    binary, model, tmp, out = sys.argv[1:5]
    os.makedirs(tmp, exist_ok=True)
    results = [run(p, binary, model, tmp) for p in ("round-robin", "prefix-aware")]
    with open(out, "w") as f:
        json.dump(results, f)
    for r in results:
        print(f"{r['policy']:>12}: {r['requests']} requests, prefix-cache hit rate {r['hit_rate']:.3f}, "
              f"mean TTFT {r['mean_ttft_ms']:.1f} ms, router-matched blocks {r['router_matched_blocks']}")


if __name__ == "__main__":
    main()
