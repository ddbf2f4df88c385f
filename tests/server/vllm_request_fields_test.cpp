// vLLM's request extensions through `pagoda serve` on the tiny fixture model: each one either has
// the effect vLLM gives it (allowed_token_ids, bad_words, skip_special_tokens, truncate_prompt_tokens,
// return_token_ids, return_tokens_as_token_ids, request_id, priority with --scheduling-policy,
// continuous_usage_stats, documents, chat echo) or is refused with a 400 that names it
// (prompt_logprobs; priority under fcfs). Expected values come from the fixture's tokenizer (ids
// 0..255 are the bytes, 500.. the added tokens) or from a second request, never from a constant
// copied out of pagoda's answers.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "server_harness.h"

namespace pagoda::server::test {
namespace {

using nlohmann::json;

constexpr int kImStart = 501;  // "<|im_start|>", special (tiny_tokenizer_json)

class VllmFields : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TestModelDir();
    ASSERT_FALSE(dir_->path.empty());
    server_ = new ServerProcess();
    ASSERT_TRUE(server_->start(dir_->path, {"--max-model-len", "1024"})) << server_->log();
  }
  static void TearDownTestSuite() {
    delete server_;
    delete dir_;
  }
  static HttpResult post(const std::string& path, const json& body, const std::vector<std::string>& headers = {}) {
    return server_->request("POST", path, body.dump(), headers);
  }
  static json ok(const std::string& path, const json& body, const std::vector<std::string>& headers = {}) {
    const HttpResult r = post(path, body, headers);
    EXPECT_EQ(r.status, 200) << body.dump() << "\n" << r.body;
    return r.json();
  }
  // A 400 whose error names `param`.
  static void refused(const std::string& path, const json& body, const std::string& param) {
    const HttpResult r = post(path, body);
    EXPECT_EQ(r.status, 400) << body.dump() << "\n" << r.body;
    const json j = r.json();
    ASSERT_TRUE(j.contains("error")) << r.body;
    EXPECT_EQ(j["error"]["param"], param) << r.body;
    EXPECT_NE(j["error"]["message"].get<std::string>().find(param), std::string::npos) << r.body;
  }
  static inline TestModelDir* dir_ = nullptr;
  static inline ServerProcess* server_ = nullptr;
};

json letters() {
  json ids = json::array();
  for (int c = 'a'; c <= 'z'; ++c) ids.push_back(c);
  return ids;
}

// The data: payloads of a server-sent event stream, [DONE] left out.
std::vector<json> sse_chunks(const std::string& body) {
  std::vector<json> out;
  std::istringstream in(body);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("data: ", 0) != 0 || line == "data: [DONE]") continue;
    out.push_back(json::parse(line.substr(6)));
  }
  return out;
}

TEST_F(VllmFields, AllowedTokenIdsRestrictEveryToken) {
  const json allowed = {'x', 'y', 'z'};
  const json base = {{"prompt", "hello there"}, {"max_tokens", 24}, {"temperature", 1.0}, {"seed", 7},
                     {"ignore_eos", true}, {"return_token_ids", true}};
  // Unrestricted, the random model wanders over the vocabulary: the check below can fail.
  const json free = ok("/v1/completions", base);
  int outside = 0;
  for (const json& id : free["choices"][0]["token_ids"]) outside += id < 'x' || id > 'z';
  EXPECT_GT(outside, 0) << free.dump();

  json body = base;
  body["allowed_token_ids"] = allowed;
  const json r = ok("/v1/completions", body);
  const json& ids = r["choices"][0]["token_ids"];
  ASSERT_EQ(ids.size(), 24u) << r.dump();
  for (const json& id : ids) EXPECT_TRUE(id == 'x' || id == 'y' || id == 'z') << r.dump();
  for (char c : r["choices"][0]["text"].get<std::string>()) EXPECT_TRUE(c >= 'x' && c <= 'z') << r.dump();

  // Chat too.
  const json chat = ok("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                                {"max_tokens", 16}, {"ignore_eos", true},
                                                {"allowed_token_ids", allowed}, {"return_token_ids", true}});
  for (const json& id : chat["choices"][0]["token_ids"]) EXPECT_TRUE(id == 'x' || id == 'y' || id == 'z') << chat.dump();

  refused("/v1/completions", {{"prompt", "a"}, {"allowed_token_ids", json::array()}}, "allowed_token_ids");
  refused("/v1/completions", {{"prompt", "a"}, {"allowed_token_ids", {1, 100000}}}, "allowed_token_ids");
}

