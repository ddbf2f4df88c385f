#!/usr/bin/env python3
"""Sum an Nsight Compute CSV (--metrics gpu__time_duration.sum --csv) by kernel name: launches, total
time, share of all, mean per launch, the TOP kernels (argv[2], default 25) by total time.

  python3 tools/device/ncu_summary.py profile.csv [TOP]
"""
import collections
import csv
import io
import sys


def kernel_name(full):
    """The function's own name: without its return type, namespaces, template arguments and parameters
    (every instantiation of a template is one row)."""
    depth, cut = 0, len(full)
    for i, c in enumerate(full):  # the first '<' or '(' outside brackets ends the qualified name
        if c in "<(" and depth == 0 and not full[:i].endswith(("::", "operator")):
            if not (c == "(" and full[i:].startswith("(anonymous")):
                cut = i
                break
        depth += c in "<([" and 1 or (c in ">)]" and -1 or 0)
    head = full[:cut].replace("<unnamed>::", "").replace("(anonymous namespace)::", "")
    return head.split()[-1].split("::")[-1] if head.split() else full


def main():
    path, top = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 25
    text = open(path, encoding="utf-8", errors="replace").read()
    # ncu writes its own "==PROF==" lines before the CSV header.
    start = text.find('"ID"')
    if start < 0:
        print(f"{path}: no kernel rows (did the program run under ncu?)")
        return
    total = collections.defaultdict(float)
    count = collections.Counter()
    for row in csv.DictReader(io.StringIO(text[start:])):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}[row["Metric Unit"]]
        name = kernel_name(row["Kernel Name"])
        total[name] += value * scale
        count[name] += 1
    grand = sum(total.values())
    print(f"{sum(count.values())} launches, {grand / 1e3:.2f} ms of kernel time")
    print(f"{'kernel':<48} {'launches':>8} {'total ms':>9} {'share':>6} {'mean us':>9}")
    for name, t in sorted(total.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{name[:48]:<48} {count[name]:>8} {t / 1e3:>9.3f} {100 * t / grand:>5.1f}% {t / count[name]:>9.1f}")


if __name__ == "__main__":
    main()
