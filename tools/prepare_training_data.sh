#!/usr/bin/env bash
# Run HERE (a Debian machine with apt; not on the GPU machine): downloads the public-domain English
# texts that the models in models/ are trained on, from Debian packages, and writes them as JSON
# lines into .train-data/prepared/ (git-ignored; a device `run` carries it), plus the held-out text
# tests/fixtures/heldout.txt (committed). Reproducible: same package versions, same bytes.
#
#   bible-kjv-text  King James Version (1611), copyright expired; read with the `bible` program of
#                   bible-kjv (run from the unpacked package, nothing is installed)
#   dict-devil      Ambrose Bierce, The Devil's Dictionary (1911), "A Public Domain Text"
#   dict-jargon     The Jargon File 4.4.7: "This document (the Jargon File) is in the public domain"
#
# Output (.train-data/prepared/):
#   kjv.jsonl      one verse a line: {"book", "chapter", "verse", "text"}  (all 66 books)
#   devil.jsonl    one entry a line: {"word", "text"}
#   jargon.jsonl   one entry a line: {"word", "text"}
#   SOURCES.txt    package names, versions and sha256 of the .debs
# The held-out text is the Revelation of St. John (the last book), formatted as the training text
# formats a chapter; tools/train_tiny_models.py never trains on it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=.train-data
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qxF '/.train-data/' "$exclude" 2>/dev/null || echo '/.train-data/' >> "$exclude"
rm -rf "$root/debs" "$root/unpacked" "$root/prepared"
mkdir -p "$root/debs" "$root/unpacked" "$root/prepared"
pkgs=(bible-kjv bible-kjv-text dict-devil dict-jargon)
(cd "$root/debs" && apt-get download "${pkgs[@]}" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
for f in "$root"/debs/*.deb; do dpkg -x "$f" "$root/unpacked"; done
(cd "$root/debs" && for f in *.deb; do
   dpkg-deb -f "$f" Package Version | paste -sd' '; sha256sum "$f"; done) > "$root/prepared/SOURCES.txt"

# The whole Bible, one verse a line, no wrapping (-l with a huge width).
"$root/unpacked/usr/bin/bible" -p "$root/unpacked/usr/lib" -l100000 "gen1:1-rev22:21" \
  > "$root/unpacked/kjv.txt"

python3 - "$root" <<'EOF'
import base64, gzip, json, re, sys
root = sys.argv[1]
out = root + "/prepared"

# --- KJV: "Book C" header lines, then "  N text" verse lines -----------------------------------
book = chap = None
verses = []
for line in open(root + "/unpacked/kjv.txt", encoding="utf-8"):
    line = line.rstrip("\n")
    if not line.strip():
        continue
    m = re.match(r"^(\S.*?) (\d+)$", line)
    if m and not line.startswith(" "):
        book, chap = m.group(1), int(m.group(2))
        continue
    m = re.match(r"^\s+(\d+) (.*)$", line)
    assert m and book, line
    verses.append({"book": book, "chapter": chap, "verse": int(m.group(1)),
                   "text": m.group(2).strip()})
assert len(verses) == 31102, len(verses)  # the KJV has 31,102 verses
with open(out + "/kjv.jsonl", "w", encoding="utf-8") as f:
    for v in verses:
        f.write(json.dumps(v, ensure_ascii=False) + "\n")

# --- dictd databases: index lines "word \t offset \t length" in dictd's base64 numbers ----------
B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
def num(s):
    n = 0
    for c in s:
        n = n * 64 + B64.index(c)
    return n

for name in ("devil", "jargon"):
    data = gzip.open(f"{root}/unpacked/usr/share/dictd/{name}.dict.dz").read()
    seen, entries = set(), []
    for line in open(f"{root}/unpacked/usr/share/dictd/{name}.index", encoding="utf-8"):
        word, off, length = line.rstrip("\n").split("\t")[:3]
        if word.startswith("00database") or word.startswith("00-database"):
            continue
        key = (num(off), num(length))
        if key in seen:  # several headwords may point at one entry
            continue
        seen.add(key)
        text = data[key[0]:key[0] + key[1]].decode("utf-8").strip("\n")
        text = "\n".join(l.rstrip() for l in text.split("\n")).strip()
        entries.append((key[0], {"word": word, "text": text}))
    entries.sort(key=lambda e: e[0])  # the order of the source text
    with open(f"{out}/{name}.jsonl", "w", encoding="utf-8") as f:
        for _, e in entries:
            f.write(json.dumps(e, ensure_ascii=False) + "\n")
    print(f"{name}: {len(entries)} entries")
print(f"kjv: {len(verses)} verses")
EOF

# The held-out text: the Revelation, as tools/train_tiny_models.py formats a chapter.
python3 - "$root/prepared/kjv.jsonl" tests/fixtures/heldout.txt <<'EOF'
import json, sys
chapters = {}
for line in open(sys.argv[1], encoding="utf-8"):
    v = json.loads(line)
    if v["book"] == "Revelation":
        chapters.setdefault(v["chapter"], []).append(f'{v["verse"]} {v["text"]}')
text = "\n\n".join(f"Revelation {c}\n\n" + "\n".join(vs) for c, vs in sorted(chapters.items()))
open(sys.argv[2], "w", encoding="utf-8").write(text + "\n")
EOF
rm -rf "$root/debs"
ls -l "$root/prepared" tests/fixtures/heldout.txt
