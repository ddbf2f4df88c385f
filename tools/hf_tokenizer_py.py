#!/usr/bin/env python3
"""An independent, pure-Python reading of Hugging Face `tokenizers` for BPE tokenizer.json files.

Written from the Rust source of huggingface/tokenizers (tokenizers/src: tokenizer/mod.rs encode and
decode, tokenizer/added_vocabulary.rs, tokenizer/normalizer.rs split, normalizers/{unicode,replace,
prepend}.rs, pre_tokenizers/{split,byte_level,metaspace,sequence}.rs, models/bpe/{model,word}.rs,
decoders/*.rs, processors/{template,sequence,roberta,bert}.rs), never from pagoda's C++. It exists
to make reference ids where the real library cannot be run; `tokenizers` output replaces it when it
can (tools/tokenizer_reference.py --backend tokenizers).

Needs the `regex` module (pip `regex`, Debian python3-regex) for the Split patterns, which HF runs
with Oniguruma: \\p{..} classes, scoped (?i:..), and \\s as Unicode White_Space.

Covered: normalizers NFC, NFKC, Replace, Prepend, Sequence; pre-tokenizers Split, ByteLevel,
Metaspace, Sequence; the BPE model with merges, unk_token, fuse_unk, byte_fallback, ignore_merges;
added tokens (leftmost-longest, lstrip/rstrip/single_word, normalized or not); decoders ByteLevel,
Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence; post-processors TemplateProcessing,
ByteLevel, Sequence, RobertaProcessing, BertProcessing. Offsets are not computed; Metaspace's
prepend_scheme "first" is decided by the piece starting at offset 0 of the input, which is what
HF's original offset is when the normalizer does not delete leading text.
"""

from __future__ import annotations

import json
import unicodedata

import regex

# --------------------------------------------------------------------------------------------------
# Byte-level alphabet (pre_tokenizers/byte_level.rs bytes_char)
# --------------------------------------------------------------------------------------------------


def _bytes_char() -> dict[int, str]:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BYTES_CHAR = _bytes_char()
CHAR_BYTES = {c: b for b, c in BYTES_CHAR.items()}
GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"

# added_vocabulary.rs uses the Rust regex crate: \w and \s are Unicode.
WORD_CHAR = regex.compile(r"[\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}]")
WHITE_SPACE = regex.compile(r"\p{White_Space}")


def compile_onig(pattern: str) -> regex.Pattern:
    # Oniguruma's \s is White_Space; so is the regex module's (checked: \x1c no, \x85 yes).
    return regex.compile(pattern)


def find_matches(pattern, text: str) -> list[tuple[int, int, bool]]:
    """pattern.rs find_matches: alternating (start, end, is_match) covering text."""
    if text == "":
        return [(0, 0, False)]
    out, prev = [], 0
    if isinstance(pattern, str):  # a literal (char or &str)
        it = []
        i = text.find(pattern)
        while i != -1:
            it.append((i, i + len(pattern)))
            i = text.find(pattern, i + len(pattern))
    else:
        it = [(m.start(), m.end()) for m in pattern.finditer(text)]
    for s, e in it:
        if prev != s:
            out.append((prev, s, False))
        out.append((s, e, True))
        prev = e
    if prev != len(text):
        out.append((prev, len(text), False))
    return out


def split_with_behavior(matches, behavior: str) -> list[tuple[int, int]]:
    """normalizer.rs NormalizedString::split: the kept (start, end) after the behaviour."""
    if behavior == "Isolated":
        splits = [(s, e, False) for s, e, _ in matches]
    elif behavior == "Removed":
        splits = list(matches)
    elif behavior in ("Contiguous", "MergedWithPrevious"):
        splits, prev_match = [], False
        for s, e, m in matches:
            merge = (m == prev_match) if behavior == "Contiguous" else (m and not prev_match)
            if merge and splits:
                ps, _, pr = splits[-1]
                splits[-1] = (ps, e, pr)
            else:
                splits.append((s, e, False))
            prev_match = m
    elif behavior == "MergedWithNext":
        splits, prev_match = [], False
        for s, e, m in reversed(matches):
            if m and not prev_match and splits:
                _, pe, pr = splits[-1]
                splits[-1] = (s, pe, pr)
            else:
                splits.append((s, e, False))
            prev_match = m
        splits.reverse()
    else:
        raise ValueError(f"unknown split behavior {behavior}")
    return [(s, e) for s, e, remove in splits if not remove]


