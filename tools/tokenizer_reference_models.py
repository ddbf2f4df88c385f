"""Writes tests/fixtures/tokenizer/<model>_reference.json for tools/tokenizer_reference.py --model.

A fixture holds, for one tokenizer.json (optionally edited by "overrides", which the C++ test
applies the same way):
  cases:               {"text", "ids": encode(text, add_special_tokens=False), "decoded": decode(ids)}
  special_token_cases: {"text", "ids": encode(text, add_special_tokens=True)}
  decode_cases:        {"ids", "skip_special_tokens", "text": decode(ids, skip_special_tokens)}
made either by Hugging Face `tokenizers` or by tools/hf_tokenizer_py.py (see "backend").
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


class _HfBackend:
    def __init__(self, j):
        import tokenizers

        self.version = "tokenizers " + tokenizers.__version__
        self.tok = tokenizers.Tokenizer.from_str(json.dumps(j))

    def encode(self, text, add_special_tokens):
        return self.tok.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids, skip_special_tokens):
        return self.tok.decode(ids, skip_special_tokens=skip_special_tokens)

    def token_to_id(self, token):
        return self.tok.token_to_id(token)


class _IndependentBackend:
    def __init__(self, j):
        sys.path.insert(0, HERE)
        import hf_tokenizer_py

        self.version = "independent (tools/hf_tokenizer_py.py)"
        self.tok = hf_tokenizer_py.Tokenizer(j)

    def encode(self, text, add_special_tokens):
        return self.tok.encode(text, add_special_tokens=add_special_tokens)

    def decode(self, ids, skip_special_tokens):
        return self.tok.decode(ids, skip_special_tokens=skip_special_tokens)

    def token_to_id(self, token):
        return self.tok.token_to_id(token)


def _decode_id_lists(tok, special_texts):
    """Id lists worth decoding beyond encode's output: byte-fallback runs, leading metaspaces,
    special tokens with and without skip_special_tokens."""
    lists = []

    def ids_of(*tokens):
        ids = [tok.token_to_id(t) for t in tokens]
        return None if None in ids else ids

    for tokens in (("<0xE4>", "<0xB8>", "<0xAD>"), ("<0xE4>", "<0xB8>"), ("<0xFF>",),
                   ("<0xE4>", "<0xB8>", "\u2581a"), ("<0xC3>", "<0xA9>", "<0xFF>"), ("<0x41>",),
                   ("\u2581a", "<0xE4>", "<0xB8>", "<0xAD>", "\u2581b"), ("<0x20>", "\u2581a"),
                   ("\u2581Hello", "\u2581world"), ("\u2581", "\u2581"), ("\u2581", "a", "\u2581"),
                   ("Hello", "\u2581"), ("\u0120Hello", "\u0120world"), ("\u00e4\u00b8", "\u0143")):
        ids = ids_of(*tokens)
        if ids is not None:
            lists.append(ids)
    for text in ["Hello world", "  leading spaces", "trailing  "] + special_texts[:4]:
        lists.append(tok.encode(text, False))
    return lists


def write_model_fixture(name: str, spec: dict, backend: str, texts: list[str]) -> None:
    path = os.path.join(ROOT, "tests", "data", spec["dir"], "tokenizer.json")
    with open(path, "rb") as f:
        raw = f.read()
    sha = hashlib.sha256(raw).hexdigest()
    j = json.loads(raw)
    overrides = copy.deepcopy(spec.get("overrides", {}))
    j.update(overrides)
    tok = _HfBackend(j) if backend == "tokenizers" else _IndependentBackend(j)

    cases = []
    for t in texts:
        ids = tok.encode(t, False)
        cases.append({"text": t, "ids": ids, "decoded": tok.decode(ids, False)})
    special_cases = [{"text": t, "ids": tok.encode(t, True)}
                     for t in ["", "Hello world", "  two leading spaces"] + spec["special"][:3]]
    decode_cases = []
    for ids in _decode_id_lists(tok, spec["special"]):
        for skip in (False, True):
            decode_cases.append({"ids": ids, "skip_special_tokens": skip,
                                 "text": tok.decode(ids, skip)})

    header = {
        "tokenizer": spec["label"],
        "generated_by": "tools/tokenizer_reference.py --model " + name + " --backend " + backend,
        "backend": tok.version,
        "tokenizer_json": "tests/data/" + spec["dir"] + "/tokenizer.json",
        "tokenizer_json_sha256": sha,
        "overrides": overrides,
    }
    if backend != "tokenizers":
        header["note"] = ("Made by the independent Python implementation tools/hf_tokenizer_py.py, "
                          "written from the Hugging Face tokenizers source, because the library "
                          "could not be run here. Replace with the library's output: "
                          "python3 tools/tokenizer_reference.py --model " + name)
    out_path = os.path.join(ROOT, "tests", "fixtures", "tokenizer", name + "_reference.json")
    with open(out_path, "w", encoding="utf-8") as f:
        # One case per line keeps the file small and its diffs readable.
        f.write(json.dumps(header, ensure_ascii=False, indent=1)[:-2] + ",\n")
        for key, rows in (("cases", cases), ("special_token_cases", special_cases),
                          ("decode_cases", decode_cases)):
            f.write(f' "{key}": [\n')
            f.write(",\n".join("  " + json.dumps(r, ensure_ascii=False) for r in rows))
            f.write("\n ]" + (",\n" if key != "decode_cases" else "\n"))
        f.write("}\n")
    with open(out_path, encoding="utf-8") as f:
        json.load(f)  # the hand-joined file must parse
    n_ids = sum(len(c["ids"]) for c in cases)
    n_same = sum(c["decoded"] == c["text"] for c in cases)
    print(f"{name}: {tok.version}; {len(cases)} cases ({n_ids} ids, {n_same} decode to the input), "
          f"{len(special_cases)} with special tokens, {len(decode_cases)} decodes -> {out_path} "
          f"({os.path.getsize(out_path)} bytes)")
