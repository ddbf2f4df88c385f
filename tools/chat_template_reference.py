#!/usr/bin/env python3
"""Expected chat-template renders from Python jinja2, set up exactly as transformers renders chat
templates (transformers.utils.chat_template_utils._compile_jinja_template): an
ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and jinja2.ext.loopcontrols, the
`tojson` filter that keeps key order and does not escape non-ASCII, and the `raise_exception` global.

Writes two fixtures that tests/tokenizer/chat_template_test.cpp compares byte for byte:
  tests/fixtures/chat_templates/qwen3_renders.json    the real Qwen3 template (from
      tests/data/qwen3-tokenizer/tokenizer_config.json, see tools/fetch_test_data.sh) over many
      conversations: [{"name", "context", "render"}]
  tests/fixtures/chat_templates/feature_renders.json  small templates written for this test that
      use what Qwen3's does not (macros, loop.last, slicing, filters, ...):
      [{"name", "template", "context", "render"}] or, where the template raises,
      [{"name", "template", "context", "error"}]

    python3 tools/chat_template_reference.py [--root REPO]

Deterministic: the same input gives the same files. jinja2 3.1.x.
"""
import argparse
import json
import os
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        # transformers' tojson: json.dumps with the key order kept and no HTML escaping.
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


# --- Qwen3 conversations ----------------------------------------------------------------------------

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "City and country, e.g. Paris, France"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["location"],
        },
    },
}
# Keys deliberately out of alphabetical order: tojson must keep them as given.
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "parameters": {
            "required": ["query"],
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Suchbegriff — «quoted» 検索"},
                "max_results": {"type": "integer", "default": 5, "minimum": 1, "maximum": 50},
                "filters": {"type": "object", "properties": {"lang": {"type": "string"}, "safe": {"type": "boolean"}}},
                "weights": {"type": "array", "items": {"type": "number"}, "default": [0.5, 1.0, 1e-05, 2.5e+20]},
            },
        },
        "name": "search",
        "description": "Search the web.\nReturns \"results\" with\ttabs and a backslash \\ too.",
    },
}

SYS = {"role": "system", "content": "You are a helpful assistant."}


def u(text):
    return {"role": "user", "content": text}


def a(text, **extra):
    m = {"role": "assistant", "content": text}
    m.update(extra)
    return m


def tool(text):
    return {"role": "tool", "content": text}


def call(name, arguments, wrapped=True):
    fn = {"name": name, "arguments": arguments}
    return {"type": "function", "function": fn} if wrapped else fn


def ctx(messages, add_generation_prompt=False, tools=None, omit_tools=False, **kwargs):
    c = {"messages": messages}
    if not omit_tools:
        c["tools"] = tools
    c["add_generation_prompt"] = add_generation_prompt
    c["bos_token"] = None
    c["eos_token"] = "<|im_end|>"
    c.update(kwargs)
    return c


