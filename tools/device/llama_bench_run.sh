#!/usr/bin/env bash
# Run ON the GPU machine, from the repository root, carrying .deps and Qwen3's tokenizer (TOKENIZER_DIR):
# `pagoda bench offline` against llama.cpp's llama-bench (pp512, tg128) and llama-batched-bench
# (B = 1, 16, 64, 128 independent sequences, 256-token prompts, 256 generated tokens each), in one
# run on the same GPU, on random bf16 checkpoints of the Qwen3-8B, Qwen3-0.6B and Qwen3.5-0.8B shapes
# (tools/make_random_checkpoint.py) and the GGUF conversion of the same checkpoints (docs/performance.md).
#
#   tools/device/llama_bench_run.sh LLAMA_CPP_SOURCE_DIR
#
# LLAMA_CPP_SOURCE_DIR is a checkout (or `git archive`) of llama.cpp's public source that the caller
# brought; this script never downloads or vendors it, it only builds llama-bench, llama-batched-bench
# and llama-server from it (CUDA, sm_90, the flags of serve_bench_run.sh, into the same build folder)
# and runs its convert_hf_to_gguf.py. Checkpoints and GGUFs are made by make_gguf_checkpoint.sh, as
# for serve_bench_run.sh, in the same scratch folder, so the two scripts share them and the build:
# Qwen3's tokenizer padded to the vocabulary size, and the embedding / lm_head rows of the tokens
# that are not valid UTF-8 alone zeroed (needed by the serving benchmark; shapes, bytes and FLOPs
# are unchanged, so the numbers here are unaffected).
#
# llama-batched-bench runs without -pps (each sequence prefills its own prompt) and without -kvu:
# with the KV cache not unified, each of the 128 sequences gets its own stream of -c / 128 = 512
# cells (= P + G), as pagoda's independent requests do. pagoda: `pagoda bench offline DIR` with its
# defaults (pp512, tg128, B = 1,16,64,128 at P = 256, G = 256).
#
# Steps take a few minutes each; to fit 10-minute windows, call it twice back to back (the scratch
# folder lives only while the machine is held):  STEPS="build ckpt"  then  STEPS=bench.
# Vulkan (the carried files exceed one call's 64 MiB together), three calls back to back on one machine:
#   1. carry .deps/root.tar.xz .gl:                 tools/device/build.sh (pagoda, with its shaders)
#   2. carry .llama-src .gl:                        LLAMA_BACKEND=vulkan STEPS=ckpt
#   3. carry .deps/vk-trixie.tar.xz .llama-src/llama-src.tar.xz .gl:  LLAMA_BACKEND=vulkan STEPS="build bench"
# (.llama-src from BACKEND=vulkan tools/device/pack_llama_src.sh, unpacked to the source dir first.)
#
# Environment:
#   STEPS       build ckpt bench (default: all, in that order)
#                 build  llama.cpp (always; incremental) and, in parallel, pagoda (tools/device/build.sh)
#                        when build-gpu/pagoda is missing or PAGODA_BUILD=always
#                 ckpt   checkpoints + GGUFs (while the builds run); kept in WORK, skipped when ready
#                 bench  per shape: llama-bench, llama-batched-bench, pagoda info, pagoda bench offline;
#                        then the comparison tables
#   SHAPES      default "qwen3-8b qwen3-0.6b qwen3.5-0.8b"
#   LLAMA_BACKEND  cuda (default) or vulkan: llama.cpp's Vulkan build (carry .deps/vk-trixie.tar.xz and the
#               loader .debs of tools/device/vulkan_gpu.sh), against pagoda --device vulkan, with pagoda's
#               CUDA backend reported beside (PAGODA_DEVICES, default "vulkan cuda")
#   WORK        scratch (builds, checkpoints, GGUFs, raw results), default /tmp/serve_bench (shared with
#               serve_bench_run.sh)
#   OUT         default /tmp/llama_bench_out: gpu.txt, commit.txt, tables.md (the comparison),
#               results.tgz (every raw output: llama-bench .json/.txt, llama-batched-bench .txt,
#               pagoda .json/.txt/.err, pagoda info, the copy-bandwidth ceiling), logs.tgz
#   TOKENIZER_DIR  Qwen3's tokenizer.json (or tokenizer.json.gz) + tokenizer_config.json
#               (default tests/data/qwen3-tokenizer), for every shape but the Llama ones
#   LLAMA_TOKENIZER_DIR  the same of Llama 3.1, for the llama* shapes (default tests/data/llama3_1-tokenizer)
#   DELETE_AFTER   1: remove a shape's checkpoint and GGUF once it is benchmarked (the 64 GB disk
#               holds two 8B-class shapes with their GGUFs at most)
#   BUILD_TIMEOUT  seconds for each build (default 900); a later call resumes them
#   BENCH_TIMEOUT  seconds for each benchmark command (default 300)
#   COPY_BW     the copy bandwidth of the weight-bandwidth limit, bytes/s (default 4.28e12, docs/performance.md's
#               H200 anchor); the limit with this GPU's own copy rate (pagoda bench kernels) is given too
set -uo pipefail
[[ $# -eq 1 && -d $1 ]] || { echo "usage: $0 LLAMA_CPP_SOURCE_DIR" >&2; exit 2; }
src=$(realpath "$1")
cd "$(dirname "$0")/../.."
repo=$PWD
out="${OUT:-/tmp/llama_bench_out}"
work="${WORK:-/tmp/serve_bench}"
logs="$work/logs"
res="$work/llama_bench"
mkdir -p "$out" "$work" "$logs" "$res"
tok="${TOKENIZER_DIR:-tests/data/qwen3-tokenizer}"
tok_for() {  # the tokenizer of a shape's family (its vocabulary size is the checkpoint's or below)
  case $1 in
    llama*) echo "${LLAMA_TOKENIZER_DIR:-tests/data/llama3_1-tokenizer}" ;;
    *) echo "$tok" ;;
  esac
}
steps="${STEPS:-build ckpt bench}"
shapes="${SHAPES:-qwen3-8b qwen3-0.6b qwen3.5-0.8b}"
bt="${BUILD_TIMEOUT:-900}"
bench_t="${BENCH_TIMEOUT:-300}"
llama_backend="${LLAMA_BACKEND:-cuda}"
# pagoda's devices, the first against llama.cpp; the others reported beside it (pagoda_<dev>_<shape>.json).
read -r -a pagoda_devices <<< "${PAGODA_DEVICES:-$([[ $llama_backend == vulkan ]] && echo "vulkan cuda" || echo cuda)}"
llama="$work/llama-build${LLAMA_BACKEND:+-$LLAMA_BACKEND}/bin"
export LD_LIBRARY_PATH="$repo/.deps/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1
has() { [[ " $steps " == *" $1 "* ]]; }
[[ -d .deps/root || ! -f .deps/root.tar.xz ]] || tar -C .deps -xJf .deps/root.tar.xz
if [[ $llama_backend == vulkan ]] && compgen -G '.gl/*.deb' >/dev/null; then  # the loader (vulkan_gpu.sh)
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
stamp() { echo "=== $1 ($(date +%T), ${SECONDS}s)"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
{ git log -1 --format=%h 2>/dev/null || echo unknown; } | tee "$out/commit.txt"

if has build; then
  if [[ ! -x build-gpu/pagoda || ${PAGODA_BUILD:-} == always ]]; then
    stamp "build pagoda and llama.cpp (in parallel)"
    (
      [[ $llama_backend == vulkan ]] && export PATH="$repo/.deps/root/usr/bin:$PATH"  # glslc for pagoda's shaders
      timeout "$bt" tools/device/build.sh > "$logs/build_pagoda.log" 2>&1
      echo "pagoda build rc $?"
    ) &
  else
    stamp "build llama.cpp (build-gpu/pagoda exists: not rebuilt; PAGODA_BUILD=always rebuilds it)"
  fi
  (
    if [[ $llama_backend == vulkan && -f .deps/vk-trixie.tar.xz ]]; then  # tools/device/fetch_vulkan_debs.sh
      mkdir -p /tmp/vk-trixie && tar -xJf .deps/vk-trixie.tar.xz -C /tmp/vk-trixie
      export VULKAN_ROOT=/tmp/vk-trixie
    fi
    targets=(llama-bench llama-batched-bench)
    [[ $llama_backend == vulkan ]] || targets+=(llama-server)
    BACKEND="$llama_backend" BUILD_TIMEOUT="$bt" tools/device/build_llama_cpp.sh "$src" "${llama%/bin}" "${targets[@]}" \
      > "$logs/build_llama.log" 2>&1
    echo "llama.cpp build rc $?"
  ) &
fi

if has ckpt; then
  for shape in $shapes; do
    stamp "checkpoint + GGUF $shape"
    tools/device/make_gguf_checkpoint.sh "$shape" "$work/$shape" "$src" "$(tok_for "$shape")" > "$logs/ckpt_$shape.log" 2>&1 ||
      tail -25 "$logs/ckpt_$shape.log"
    grep -a '^\[ckpt\]' "$logs/ckpt_$shape.log" | tail -1
  done
  df -h "$work" | tail -1
fi
if has build; then
  wait
  stamp "builds done"
  grep -iE "error" "$logs/build_pagoda.log" 2>/dev/null | head -10
  grep -iE "error" "$logs/build_llama.log" | head -10
  ls -la "$llama"/llama-bench "$llama"/llama-batched-bench "$llama"/llama-server build-gpu/pagoda 2>&1 | sed 's/^/  /'
fi

report() {  # the comparison tables of every result so far, into $OUT/tables.md
  python3 - "$res" "${COPY_BW:-4.28e12}" "$work" "$llama_backend" "${pagoda_devices[*]}" $shapes <<'EOF' | tee "$out/tables.md"
import json, os, re, sys

res, copy_bw, work, llama_backend, devices, shapes = (sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4],
                                                      sys.argv[5].split(), sys.argv[6:])


def load(path):
    try:
        return open(path, encoding="utf-8", errors="replace").read()
    except OSError:
        return None


def llama_bench(shape):  # {"pp512": tok/s, "tg128": tok/s} from llama-bench -o json
    text = load(f"{res}/llama_bench_{shape}.json")
    if not text or "[" not in text:
        return {}
    try:
        tests = json.loads(text[text.index("["):text.rindex("]") + 1])
    except ValueError:
        return {}
    r = {}
    for t in tests:
        if t.get("n_prompt", 0) > 0 and t.get("n_gen", 0) == 0:
            r[f"pp{t['n_prompt']}"] = t["avg_ts"]
        elif t.get("n_gen", 0) > 0 and t.get("n_prompt", 0) == 0:
            r[f"tg{t['n_gen']}"] = t["avg_ts"]
    return r


def batched_bench(shape):  # {B: (S_PP, S_TG, S)} from llama-batched-bench's table
    text = load(f"{res}/llama_batched_{shape}.txt") or ""
    r = {}
    for line in text.splitlines():
        f = [x.strip() for x in line.strip().strip("|").split("|")]
        if len(f) == 10 and f[0].isdigit():
            pp, tg, b = int(f[0]), int(f[1]), int(f[2])
            r[b] = (float(f[5]), float(f[7]), float(f[9]))
    return r


def pagoda(shape, dev=None):  # {point name: point} from pagoda bench offline --json
    text = load(f"{res}/pagoda_{dev + '_' if dev else ''}{shape}.json")
    try:
        return {p["name"]: p for p in json.loads(text)["points"]} if text else {}
    except (ValueError, KeyError):
        return {}


def weight_bytes(shape):
    """(all weights, read per decode step) in bytes from `pagoda info`: parameters x dtype size; per
    step an untied input embedding is read one row a token, not whole. Falls back to the sum of the
    *.safetensors file sizes (their JSON headers and any skipped tensors included: close enough)."""
    info = load(f"{res}/pagoda_info_{shape}.txt") or ""
    m = re.search(r"^parameters\s+\d+ \([^;]*; ([^)]*)\)", info, re.M)
    if m:
        size = {"BF16": 2, "F16": 2, "F32": 4, "I32": 4, "I64": 8}
        total = sum(int(n) * size.get(dt, 2) for dt, n in re.findall(r"(\w+) (\d+)", m.group(1)))
        src = "pagoda info: parameters x dtype size"
    else:
        d = os.path.join(work, shape)
        total = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".safetensors")) \
            if os.path.isdir(d) else 0
        src = "sum of the *.safetensors file sizes"
    per_step = total
    h = re.search(r"^hidden / mlp\s+(\d+)", info, re.M)
    v = re.search(r"^vocab\s+(\d+) \(untied", info, re.M)
    active = re.search(r"^params \(config\)\s+\d+ total \([^)]*\), (\d+) active per token", info, re.M)
    if active:  # mixture of experts: a decode step reads the k routed experts, not all of them
        per_step = int(active.group(1)) * 2  # bf16
        src += "; per step: the active parameters of `pagoda info`"
    if h and v:
        per_step -= int(h.group(1)) * int(v.group(1)) * 2  # bf16
    return total, per_step, src


