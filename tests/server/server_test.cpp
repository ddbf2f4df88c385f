// `pagoda serve` end to end: the official `openai` npm client (tests/server/openai_client_test.mjs,
// tests/server/responses_test.mjs for /v1/responses),
// the error cases through curl, overload (503), a load test (tests/server/load_test.mjs) and a
// clean shutdown on SIGTERM.
#include <gtest/gtest.h>

#include <cstdio>
#include <thread>

#include "raw_http.h"
#include "server_harness.h"

namespace pagoda::server::test {
namespace {

const std::string kKey = "test-key";
const std::string kAuth = "Authorization: Bearer " + kKey;

std::string node_command(const std::string& script, const ServerProcess& s, const std::string& model) {
  return "node " + source_path("tests/server/" + script) + " " + std::to_string(s.port()) + " " + kKey + " '" +
         model + "' 2>&1";
}

TEST(Server, OpenAiClientConformance) {
  const TestModelDir model_dir;
  const std::string& dir = model_dir.path;
  ASSERT_FALSE(dir.empty());
  ServerProcess s;
  ASSERT_TRUE(s.start(dir, {"--api-key", kKey, "--served-model-name", "tiny", "--max-model-len", "1024"})) << s.log();
  const CommandResult r = run_command(node_command("openai_client_test.mjs", s, "tiny"));
  EXPECT_EQ(r.code, 0) << r.out << "\n--- server log ---\n" << s.log();
  EXPECT_EQ(s.stop(), 0) << s.log();
}

TEST(Server, OpenAiClientResponses) {
  const TestModelDir model_dir;
  const std::string& dir = model_dir.path;
  ASSERT_FALSE(dir.empty());
  ServerProcess s;
  ASSERT_TRUE(s.start(dir, {"--api-key", kKey, "--served-model-name", "tiny", "--max-model-len", "1024"})) << s.log();
  const CommandResult r = run_command(node_command("responses_test.mjs", s, "tiny"));
  EXPECT_EQ(r.code, 0) << r.out << "\n--- server log ---\n" << s.log();
  EXPECT_EQ(s.stop(), 0) << s.log();
}

TEST(Server, ErrorCases) {
  const TestModelDir model_dir;
  const std::string& dir = model_dir.path;
  ASSERT_FALSE(dir.empty());
  ServerProcess s;
  ASSERT_TRUE(s.start(dir, {"--api-key", kKey, "--served-model-name", "tiny", "--max-model-len", "256"})) << s.log();

  // A long stream runs through all the bad requests below, untouched by them.
  const std::string stream_cmd = "curl -sN -m 120 -H '" + kAuth + "' -H 'Content-Type: application/json' -d '" +
                                 R"({"prompt": "hello", "max_tokens": 200, "ignore_eos": true, "stream": true,)" +
                                 R"( "stream_options": {"include_usage": true}}' )" + s.url("/v1/completions");
  std::string stream_out;
  std::thread streamer([&] { stream_out = run_command(stream_cmd).out; });

  auto expect_error = [&](const HttpResult& r, int status, const std::string& param = "", const std::string& code = "") {
    EXPECT_EQ(r.status, status) << r.body;
    const nlohmann::json j = r.json();
    ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
    const nlohmann::json& e = j["error"];
    EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty()) << r.body;
    EXPECT_TRUE(e["type"].is_string()) << r.body;
    EXPECT_TRUE(e.contains("param") && e.contains("code")) << r.body;
    if (!param.empty()) {
      EXPECT_EQ(e["param"], param) << r.body;
    }
    if (!code.empty()) {
      EXPECT_EQ(e["code"], code) << r.body;
    }
  };
  const std::vector<std::string> auth = {kAuth};
  // 400: bad JSON, bad parameters, a prompt longer than the model allows.
  expect_error(s.request("POST", "/v1/completions", "{\"prompt\": ", auth), 400);
  expect_error(s.request("POST", "/v1/completions", R"({"prompt": "x", "temperature": -1})", auth), 400, "temperature");
  expect_error(s.request("POST", "/v1/completions", R"({"prompt": "x", "top_p": "high"})", auth), 400, "top_p");
  expect_error(s.request("POST", "/v1/completions", R"({"prompt": "x", "n": 0})", auth), 400, "n");
  expect_error(s.request("POST", "/v1/completions", R"({"prompt": [1, 2, 99999]})", auth), 400, "prompt");
  expect_error(s.request("POST", "/v1/chat/completions", R"({"messages": "hi"})", auth), 400, "messages");
  expect_error(s.request("POST", "/v1/chat/completions",
                         R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 3})", auth),
               400, "top_logprobs");
  const std::string long_prompt(300, '~');  // 300 single-byte tokens > --max-model-len 256
  expect_error(s.request("POST", "/v1/completions", R"({"prompt": ")" + long_prompt + R"(", "max_tokens": 4})", auth),
               400, "prompt", "context_length_exceeded");
  expect_error(s.request("POST", "/v1/completions", R"({"prompt": "abc", "max_tokens": 300})", auth), 400, "prompt",
               "context_length_exceeded");
  // 401 on the /v1 routes; as vLLM, the others (probes, the scrape, /tokenize) need no key.
  expect_error(s.request("POST", "/v1/completions", R"({"prompt": "x"})"), 401, "", "invalid_api_key");
  expect_error(s.request("POST", "/v1/completions", R"({"prompt": "x"})", {"Authorization: Bearer wrong"}), 401);
  expect_error(s.get("/v1/models"), 401);
  EXPECT_EQ(s.get("/metrics").status, 200);
  EXPECT_EQ(s.request("POST", "/tokenize", R"({"prompt": "x"})").status, 200);
  EXPECT_EQ(s.get("/health").status, 200);
  // 404: unknown route, unknown model.
  expect_error(s.get("/v1/nothing", auth), 404);
  expect_error(s.request("POST", "/v1/completions", R"({"model": "other", "prompt": "x"})", auth), 404, "",
               "model_not_found");

