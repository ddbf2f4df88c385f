// Request parsing and validation: what becomes SamplingParams, and the 400s with their param.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/chat_message_forms.h"
#include "server/metrics.h"
#include "server/openai_request.h"

namespace pagoda::server {
namespace {

Json body(const std::string& s) { return parse_json_body(s); }

// The ApiError that parsing `json` throws (status 0 when it parses).
ApiError completion_error(const std::string& json) {
  try {
    parse_completion_request(body(json));
  } catch (const ApiError& e) {
    return e;
  }
  return ApiError(0, "", "");
}

TEST(OpenAiRequest, CompletionSamplingFields) {
  const CompletionRequest r = parse_completion_request(body(R"({
      "model": "m", "prompt": "hi", "max_tokens": 7, "temperature": 0, "top_p": 0.5, "top_k": 3,
      "min_p": 0.1, "seed": 42, "stop": "x", "stop_token_ids": [5, 6], "n": 2, "logprobs": 3,
      "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.1,
      "ignore_eos": true, "min_tokens": 2, "stream": true, "stream_options": {"include_usage": true}})"));
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(*r.prompts[0].text, "hi");
  EXPECT_EQ(*r.params.max_tokens, 7);
  EXPECT_TRUE(r.params.greedy());
  EXPECT_EQ(r.params.top_k, 3);
  EXPECT_EQ(*r.params.seed, 42u);
  EXPECT_EQ(r.params.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(r.params.stop_token_ids, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(r.params.n, 2);
  EXPECT_EQ(*r.params.logprobs, 3);
  EXPECT_TRUE(r.params.ignore_eos);
  EXPECT_EQ(r.params.min_tokens, 2);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
}

TEST(OpenAiRequest, CompletionPromptForms) {
  EXPECT_EQ(parse_completion_request(body(R"({"prompt": ["a", "b"]})")).prompts.size(), 2u);
  auto ids = parse_completion_request(body(R"({"prompt": [1, 2, 3]})"));
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_EQ(ids.prompts[0].token_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(parse_completion_request(body(R"({"prompt": [[1], [2, 3]]})")).prompts.size(), 2u);
  EXPECT_EQ(*parse_completion_request(body(R"({"prompt": "x"})")).params.max_tokens, 16);  // OpenAI default
}

TEST(OpenAiRequest, CompletionErrorsNameTheField) {
  EXPECT_EQ(completion_error(R"({"prompt": "x", "temperature": -1})").param, "temperature");
  EXPECT_EQ(completion_error(R"({"prompt": "x", "temperature": "hot"})").param, "temperature");
  EXPECT_EQ(completion_error(R"({"prompt": "x", "top_p": 0})").param, "top_p");
  EXPECT_EQ(completion_error(R"({"prompt": "x", "max_tokens": 0})").param, "max_tokens");
  EXPECT_EQ(completion_error(R"({"prompt": "x", "max_tokens": 1.5})").param, "max_tokens");
  EXPECT_EQ(completion_error(R"({"prompt": "x", "n": 0})").param, "n");
  EXPECT_EQ(completion_error(R"({"prompt": "x", "logprobs": 21})").param, "logprobs");
  EXPECT_EQ(completion_error(R"({"prompt": "x", "stop": [1]})").param, "stop");
  EXPECT_EQ(completion_error(R"({"prompt": "x", "stop_token_ids": [-1]})").param, "stop_token_ids");
  EXPECT_EQ(completion_error(R"({"prompt": "x", "stream_options": {"include_usage": true}})").param,
            "stream_options");
  EXPECT_EQ(completion_error(R"({"prompt": 5})").param, "prompt");
  EXPECT_EQ(completion_error(R"({"max_tokens": 5})").param, "prompt");
  EXPECT_EQ(completion_error(R"({"prompt": "x", "presence_penalty": 3})").status, 400);
  EXPECT_EQ(completion_error(R"({"prompt": "x", "max_tokens": 99999999999})").status, 400);
  EXPECT_THROW(parse_json_body("{not json"), ApiError);
  EXPECT_THROW(parse_json_body("[1, 2]"), ApiError);
}

TEST(OpenAiRequest, ChatMessagesAndTools) {
  const ChatRequest r = parse_chat_request(body(R"({
      "messages": [{"role": "system", "content": "be brief"},
                   {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                   {"role": "assistant", "content": null, "tool_calls": [
                       {"id": "1", "type": "function", "function": {"name": "f", "arguments": "{\"z\": 1, \"a\": 2}"}}]}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
      "max_completion_tokens": 9, "max_tokens": 3, "logprobs": true, "top_logprobs": 2,
      "chat_template_kwargs": {"enable_thinking": false}})"));
  EXPECT_EQ(r.prompt.messages[1]["content"], "a\nb");
  EXPECT_TRUE(r.prompt.messages[2]["content"].is_null());  // null stays null, as transformers passes it
  // Arguments stay as sent here; ChatPrompt gives them in the form the template takes.
  EXPECT_EQ(r.prompt.messages[2]["tool_calls"][0]["function"]["arguments"], R"({"z": 1, "a": 2})");
  EXPECT_EQ(adapt_messages(r.prompt.messages, ToolCallForms{})[2]["tool_calls"][0]["function"]["arguments"].dump(),
            R"({"z":1,"a":2})");  // a mapping, in the client's key order
  EXPECT_TRUE(r.parse_tool_calls);
  EXPECT_EQ(*r.params.max_tokens, 9);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(*r.params.logprobs, 2);
  EXPECT_EQ(r.prompt.chat_template_kwargs["enable_thinking"], false);
  EXPECT_TRUE(r.prompt.add_generation_prompt);

  const ChatRequest none = parse_chat_request(body(R"({"messages": [{"role": "user", "content": "x"}],
      "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "none"})"));
  EXPECT_FALSE(none.parse_tool_calls);
}

TEST(OpenAiRequest, ChatErrors) {
  auto param = [](const std::string& json) {
    try {
      parse_chat_request(parse_json_body(json));
    } catch (const ApiError& e) {
      return e.param;
    }
    return std::string("<parsed>");
  };
  EXPECT_EQ(param(R"({"messages": []})"), "messages");
  EXPECT_EQ(param(R"({"messages": [{"content": "x"}]})"), "messages[0].role");
  EXPECT_EQ(param(R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})"), "top_logprobs");
  EXPECT_EQ(param(R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]})"), "tools");
  EXPECT_EQ(param(R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "sometimes"})"), "tool_choice");
}

}  // namespace
}  // namespace pagoda::server

namespace pagoda::server {
namespace {

TEST(OpenAiRequest, UnsetSamplingFieldsTakeTheModelDefaults) {
  SamplingParams defaults;
  defaults.temperature = 0.7;
  defaults.top_k = 40;
  const CompletionRequest a = parse_completion_request(Json::parse(R"({"prompt": "x"})"), defaults);
  EXPECT_EQ(a.params.temperature, 0.7);
  EXPECT_EQ(a.params.top_k, 40);
  const ChatRequest b = parse_chat_request(
      Json::parse(R"({"messages": [{"role": "user", "content": "x"}], "temperature": 0})"), defaults);
  EXPECT_EQ(b.params.temperature, 0.0);  // what the request sets wins
  EXPECT_EQ(b.params.top_k, 40);
}

}  // namespace
}  // namespace pagoda::server

// Chat messages as the template sees them, and what reaches the template through ChatPrompt.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "server/chat_message_forms.h"
#include "server/chat_prompt.h"
#include "server/request_json.h"
#include "template/chat_template.h"
#include "core/build_paths.h"

namespace pagoda::server {
namespace {

const std::string kFixtures = std::string(PAGODA_SOURCE_DIR) + "/tests/fixtures/chat_templates";
const std::string kQwen3Dir = std::string(PAGODA_SOURCE_DIR) + "/tests/data/qwen3-tokenizer";

ApiError chat_error(const Json& body) {
  try {
    parse_chat_request(body);
  } catch (const ApiError& e) {
    return e;
  }
  return ApiError(0, "", "");
}

Json user_then(const Json& message) {
  return Json{{"messages", Json::array({Json{{"role", "user"}, {"content", "q"}}, message})}};
}

Json assistant_call(const Json& arguments) {
  return Json{{"role", "assistant"},
              {"content", nullptr},
              {"tool_calls", Json::array({Json{{"type", "function"}, {"function", {{"name", "f"}, {"arguments", arguments}}}}})}};
}

// A model directory holding only a tokenizer_config.json with this template.
class TemplateDir {
 public:
  explicit TemplateDir(const std::string& source, const std::string& bos = "<s>", const std::string& eos = "</s>") {
    dir_ = std::filesystem::temp_directory_path() /
           ("pagoda_chat_prompt_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    std::filesystem::create_directories(dir_);
    const Json config = {{"chat_template", source}, {"bos_token", {{"content", bos}}}, {"eos_token", {{"content", eos}}}};
    std::ofstream(dir_ / "tokenizer_config.json") << config.dump();
    prompt_ = ChatPrompt::load(dir_.string());
  }
  ~TemplateDir() { std::filesystem::remove_all(dir_); }
  const ChatPrompt& prompt() const { return *prompt_; }
  std::string render(const Json& body) const { return prompt_->render(parse_chat_request(body).prompt); }
  ApiError error(const Json& body) const {
    try {
      render(body);
    } catch (const ApiError& e) {
      return e;
    }
    return ApiError(0, "", "");
  }

 private:
  static inline int counter_ = 0;
  std::filesystem::path dir_;
  std::unique_ptr<ChatPrompt> prompt_;
};

TEST(ChatMessages, ContentPassesThroughAsSent) {
  const ChatRequest r = parse_chat_request(Json::parse(R"({"messages": [
      {"role": "assistant", "content": null, "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}]},
      {"role": "assistant", "content": ""},
      {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "g", "arguments": "{}"}}]},
      {"role": "user", "content": ["plain", {"type": "text", "text": "typed"}, {"type": "text"}, {"type": "input_text", "text": "in"}]},
      {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}], "reasoning_content": "kept", "x-extra": [1]}]})"));
  const Json& m = r.prompt.messages;
  EXPECT_TRUE(m[0]["content"].is_null());
  EXPECT_EQ(m[1]["content"], "");
  EXPECT_FALSE(m[2].contains("content"));
  EXPECT_EQ(m[3]["content"], "plain\ntyped\nin");  // vLLM's "string" content format; a part without text is skipped
  EXPECT_EQ(m[4]["content"], "no");
  EXPECT_EQ(m[4]["reasoning_content"], "kept");
  EXPECT_EQ(m[4]["x-extra"], Json::array({1}));
  EXPECT_EQ(chat_error(user_then(Json::parse(R"({"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]})"))).param,
            "messages[1].content");
  // Image parts are kept for the route (docs/vision.md): the content stays a list of parts, the URL
  // goes to `images` with where it was.
  const ChatRequest img = parse_chat_request(Json::parse(R"({"messages": [{"role": "user", "content": [
      {"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}, "b"]}]})"));
  EXPECT_EQ(img.prompt.messages[0]["content"],
            Json::parse(R"([{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}])"));
  ASSERT_EQ(img.prompt.images.size(), 1u);
  EXPECT_EQ(img.prompt.images[0].url, "data:image/png;base64,AAAA");
  EXPECT_EQ(img.prompt.images[0].key, "messages[0].content[1]");
  EXPECT_EQ(chat_error(user_then(Json::parse(R"({"role": "user", "content": [{"type": "image_url", "image_url": 5}]})"))).param,
            "messages[1].content[0].image_url");
  EXPECT_EQ(chat_error(user_then(Json::parse(R"({"role": "user", "content": 5})"))).param, "messages[1].content");
}

TEST(ChatMessages, ToolCallsChecksAndEmptyListsDropped) {
  const ChatRequest r = parse_chat_request(Json::parse(R"({"messages": [
      {"role": "assistant", "content": null, "tool_calls": [{"type": "function", "function": {"name": "a", "arguments": "{\"k\": 1}"}}]},
      {"role": "assistant", "content": "x", "tool_calls": []},
      {"role": "assistant", "content": "z", "tool_calls": null},
      {"role": "user", "content": "y", "tool_calls": []}]})"));
  EXPECT_EQ(r.prompt.messages[0]["tool_calls"][0]["function"]["arguments"], "{\"k\": 1}");  // as sent
  EXPECT_FALSE(r.prompt.messages[1].contains("tool_calls"));  // vLLM drops an empty list
  EXPECT_FALSE(r.prompt.messages[2].contains("tool_calls"));  // and null
  EXPECT_TRUE(r.prompt.messages[3].contains("tool_calls"));   // an assistant's only
  EXPECT_EQ(chat_error(user_then(Json::parse(R"({"role": "assistant", "tool_calls": [{"type": "function"}]})"))).param,
            "messages[1].tool_calls[0].function");
  EXPECT_EQ(chat_error(user_then(Json::parse(R"({"role": "assistant", "tool_calls": [5]})"))).param, "messages[1].tool_calls[0]");
  EXPECT_EQ(chat_error(user_then(Json::parse(R"({"role": "assistant", "tool_calls": {}})"))).param, "messages[1].tool_calls");
}

TEST(ChatMessages, AdaptToTheTemplatesForm) {
  const Json messages = Json::parse(R"([
      {"role": "user", "content": null},
      {"role": "assistant", "content": null, "tool_calls": [
          {"type": "function", "function": {"name": "a", "arguments": "{\"z\": 1, \"a\": [18446744073709551615, -9223372036854775808]}"}},
          {"type": "function", "function": {"name": "b", "arguments": "not json"}},
          {"type": "function", "function": {"name": "c", "arguments": null}},
          {"type": "function", "function": {"name": "d"}},
          {"type": "function", "function": {"name": "e", "arguments": [1]}},
          {"type": "function", "function": {"name": "f", "arguments": 7}}]},
      {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "g", "arguments": "[1e400]"}}]}])");
  // As sent, with vLLM's mapping arguments: json.loads of the text, else {}.
  const Json a = adapt_messages(messages, ToolCallForms{true, true});
  EXPECT_TRUE(a[0]["content"].is_null());
  EXPECT_TRUE(a[1]["content"].is_null());
  EXPECT_TRUE(a[2]["content"].is_null());  // absent reads as null
  const Json& calls = a[1]["tool_calls"];
  EXPECT_EQ(calls[0]["function"]["arguments"].dump(), R"({"z":1,"a":[18446744073709551615,-9223372036854775808]})");
  for (int i : {1, 2, 3, 5}) EXPECT_EQ(calls[i]["function"]["arguments"], Json::object()) << i;
  EXPECT_EQ(calls[4]["function"]["arguments"], Json::array({1}));
  EXPECT_EQ(a[2]["tool_calls"][0]["function"]["arguments"], Json::object());  // not JSON to nlohmann (Python reads inf)
  // For a template that cannot take None or a mapping: "" and the text as sent.
  const Json b = adapt_messages(messages, ToolCallForms{false, false});
  EXPECT_EQ(b[0]["content"], "");
  EXPECT_EQ(b[1]["content"], "");
  EXPECT_EQ(b[2]["content"], "");
  EXPECT_EQ(b[1]["tool_calls"][1]["function"]["arguments"], "not json");
  EXPECT_TRUE(b[1]["tool_calls"][2]["function"]["arguments"].is_null());
  // An integer beyond 64 bits would become a double: refused, never changed.
  try {
    adapt_messages(Json::array({assistant_call("{\"n\": 18446744073709551616}")}), ToolCallForms{});
    ADD_FAILURE() << "expected a 400";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "messages[0].tool_calls[0].function.arguments");
    EXPECT_NE(std::string(e.what()).find("18446744073709551616"), std::string::npos) << e.what();
  }
  // ... unless the template takes the text: then it is passed exactly as sent.
  EXPECT_EQ(adapt_messages(Json::array({assistant_call("{\"n\": 18446744073709551616}")}), ToolCallForms{true, false})[0]
                ["tool_calls"][0]["function"]["arguments"],
            "{\"n\": 18446744073709551616}");
}