TEST_F(VllmFields, BadWordsNeverAppear) {
  const json base = {{"prompt", "once upon a time"}, {"max_tokens", 32}, {"temperature", 0},
                     {"ignore_eos", true}, {"allowed_token_ids", letters()}};
  const std::string before = ok("/v1/completions", base)["choices"][0]["text"];
  ASSERT_FALSE(before.empty());
  // The letter the greedy output uses most: banned, it must vanish.
  std::map<char, int> counts;
  for (char c : before) ++counts[c];
  char most = before[0];
  for (const auto& kv : counts)
    if (kv.second > counts[most]) most = kv.first;
  json body = base;
  body["bad_words"] = {std::string(1, most)};
  const std::string after = ok("/v1/completions", body)["choices"][0]["text"];
  EXPECT_EQ(after.size(), before.size());
  EXPECT_EQ(after.find(most), std::string::npos) << "banned '" << most << "': " << before << " -> " << after;

  json chat = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 24}, {"temperature", 0},
               {"ignore_eos", true}, {"allowed_token_ids", letters()}, {"bad_words", {std::string(1, most)}}};
  const std::string content = ok("/v1/chat/completions", chat)["choices"][0]["message"]["content"];
  EXPECT_EQ(content.find(most), std::string::npos) << content;

  refused("/v1/completions", {{"prompt", "a"}, {"bad_words", "x"}}, "bad_words");
  refused("/v1/completions", {{"prompt", "a"}, {"bad_words", {" "}}}, "bad_words");
}

TEST_F(VllmFields, SkipSpecialTokensFalseKeepsThemInTheText) {
  const json base = {{"prompt", "hi"}, {"max_tokens", 3}, {"ignore_eos", true}, {"allowed_token_ids", {kImStart}}};
  EXPECT_EQ(ok("/v1/completions", base)["choices"][0]["text"], "");
  json keep = base;
  keep["skip_special_tokens"] = false;
  EXPECT_EQ(ok("/v1/completions", keep)["choices"][0]["text"], "<|im_start|><|im_start|><|im_start|>");
}

TEST_F(VllmFields, PromptLogprobsIsRefusedByName) {
  refused("/v1/completions", {{"prompt", "a"}, {"prompt_logprobs", 1}}, "prompt_logprobs");
  refused("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "a"}}}}, {"prompt_logprobs", 0}},
          "prompt_logprobs");
}

TEST_F(VllmFields, TruncatePromptTokensKeepsTheLastK) {
  const json prompt = {11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
  const json r = ok("/v1/completions", {{"prompt", prompt}, {"max_tokens", 2}, {"truncate_prompt_tokens", 3},
                                        {"return_token_ids", true}});
  EXPECT_EQ(r["choices"][0]["prompt_token_ids"], json({18, 19, 20})) << r.dump();
  EXPECT_EQ(r["usage"]["prompt_tokens"], 3);
  // -1: max_model_len, which this prompt is under: nothing cut.
  const json all = ok("/v1/completions", {{"prompt", prompt}, {"max_tokens", 2}, {"truncate_prompt_tokens", -1}});
  EXPECT_EQ(all["usage"]["prompt_tokens"], 10);
  const json chat = ok("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "a longer question"}}}},
                                                {"max_tokens", 2}, {"truncate_prompt_tokens", 5}});
  EXPECT_EQ(chat["usage"]["prompt_tokens"], 5);
  refused("/v1/completions", {{"prompt", prompt}, {"truncate_prompt_tokens", 5000}}, "truncate_prompt_tokens");
  refused("/v1/completions", {{"prompt", prompt}, {"truncate_prompt_tokens", -2}}, "truncate_prompt_tokens");
}

