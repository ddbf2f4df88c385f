#!/usr/bin/env python3
"""Expected chat-template renders from Python jinja2, set up exactly as transformers renders chat
templates (transformers.utils.chat_template_utils._compile_jinja_template): an
ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and jinja2.ext.loopcontrols, the
`tojson` filter that keeps key order and does not escape non-ASCII, and the `raise_exception` global.

Writes three fixtures that tests/template/chat_template_test.cpp and
tests/server/openai_request_test.cpp compare byte for byte:
  tests/fixtures/chat_templates/qwen3_renders.json    the real Qwen3 template (from
      tests/data/qwen3-tokenizer/tokenizer_config.json, see tools/fetch_test_data.sh) over many
      conversations: [{"name", "context", "render"}], then request-level cases as below
  tests/fixtures/chat_templates/feature_renders.json  small templates written for this test that
      use what Qwen3's does not (macros, loop.last, slicing, filters, ...):
      [{"name", "template", "context", "render"}] or, where the template raises,
      [{"name", "template", "context", "error"}] (raise_exception) or
      [{"name", "template", "context", "error", "error_type"}] (another Python exception)
  tests/fixtures/chat_templates/deepseek_v3_renders.json  the real DeepSeek-V3 template
      (tests/fixtures/chat_templates/deepseek_v3.jinja, see the README there) over tool-call
      conversations: [{"name", "context", "render" | "error"...}], then request-level cases:
      [{"name", "request", "forms", "context", "render" | "error"...}] where "request" is an OpenAI
      request body, "forms" the tool-call message form the template takes (probe_forms below) and
      "context" what the server hands the template for "request" (server_context below), so the
      tests can send "request" through pagoda's request parser and chat prompt and compare.

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


# --- what the server hands the template for an OpenAI request ----------------------------------------

PROBE_VALUE = "pagoda-probe-value"
PROBE_ORDER = [(True, True), (True, False), (False, True), (False, False)]  # (null content, mapping arguments)


def probe_context(null_content, object_arguments, bos_token, eos_token):
    """user -> assistant tool call -> tool result, one tool defined (as src/server/chat_message_forms.cpp)."""
    arguments = {"pagoda_probe_arg": PROBE_VALUE} if object_arguments else '{"pagoda_probe_arg": "%s"}' % PROBE_VALUE
    call = {"id": "call_probe", "type": "function", "function": {"name": "pagoda_probe_fn", "arguments": arguments}}
    messages = [{"role": "user", "content": "pagoda-probe-question"},
                {"role": "assistant", "content": None if null_content else "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_probe", "content": "pagoda-probe-result"}]
    tool = {"type": "function", "function": {"name": "pagoda_probe_fn", "description": "Probe.",
                                             "parameters": {"type": "object", "properties": {"pagoda_probe_arg": {"type": "string"}}}}}
    return {"messages": messages, "tools": [tool], "add_generation_prompt": True, "bos_token": bos_token, "eos_token": eos_token}


def probe_forms(template, bos_token, eos_token):
    """The form of an assistant's tool-call message the template takes: the first of PROBE_ORDER whose
    probe renders with the argument value in it, else the first that renders, else (None, mapping).
    Clients send content null and arguments as JSON text; transformers passes both as sent, vLLM
    gives "" and a mapping; templates differ in what they can take (see chat_message_forms.h)."""
    renders = []
    for null_content, object_arguments in PROBE_ORDER:
        try:
            renders.append(template.render(**probe_context(null_content, object_arguments, bos_token, eos_token)))
        except Exception:  # any failure of this form
            renders.append(None)
    for form, text in zip(PROBE_ORDER, renders):
        if text is not None and PROBE_VALUE in text:
            return form
    for form, text in zip(PROBE_ORDER, renders):
        if text is not None:
            return form
    return PROBE_ORDER[0]


def server_messages(messages, forms):
    """Messages as pagoda's server passes them to the template, written from transformers' and vLLM's
    behaviour (not from pagoda's code). transformers' apply_chat_template passes messages as sent;
    vLLM's template-independent normalisations are kept on top (vllm/entrypoints/chat_utils.py): a
    content array of text parts becomes one string joined by "\\n" (its "string" content format;
    parts whose text is missing are skipped), and an assistant's null or empty tool_calls is
    dropped. Then the form the template takes (probe_forms): an assistant's absent content counts as
    null (as the OpenAI API reads it); a null content stays None, or becomes "" for every message
    when the template cannot take None (as vLLM always does); with mapping arguments an assistant's
    arguments text becomes json.loads of it ({} when that fails, and {} when arguments is neither
    text, a dict nor a list, as vLLM), otherwise the text stays as sent."""
    null_content, object_arguments = forms
    out = []
    for m in messages:
        m = json.loads(json.dumps(m))  # a deep copy
        content = m.get("content")
        if isinstance(content, list):
            texts = []
            for part in content:
                if isinstance(part, str):
                    texts.append(part)
                    continue
                kind = part.get("type", "text")
                text = part.get("refusal" if kind == "refusal" else "text")
                if text is not None:
                    texts.append(text)
            m["content"] = "\n".join(texts)
        assistant = m["role"] == "assistant"
        if assistant and "tool_calls" in m and not m["tool_calls"]:
            del m["tool_calls"]
        if "content" not in m:
            if assistant:
                m["content"] = None if null_content else ""
        elif m["content"] is None and not null_content:
            m["content"] = ""
        if assistant and object_arguments and isinstance(m.get("tool_calls"), list):
            for item in m["tool_calls"]:
                args = item["function"].get("arguments")
                if isinstance(args, str):
                    try:
                        item["function"]["arguments"] = json.loads(args)
                    except json.JSONDecodeError:
                        item["function"]["arguments"] = {}
                elif not isinstance(args, (dict, list)):
                    item["function"]["arguments"] = {}
        out.append(m)
    return out


def server_context(request, forms, bos_token, eos_token):
    """ChatPrompt's context: chat_template_kwargs, then messages, tools (when a non-empty list),
    add_generation_prompt (default true), bos_token and eos_token (a null token is "")."""
    c = dict(request.get("chat_template_kwargs", {}))
    c["messages"] = server_messages(request["messages"], forms)
    if request.get("tools"):
        c["tools"] = request["tools"]
    c["add_generation_prompt"] = request.get("add_generation_prompt", True)
    c["bos_token"] = bos_token or ""
    c["eos_token"] = eos_token or ""
    return c


def request_entries(template, requests, bos_token, eos_token):
    forms = probe_forms(template, bos_token or "", eos_token or "")
    entries = []
    for name, request in requests:
        context = server_context(request, forms, bos_token, eos_token)
        entry = {"name": name, "request": request, "forms": {"null_content": forms[0], "object_arguments": forms[1]},
                 "context": context}
        entries.append(render_entry(template, entry, context))
    return entries


def render_entry(template, entry, context):
    """entry + "render", or + "error" (and "error_type" unless it is raise_exception)."""
    try:
        entry["render"] = template.render(**context)
    except jinja2.exceptions.TemplateError as e:
        if type(e) is not jinja2.exceptions.TemplateError:  # only raise_exception is expected
            raise
        entry["error"] = str(e)
    except (TypeError, ValueError, OverflowError, ZeroDivisionError) as e:
        entry["error"] = str(e)
        entry["error_type"] = type(e).__name__
    return entry


# --- DeepSeek-V3 ------------------------------------------------------------------------------------

DSV3_BOS = "<｜begin▁of▁sentence｜>"
DSV3_EOS = "<｜end▁of▁sentence｜>"


def dsv3_ctx(messages, add_generation_prompt=True, **kwargs):
    c = {"messages": messages, "add_generation_prompt": add_generation_prompt, "bos_token": DSV3_BOS, "eos_token": DSV3_EOS}
    c.update(kwargs)
    return c


def dsv3_call(name, arguments, call_id="call_1"):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def deepseek_cases():
    """(name, context) rendered straight, and (name, request) sent through the server's parsing.
    DeepSeek-V3's template concatenates tool-call arguments as text, so the straight cases pass them
    as JSON strings (as DeepSeek's own examples do); the server would parse them into mappings, as vLLM
    does, which this template cannot concatenate: those renders are jinja2's TypeError."""
    paris = dsv3_call("get_weather", "{\"location\": \"Paris\"}")
    tokyo = dsv3_call("get_weather", "{\"location\": \"東京\", \"unit\": \"celsius\"}", "call_2")
    sys_msg = {"role": "system", "content": "You are a helpful assistant."}
    direct = [
        ("tool_call_content_null", dsv3_ctx([sys_msg, u("Weather in Paris?"), a(None, tool_calls=[paris]), tool("21°C, sunny")])),
        ("two_tool_calls_then_answer", dsv3_ctx([u("Paris and Tokyo?"), a(None, tool_calls=[paris, tokyo]), tool("21°C"), tool("18°C"),
                                                a("Paris 21°C, Tokyo 18°C."), u("Thanks!")])),
        ("tool_call_content_empty_string", dsv3_ctx([u("Weather in Paris?"), a("", tool_calls=[paris]), tool("21°C")])),
        ("tool_output_then_answer_no_prompt", dsv3_ctx([u("Weather?"), a(None, tool_calls=[paris]), tool("21°C"), a("It is 21°C.")], add_generation_prompt=False)),
        ("two_system_messages", dsv3_ctx([sys_msg, {"role": "system", "content": "Answer in French."}, u("Hi"), a("Bonjour !"), u("Ça va ?")])),
        ("no_generation_prompt_variable", {"messages": [u("Hi"), a("Hello")], "bos_token": DSV3_BOS, "eos_token": DSV3_EOS}),
    ]
    requests = [
        ("request_plain_conversation", {"messages": [sys_msg, u("Hi"), a("Hello!"), u("What is 2+2?")]}),
        ("request_text_parts", {"messages": [{"role": "user", "content": [{"type": "text", "text": "Look:"}, {"type": "text", "text": "what is it?"}]}]}),
        ("request_tool_call_content_null", {"messages": [u("Weather in Paris?"), a(None, tool_calls=[paris]), tool("21°C, sunny")]}),
        ("request_tool_call_content_empty_string", {"messages": [u("Weather in Paris?"), a("", tool_calls=[paris]), tool("21°C, sunny")]}),
        ("request_empty_tool_calls_dropped", {"messages": [u("Hi"), a("Hello", tool_calls=[]), u("Bye")], "add_generation_prompt": False}),
        ("request_null_tool_calls_dropped", {"messages": [u("Hi"), a("Hello", tool_calls=None), u("Bye")]}),
    ]
    return direct, requests


def qwen3_request_cases():
    """OpenAI request bodies as clients send them (content null beside tool calls, arguments as
    JSON text), for the request-level test of the server's path."""
    weather = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"location\": \"Paris\"}"}}
    return [
        ("request_tool_call_content_null", {"messages": [u("Weather in Paris?"), a(None, tool_calls=[weather]), tool("21°C")],
                                            "tools": [WEATHER_TOOL]}),
        ("request_tool_call_content_absent", {"messages": [u("Weather in Paris?"), {"role": "assistant", "tool_calls": [weather]}, tool("21°C")],
                                              "tools": [WEATHER_TOOL], "chat_template_kwargs": {"enable_thinking": False}}),
        ("request_text_parts_and_bad_arguments", {"messages": [
            {"role": "user", "content": [{"type": "text", "text": "a"}, "b", {"type": "text"}]},
            a("", tool_calls=[{"type": "function", "function": {"name": "get_weather", "arguments": "not json"}}]), tool("?")]}),
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


# `is none` against a null content, as DeepSeek-V3's template branches on it.
CONTENT_NONE_TEMPLATE = """{%- for m in messages -%}
[{{ m.role }}|
{%- if m.content is none -%}none{%- elif m.content is string -%}str:{{ m.content }}{%- else -%}{{ m.content }}{%- endif -%}
|{{ m.content is defined }}
{%- if m.tool_calls is defined %}|calls:{% for c in m.tool_calls %}{{ c.function.name }}({{ c.function.arguments }}){% endfor %}{% endif -%}
]
{%- endfor -%}"""

# Python ints of any size: literals, request data beyond int64, arithmetic, comparisons, filters.
BIGINT_TEMPLATE = """literals: {{ 9223372036854775807 }} {{ 9223372036854775808 }} {{ -9223372036854775808 }} {{ 18446744073709551616 }} {{ 0x1_0000_0000_0000_0000 }} {{ 123456789012345678901234567890 }}
arith: {{ 9223372036854775807 + 1 }} {{ -9223372036854775808 - 1 }} {{ 2 ** 64 }} {{ 2 ** 100 }} {{ 3 ** 70 * -1 }} {{ 10 ** 20 - 10 ** 20 }} {{ 4294967296 * 4294967296 }} {{ -(-9223372036854775808) }}
division: {{ 123456789012345678901234567890 // 7 }} {{ 123456789012345678901234567890 % 7 }} {{ -123456789012345678901234567890 // 7 }} {{ -123456789012345678901234567890 % 7 }} {{ 5 // 10 ** 30 }} {{ -5 // 10 ** 30 }} {{ -5 % 10 ** 30 }} {{ -9223372036854775808 // -1 }}
true division: {{ 10 ** 30 / 7 }} {{ 2 ** 64 / 3 }} {{ 9007199254740993 / 1 }} {{ 123456789012345678901 / 10 }} {{ -(10 ** 25) / 3 }}
floats: {{ 2 ** 64 + 0.5 }} {{ 10 ** 20 * 1.0 }} {{ 2 ** 63 == 9223372036854775808.0 }} {{ 2 ** 53 + 1 == 9007199254740992.0 }} {{ 2 ** 53 + 1 > 9007199254740992.0 }} {{ 10 ** 20 == 1e20 }} {{ 10 ** 400 > 1e308 }}
compare: {{ 2 ** 64 > 2 ** 63 }} {{ -(2 ** 64) < -(2 ** 63) }} {{ 2 ** 64 == 18446744073709551616 }} {{ 2 ** 64 != 2 ** 64 + 1 }} {{ [2 ** 65, 3, -(2 ** 70), 2 ** 64] | sort }} {{ [2 ** 65, 3] | max }} {{ 2 ** 70 in [1, 2 ** 70] }}
filters: {{ -(2 ** 70) | abs }} {{ '123456789012345678901234567890' | int + 1 }} {{ ' -99999999999999999999 ' | int }} {{ 'ffffffffffffffffff' | int(0, 16) }} {{ 1e30 | int }} {{ 2 ** 70 | float }} {{ 2 ** 70 | string | length }} {{ 2 ** 70 | round }} {{ [2 ** 64, 1] | sum }}
tests: {{ (2 ** 100) is odd }} {{ (2 ** 100 + 1) is odd }} {{ (2 ** 100) is even }} {{ (2 ** 100) is divisibleby 3 }} {{ (3 ** 50) is divisibleby 3 }} {{ (3 ** 50) is divisibleby (3 ** 49) }} {{ (2 ** 100) is integer }} {{ (2 ** 100) is number }} {{ 2 ** 100 is odd }}
text: {{ '%d|%5d|%+d' % (2 ** 70, 2 ** 64, 2 ** 64) }} {{ 'n=' ~ 2 ** 64 }} {{ (2 ** 64, -(2 ** 64)) }} {{ {2 ** 64: 'k'} }} {{ {'n': 2 ** 70, 'm': -(2 ** 64)} | tojson }}
slices: {{ [1, 2, 3][10 ** 20:] }} {{ [1, 2, 3][:10 ** 20] }} {{ [1, 2, 3][-(10 ** 20):2] }} {{ 'abc'[::-(10 ** 20)] }} {{ [1, 2][10 ** 20] is defined }}
data: {{ u }} {{ u + 1 }} {{ u * u }} {{ i - 1 }} {{ u > i }} {{ u == 18446744073709551615 }} {{ nested.big }} {{ nested | tojson }} {{ u is integer }}"""


# What Llama 3.1's official template has beyond the Llama 3.1-family template of
# tests/data/llama3_2-tokenizer (whose renders tools/chat_template_family_reference.py checks):
# built-in tools (brave_search, wolfram_alpha) called through <|python_tag|> with `| items` over the
# arguments and <|eom_id|>; no npm package ships that template itself.
BUILTIN_TOOLS_TEMPLATE = """{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\\n" }}
{%- endif %}
{%- if builtin_tools is defined %}
    {{- "Tools: " + builtin_tools | reject('equalto', 'code_interpreter') | join(", ") + "\\n\\n"}}
{%- endif %}
{%- for message in messages if 'tool_calls' in message %}
    {%- set tool_call = message.tool_calls[0].function %}
    {%- if builtin_tools is defined and tool_call.name in builtin_tools %}
        {{- "<|python_tag|>" + tool_call.name + ".call(" }}
        {%- for arg_name, arg_val in tool_call.arguments | items %}
            {{- arg_name + '="' + arg_val + '"' }}
            {%- if not loop.last %}
                {{- ", " }}
            {%- endif %}
        {%- endfor %}
        {{- ")" }}
    {%- else %}
        {{- '{"name": "' + tool_call.name + '", "parameters": ' + tool_call.arguments | tojson + "}" }}
    {%- endif %}
    {{- "<|eom_id|>" if builtin_tools is defined else "<|eot_id|>" }}
{%- endfor %}"""


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
    calls = [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"location": "Paris"}}}]
    cases.append(("content_none_with_tool_calls", CONTENT_NONE_TEMPLATE, ctx([u("Weather?"), a(None, tool_calls=calls), tool("21°C"), a(""), {"role": "assistant", "tool_calls": calls}])))
    cases.append(("big_integers", BIGINT_TEMPLATE, {"u": 18446744073709551615, "i": -9223372036854775808,
                                                    "nested": {"big": 9223372036854775808, "list": [18446744073709551615, -1]}}))
    builtin_calls = [a("", tool_calls=[call("brave_search", {"query": "weather in Menlo Park", "count": "3"})]),
                     a("", tool_calls=[call("get_weather", {"location": "Paris"})])]
    cases.append(("llama3_1_builtin_tools", BUILTIN_TOOLS_TEMPLATE, ctx([u("q")] + builtin_calls, tools=[WEATHER_TOOL],
                                                                        builtin_tools=["brave_search", "code_interpreter", "wolfram_alpha"])))
    cases.append(("llama3_1_no_builtin_tools", BUILTIN_TOOLS_TEMPLATE, ctx([u("q")] + builtin_calls)))
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
    renders += request_entries(qwen3, qwen3_request_cases(), None, "<|im_end|>")
    with open(os.path.join(out_dir, "qwen3_renders.json"), "w", encoding="utf-8") as f:
        json.dump(renders, f, ensure_ascii=False, indent=1)
        f.write("\n")

    features = []
    for name, source, context in feature_cases():
        features.append(render_entry(env.from_string(source), {"name": name, "template": source, "context": context}, context))
    with open(os.path.join(out_dir, "feature_renders.json"), "w", encoding="utf-8") as f:
        json.dump(features, f, ensure_ascii=False, indent=1)
        f.write("\n")

    with open(os.path.join(out_dir, "deepseek_v3.jinja"), encoding="utf-8", newline="") as f:
        deepseek = env.from_string(f.read())
    dsv3 = []
    direct, requests = deepseek_cases()
    for name, context in direct:
        dsv3.append(render_entry(deepseek, {"name": name, "context": context}, context))
    dsv3 += request_entries(deepseek, requests, DSV3_BOS, DSV3_EOS)
    with open(os.path.join(out_dir, "deepseek_v3_renders.json"), "w", encoding="utf-8") as f:
        json.dump(dsv3, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(renders)} Qwen3, {len(features)} feature and {len(dsv3)} DeepSeek-V3 renders to {out_dir} "
          f"(jinja2 {jinja2.__version__}, Python {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