TEST(ChatMessages, ToolCallArgumentsNestingIsBounded) {
  auto adapt = [](const std::string& text) {
    try {
      adapt_messages(Json::array({assistant_call(text)}), ToolCallForms{});
    } catch (const ApiError& e) {
      return e;
    }
    return ApiError(0, "", "");
  };
  const size_t n = kMaxChatNesting;
  EXPECT_EQ(adapt(std::string(n, '[') + std::string(n, ']')).status, 0);
  const ApiError deep = adapt(std::string(n + 1, '[') + std::string(n + 1, ']'));
  EXPECT_EQ(deep.status, 400);
  EXPECT_NE(std::string(deep.what()).find("nested too deeply"), std::string::npos);
  EXPECT_EQ(adapt(std::string(200000, '[')).status, 400);
}

TEST(ChatMessages, DeepRequestDataIsAnErrorNotACrash) {
  // Built directly, bypassing parse_json_body's own bound: 20,000 levels of arrays.
  Json deep = Json::array();
  for (int i = 0; i < 20000; ++i) {
    Json outer = Json::array();
    outer.push_back(std::move(deep));
    deep = std::move(outer);
  }
  EXPECT_TRUE(nesting_exceeds(deep, 64));
  EXPECT_FALSE(nesting_exceeds(Json::array({Json::array()}), 2));
  EXPECT_TRUE(nesting_exceeds(Json::array({Json::array()}), 1));
  Json body = user_then(Json{{"role", "assistant"}, {"content", "x"}});
  body["messages"][1]["metadata"] = std::move(deep);
  ApiError e = chat_error(body);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "messages[1]");
  deep = std::move(body["messages"][1]["metadata"]);
  body["messages"][1].erase("metadata");
  body["chat_template_kwargs"] = Json{{"k", std::move(deep)}};
  e = chat_error(body);
  EXPECT_EQ(e.param, "chat_template_kwargs");
  deep = std::move(body["chat_template_kwargs"]);
  body.erase("chat_template_kwargs");
  body["tools"] = Json::array({Json{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", std::move(deep)}}}}});
  EXPECT_EQ(chat_error(body).param, "tools");
  // ChatPrompt holds the bound by itself too, for a request built without the parser.
  const TemplateDir t("{{ messages|length }}");
  ChatPromptRequest direct;
  direct.messages = Json::array({std::move(body["tools"])});
  try {
    t.prompt().render(direct);
    ADD_FAILURE() << "expected a 400";
  } catch (const ApiError& err) {
    EXPECT_EQ(err.param, "messages");
  }
}

TEST(ChatPromptRender, ProbedToolCallForms) {
  // A template that takes None and maps arguments (Qwen2.5 / Llama 3.1 style): as sent.
  const TemplateDir mapping(
      "{% for m in messages %}{% if m.content is none %}N{% else %}{{ m.content }}{% endif %}"
      "{% for c in m.tool_calls or [] %}{{ c.function.arguments|tojson }}{% endfor %};{% endfor %}");
  EXPECT_TRUE(mapping.prompt().tool_call_forms().null_content);
  EXPECT_TRUE(mapping.prompt().tool_call_forms().object_arguments);
  // One that concatenates content (raises on None, as Qwen3's first template does): "".
  const TemplateDir strings(
      "{% for m in messages %}{{ m.role + ':' + m.content }}{% for c in m.tool_calls or [] %}{{ c.function.arguments|tojson }}"
      "{% endfor %};{% endfor %}");
  EXPECT_FALSE(strings.prompt().tool_call_forms().null_content);
  EXPECT_TRUE(strings.prompt().tool_call_forms().object_arguments);
  // One that renders calls on `content is none` and concatenates the arguments text (DeepSeek-V3).
  const TemplateDir text(
      "{% for m in messages %}{% if m.content is none %}{% for c in m.tool_calls %}{{ c.function.name + ' ' + c.function.arguments }}"
      "{% endfor %}{% else %}{{ m.content }}{% endif %};{% endfor %}");
  EXPECT_TRUE(text.prompt().tool_call_forms().null_content);
  EXPECT_FALSE(text.prompt().tool_call_forms().object_arguments);
  // Expected renders written from jinja2's semantics.
  const Json body = Json::parse(R"({"messages": [{"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function",
          "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 18446744073709551615}"}}]},
      {"role": "tool", "content": "21C"}], "add_generation_prompt": false})");
  EXPECT_EQ(mapping.render(body), "Weather?;N{\"city\": \"Paris\", \"days\": 18446744073709551615};21C;");
  EXPECT_EQ(strings.render(body), "user:Weather?;assistant:{\"city\": \"Paris\", \"days\": 18446744073709551615};tool:21C;");
  EXPECT_EQ(text.render(body), "Weather?;get_weather {\"city\": \"Paris\", \"days\": 18446744073709551615};21C;");
  // A mapping-arguments template refuses an integer it would change; a text one passes it as sent.
  Json big = body;
  big["messages"][1]["tool_calls"][0]["function"]["arguments"] = "{\"n\": 18446744073709551616}";
  EXPECT_EQ(mapping.error(big).param, "messages[1].tool_calls[0].function.arguments");
  EXPECT_EQ(text.render(big), "Weather?;get_weather {\"n\": 18446744073709551616};21C;");
}

