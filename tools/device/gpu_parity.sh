#!/usr/bin/env bash
# Run ON the GPU machine after tools/device/build.sh: the tiny fixtures' greedy tokens on the GPU
# against transformers' fp32 reference (the CPU engine matches it exactly; see tests/model).
# Prints, per fixture, how many of the 32-token continuations are identical. PARITY_FLAGS adds engine
# flags (e.g. PARITY_FLAGS=--enforce-eager to compare with CUDA graphs off).
set -uo pipefail
cd "$(dirname "$0")/../.."
build="${BUILD:-build-gpu}"
export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for m in tests/fixtures/models/*/; do
  name=$(basename "$m")
  python3 - "$m" > /tmp/in.jsonl <<'PY'
import json, sys
ref = json.load(open(sys.argv[1] + "/reference.json"))
for c in ref["cases"]:
    print(json.dumps({"prompt_token_ids": c["prompt_ids"]}))
PY
  "$build/pagoda" generate "$m" --device cuda --temperature 0 --ignore-eos --max-tokens 32 \
    --max-model-len 512 ${PARITY_FLAGS:-} --prompts /tmp/in.jsonl --output /tmp/out.jsonl 2>/tmp/err.log ||
    { echo "$name: pagoda failed: $(tail -2 /tmp/err.log)"; continue; }
  python3 - "$m" <<'PY'
import json, sys
ref = json.load(open(sys.argv[1] + "/reference.json"))
outs = [json.loads(l) for l in open("/tmp/out.jsonl")]
same = sum(o["token_ids"] == c["generated_ids"] for o, c in zip(outs, ref["cases"]))
first = [next((i for i, (a, b) in enumerate(zip(o["token_ids"], c["generated_ids"])) if a != b), 32)
         for o, c in zip(outs, ref["cases"])]
print(f"{sys.argv[1].rstrip('/').split('/')[-1]}: {same}/{len(ref['cases'])} continuations identical; "
      f"first differing position per case {first}")
PY
done