TEST_F(VllmFields, ReturnTokenIdsGivesPromptAndOutputIds) {
  const json messages = {{{"role", "user"}, {"content", "what is this?"}}};
  const json r = ok("/v1/chat/completions", {{"messages", messages}, {"max_tokens", 12}, {"ignore_eos", true},
                                             {"allowed_token_ids", letters()}, {"return_token_ids", true}});
  // The prompt ids as /tokenize makes them from the same messages.
  const json tok = ok("/tokenize", {{"messages", messages}});
  EXPECT_EQ(r["prompt_token_ids"], tok["tokens"]) << r.dump();
  const json& ids = r["choices"][0]["token_ids"];
  EXPECT_EQ(ids.size(), 12u);
  const json text = ok("/detokenize", {{"tokens", ids}});
  EXPECT_EQ(text["prompt"], r["choices"][0]["message"]["content"]);
  // Without it, neither field.
  const json plain = ok("/v1/chat/completions", {{"messages", messages}, {"max_tokens", 2}});
  EXPECT_FALSE(plain.contains("prompt_token_ids"));
  EXPECT_FALSE(plain["choices"][0].contains("token_ids"));

  // Streamed: the prompt ids once, the output ids chunk by chunk, adding up to the whole.
  const HttpResult s = post("/v1/completions", {{"prompt", {5, 6, 7}}, {"max_tokens", 10}, {"ignore_eos", true},
                                                {"stream", true}, {"return_token_ids", true},
                                                {"allowed_token_ids", letters()}});
  ASSERT_EQ(s.status, 200) << s.body;
  json streamed = json::array();
  int prompt_seen = 0;
  std::string text_streamed;
  for (const json& c : sse_chunks(s.body)) {
    for (const json& ch : c["choices"]) {
      if (ch.contains("prompt_token_ids")) {
        ++prompt_seen;
        EXPECT_EQ(ch["prompt_token_ids"], json({5, 6, 7}));
      }
      for (const json& id : ch.value("token_ids", json::array())) streamed.push_back(id);
      text_streamed += ch["text"].get<std::string>();
    }
  }
  EXPECT_EQ(prompt_seen, 1);
  EXPECT_EQ(streamed.size(), 10u);
  EXPECT_EQ(ok("/detokenize", {{"tokens", streamed}})["prompt"], text_streamed);
}

TEST_F(VllmFields, ReturnTokensAsTokenIdsPerRequest) {
  const json r = ok("/v1/completions", {{"prompt", "hi"}, {"max_tokens", 6}, {"ignore_eos", true}, {"logprobs", 1},
                                        {"return_tokens_as_token_ids", true}, {"return_token_ids", true}});
  const json& ids = r["choices"][0]["token_ids"];
  const json& tokens = r["choices"][0]["logprobs"]["tokens"];
  ASSERT_EQ(tokens.size(), ids.size()) << r.dump();
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(tokens[i], "token_id:" + std::to_string(ids[i].get<int>()));
  const json chat = ok("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                                {"max_tokens", 4}, {"ignore_eos", true}, {"logprobs", true},
                                                {"return_tokens_as_token_ids", true}, {"return_token_ids", true}});
  const json& cids = chat["choices"][0]["token_ids"];
  const json& content = chat["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), cids.size()) << chat.dump();
  for (size_t i = 0; i < cids.size(); ++i)
    EXPECT_EQ(content[i]["token"], "token_id:" + std::to_string(cids[i].get<int>()));
  // Without the field: the token's text.
  const json text = ok("/v1/completions", {{"prompt", "hi"}, {"max_tokens", 4}, {"logprobs", 1},
                                           {"allowed_token_ids", letters()}});
  for (const json& t : text["choices"][0]["logprobs"]["tokens"]) EXPECT_EQ(t.get<std::string>().rfind("token_id:", 0), std::string::npos);
}

