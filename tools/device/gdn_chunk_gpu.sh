#!/usr/bin/env bash
# Run ON the GPU machine (carry .deps): the chunked gated delta rule checked and timed — the op table's
# gated_delta_rule cases (large ones included) and the GDN GPU tests, then `bench kernels` on the
# GDN shapes with AB_VAR (default PAGODA_GDN_SPLIT: the split chunked form; PAGODA_GDN_TC: the one-pass
# kernel's tensor cores) at 0 and 1, alternating ROUNDS times. TESTS=0 skips the tests, OPTABLE=0 the op table;
# NCU=1 adds each kernel's time under Nsight Compute (NCU_FILTER: the bench case), NCU_DETAIL=1 its
# throughput, occupancy and warp stalls.
#   bash tools/device/gdn_chunk_gpu.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu" PATH="/usr/local/cuda/bin:$PATH"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
git log -1 --format='commit %h' 2>/dev/null
tools/device/build.sh >/dev/null || exit 1
status=0
ab="${AB_VAR:-PAGODA_GDN_SPLIT}"
if [ "${TESTS:-1}" = 1 ]; then
if [ "${OPTABLE:-1}" = 1 ]; then
cmake --build build-gpu -j"$(nproc)" --target pagoda_tests 2>&1 | grep -E "error|FAILED" && exit 1
echo "== op table: gated_delta_rule"
PAGODA_OPTABLE_LARGE=1 build-gpu/pagoda_tests --gtest_filter='Backends/OpTable.*' 2>&1 |
  grep -E "gated_delta_rule.*(differ|Failure)|FAILED|PASSED" || true
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi
echo "== pagoda_gpu_tests"
build-gpu/pagoda_gpu_tests --gtest_filter="${GPU_FILTER:-*}" 2>&1 |
  grep -E "^\[ *(FAILED|PASSED) |differ" | cut -c1-400 || true
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi
for r in $(seq "${ROUNDS:-2}"); do
  for on in 0 1; do
    echo "== bench kernels gated_delta_rule $ab=$on round $r"
    env "$ab=$on" build-gpu/pagoda bench kernels --device cuda --filter gated_delta_rule 2>&1 | grep "^| gated"
  done
done
# NCU=1: each GDN kernel's own time under Nsight Compute on the 9B prefill case, both forms.
if [ "${NCU:-0}" = 1 ]; then
  ncu_bin=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  for on in 0 1; do
    echo "== ncu $ab=$on: ${NCU_FILTER:=Hv32 dk128 dv128 B=8 q=1024}"
    env "$ab=$on" "$ncu_bin" --clock-control none -k regex:gdn --metrics gpu__time_duration.sum --csv \
      --log-file "/tmp/ncu_$on.csv" build-gpu/pagoda bench kernels --device cuda --filter "$NCU_FILTER" >/dev/null 2>&1
    python3 - "/tmp/ncu_$on.csv" <<'PY'
import collections, csv, io, re, sys
text = open(sys.argv[1], errors="replace").read()
rows = csv.DictReader(io.StringIO(text[text.index('"ID"'):]))
tot, n = collections.Counter(), collections.Counter()
for r in rows:
    m = re.search(r"(gdn_\w+?_kernel)(<[^(]*>)?", r["Kernel Name"])
    k = (m.group(1) + (m.group(2) or "")) if m else r["Kernel Name"][:60]
    unit = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}[r["Metric Unit"]]
    tot[k] += float(r["Metric Value"].replace(",", "")) * unit
    n[k] += 1
for k, v in tot.most_common():
    print(f"{k:60s} {n[k]:5d} launches {v / n[k]:10.1f} us each")
PY
  done
fi
# NCU_DETAIL=1: one launch of each split kernel under Nsight Compute's throughput, occupancy and
# warp-stall sections.
if [ "${NCU_DETAIL:-0}" = 1 ]; then
  ncu_bin=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  for k in gdn_split_prepare gdn_split_scan; do
    echo "== ncu detail $k: ${NCU_FILTER:-Hv32 dk128 dv128 B=8 q=1024}"
    "$ncu_bin" --clock-control none -k "regex:$k" -s 2 -c 1 --section SpeedOfLight --section Occupancy \
      --section WarpStateStats --section SchedulerStats --section LaunchStats \
      build-gpu/pagoda bench kernels --device cuda --filter "${NCU_FILTER:-Hv32 dk128 dv128 B=8 q=1024}" 2>&1 |
      grep -E "Duration|Throughput|Occupancy|Warp Cycles|Issued Ipc|Eligible|Registers|Shared Memory Config|Stall|stall|Block Limit|No Eligible|Active Warps" | head -40
  done
fi
exit $status
