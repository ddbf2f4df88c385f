#!/usr/bin/env bash
# Does llama.cpp, given the GGUF that tools/checkpoint_to_gguf.py writes, compute the same model as
# pagoda? Two independent implementations, greedy, the same prompts: for each model and each GGUF
# type, the prompt's token ids (pagoda tokenize vs llama-tokenize) and the N generated tokens'
# text (pagoda generate; llama-completion generates one more and must begin with that text) must
# be equal. Prints one line per prompt and exits
# non-zero on any difference. Not a CI test: llama.cpp is built by hand, outside the repository:
#
#   cmake -S LLAMA_SRC -B LLAMA_BUILD -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
#     -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
#     -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DGGML_CUDA=OFF
#   cmake --build LLAMA_BUILD -j2 --target llama-bench llama-completion llama-tokenize
#   LLAMA_SRC=... LLAMA_BUILD=... tools/llama_cpp_cpu_check.sh [MODEL_DIR...]
#
# Defaults: models/qwen3-kjv models/default (Qwen3.5 hybrid; models/qwen3_5-kjv is the same
# checkpoint); OUTTYPES="f32 bf16" (f32: llama.cpp multiplies in fp32 like pagoda, KV in f32 on
# both sides; bf16: llama.cpp rounds activations to bf16 in its matmuls, so a near tie may
# legitimately go the other way: only differences in STRICT=f32 fail), N=32, PAGODA=build/pagoda. The prompts are KJV openings that
# the shipped models continue past N tokens (both engines stop at end-of-sequence the same way).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${LLAMA_SRC:?set LLAMA_SRC to a llama.cpp source tree (its gguf-py is used)}"
: "${LLAMA_BUILD:?set LLAMA_BUILD to its CPU build directory}"
PAGODA=${PAGODA:-build/pagoda}
N=${N:-32}
OUTTYPES=${OUTTYPES:-"f32 bf16"}
THREADS=${THREADS:-2}
PY=${PY:-/usr/bin/python3}
models=("$@")
((${#models[@]})) || models=(models/qwen3-kjv models/default)
prompts=("And God said, Let there be" "The LORD is my shepherd; I shall" "And it came to pass, when"
         "In the beginning was the Word, and")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
STRICT=${STRICT:-f32}  # GGUF types whose differences fail the check (bf16 ones are reported)
fails=0 soft=0
for model in "${models[@]}"; do
  name=$(basename "$model")
  for ot in $OUTTYPES; do
    gguf="$work/$name-$ot.gguf"
    "$PY" tools/checkpoint_to_gguf.py "$model" --out "$gguf" --outtype "$ot" --gguf-py "$LLAMA_SRC/gguf-py" >/dev/null
    kv_pagoda=() kv_llama=()
    [[ $ot == f32 ]] && kv_pagoda=(--kv-cache-dtype fp32) kv_llama=(-ctk f32 -ctv f32)
    : >"$work/in.jsonl"
    for p in "${prompts[@]}"; do
      "$PY" -c 'import json,sys; print(json.dumps({"prompt": sys.argv[1]}))' "$p" >>"$work/in.jsonl"
    done
    "$PAGODA" generate "$model" --device cpu --threads "$THREADS" "${kv_pagoda[@]}" --prompts "$work/in.jsonl" \
      --output "$work/out.jsonl" --max-tokens "$N" --temperature 0 2>/dev/null
    i=0
    for p in "${prompts[@]}"; do
      ids_p=$("$PAGODA" tokenize --model "$model" "$p" | tr -s ' ' | sed 's/ *$//')
      ids_l=$("$LLAMA_BUILD/bin/llama-tokenize" -m "$gguf" -p "$p" --ids --log-disable 2>/dev/null |
              tr -d '[],' | sed 's/^ *//; s/ *$//')
      "$LLAMA_BUILD/bin/llama-completion" -m "$gguf" -p "$p" -n $((N + 1)) --temp 0 --seed 1 -t "$THREADS" -c 512 \
        "${kv_llama[@]}" -no-cnv --no-display-prompt --no-warmup -s 1 </dev/null >"$work/llama.txt" 2>"$work/llama.err" ||
        { echo "llama-completion failed on $gguf:"; tail -5 "$work/llama.err"; exit 1; }
      verdict=$("$PY" - "$work/out.jsonl" "$i" "$work/llama.txt" "$ids_p" "$ids_l" <<'PY'
import json, sys
out, i, ltxt, ids_p, ids_l = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
row = [json.loads(l) for l in open(out)][i]
# llama.cpp generated one token more than pagoda: its text must begin with pagoda's whole text (on a
# busy machine llama-completion's asynchronous log sometimes drops its last token, and it ends its
# output with newlines of its own)
ptext = row["text"]
ltext = open(ltxt, encoding="utf-8", errors="replace").read()
ok_ids = ids_p.split() == ids_l.split()
n = len(row["token_ids"])
if ok_ids and ltext.startswith(ptext):
    print(f"same  ({len(ids_p.split())} prompt ids, {n} generated tokens) {ptext!r}")
else:
    k = next((j for j in range(min(len(ptext), len(ltext))) if ptext[j] != ltext[j]), min(len(ptext), len(ltext)))
    print(f"DIFF  prompt ids {'equal' if ok_ids else f'pagoda {ids_p} llama {ids_l}'}; text from char {k}:"
          f"\n        pagoda {ptext!r}\n        llama  {ltext!r}")
PY
)
      printf '%-12s %-4s %-36s %s\n' "$name" "$ot" "\"$p\"" "$verdict"
      if [[ $verdict != same* ]]; then
        if [[ " $STRICT " == *" $ot "* ]]; then fails=$((fails + 1)); else soft=$((soft + 1)); fi
      fi
      i=$((i + 1))
    done
  done
done
echo "$fails differences in GGUF types $STRICT (must be 0); $soft in the others (near ties under bf16 rounding)"
((fails == 0))