def qwen3_cases():
    weather_call = call("get_weather", {"location": "Paris, France", "unit": "celsius"})
    return [
        ("single_user", ctx([u("Hello!")])),
        ("single_user_generation_prompt", ctx([u("Hello!")], add_generation_prompt=True)),
        ("system_and_user", ctx([SYS, u("What is 2+2?")], add_generation_prompt=True)),
        ("no_system_multi_turn", ctx([u("Hi"), a("Hello! How can I help?"), u("Tell me a joke.")], add_generation_prompt=True)),
        ("system_multi_turn_no_prompt", ctx([SYS, u("Hi"), a("Hello!"), u("Bye"), a("Goodbye!")])),
        ("enable_thinking_false", ctx([u("Quick answer please")], add_generation_prompt=True, enable_thinking=False)),
        ("enable_thinking_true", ctx([u("Think hard")], add_generation_prompt=True, enable_thinking=True)),
        ("enable_thinking_false_no_prompt", ctx([u("x"), a("y")], enable_thinking=False)),
        ("reasoning_content_last_turn", ctx([u("Why is the sky blue?"), a("Rayleigh scattering.", reasoning_content="Light scatters more at short wavelengths.")])),
        ("reasoning_content_earlier_turn", ctx([u("Q1"), a("A1", reasoning_content="R1"), u("Q2")], add_generation_prompt=True)),
        ("reasoning_content_none", ctx([u("Q"), a("A", reasoning_content=None)])),
        ("think_tags_in_content", ctx([u("Solve"), a("<think>\nLet me think.\n</think>\n\nThe answer is 4.")])),
        ("think_tags_earlier_turn", ctx([u("Solve"), a("<think>\nhidden\n</think>\n\nFour."), u("Thanks")], add_generation_prompt=True)),
        ("think_only_close_tag", ctx([u("q"), a("partial reasoning\n</think>\nfinal")])),
        ("tools_defined", ctx([u("Weather in Paris?")], add_generation_prompt=True, tools=[WEATHER_TOOL, SEARCH_TOOL])),
        ("tools_with_system", ctx([SYS, u("Search for cats")], add_generation_prompt=True, tools=[SEARCH_TOOL])),
        ("tool_call_dict_arguments", ctx([u("Weather in Paris?"), a("", tool_calls=[weather_call])], tools=[WEATHER_TOOL])),
        ("tool_call_string_arguments", ctx([u("Weather?"), a("Let me check.", tool_calls=[call("get_weather", "{\"location\": \"Berlin\"}")])], tools=[WEATHER_TOOL])),
        ("tool_call_unwrapped", ctx([u("Weather?"), a("", tool_calls=[call("get_weather", {"location": "Rome"}, wrapped=False)])], tools=[WEATHER_TOOL])),
        ("single_tool_response", ctx([u("Weather in Paris?"), a("", tool_calls=[weather_call]), tool("{\"temperature\": 21}")], add_generation_prompt=True, tools=[WEATHER_TOOL])),
        ("multiple_tool_calls_and_responses", ctx([
            SYS, u("Weather in Paris and Tokyo?"),
            a("I'll check both.", tool_calls=[weather_call, call("get_weather", {"location": "東京", "unit": "celsius"})]),
            tool("21°C, sunny"), tool("18°C, rain"),
            a("Paris: 21°C sunny; Tokyo: 18°C rain."), u("Thanks!")], add_generation_prompt=True, tools=[WEATHER_TOOL])),
        ("multi_step_tool_with_reasoning", ctx([
            u("Find news"), a("", reasoning_content="Need to search.", tool_calls=[call("search", {"query": "news", "max_results": 3})]),
            tool("<results/>"), a("Here are the news.", reasoning_content="Summarise.")], tools=[SEARCH_TOOL])),
        ("user_message_looks_like_tool_response", ctx([u("<tool_response>\nfake\n</tool_response>"), a("ok")])),
        ("tool_response_then_prompt_thinking_off", ctx([u("q"), a("", tool_calls=[weather_call]), tool("sunny")], add_generation_prompt=True, tools=[WEATHER_TOOL], enable_thinking=False)),
        ("unicode_content", ctx([SYS, u("Héllo wörld — 你好, мир! 😀👍🏽 \u200b\u00a0tab\tend"), a("Ça va? ✓ 🎉")], add_generation_prompt=True)),
        ("empty_content", ctx([u(""), a(""), u("")], add_generation_prompt=True)),
        ("jinja_looking_content", ctx([u("{{ messages }} {% if true %}x{% endif %} {# c #} {{- raw -}}"), a("{% raw %}literal{% endraw %}")], add_generation_prompt=True)),
        ("whitespace_and_newlines", ctx([u("\n\n  leading and trailing  \n\n"), a("\n\nanswer\n\n")])),
        ("system_in_middle", ctx([u("first"), {"role": "system", "content": "mid system"}, u("second")], add_generation_prompt=True)),
        ("tools_absent_key", ctx([u("no tools key")], add_generation_prompt=True, omit_tools=True)),
        ("tools_empty_list", ctx([SYS, u("empty tools")], add_generation_prompt=True, tools=[])),
        ("tool_arguments_nested_unicode", ctx([u("x"), a("", tool_calls=[call("search", {"query": "naïve \"quotes\" \\ back", "filters": {"lang": "日本語", "safe": True}, "weights": [1, 2.5, None]})])], tools=[SEARCH_TOOL])),
        ("long_multi_turn", ctx([SYS] + [m for i in range(6) for m in (u(f"question {i}"), a(f"answer {i}", reasoning_content=f"thought {i}"))] + [u("last")], add_generation_prompt=True)),
    ]


# --- templates written for this test --------------------------------------------------------------

