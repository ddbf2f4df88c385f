#!/usr/bin/python3
"""A KV-cache-events subscriber, as llm-d's indexer is one: pyzmq and msgpack from Debian, nothing
of pagoda's. Checks every batch pagoda publishes against vLLM's schema (written here from
vllm/distributed/kv_events.py: array-like msgspec structs, the event's class name as its tag),
keeps the set of cached blocks the events describe, and at the end asks the replay socket for
everything from sequence 0 and checks it against what arrived live.

    kv_events_subscriber.py PUB_ENDPOINT REPLAY_ENDPOINT TOPIC READY_FILE STOP_FILE OUT_JSON

Writes READY_FILE once subscribed; runs until STOP_FILE exists and the stream has been quiet for
half a second; writes a JSON summary to OUT_JSON.
"""

import json
import os
import sys
import time

import msgpack
import zmq

U64 = 1 << 64


def is_hash(v):
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < U64


def check_event(ev, errors):
    """One event of a batch, by vLLM's BlockStored / BlockRemoved / AllBlocksCleared."""
    if not isinstance(ev, list) or not ev or not isinstance(ev[0], str):
        errors.append(f"event is not a tagged array: {ev!r}"[:200])
        return None
    tag = ev[0]
    if tag == "BlockStored":
        # [tag, block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium, lora_name]
        if len(ev) != 8:
            errors.append(f"BlockStored has {len(ev)} fields, vLLM's has 8")
            return None
        _, hashes, parent, tokens, block_size, lora_id, medium, lora_name = ev
        ok = (isinstance(hashes, list) and hashes and all(is_hash(h) for h in hashes)
              and (parent is None or is_hash(parent))
              and isinstance(tokens, list) and all(isinstance(t, int) and t >= 0 for t in tokens)
              and isinstance(block_size, int) and block_size > 0
              and len(tokens) == block_size * len(hashes)
              and (lora_id is None or isinstance(lora_id, int))
              and (medium is None or isinstance(medium, str))
              and (lora_name is None or isinstance(lora_name, str)))
        if not ok:
            errors.append(f"BlockStored fields do not match the schema: {ev!r}"[:300])
            return None
        return ("stored", hashes, parent)
    if tag == "BlockRemoved":
        # [tag, block_hashes, medium]
        if len(ev) != 3 or not isinstance(ev[1], list) or not all(is_hash(h) for h in ev[1]) or not (
                ev[2] is None or isinstance(ev[2], str)):
            errors.append(f"BlockRemoved does not match the schema: {ev!r}"[:300])
            return None
        return ("removed", ev[1], None)
    if tag == "AllBlocksCleared":
        if len(ev) != 1:
            errors.append(f"AllBlocksCleared has {len(ev)} fields")
            return None
        return ("cleared", [], None)
    errors.append(f"unknown event tag {tag!r}")
    return None


def main():
    endpoint, replay_endpoint, topic, ready_file, stop_file, out_json = sys.argv[1:7]
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, topic.encode())
    sub.connect(endpoint)
    time.sleep(0.3)  # the subscription reaches the publisher (ZeroMQ's slow joiner)
    with open(ready_file, "w") as f:
        f.write("ready\n")
    live = {}  # seq -> payload
    errors = []
    quiet_since = time.monotonic()
    while True:
        if sub.poll(50):
            frames = sub.recv_multipart()
            quiet_since = time.monotonic()
            if len(frames) != 3 or frames[0] != topic.encode() or len(frames[1]) != 8:
                errors.append(f"a message of {len(frames)} frames, not [topic, 8-byte seq, payload]")
                continue
            live[int.from_bytes(frames[1], "big")] = frames[2]
        elif os.path.exists(stop_file) and time.monotonic() - quiet_since > 0.5:
            break

    # Everything from sequence 0, from the replay socket: a DEALER with REQ's empty delimiter, since
    # the ROUTER streams one reply per batch and then [-1, ""].
    dealer = ctx.socket(zmq.DEALER)
    dealer.connect(replay_endpoint)
    dealer.send_multipart([b"", (0).to_bytes(8, "big")])
    replayed = []
    while True:
        if not dealer.poll(5000):
            errors.append("the replay socket stopped answering")
            break
        _, seq_bytes, payload = dealer.recv_multipart()
        seq = int.from_bytes(seq_bytes, "big", signed=True)
        if seq == -1:
            break
        replayed.append((seq, payload))

    seqs = [s for s, _ in replayed]
    gap_free = seqs == list(range(len(seqs)))
    replay_matches = all(live[s] == p for s, p in replayed if s in live) and set(live) <= set(seqs)

    cached = set()
    stats = {"stored": 0, "removed": 0, "cleared": 0, "events": 0, "parent_missing": 0}
    media, ranks = set(), set()
    for _, payload in replayed:
        try:
            batch = msgpack.unpackb(payload, raw=False, strict_map_key=False)
        except Exception as e:  # noqa: BLE001
            errors.append(f"payload is not msgpack: {e}")
            continue
        # [ts, events, data_parallel_rank]
        if not (isinstance(batch, list) and len(batch) == 3 and isinstance(batch[0], float)
                and isinstance(batch[1], list) and isinstance(batch[2], int)):
            errors.append(f"batch is not [ts, [events], data_parallel_rank]: {batch!r}"[:300])
            continue
        ranks.add(batch[2])
        for ev in batch[1]:
            stats["events"] += 1
            r = check_event(ev, errors)
            if r is None:
                continue
            kind, hashes, parent = r
            if kind == "stored":
                media.add(ev[6])
                # A parent may leave the cache before its child is registered (as in vLLM): counted,
                # not an error.
                if parent is not None and parent not in cached:
                    stats["parent_missing"] += 1
                for h in hashes:
                    if h in cached:
                        errors.append(f"block {h} stored twice without a removal")
                    cached.add(h)
                    stats["stored"] += 1
            elif kind == "removed":
                for h in hashes:
                    if h not in cached:
                        errors.append(f"block {h} removed but never stored")
                    cached.discard(h)
                    stats["removed"] += 1
            else:
                cached.clear()
                stats["cleared"] += 1
    out = {"batches_live": len(live), "batches_replayed": len(replayed), "gap_free": gap_free,
           "replay_matches_live": replay_matches, "cached": len(cached), "media": sorted(m for m in media if m),
           "dp_ranks": sorted(ranks), "errors": errors[:20], **stats}
    with open(out_json, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