TEST_F(VllmFields, RequestIdBecomesTheResponseId) {
  const json messages = {{{"role", "user"}, {"content", "hi"}}};
  EXPECT_EQ(ok("/v1/chat/completions", {{"messages", messages}, {"max_tokens", 1}, {"request_id", "my-req-1"}})["id"],
            "chatcmpl-my-req-1");
  EXPECT_EQ(ok("/v1/completions", {{"prompt", "hi"}, {"max_tokens", 1}, {"request_id", "my-req-2"}})["id"],
            "cmpl-my-req-2");
  // As vLLM: the X-Request-Id header wins over the body's request_id.
  EXPECT_EQ(ok("/v1/chat/completions", {{"messages", messages}, {"max_tokens", 1}, {"request_id", "body"}},
               {"X-Request-Id: hdr-7"})["id"],
            "chatcmpl-hdr-7");
  EXPECT_EQ(ok("/v1/responses", {{"input", "hi"}, {"max_output_tokens", 1}, {"request_id", "resp_mine"}})["id"],
            "resp_mine");
  refused("/v1/completions", {{"prompt", "hi"}, {"request_id", "has space"}}, "request_id");
  refused("/v1/completions", {{"prompt", "hi"}, {"request_id", std::string(300, 'a')}}, "request_id");
}

TEST_F(VllmFields, PriorityUnderFcfsIsRefusedByName) {
  refused("/v1/completions", {{"prompt", "hi"}, {"max_tokens", 1}, {"priority", 1}}, "priority");
  refused("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "a"}}}}, {"priority", -3}}, "priority");
  refused("/v1/responses", {{"input", "hi"}, {"priority", 2}}, "priority");
  ok("/v1/completions", {{"prompt", "hi"}, {"max_tokens", 1}, {"priority", 0}});
}

TEST_F(VllmFields, ContinuousUsageStatsInEveryChunk) {
  const json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 8}, {"ignore_eos", true},
                     {"stream", true}, {"stream_options", {{"include_usage", true}, {"continuous_usage_stats", true}}}};
  const HttpResult s = post("/v1/chat/completions", body);
  ASSERT_EQ(s.status, 200) << s.body;
  const std::vector<json> chunks = sse_chunks(s.body);
  ASSERT_GE(chunks.size(), 3u);
  int64_t last = -1;
  for (const json& c : chunks) {
    ASSERT_TRUE(c["usage"].is_object()) << c.dump();
    const int64_t n = c["usage"]["completion_tokens"];
    EXPECT_GE(n, last) << c.dump();
    last = n;
  }
  EXPECT_EQ(last, 8);
  // Completions too; without the option, chunks carry usage null.
  json cbody = {{"prompt", "hi"}, {"max_tokens", 5}, {"ignore_eos", true}, {"stream", true},
                {"stream_options", {{"include_usage", true}, {"continuous_usage_stats", true}}}};
  for (const json& c : sse_chunks(post("/v1/completions", cbody).body)) EXPECT_TRUE(c["usage"].is_object()) << c.dump();
  cbody["stream_options"] = {{"include_usage", true}};
  const std::vector<json> plain = sse_chunks(post("/v1/completions", cbody).body);
  ASSERT_GE(plain.size(), 2u);
  EXPECT_TRUE(plain.front()["usage"].is_null()) << plain.front().dump();
}

TEST_F(VllmFields, ChatEchoPrefixesTheLastMessage) {
  const json messages = {{{"role", "user"}, {"content", "tell me"}}, {{"role", "assistant"}, {"content", "Once upon"}}};
  json body = {{"messages", messages}, {"max_tokens", 8}, {"temperature", 0}, {"ignore_eos", true},
               {"allowed_token_ids", letters()}, {"add_generation_prompt", false}, {"continue_final_message", true}};
  const std::string plain = ok("/v1/chat/completions", body)["choices"][0]["message"]["content"];
  body["echo"] = true;
  EXPECT_EQ(ok("/v1/chat/completions", body)["choices"][0]["message"]["content"], "Once upon" + plain);
  body["stream"] = true;
  std::string streamed;
  for (const json& c : sse_chunks(post("/v1/chat/completions", body).body))
    for (const json& ch : c["choices"]) streamed += ch["delta"].value("content", "");
  EXPECT_EQ(streamed, "Once upon" + plain);
  // The last message is the user's, not the answer's role: nothing to echo (vLLM's rule).
  json user_last = {{"messages", {{{"role", "user"}, {"content", "tell me"}}}}, {"max_tokens", 6}, {"temperature", 0},
                    {"ignore_eos", true}, {"allowed_token_ids", letters()}};
  const std::string u_plain = ok("/v1/chat/completions", user_last)["choices"][0]["message"]["content"];
  user_last["echo"] = true;
  EXPECT_EQ(ok("/v1/chat/completions", user_last)["choices"][0]["message"]["content"], u_plain);
}

