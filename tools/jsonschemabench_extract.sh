#!/bin/sh
# Extracts JSONSchemaBench's data/ from a bare git mirror (the `fetch` tool's copy) into OUT,
# skipping objects the mirror lacks. Usage: tools/jsonschemabench_extract.sh GIT_DIR OUT
set -e
G="$1"; OUT="$2"
git --git-dir="$G" ls-tree -r --name-only HEAD data | while read -r f; do
  mkdir -p "$OUT/$(dirname "$f")"
  git --git-dir="$G" show "HEAD:$f" > "$OUT/$f" 2>/dev/null || rm -f "$OUT/$f"
done