// The request-level cases of a fixture: each OpenAI request body goes through parse_chat_request
// and ChatPrompt as the server sends it; tools/chat_template_reference.py built the expected
// context from the body independently (transformers' pass-through, vLLM's normalisations, its own
// probe of the template's form) and rendered it with jinja2.
void expect_requests_match(const ChatPrompt& prompt, const std::string& fixture, size_t at_least) {
  std::ifstream in(kFixtures + "/" + fixture);
  ASSERT_TRUE(in.good()) << fixture << " is missing: run tools/chat_template_reference.py";
  const Json cases = Json::parse(in);
  size_t checked = 0;
  for (const Json& c : cases) {
    if (!c.contains("request")) continue;
    SCOPED_TRACE(c["name"].get<std::string>());
    ++checked;
    EXPECT_EQ(prompt.tool_call_forms().null_content, c["forms"]["null_content"].get<bool>());
    EXPECT_EQ(prompt.tool_call_forms().object_arguments, c["forms"]["object_arguments"].get<bool>());
    const ChatPromptRequest r = parse_chat_request(c["request"]).prompt;
    if (!c.contains("error")) {
      EXPECT_EQ(prompt.render(r), c["render"].get<std::string>());
      continue;
    }
    try {
      prompt.render(r);
      ADD_FAILURE() << "expected: " << c["error"];
    } catch (const ApiError& e) {
      const std::string msg = e.what(), want = ": " + c["error"].get<std::string>();
      EXPECT_EQ(e.status, 400);
      EXPECT_TRUE(msg.size() >= want.size() && msg.compare(msg.size() - want.size(), want.size(), want) == 0) << msg;
    }
  }
  EXPECT_GE(checked, at_least);
}