def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "-"


def num(x):
    return f"{x:,.0f}" if x else "-"


measured_bw = None
try:
    measured_bw = json.load(open(f"{res}/ceilings.json"))["copy_gb_s"] * 1e9
except (OSError, ValueError, KeyError):
    pass
gpu = (load(f"{res}/gpu.txt") or "").strip()
print(f"# pagoda (--device {devices[0]}) vs llama.cpp ({llama_backend}), same GPU, one run"
      f"{': ' + gpu if gpu else ''}\n")
print("pagoda: `pagoda bench offline` (tg128 and B=N decode: tokens after each request's first over the decode "
      "time); llama.cpp: llama-bench -p 512 -n 128 -fa 1 (avg_ts) and llama-batched-bench -npp 256 -ntg 256 "
      "(S_PP, S_TG, S). Target: docs/performance.md's, as pagoda / llama.cpp.")
for shape in shapes:
    lb, bb, pg = llama_bench(shape), batched_bench(shape), pagoda(shape)
    others = {dev: pagoda(shape, dev) for dev in devices[1:]}  # reported beside, not compared
    if not (lb or bb or pg):
        print(f"\n## {shape}: no results\n")
        continue
    print(f"\n## {shape}\n")
    extra = "".join(f" pagoda {dev} tok/s |" for dev in others)
    print(f"| point | metric | pagoda tok/s | llama.cpp tok/s | pagoda / llama.cpp | target |{extra}")
    print("|---|---|---|---|---|---|" + "---|" * len(others))
    small = shape in ("qwen3-0.6b", "qwen3.5-0.8b")

    def row(point, metric, key, theirs, target=None):
        mine = pg.get(point, {}).get(key)
        verdict = ""
        if target and mine and theirs:
            verdict = f"{target:g}x: {'met' if mine / theirs >= target else 'MISSED'}"
        beside = "".join(f" {num(o.get(point, {}).get(key))} |" for o in others.values())
        print(f"| {point} | {metric} | {num(mine)} | {num(theirs)} | {ratio(mine, theirs)} | {verdict} |{beside}")

    if llama_backend != "cuda":  # targets of docs/performance.md are the CUDA backend's; Vulkan's is parity
        row("pp512", "prefill", "prefill_tok_s", lb.get("pp512"), 1.0)
        row("tg128", "decode", "decode_tok_s", lb.get("tg128"), 1.0)
    else:
        row("pp512", "prefill", "prefill_tok_s", lb.get("pp512"), 1.2)
        row("tg128", "decode", "decode_tok_s", lb.get("tg128"), 1.5 if shape == "qwen3-0.6b" else None)
    for b in sorted(set(bb) | {p["batch"] for n, p in pg.items() if n.startswith("B=")}):
        s_pp, s_tg, s = bb.get(b, (None, None, None))
        target = 1.0 if llama_backend != "cuda" else 2.0 if small and b in (64, 128) else None
        row(f"B={b}", "decode (S_TG)", "decode_tok_s", s_tg, target)
        row(f"B={b}", "prefill (S_PP)", "prefill_tok_s", s_pp)
        row(f"B={b}", "total (S)", "total_tok_s", s)
    total, per_step, src = weight_bytes(shape)
    if total:
        print(f"\nWeight-bandwidth limit of single-stream decode (weights {total / 1e9:.2f} GB, {src}; "
              f"read per step {per_step / 1e9:.2f} GB, an untied input embedding being read one row a token):\n")
        print("| engine | tg128 tok/s | copy bandwidth | limit, all weights | fraction | limit, bytes read per step | fraction |")
        print("|---|---|---|---|---|---|---|")
        for name, tps in (("pagoda", pg.get("tg128", {}).get("decode_tok_s")), ("llama.cpp", lb.get("tg128"))):
            for label, bw in ((f"{copy_bw / 1e12:.2f} TB/s (COPY_BW)", copy_bw),
                              (f"{measured_bw / 1e12:.2f} TB/s (measured here)" if measured_bw else None, measured_bw)):
                if not bw or not tps:
                    continue
                print(f"| {name} | {tps:,.1f} | {label} | {bw / total:,.0f} | {tps * total / bw * 100:.1f}% "
                      f"| {bw / per_step:,.0f} | {tps * per_step / bw * 100:.1f}% |")
        if shape == "qwen3-8b":
            print("\nTarget (docs/performance.md): pagoda >= 85% of the weight-bandwidth limit "
                  "(docs/performance.md's 16.4 GB / 4.28 TB/s convention: the 'all weights' column at COPY_BW).")
