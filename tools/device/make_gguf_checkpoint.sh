#!/usr/bin/env bash
# Run ON the GPU machine (called by serve_bench_run.sh and llama_bench_run.sh, the one copy of this
# step): a random bf16 checkpoint of one released shape and its GGUF conversion, the same weights
# for pagoda and llama.cpp.
#
#   tools/device/make_gguf_checkpoint.sh SHAPE DIR LLAMA_CPP_SOURCE_DIR TOKENIZER_DIR
#
# In order, each step skipped when already done (a rerun resumes; DIR/ready2 when all are done):
#  1. tools/make_random_checkpoint.py --shape SHAPE --out DIR (seeded; DIR/ckpt_done after it; a
#     checkpoint marked by the older DIR/ready counts as done).
#  2. The tokenizer: Qwen3's tokenizer.json (or tokenizer.json.gz) + tokenizer_config.json from
#     TOKENIZER_DIR, padded with placeholder tokens up to the checkpoint's vocab_size, so that every
#     id random weights can sample decodes (Qwen3.5's vocabulary is 248,320; Qwen3's tokenizer has
#     151,669).
#  3. Zeroing (DIR/zeroed, which holds the count): the rows of every `*embed_tokens.weight` and
#     `*lm_head.weight` tensor for each token id whose byte-level-BPE string (GPT-2's
#     bytes_to_unicode inverted) is not valid UTF-8 on its own (added tokens are left alone).
#     Why: random weights generate arbitrary byte fragments, and llama.cpp's server fails a request
#     whose generated text is not valid UTF-8 (its chat-output parser, common_chat_peg_parse,
#     rejects it even for /v1/completions). The benchmark clients decode greedily (temperature 0);
#     a zero row gives a logit of exactly 0, while the largest of ~150k random logits is far above
#     0, so these tokens are never generated and every output is valid UTF-8 (a concatenation of
#     valid pieces is valid). Shapes, bytes moved and FLOPs are unchanged, so it is harmless for the
#     offline benchmarks too and is always done. The rows are overwritten in place (a safetensors
#     file is an 8-byte header length, a JSON header and the raw row-major tensors): header,
#     metadata and layout stay byte-identical and the 16 GB Qwen3-8B checkpoint is not rewritten.
#  4. convert_hf_to_gguf.py (bf16; --no-mtp for Qwen3.5, whose converter expects MTP layers that the
#     text-only checkpoint has none of) to DIR/model.gguf, through a partial file and a rename; a
#     model.gguf made before the zeroing is removed by step 3.
# NO_GGUF=1 stops after step 3 (a checkpoint for pagoda alone; LLAMA_CPP_SOURCE_DIR is not read).
# SPARSE=1: step 1 writes zero weights as a sparse file (make_random_checkpoint.py --sparse: shapes
# larger than the disk); use with NO_GGUF=1.
# Prints what it does; lines beginning "[ckpt]" are the summary. Exit status 0 when DIR/ready2 exists
# (with NO_GGUF=1: when DIR/zeroed exists).
set -uo pipefail
[[ $# -eq 4 ]] || { echo "usage: $0 SHAPE DIR LLAMA_CPP_SOURCE_DIR TOKENIZER_DIR" >&2; exit 2; }
shape=$1
dir=$2
src=$(realpath "$3")
tok=$(realpath "$4")
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
say() { echo "[ckpt] $shape: $*"; }
fail() { say "FAILED: $*"; exit 1; }
if [[ -f $dir/ready2 ]]; then
  say "ready ($(cat "$dir/zeroed" 2>/dev/null) token ids zeroed; $(du -h "$dir/model.gguf" 2>/dev/null | cut -f1) GGUF)"
  exit 0
fi

if [[ ! -f $dir/ckpt_done && ! -f $dir/ready ]]; then
  echo "--- 1. random checkpoint ($(date +%T))"
  mkdir -p "$dir"
  rm -f "$dir"/*.safetensors "$dir"/*.json "$dir"/zeroed "$dir"/model.gguf  # a partial one
  python3 tools/make_random_checkpoint.py --shape "$shape" --out "$dir" ${SPARSE:+--sparse} || fail "make_random_checkpoint.py"
  touch "$dir/ckpt_done"
fi

if [[ ! -f $dir/zeroed ]]; then
  echo "--- 2. tokenizer ($(date +%T))"
  python3 - "$dir" "$tok" <<'EOF' || fail "tokenizer padding"
import gzip, json, os, shutil, sys
dst, tok = sys.argv[1], sys.argv[2]
cfg = json.load(open(f"{dst}/config.json"))
vocab_size = cfg.get("vocab_size") or cfg.get("text_config", {}).get("vocab_size")
src = f"{tok}/tokenizer.json"
t = json.load(open(src, encoding="utf-8") if os.path.exists(src) else gzip.open(src + ".gz", "rt", encoding="utf-8"))
# The added tokens go into the model's vocabulary at their ids too (as Hugging Face allows), so that
# placeholders may follow them there.
for a in t["added_tokens"]:
    t["model"]["vocab"][a["content"]] = a["id"]
used = set(t["model"]["vocab"].values())
for i in range(vocab_size):
    if i not in used:
        t["model"]["vocab"][f"<|placeholder_{i}|>"] = i
json.dump(t, open(f"{dst}/tokenizer.json", "w", encoding="utf-8"), ensure_ascii=False)
shutil.copy(f"{tok}/tokenizer_config.json", f"{dst}/tokenizer_config.json")
print("tokenizer padded to", vocab_size)
EOF

  echo "--- 3. zero the embedding / lm_head rows of tokens that are not valid UTF-8 alone ($(date +%T))"
  rm -f "$dir/model.gguf"  # converted from the weights before this step
  python3 - "$dir" <<'EOF' || fail "zeroing"
import glob, json, os, struct, sys

d = sys.argv[1]


def bytes_to_unicode():  # GPT-2's byte <-> printable character table (byte-level BPE)
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


byte_of = {c: b for b, c in bytes_to_unicode().items()}
t = json.load(open(f"{d}/tokenizer.json", encoding="utf-8"))
added = {a["id"] for a in t.get("added_tokens", [])}
bad, unmapped = set(), 0
for s, i in t["model"]["vocab"].items():
    if i in added:
        continue
    try:
        raw = bytes(byte_of[c] for c in s)
    except KeyError:  # not a byte-level string at all: cannot be decoded to bytes either
        unmapped += 1
        bad.add(i)
        continue
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        bad.add(i)
bad = sorted(bad)
print(f"{len(bad)} of {len(t['model']['vocab'])} token ids are not valid UTF-8 alone "
      f"({unmapped} of them not byte-level strings)")

elem = {"BF16": 2, "F16": 2, "F32": 4}
done = []
for path in sorted(glob.glob(os.path.join(d, "*.safetensors"))):
    with open(path, "r+b") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        base = 8 + n
        for name, info in header.items():
            if name == "__metadata__" or not (name.endswith("embed_tokens.weight") or name.endswith("lm_head.weight")):
                continue
            rows, cols = info["shape"]
            es = elem[info["dtype"]]
            start, end = info["data_offsets"]
            assert end - start == rows * cols * es, (name, info)
            zero = bytes(cols * es)
            k = 0
            for i in bad:
                if i >= rows:
                    break
                f.seek(base + start + i * cols * es)
                f.write(zero)
                k += 1
            done.append((os.path.basename(path), name, rows, cols, info["dtype"], k))
if not done:
    sys.exit("no *embed_tokens.weight / *lm_head.weight tensor found")
for p, name, rows, cols, dt, k in done:
    print(f"  {p}: {name} [{rows}, {cols}] {dt}: {k} rows zeroed")

# A check through the safetensors library (where present): the rows read back as zeros, others not.
try:
    from safetensors import safe_open
    bad_set = set(bad)
    good = next(i for i in range(len(bad) + 1) if i not in bad_set)
    for p, name, rows, cols, dt, k in done:
        with safe_open(os.path.join(d, p), framework="pt") as f:
            sl = f.get_slice(name)
            for i in bad[:3] + bad[-3:] + [good]:
                if i < rows:
                    zero = not sl[i:i + 1].float().abs().sum().item()
                    if zero != (i in bad_set):
                        sys.exit(f"read-back check failed: {p} {name} row {i}")
    print("read back through safetensors: the zeroed rows are zero, another row is not")
except ImportError as e:
    print(f"(no read-back check: {e})")
except Exception as e:  # the check's own trouble (an old safetensors, say), not the data's
    print(f"(read-back check not run: {type(e).__name__}: {e})")
open(os.path.join(d, "zeroed"), "w").write(f"{len(bad)}\n")
EOF
fi

if [[ ${NO_GGUF:-0} == 1 ]]; then
  say "ready without a GGUF (NO_GGUF=1; $(cat "$dir/zeroed") token ids zeroed)"
  exit 0
fi
if [[ ! -f $dir/model.gguf ]]; then
  echo "--- 4. GGUF conversion ($(date +%T))"
  df -h "$dir" | tail -1
  mtp=()  # the Qwen3.5 converter expects MTP layers, which the text-only checkpoint has none of
  [[ $shape == qwen3.5* ]] && mtp=(--no-mtp)
  rm -f "$dir/model-partial.gguf"
  PYTHONPATH="$src/gguf-py" python3 "$src/convert_hf_to_gguf.py" "$dir" --outtype bf16 "${mtp[@]}" \
    --outfile "$dir/model-partial.gguf" || { rm -f "$dir/model-partial.gguf"; fail "convert_hf_to_gguf.py"; }
  mv "$dir/model-partial.gguf" "$dir/model.gguf"
fi
touch "$dir/ready2"
say "ready ($(cat "$dir/zeroed") token ids zeroed; $(du -h "$dir/model.gguf" | cut -f1) GGUF; $(df -h "$dir" | awk 'NR==2 {print $4}') disk left)"