// A template that reads `documents`, given with --chat-template.
TEST(VllmFieldsTemplate, DocumentsReachTheChatTemplate) {
  const TestModelDir dir;
  ASSERT_FALSE(dir.path.empty());
  const std::string tmpl = dir.path + "/docs_template.jinja";
  write_file(tmpl,
             "{% for d in documents %}[DOC {{ d.title }}: {{ d.text }}]{% endfor %}"
             "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}");
  ServerProcess s;
  ASSERT_TRUE(s.start(dir.path, {"--max-model-len", "1024", "--chat-template", tmpl})) << s.log();
  const json body = {{"messages", {{{"role", "user"}, {"content", "q"}}}},
                     {"documents", {{{"title", "t1"}, {"text", "alpha"}}, {{"title", "t2"}, {"text", "beta"}}}},
                     {"max_tokens", 1}, {"return_token_ids", true}};
  const HttpResult r = s.request("POST", "/v1/chat/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const HttpResult text = s.request("POST", "/detokenize", json{{"tokens", r.json()["prompt_token_ids"]}}.dump());
  EXPECT_EQ(text.json()["prompt"], "[DOC t1: alpha][DOC t2: beta]<user>q") << text.body;
  const HttpResult bad = s.request("POST", "/v1/chat/completions",
                                   json{{"messages", body["messages"]}, {"documents", "x"}}.dump());
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(bad.json()["error"]["param"], "documents") << bad.body;
}

// --scheduling-policy priority with one sequence at a time: of two requests waiting behind a long
// one, the lower priority value goes first though it came second; under equal priorities the
// first-come one does (the control, so the test can fail). Each arrival waits until the server's
// gauges show it queued, so the order does not hang on how fast this machine decodes; the
// blocker's 2,000 tokens outlast those few polls by far. The two queued requests decode 32 tokens
// each: the order is read where their responses arrive, and a client thread woken late on a loaded
// machine must not let the later one's whole decode overtake it (4 tokens did, under ctest -j2).
TEST(VllmFieldsPriority, LowerPriorityValueIsServedFirst) {
  const DefaultModelDir dir;
  ASSERT_FALSE(dir.path.empty());
  ServerProcess s;
  ASSERT_TRUE(s.start(dir.path, {"--max-num-seqs", "1", "--scheduling-policy", "priority"})) << s.log();
  auto wait_for = [&](const std::string& series, double value) {
    const auto t0 = std::chrono::steady_clock::now();
    while (s.metric(series) != value) {
      if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(20)) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  };
  auto order = [&](int first_priority, int second_priority) {
    std::mutex mu;
    std::vector<std::string> done;
    auto send = [&](const std::string& name, int priority, int max_tokens) {
      const json body = {{"prompt", "go"}, {"max_tokens", max_tokens}, {"ignore_eos", true}, {"priority", priority}};
      const HttpResult r = s.request("POST", "/v1/completions", body.dump());
      EXPECT_EQ(r.status, 200) << r.body;
      std::lock_guard lock(mu);
      done.push_back(name);
    };
    std::thread blocker(send, "blocker", 0, 2000);
    EXPECT_TRUE(wait_for("vllm:num_requests_running", 1));
    std::thread first(send, "first", first_priority, 32);
    EXPECT_TRUE(wait_for("vllm:num_requests_waiting", 1));
    std::thread second(send, "second", second_priority, 32);
    EXPECT_TRUE(wait_for("vllm:num_requests_waiting", 2));
    {
      std::lock_guard lock(mu);
      EXPECT_TRUE(done.empty()) << "the blocker ended before both others were queued: nothing was decided by priority";
    }
    blocker.join();
    first.join();
    second.join();
    return done;
  };
  EXPECT_EQ(order(0, 0), (std::vector<std::string>{"blocker", "first", "second"}));
  EXPECT_EQ(order(5, -5), (std::vector<std::string>{"blocker", "second", "first"}));
  EXPECT_EQ(s.stop(), 0) << s.log();
}

}  // namespace
}  // namespace pagoda::server::test
