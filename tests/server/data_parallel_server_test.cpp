// `pagoda serve --data-parallel-size N`: N engine replicas behind one server. Every request gets the
// greedy tokens of the one-engine server (-dp 2, and -dp 2 -tp 2); a request goes to the replica with
// fewer requests, as the per-replica metrics (the `engine` label) show; a client that hangs up aborts
// its request on the replica that runs it and no other; a LoRA adapter loaded at run time serves on a
// replica it was not loaded through; too few GPUs for dp x tp exit 1 before anything loads.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "../model/lora_fixture.h"
#include "../support/run_command.h"
#include "backend/devices.h"
#include "core/build_paths.h"
#include "raw_http.h"
#include "engine_greedy.h"
#include "server_harness.h"

namespace pagoda::server::test {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

// The value of the series of `name` whose labels include every one of `labels` (`key="value"`), or -1.
double series(const ServerProcess& s, const std::string& name, const std::vector<std::string>& labels) {
  std::istringstream in(s.get("/metrics").body);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name + "{", 0) != 0) continue;
    const std::string set = line.substr(0, line.rfind('}') + 1);
    bool all = true;
    for (const std::string& l : labels) all = all && set.find(l) != std::string::npos;
    if (all) return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return -1;
}

double running(const ServerProcess& s, int engine) {
  return series(s, "vllm:num_requests_running", {"engine=\"" + std::to_string(engine) + "\""});
}

double finished(const ServerProcess& s, int engine, const std::string& reason) {
  return series(s, "vllm:request_success_total",
                {"engine=\"" + std::to_string(engine) + "\"", "finished_reason=\"" + reason + "\""});
}