MACRO_TEMPLATE = """{#- A Llama-3 style template: macros, loop.last, slicing, namespace, filters. -#}
{%- macro render_content(content, prefix='') -%}
    {%- if content is string -%}{{ prefix ~ content | trim }}
    {%- elif content is mapping -%}{{ prefix ~ content | tojson }}
    {%- else -%}
        {%- for part in content -%}
            {{- prefix ~ part.text if part.type == 'text' else '[' ~ part.type | upper ~ ']' -}}
            {%- if not loop.last %} | {% endif -%}
        {%- endfor -%}
    {%- endif -%}
{%- endmacro -%}
{{- bos_token }}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] | trim %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set system_message = 'Default system.' %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- set ns = namespace(users=0, chars=0, roles=[]) %}
{%- for m in loop_messages %}
    {%- if m.role == 'user' %}{% set ns.users = ns.users + 1 %}{% endif %}
    {%- set ns.roles = ns.roles + [m.role] %}
{%- endfor %}
<|start|>system
{{ system_message }}
Users: {{ ns.users }}; roles: {{ ns.roles | unique | join(', ') }}; last two: {{ loop_messages[-2:] | map(attribute='role') | list }}
{%- if tools is defined and tools %}

Tools ({{ tools | length }}):
{%- for t in tools %}
- {{ t.function.name }}: {{ t.function.description | default('(none)') }}{{ ',' if not loop.last else '.' }}
{%- endfor %}
{%- endif %}
<|end|>
{% for message in loop_messages %}
<|start|>{{ message.role }}{{ ' #' ~ loop.index ~ '/' ~ loop.length }}
{{ render_content(message.content, prefix='> ' if message.role == 'user' else '') }}
{%- if message.tool_calls is defined %}
{%- for tc in message.tool_calls %}
call {{ loop.index0 }}: {{ tc.function.name }}({{ tc.function.arguments | tojson(indent=2) }})
{%- endfor %}
{%- endif %}
<|end|>{% if loop.last and not add_generation_prompt %}<|eot|>{% endif %}

{% endfor %}
{%- if add_generation_prompt %}<|start|>assistant
{% endif %}"""

STRICT_TEMPLATE = """{%- if messages[0]['role'] == 'system' -%}
    {%- set sys = messages[0]['content'] -%}
    {%- set rest = messages[1:] -%}
{%- else -%}
    {%- set sys = none -%}
    {%- set rest = messages -%}
{%- endif -%}
{{ bos_token }}
{%- for message in rest -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif -%}
    {%- if message['role'] == 'user' -%}
        {%- if loop.first and sys is not none -%}
            {{ '[INST] ' + sys + '\\n\\n' + message['content'] + ' [/INST]' }}
        {%- else -%}
            {{ '[INST] ' + message['content'] + ' [/INST]' }}
        {%- endif -%}
    {%- elif message['role'] == 'assistant' -%}
        {{ ' ' + message['content'] | trim + eos_token }}
    {%- else -%}
        {{ raise_exception('Only user and assistant roles are supported!') }}
    {%- endif -%}
{%- endfor -%}"""

FILTERS_TEMPLATE = """{%- set people = [
    {'name': 'Ada', 'age': 36, 'langs': ['en', 'fr']},
    {'name': 'bob', 'age': 25, 'langs': []},
    {'name': 'Cy', 'age': 41, 'langs': ['de']},
] -%}
sorted: {{ people | sort(attribute='age', reverse=true) | map(attribute='name') | join(',') }}
by name: {{ people | sort(attribute='name') | map(attribute='name') | list }}
with langs: {{ people | selectattr('langs') | map(attribute='name') | join(' & ') }}
adults over 30: {{ people | selectattr('age', 'gt', 30) | list | length }}
reject: {{ people | rejectattr('age', 'ge', 36) | map(attribute='name') | first }}
sum: {{ people | sum(attribute='age') }} max: {{ (people | max(attribute='age')).name }} min: {{ people | min(attribute='age') | attr('name') | default('n/a') }}
dictsort: {% for k, v in {'b': 2, 'a': 1, 'C': 3} | dictsort %}{{ k }}={{ v }}{{ ';' if not loop.last }}{% endfor %}
items: {% for k, v in meta | items %}{{ k }}:{{ v }} {% endfor %}
tojson: {{ meta | tojson }} / {{ meta | tojson(indent=2) }} / {{ meta | tojson(sort_keys=true) }}
slices: {{ text[:5] }}|{{ text[-6:] }}|{{ text[::3] }}|{{ text[::-1] }}|{{ nums[1:-1] }}|{{ nums[::2] }}
strings: {{ text.upper() }}|{{ text.title() }}|{{ text | title }}|{{ text.replace('o', '0', 2) }}|{{ text.split(' ', 1) }}|{{ text | wordcount }}|{{ '  pad  ' | trim }}|{{ 'x-y-z'.rsplit('-', 1) }}
numbers: {{ 7 // 2 }} {{ 7 % 3 }} {{ 2 ** 10 }} {{ 7 / 2 }} {{ (2.675) | round(2) }} {{ 3.7 | int }} {{ '12' | int + 1 }} {{ 1e3 }} {{ 0.1 + 0.2 }} {{ -5 | abs }}
tests: {{ nums is sequence }} {{ meta is mapping }} {{ 3 is odd }} {{ none is none }} {{ undefined_var is defined }} {{ text is string }} {{ 'x' in text }} {{ 4 in nums }}
loop: {% for n in nums %}{% if n == 3 %}{% continue %}{% endif %}{% if n > 5 %}{% break %}{% endif %}{{ loop.index }}:{{ n }}{{ ',' if not loop.last }}{% endfor %}
prev/next: {% for n in nums[:3] %}({{ loop.previtem | default('-') }},{{ loop.nextitem | default('-') }}){% endfor %}
cycle: {% for n in nums[:4] %}{{ loop.cycle('a', 'b', 'c') }}{% endfor %}
range: {{ range(3) | list }} {{ range(2, 11, 3) | list }}
set block: {% set block %}  Hello {{ people[0].name }}!  {% endset %}[{{ block | trim | upper }}]
filter block: {% filter upper %}shout {{ 'this' }}{% endfilter %}
format: {{ '%s is %d years' | format(people[0].name, people[0].age) }} {{ '{} and {}'.format('x', 'y') }} {{ '%-5s|%05.1f' % ('ab', 3.14159) }}
indent:
{{ 'line one\\nline two\\n\\nline four' | indent(4) }}
{{ 'first\\nsecond' | indent(2, true) }}
raw: {% raw %}{{ not rendered }}{% endraw %}
with: {% with greeting = 'hi', who = people[1].name | capitalize %}{{ greeting }} {{ who }}{% endwith %}
conditional: {{ 'yes' if nums | length > 3 else 'no' }} {{ none or 'fallback' }} {{ 0 and 'never' }}
repr: {{ people[1] }} {{ (1, 'two') }} {{ [none, true, 1.5] }} {{ "it's" }}
{#- trailing comment -#}
"""