# --------------------------------------------------------------------------------------------------
# Normalizers
# --------------------------------------------------------------------------------------------------


class Normalizer:
    def __init__(self, j):
        self.steps = []
        self._add(j)

    def _add(self, j):
        if j is None:
            return
        t = j["type"]
        if t == "Sequence":
            for n in j["normalizers"]:
                self._add(n)
        elif t in ("NFC", "NFKC", "NFD", "NFKD"):
            self.steps.append(("unicode", t))
        elif t == "Replace":
            self.steps.append(("replace", replace_rule(j)))
        elif t == "Prepend":
            self.steps.append(("prepend", j["prepend"]))
        else:
            raise ValueError(f"normalizer {t} not implemented")

    def normalize(self, s: str) -> str:
        for kind, arg in self.steps:
            if kind == "unicode":
                s = unicodedata.normalize(arg, s)
            elif kind == "replace":
                s = apply_replace(arg, s)
            elif kind == "prepend":
                if s:  # prepend.rs: only a non-empty string
                    s = arg + s
        return s


def replace_rule(j):
    p = j["pattern"]
    pattern = p["String"] if "String" in p else compile_onig(p["Regex"])
    return (pattern, j["content"])


def apply_replace(rule, s: str) -> str:
    pattern, content = rule
    out = []
    for a, b, m in find_matches(pattern, s):
        out.append(content if m else s[a:b])
    return "".join(out)


# --------------------------------------------------------------------------------------------------
# Pre-tokenizers: functions (piece, at_origin) -> [(piece, at_origin)]
# --------------------------------------------------------------------------------------------------


class PreTokenizer:
    def __init__(self, j):
        self.steps = []
        self.ends_with_byte_level = False
        self._add(j)

    def _add(self, j):
        if j is None:
            return
        t = j["type"]
        if t == "Sequence":
            for p in j["pretokenizers"]:
                self._add(p)
        elif t == "Split":
            p = j["pattern"]
            pattern = p["String"] if "String" in p else compile_onig(p["Regex"])
            self.steps.append(("split", pattern, j["behavior"], j.get("invert", False)))
        elif t == "ByteLevel":
            self.steps.append(("byte_level", j.get("add_prefix_space", True), j.get("use_regex", True)))
        elif t == "Metaspace":
            scheme = j.get("prepend_scheme") or "always"
            if j.get("add_prefix_space") is False:
                assert scheme == "never" or "prepend_scheme" not in j
                scheme = "never"
            self.steps.append(("metaspace", j["replacement"], scheme, j.get("split", True)))
        else:
            raise ValueError(f"pre_tokenizer {t} not implemented")

    def pre_tokenize(self, text: str, at_origin: bool) -> list[str]:
        splits = [(text, at_origin)]
        for step in self.steps:
            new = []
            for piece, origin in splits:
                for sub, sub_origin in self._apply(step, piece, origin):
                    if sub:  # pre_tokenizer.rs split drops empty splits
                        new.append((sub, sub_origin))
            splits = new
        return [p for p, _ in splits]

    @staticmethod
    def _apply(step, s, origin):
        kind = step[0]
        if kind == "split":
            _, pattern, behavior, invert = step
            matches = find_matches(pattern, s)
            if invert:
                matches = [(a, b, not m) for a, b, m in matches]
            return [(s[a:b], origin and a == 0) for a, b in split_with_behavior(matches, behavior)]
        if kind == "byte_level":
            _, add_prefix_space, use_regex = step
            if add_prefix_space and not s.startswith(" "):
                s = " " + s
            if use_regex:
                parts = [(s[a:b], origin and a == 0)
                         for a, b in split_with_behavior(find_matches(regex.compile(GPT2_PATTERN), s), "Isolated")]
            else:
                parts = [(s, origin)]
            return [("".join(BYTES_CHAR[b] for b in p.encode("utf-8")), o) for p, o in parts]
        if kind == "metaspace":
            _, rep, scheme, split = step
            s = s.replace(" ", rep)
            if not s.startswith(rep) and (scheme == "always" or (scheme == "first" and origin)):
                s = rep + s
            if not split:
                return [(s, origin)]
            return [(s[a:b], origin and a == 0)
                    for a, b in split_with_behavior(find_matches(rep, s), "MergedWithNext")]
        raise AssertionError(kind)