TEST(ChatPromptRender, DeepSeekV3RequestsMatchJinja2) {
  // Content null beside tool calls reaches the template as None, and the arguments as the JSON text
  // sent: the tool calls render (the template concatenates them as text).
  std::ifstream tf(kFixtures + "/deepseek_v3.jinja", std::ios::binary);
  ASSERT_TRUE(tf.good());
  std::ostringstream source;
  source << tf.rdbuf();
  const TemplateDir t(source.str(), "<\uff5cbegin\u2581of\u2581sentence\uff5c>", "<\uff5cend\u2581of\u2581sentence\uff5c>");
  expect_requests_match(t.prompt(), "deepseek_v3_renders.json", 6);
}

TEST(ChatPromptRender, Qwen3RequestsMatchJinja2) {
  // Qwen3's first template raises on a None content ('</think>' in None): it gets "" as vLLM gives.
  ASSERT_TRUE(std::filesystem::exists(kQwen3Dir + "/tokenizer_config.json")) << "run tools/fetch_test_data.sh";
  const std::unique_ptr<ChatPrompt> prompt = ChatPrompt::load(kQwen3Dir);
  ASSERT_TRUE(prompt);
  expect_requests_match(*prompt, "qwen3_renders.json", 3);
}

}  // namespace
}  // namespace pagoda::server