def feature_cases():
    cases = []
    tools = [WEATHER_TOOL, {"type": "function", "function": {"name": "noop", "parameters": {}}}]
    cases.append(("macro_template_basic", MACRO_TEMPLATE, ctx([{"role": "system", "content": "  Be brief.  "}, u("Hi"), a("Hello"), u("Weather?")], add_generation_prompt=True, tools=tools, bos_token="<s>")))
    cases.append(("macro_template_parts", MACRO_TEMPLATE, ctx([u([{"type": "text", "text": "Look:"}, {"type": "image"}, {"type": "text", "text": "what is it?"}]), a({"kind": "json", "ok": True}, tool_calls=[call("get_weather", {"location": "Oslo", "days": [1, 2]})])], bos_token="<s>")))
    cases.append(("strict_alternation_ok", STRICT_TEMPLATE, ctx([SYS, u("Hello"), a("  Hi there  "), u("Bye")], bos_token="<s>", eos_token="</s>")))
    cases.append(("strict_alternation_no_system", STRICT_TEMPLATE, ctx([u("only user")], bos_token="<s>", eos_token="</s>")))
    cases.append(("strict_alternation_error", STRICT_TEMPLATE, ctx([u("a"), u("b")], bos_token="<s>", eos_token="</s>")))
    cases.append(("strict_role_error", STRICT_TEMPLATE, ctx([u("a"), {"role": "tool", "content": "x"}], bos_token="<s>", eos_token="</s>")))
    meta = {"zeta": 1, "alpha": [1, 2], "mid": {"y": None, "x": "é"}}
    cases.append(("filters_and_tests", FILTERS_TEMPLATE, {"meta": meta, "text": "hello wonderful world", "nums": [1, 2, 3, 4, 5, 6, 7]}))
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = ap.parse_args()
    env = make_env()
    config_path = os.path.join(args.root, "tests/data/qwen3-tokenizer/tokenizer_config.json")
    if not os.path.exists(config_path):
        sys.exit(f"{config_path} is missing: run tools/fetch_test_data.sh")
    with open(config_path, encoding="utf-8") as f:
        qwen3 = env.from_string(json.load(f)["chat_template"])
    out_dir = os.path.join(args.root, "tests/fixtures/chat_templates")
    os.makedirs(out_dir, exist_ok=True)

    renders = []
    for name, context in qwen3_cases():
        renders.append({"name": name, "context": context, "render": qwen3.render(**context)})
    with open(os.path.join(out_dir, "qwen3_renders.json"), "w", encoding="utf-8") as f:
        json.dump(renders, f, ensure_ascii=False, indent=1)
        f.write("\n")

    features = []
    for name, source, context in feature_cases():
        entry = {"name": name, "template": source, "context": context}
        try:
            entry["render"] = env.from_string(source).render(**context)
        except jinja2.exceptions.TemplateError as e:
            if type(e) is not jinja2.exceptions.TemplateError:  # only raise_exception is expected
                raise
            entry["error"] = str(e)
        features.append(entry)
    with open(os.path.join(out_dir, "feature_renders.json"), "w", encoding="utf-8") as f:
        json.dump(features, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(renders)} Qwen3 renders and {len(features)} feature renders to {out_dir} (jinja2 {jinja2.__version__})")


if __name__ == "__main__":
    main()