# --------------------------------------------------------------------------------------------------
# BPE model (models/bpe/model.rs merge_word, word.rs merge_all)
# --------------------------------------------------------------------------------------------------


class BPE:
    def __init__(self, j):
        assert j.get("type", "BPE") == "BPE", j.get("type")
        self.vocab = dict(j["vocab"])
        self.vocab_r = {v: k for k, v in self.vocab.items()}
        self.merges = {}
        for rank, m in enumerate(j.get("merges") or []):
            a, b = m.split(" ", 1) if isinstance(m, str) else m
            self.merges[(self.vocab[a], self.vocab[b])] = (rank, self.vocab[a + b])
        self.unk_token = j.get("unk_token")
        self.fuse_unk = bool(j.get("fuse_unk", False))
        self.byte_fallback = bool(j.get("byte_fallback", False))
        self.ignore_merges = bool(j.get("ignore_merges", False))
        assert not j.get("continuing_subword_prefix") and not j.get("end_of_word_suffix")
        assert not j.get("dropout")

    def tokenize(self, piece: str) -> list[int]:
        if piece == "":
            return []
        if self.ignore_merges and piece in self.vocab:
            return [self.vocab[piece]]
        symbols: list[int] = []
        unk = None  # (unk id) pending, as merge_word's `unk`
        for ch in piece:
            if ch in self.vocab:
                if unk is not None:
                    symbols.append(unk)
                    unk = None
                symbols.append(self.vocab[ch])
                continue
            if self.byte_fallback:
                codes = ["<0x%02X>" % b for b in ch.encode("utf-8")]
                if all(c in self.vocab for c in codes):
                    # The pending unk stays pending, as in merge_word.
                    symbols.extend(self.vocab[c] for c in codes)
                    continue
            if self.unk_token is not None:
                unk_id = self.vocab[self.unk_token]
                if unk is not None and not self.fuse_unk:
                    symbols.append(unk)
                    unk = unk_id
                elif unk is None:
                    unk = unk_id
        if unk is not None:
            symbols.append(unk)
        return self._merge_all(symbols)

    def _merge_all(self, symbols: list[int]) -> list[int]:
        # Lowest rank first, leftmost on a tie: the order word.rs's heap of (rank, pos) pops in.
        while len(symbols) > 1:
            best = None
            for i in range(len(symbols) - 1):
                m = self.merges.get((symbols[i], symbols[i + 1]))
                if m is not None and (best is None or m[0] < best[0]):
                    best = (m[0], i, m[1])
            if best is None:
                break
            _, i, new_id = best
            symbols[i:i + 2] = [new_id]
        return symbols


# --------------------------------------------------------------------------------------------------
# Added vocabulary (tokenizer/added_vocabulary.rs)
# --------------------------------------------------------------------------------------------------