EOF
}

if has bench; then
  cp "$out/gpu.txt" "$out/commit.txt" "$res/"
  rm -f "$res/ceilings.json"
  if [[ -x build-gpu/pagoda ]]; then
    stamp "copy-bandwidth ceiling (pagoda bench kernels)"
    timeout "$bench_t" build-gpu/pagoda bench kernels --device cuda --filter ceilings-only \
      --json "$res/ceilings.json" > "$res/ceilings.txt" 2>&1
    grep -a "copy" "$res/ceilings.txt" | head -2
  else
    echo "no build-gpu/pagoda (STEPS=build): pagoda is skipped"
  fi
  for shape in $shapes; do
    dir="$work/$shape"
    rm -f "$res"/*_"$shape".*  # an earlier run's
    if [[ -f $dir/ready2 && -x $llama/llama-bench && -x $llama/llama-batched-bench ]]; then
      stamp "llama-bench $shape"
      timeout "$bench_t" "$llama/llama-bench" -m "$dir/model.gguf" -p 512 -n 128 -fa 1 -ngl 99 -o json -oe md \
        > "$res/llama_bench_$shape.json" 2> "$res/llama_bench_$shape.txt"
      echo "rc $?"
      grep -a '^|' "$res/llama_bench_$shape.txt"
      stamp "llama-batched-bench $shape"
      # -c: 128 sequences x (256 + 256) tokens; the KV cache is not unified, so each sequence has 512 cells.
      timeout "$bench_t" "$llama/llama-batched-bench" -m "$dir/model.gguf" -c $((128 * (256 + 256))) -b 2048 -ub 512 \
        -npp 256 -ntg 256 -npl 1,16,64,128 -fa on -ngl 99 > "$res/llama_batched_$shape.txt" 2>&1
      echo "rc $?"
      grep -a '^|' "$res/llama_batched_$shape.txt"
      grep -a "kv_unified\|n_ctx_seq " "$res/llama_batched_$shape.txt" | head -2
    else
      echo "$shape: no GGUF ($dir/ready2; STEPS=ckpt) or no llama.cpp build (STEPS=build): llama.cpp skipped"
    fi
    if [[ -f $dir/zeroed && -x build-gpu/pagoda ]]; then
      build-gpu/pagoda info "$dir" > "$res/pagoda_info_$shape.txt" 2>&1
      grep -a "^parameters\|^weights on disk" "$res/pagoda_info_$shape.txt"
      for dev in "${pagoda_devices[@]}"; do
        name="pagoda_$shape"
        [[ $dev == "${pagoda_devices[0]}" ]] || name="pagoda_${dev}_$shape"
        stamp "pagoda bench offline $shape --device $dev"
        timeout "$bench_t" build-gpu/pagoda bench offline "$dir" --device "$dev" --json "$res/$name.json" \
          > "$res/$name.txt" 2> "$res/$name.err"
        echo "rc $?"
        cat "$res/$name.txt"
        grep -ai "error" "$res/$name.err" | head -5
      done
    else
      echo "$shape: no checkpoint ($dir/zeroed; STEPS=ckpt) or no build-gpu/pagoda: pagoda skipped"
    fi
    report > /dev/null
    if [[ ${DELETE_AFTER:-0} == 1 ]]; then
      rm -rf "${dir:?}"
      echo "$shape: checkpoint and GGUF removed (DELETE_AFTER=1); $(df -h "$work" | awk 'NR==2 {print $4}') disk left"
    fi
  done
  stamp "comparison"
  report
  tar czf "$out/results.tgz" -C "$res" .
fi
tar czf "$out/logs.tgz" -C "$logs" .
stamp done