  // Good requests still work, and the stream finished with all its tokens.
  const HttpResult ok = s.request("POST", "/v1/completions", R"({"model": "tiny", "prompt": "abc", "max_tokens": 3, "ignore_eos": true})", auth);
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.json()["usage"]["completion_tokens"], 3);
  streamer.join();
  EXPECT_NE(stream_out.find("\"completion_tokens\":200"), std::string::npos) << stream_out.substr(0, 2000);
  EXPECT_NE(stream_out.find("data: [DONE]"), std::string::npos);

  // /tokenize and /detokenize round trip; chat messages through the template.
  const HttpResult tok = s.request("POST", "/tokenize", R"({"prompt": "hello world"})", auth);
  ASSERT_EQ(tok.status, 200) << tok.body;
  const nlohmann::json tj = tok.json();
  EXPECT_EQ(tj["count"], tj["tokens"].size());
  EXPECT_EQ(tj["max_model_len"], 256);
  const HttpResult detok = s.request("POST", "/detokenize", nlohmann::json{{"tokens", tj["tokens"]}}.dump(), auth);
  ASSERT_EQ(detok.status, 200) << detok.body;
  EXPECT_EQ(detok.json()["prompt"], "hello world");

  EXPECT_EQ(s.stop(), 0) << s.log();
}

TEST(Server, OverloadAnswers503AndShutdownAbortsInFlight) {
  const TestModelDir model_dir;
  const std::string& dir = model_dir.path;
  ASSERT_FALSE(dir.empty());
  ServerProcess s;
  ASSERT_TRUE(s.start(dir, {"--max-num-seqs", "1", "--max-waiting-requests", "1", "--shutdown-timeout", "0",
                            "--max-model-len", "4096"}))
      << s.log();
  // One request runs (max-num-seqs 1), one waits; both would take far longer than the test.
  auto long_stream = [&] {
    return run_command("curl -sN -m 120 -H 'Content-Type: application/json' -d '" +
                       std::string(R"({"prompt": "hi", "max_tokens": 4000, "ignore_eos": true, "stream": true})") +
                       "' " + s.url("/v1/completions"))
        .out;
  };
  std::string first, second;
  std::thread t1([&] { first = long_stream(); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (s.metric("vllm:num_requests_running") < 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::thread t2([&] { second = long_stream(); });
  while (s.metric("vllm:num_requests_waiting") < 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(s.metric("vllm:num_requests_waiting"), 1) << s.log();

  const HttpResult r = s.request("POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 2})");
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_TRUE(r.json().contains("error")) << r.body;
  {  // and it tells the client when to come back
    RawConn c(s.port());
    c.send(post_request("/v1/completions", R"({"prompt": "x", "max_tokens": 2})", "Connection: close\r\n"));
    const std::string resp = c.read_all(std::chrono::seconds(10));
    EXPECT_EQ(status_of(resp), 503) << resp;
    EXPECT_NE(resp.find("Retry-After: "), std::string::npos) << resp;
  }

  // SIGTERM with --shutdown-timeout 0: what is in flight is aborted at once (4000 tokens each take
  // far longer than this test), and the streams still end cleanly.
  EXPECT_EQ(s.stop(), 0) << s.log();
  t1.join();
  t2.join();
  const std::string aborted = "\"finish_reason\":\"abort\"";
  EXPECT_TRUE(first.find(aborted) != std::string::npos || second.find(aborted) != std::string::npos)
      << first.substr(0, 300) << "\n" << second.substr(0, 300);
  EXPECT_NE(first.find("data: [DONE]"), std::string::npos) << first.substr(0, 300);
  EXPECT_NE(second.find("data: [DONE]"), std::string::npos) << second.substr(0, 300);
}

TEST(Server, LoadAndDisconnects) {
  const TestModelDir model_dir;
  const std::string& dir = model_dir.path;
  ASSERT_FALSE(dir.empty());
  ServerProcess s;
  ASSERT_TRUE(s.start(dir, {"--api-key", kKey, "--served-model-name", "tiny", "--max-model-len", "4096"})) << s.log();
  const CommandResult r = run_command(node_command("load_test.mjs", s, "tiny"));
  EXPECT_EQ(r.code, 0) << r.out << "\n--- server log ---\n" << s.log();
  EXPECT_EQ(s.stop(), 0) << s.log();
}

}  // namespace
}  // namespace pagoda::server::test