class AddedVocabulary:
    def __init__(self, tokens, model: BPE, normalizer: Normalizer | None):
        self.by_id: dict[int, dict] = {}
        self.by_content: dict[str, int] = {}
        self.special: set[str] = set()
        raw, norm = {}, {}
        for t in tokens:
            if t["content"] == "" or t["content"] in self.by_content:
                continue
            self.by_id[t["id"]] = t
            self.by_content[t["content"]] = t["id"]
            if t.get("special"):
                self.special.add(t["content"])
            normalized = t.get("normalized", not t.get("special", False))
            if normalized:
                pat = normalizer.normalize(t["content"]) if normalizer else t["content"]
                norm[pat] = t["id"]
            else:
                raw[t["content"]] = t["id"]
        self.raw_trie = self._trie(raw)
        self.norm_trie = self._trie(norm)

    @staticmethod
    def _trie(patterns: dict[str, int]):
        root: dict = {}
        for p, i in patterns.items():
            node = root
            for ch in p:
                node = node.setdefault(ch, {})
            node[None] = i
        return root

    @staticmethod
    def _leftmost_longest(trie, text: str, start: int):
        for i in range(start, len(text)):
            node, best = trie, None
            j = i
            while j < len(text) and text[j] in node:
                node = node[text[j]]
                j += 1
                if None in node:
                    best = (i, j, node[None])
            if best is not None:
                return best
        return None

    def split(self, text: str, trie) -> list[tuple[str, int | None]]:
        """find_matches: [(segment, id or None)] covering text."""
        if not trie:
            return [(text, None)]
        out, start_offset, search = [], 0, 0
        while True:
            found = self._leftmost_longest(trie, text, search)
            if found is None:
                break
            start, stop, tid = found
            search = stop
            tok = self.by_id[tid]
            if tok.get("single_word"):
                start_space = start == 0 or not WORD_CHAR.fullmatch(text[start - 1])
                stop_space = stop == len(text) or not WORD_CHAR.fullmatch(text[stop])
                if not start_space or not stop_space:
                    continue
            if tok.get("lstrip"):
                new_start = start
                while new_start > 0 and WHITE_SPACE.fullmatch(text[new_start - 1]):
                    new_start -= 1
                start = max(new_start, start_offset)
            if tok.get("rstrip"):
                while stop < len(text) and WHITE_SPACE.fullmatch(text[stop]):
                    stop += 1
            if start_offset < start:
                out.append((text[start_offset:start], None))
            out.append((text[start:stop], tid))
            start_offset = stop
        if start_offset != len(text):
            out.append((text[start_offset:], None))
        return out


# --------------------------------------------------------------------------------------------------
# Decoders (decoder.decode_chain, then join "")
# --------------------------------------------------------------------------------------------------


def strip_token(token: str, content: str, start: int, stop: int) -> str:
    chars = list(token)
    start_cut = 0
    for i, c in enumerate(chars[:start]):
        if c == content:
            start_cut = i + 1
        else:
            break
    stop_cut = len(chars)
    for i in range(stop):
        index = len(chars) - i - 1
        if index < 0:  # HF would panic here (usize underflow)
            break
        if chars[index] == content:
            stop_cut = index
        else:
            break
    return "".join(chars[start_cut:stop_cut])


def byte_fallback_chain(tokens: list[str]) -> list[str]:
    out, pending = [], []

    def flush():
        if pending:
            try:
                out.append(bytes(pending).decode("utf-8"))
            except UnicodeDecodeError:
                out.extend(["\ufffd"] * len(pending))
            pending.clear()

    for t in tokens:
        b = None
        if len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
            digits = t[3:5]
            # u8::from_str_radix(.., 16): an optional '+', then hex digits.
            body = digits[1:] if digits.startswith("+") else digits
            if body and all(c in "0123456789abcdefABCDEF" for c in body):
                b = int(body, 16)
        if b is not None:
            pending.append(b)
        else:
            flush()
            out.append(t)
    flush()
    return out