// Polls until `done` holds, up to `timeout`.
template <typename F>
bool eventually(F done, std::chrono::milliseconds timeout = 20s) {
  const auto until = Clock::now() + timeout;
  while (Clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return done();
}

const std::vector<std::string> kPrompts = {"The quick brown fox", "Once upon a time", "In the beginning",
                                           "Tell me about the sea"};

// Each prompt's greedy answer, the prompts sent at once (each on its own thread).
std::vector<json> complete_all(const ServerProcess& s) {
  std::vector<json> out(kPrompts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < kPrompts.size(); ++i)
    threads.emplace_back([&, i] {
      const json body = {{"prompt", kPrompts[i]}, {"max_tokens", 24}, {"temperature", 0}, {"ignore_eos", true},
                         {"logprobs", 1}};
      const HttpResult r = s.request("POST", "/v1/completions", body.dump());
      EXPECT_EQ(r.status, 200) << r.body;
      out[i] = r.json();
    });
  for (auto& t : threads) t.join();
  return out;
}

TEST(DataParallelServer, ReplicasAnswerAsOneEngine) {
  const DefaultModelDir dir;
  ASSERT_FALSE(dir.path.empty());
  std::map<std::string, std::vector<json>> answers;
  for (const std::vector<std::string>& layout :
       {std::vector<std::string>{}, std::vector<std::string>{"-dp", "2"},
        std::vector<std::string>{"--data-parallel-size", "2", "-tp", "2"}}) {
    std::vector<std::string> args = {"--device", "cpu"};
    args.insert(args.end(), layout.begin(), layout.end());
    std::string name;
    for (const std::string& a : layout) name += a + " ";
    ServerProcess s;
    ASSERT_TRUE(s.start(dir.path, args)) << s.log();
    answers[name] = complete_all(s);
    if (!layout.empty()) {
      // The memory plan, once per replica.
      EXPECT_NE(s.log().find("DP rank 0: "), std::string::npos) << s.log();
      EXPECT_NE(s.log().find("DP rank 1: "), std::string::npos) << s.log();
    }
    EXPECT_EQ(s.stop(), 0) << s.log();
  }
  const std::vector<json>& one = answers[""];
  for (const auto& [name, got] : answers) {
    ASSERT_EQ(got.size(), one.size());
    for (size_t i = 0; i < one.size(); ++i) {
      ASSERT_TRUE(one[i].contains("choices") && got[i].contains("choices")) << name << got[i].dump();
      EXPECT_EQ(got[i]["choices"][0]["text"], one[i]["choices"][0]["text"]) << name << "prompt " << i;
      const json& a = one[i]["choices"][0]["logprobs"]["token_logprobs"];
      const json& b = got[i]["choices"][0]["logprobs"]["token_logprobs"];
      ASSERT_EQ(a.size(), 24u);
      ASSERT_EQ(b.size(), a.size()) << name;
      for (size_t t = 0; t < a.size(); ++t)
        EXPECT_NEAR(b[t].get<double>(), a[t].get<double>(), 1e-4) << name << "prompt " << i << " token " << t;
    }
  }
}

// A long request that keeps a replica busy until its connection closes: `max_tokens` near the model's
// length, seconds of decoding on one core, long past what the test does meanwhile.
std::unique_ptr<RawConn> start_long_request(const ServerProcess& s, int max_tokens) {
  auto c = std::make_unique<RawConn>(s.port());
  const json body = {{"prompt", "tell me"}, {"max_tokens", max_tokens}, {"ignore_eos", true}, {"temperature", 0}};
  EXPECT_TRUE(c->send(post_request("/v1/completions", body.dump())));
  return c;
}

TEST(DataParallelServer, RequestsGoToTheLeastLoadedReplicaAndHangUpsAbortWhereTheyRun) {
  const DefaultModelDir dir;  // slower than the tiny test model: a long request lasts seconds
  ASSERT_FALSE(dir.path.empty());
  ServerProcess s;
  ASSERT_TRUE(s.start(dir.path, {"--device", "cpu", "-dp", "2"})) << s.log();
  ASSERT_EQ(running(s, 0), 0);
  ASSERT_EQ(running(s, 1), 0) << "no series of replica 1:\n" << s.get("/metrics").body;

  // Both idle: the lowest rank takes the first request.
  auto a = start_long_request(s, 2000);
  ASSERT_TRUE(eventually([&] { return running(s, 0) == 1; })) << s.log();
  EXPECT_EQ(running(s, 1), 0);
  // Replica 0 has one request, replica 1 none: the next ones go to replica 1, one after the other.
  const std::string short_request = R"({"prompt": "hello", "max_tokens": 4, "ignore_eos": true})";
  for (int i = 0; i < 2; ++i) EXPECT_EQ(s.request("POST", "/v1/completions", short_request).status, 200);
  EXPECT_EQ(finished(s, 1, "length"), 2);
  EXPECT_EQ(finished(s, 0, "length"), 0);

  // A second long request goes to replica 1; its client hangs up: replica 1 aborts it, replica 0's
  // request runs on.
  auto b = start_long_request(s, 2000);
  ASSERT_TRUE(eventually([&] { return running(s, 1) == 1; })) << s.log();
  b.reset();
  EXPECT_TRUE(eventually([&] { return running(s, 1) == 0; }));
  EXPECT_EQ(finished(s, 1, "abort"), 1);
  EXPECT_EQ(running(s, 0), 1) << "replica 0's request was touched by replica 1's abort";
  EXPECT_EQ(finished(s, 0, "abort"), 0);

  a.reset();
  EXPECT_TRUE(eventually([&] { return running(s, 0) == 0; }));
  EXPECT_EQ(finished(s, 0, "abort"), 1);
  for (int e = 0; e < 2; ++e)
    EXPECT_EQ(series(s, "vllm:kv_cache_usage_perc", {"engine=\"" + std::to_string(e) + "\""}), 0) << "engine " << e;
  EXPECT_EQ(s.request("POST", "/v1/completions", short_request).status, 200);
  // One stats-line series per replica is not asserted (it is time-driven); /health is one answer.
  EXPECT_EQ(s.get("/health").status, 200);
  EXPECT_EQ(s.stop(), 0) << s.log();
}

// The greedy ids of `prompt` from the server (logprobs tokens as token_id:N), for `model`.
std::vector<int32_t> served_ids(const ServerProcess& s, const std::string& model, const std::vector<int32_t>& prompt) {
  const json body = {{"model", model}, {"prompt", prompt}, {"max_tokens", 8}, {"temperature", 0},
                     {"ignore_eos", true}, {"logprobs", 1}};
  const HttpResult r = s.request("POST", "/v1/completions", body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  std::vector<int32_t> ids;
  const json j = r.json();
  if (!j.contains("choices")) return ids;
  for (const json& t : j["choices"][0]["logprobs"]["tokens"]) {
    const std::string text = t.get<std::string>();
    ids.push_back(std::atoi(text.c_str() + text.find(':') + 1));
  }
  return ids;
}

// Loaded through replica 0 (the shared catalog), the adapter serves on replica 1 with its weights'
// tokens; unloaded, it is gone from both.
TEST(DataParallelServer, ARuntimeLoraAdapterServesOnEveryReplica) {
  const TestModelDir model_dir;
  ASSERT_FALSE(model_dir.path.empty());
  io_test::TempDir tmp;
  const std::string fixture = "qwen3-tiny-tied";
  const lora_test::AdapterSpec spec{.rank = 4, .alpha = 8, .seed = 41};
  const std::string adapter = tmp.file("adapter");
  const auto pairs = lora_test::write_adapter(fixture, spec, adapter);
  const std::string merged = tmp.file("merged");
  lora_test::write_merged(fixture, pairs, spec, merged);

  ServerProcess s;
  setenv("VLLM_ALLOW_RUNTIME_LORA_UPDATING", "True", 1);
  const bool started = s.start(model_dir.path, {"--served-model-name", "tiny", "--max-model-len", "4096",
                                                "--enable-lora", "--max-lora-rank", "8", "-dp", "2",
                                                "--return-tokens-as-token-ids"});
  unsetenv("VLLM_ALLOW_RUNTIME_LORA_UPDATING");
  ASSERT_TRUE(started) << s.log();
  const HttpResult load = s.request("POST", "/v1/load_lora_adapter",
                                    json{{"lora_name", "a"}, {"lora_path", adapter}}.dump());
  ASSERT_EQ(load.status, 200) << load.body << s.log();

  const std::vector<int32_t> prompt = {17, 300, 45, 260, 99, 12, 301, 77};
  auto busy = start_long_request(s, 4000);  // replica 0 busy: the adapter's requests go to replica 1
  ASSERT_TRUE(eventually([&] { return running(s, 0) == 1; })) << s.log();
  const std::vector<int32_t> expected = engine_greedy(merged, prompt);
  ASSERT_EQ(expected.size(), 8u);
  EXPECT_EQ(served_ids(s, "a", prompt), expected);
  EXPECT_EQ(finished(s, 1, "length"), 1);
  EXPECT_EQ(finished(s, 0, "length"), 0);
  busy.reset();
  ASSERT_TRUE(eventually([&] { return running(s, 0) == 0; }));
  EXPECT_EQ(served_ids(s, "a", prompt), expected);  // now on replica 0
  EXPECT_EQ(finished(s, 0, "length"), 1);

  EXPECT_EQ(s.request("POST", "/v1/unload_lora_adapter", json{{"lora_name", "a"}}.dump()).status, 200);
  const json body = {{"model", "a"}, {"prompt", prompt}, {"max_tokens", 2}};
  EXPECT_EQ(s.request("POST", "/v1/completions", body.dump()).status, 404);
  EXPECT_EQ(s.stop(), 0) << s.log();
}

pagoda::testing::CommandResult serve(const std::string& dir, const std::string& args) {
  return pagoda::testing::run_command("timeout 60 " + std::string(PAGODA_BINARY) + " serve " + dir +
                                      " --port 0 " + args + " 2>&1");
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(DataParallelServer, TooFewDevicesExitOneBeforeLoading) {
  const TestModelDir dir;
  ASSERT_FALSE(dir.path.empty());
  // More GPUs than any machine has (dp x tp = 80): refused whatever this one has.
  auto r = serve(dir.path, "--device cuda -dp 40 -tp 2");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "--data-parallel-size 40 x --tensor-parallel-size 2 on --device cuda needs 80 CUDA "
                              "devices")) << r.out;
  EXPECT_FALSE(contains(r.out, "engine: device")) << "refused only after loading:\n" << r.out;
  if (cuda_device_count() < 3) {
    r = serve(dir.path, "--device cuda -dp 3");
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_TRUE(contains(r.out, "needs 3 CUDA devices")) << r.out;
    EXPECT_TRUE(contains(r.out, std::to_string(cuda_device_count()) + " are visible")) << r.out;
    EXPECT_FALSE(contains(r.out, "engine: device")) << r.out;
  }
  r = serve(dir.path, "--device cpu -dp 0");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "--data-parallel-size must be in [1, 64], got 0")) << r.out;
  r = serve(dir.path, "--device cpu -dp 2 --data-parallel-size-local 1");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "--data-parallel-size-local 1 with --data-parallel-size 2")) << r.out;
}

}  // namespace
}  // namespace pagoda::server::test