class Decoder:
    def __init__(self, j):
        self.j = j

    def decode(self, tokens: list[str]) -> str:
        if self.j is None:
            return " ".join(tokens)
        return "".join(self._chain(self.j, tokens))

    def _chain(self, j, tokens: list[str]) -> list[str]:
        t = j["type"]
        if t == "Sequence":
            for d in j["decoders"]:
                tokens = self._chain(d, tokens)
            return tokens
        if t == "ByteLevel":
            data = bytearray()
            for tok in tokens:
                if all(c in CHAR_BYTES for c in tok):
                    data.extend(CHAR_BYTES[c] for c in tok)
                else:
                    data.extend(tok.encode("utf-8"))
            return [bytes(data).decode("utf-8", errors="replace")]
        if t == "Replace":
            rule = replace_rule(j)
            return [apply_replace(rule, tok) for tok in tokens]
        if t == "ByteFallback":
            return byte_fallback_chain(tokens)
        if t == "Fuse":
            return ["".join(tokens)]
        if t == "Strip":
            return [strip_token(tok, j["content"], j["start"], j["stop"]) for tok in tokens]
        if t == "Metaspace":
            scheme = j.get("prepend_scheme") or "always"
            if j.get("add_prefix_space") is False:
                scheme = "never"
            rep = j["replacement"]
            out = []
            for i, tok in enumerate(tokens):
                out.append("".join(("" if (i == 0 and scheme != "never") else " ") if c == rep else c
                                   for c in tok))
            return out
        raise ValueError(f"decoder {t} not implemented")


# --------------------------------------------------------------------------------------------------
# Post-processors (single sequence, add_special_tokens=True)
# --------------------------------------------------------------------------------------------------


def post_process(j, ids: list[int]) -> list[int]:
    if j is None:
        return ids
    t = j["type"]
    if t == "Sequence":
        for p in j["processors"]:
            ids = post_process(p, ids)
        return ids
    if t == "ByteLevel":
        return ids
    if t in ("RobertaProcessing", "BertProcessing"):
        return [j["cls"][1]] + ids + [j["sep"][1]]
    if t == "TemplateProcessing":
        out = []
        for piece in j["single"]:
            if "Sequence" in piece:
                assert piece["Sequence"]["id"] == "A"
                out.extend(ids)
            else:
                out.extend(j["special_tokens"][piece["SpecialToken"]["id"]]["ids"])
        return out
    raise ValueError(f"post_processor {t} not implemented")


# --------------------------------------------------------------------------------------------------
# The tokenizer (tokenizer/mod.rs)
# --------------------------------------------------------------------------------------------------


class Tokenizer:
    def __init__(self, j: dict):
        self.j = j
        self.normalizer = Normalizer(j.get("normalizer")) if j.get("normalizer") else None
        self.pre_tokenizer = PreTokenizer(j.get("pre_tokenizer"))
        self.model = BPE(j["model"])
        self.added = AddedVocabulary(j.get("added_tokens") or [], self.model, self.normalizer)
        self.decoder = Decoder(j.get("decoder"))

    @classmethod
    def from_file(cls, path: str) -> "Tokenizer":
        with open(path, encoding="utf-8") as f:
            return cls(json.load(f))

    def token_to_id(self, token: str):
        if token in self.added.by_content:
            return self.added.by_content[token]
        return self.model.vocab.get(token)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        ids: list[int] = []
        offset = 0
        for seg, tid in self.added.split(text, self.added.raw_trie):
            seg_at_origin = offset == 0
            offset += len(seg)
            if tid is not None:
                ids.append(tid)
                continue
            normalized = self.normalizer.normalize(seg) if self.normalizer else seg
            first = seg_at_origin
            for sub, sub_id in self.added.split(normalized, self.added.norm_trie):
                if sub_id is not None:
                    ids.append(sub_id)
                elif sub:
                    for piece in self.pre_tokenizer.pre_tokenize(sub, first):
                        ids.extend(self.model.tokenize(piece))
                first = False
        if add_special_tokens:
            ids = post_process(self.j.get("post_processor"), ids)
        return ids

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        tokens = []
        for i in ids:
            tok = self.added.by_id[i]["content"] if i in self.added.by_id else self.model.vocab_r.get(i)
            if tok is None:
                continue  # HF drops unknown ids
            if skip_special_tokens and tok in self.added.special:
                continue
            tokens.append(tok)
        return self.decoder.decode(tokens)
