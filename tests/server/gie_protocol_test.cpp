// The Gateway API Inference Extension's model-server protocol (GIE docs/proposals/003-model-server-
// protocol), as its endpoint picker reads a vLLM server: the OpenAI completions and chat routes,
// and on /metrics — which a scraper reads without the API key — the queue (vllm:num_requests_waiting),
// the running requests (vllm:num_requests_running), the KV-cache utilisation
// (vllm:kv_cache_usage_perc) and vllm:cache_config_info with its block_size and num_gpu_blocks
// labels. (vllm:lora_requests_info comes with LoRA, issue 33.) And the drain a rolling update
// relies on: after SIGTERM /health answers 503 so the pod leaves the pool, a new request is
// refused, and every request in flight still completes in full.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <chrono>
#include <regex>
#include <thread>
#include <vector>

#include "server_harness.h"

namespace pagoda::server::test {
namespace {

using nlohmann::json;

TEST(GieProtocol, MetricsAndRoutesTheEndpointPickerReads) {
  const DefaultModelDir model;
  ASSERT_FALSE(model.path.empty());
  ServerProcess s;
  ASSERT_TRUE(s.start(model.path, {"--api-key", "secret"})) << s.log();
  const std::vector<std::string> auth = {"Authorization: Bearer secret"};
  EXPECT_EQ(s.request("POST", "/v1/completions", R"({"prompt": "hi", "max_tokens": 2})", auth).status, 200);
  EXPECT_EQ(s.request("POST", "/v1/chat/completions",
                      R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})", auth).status,
            200);
  EXPECT_EQ(s.request("POST", "/v1/completions", R"({"prompt": "hi", "max_tokens": 2})").status, 401)
      << "the API routes keep their key";
  const HttpResult m = s.get("/metrics");  // no key: scrapers and the endpoint picker carry none
  ASSERT_EQ(m.status, 200) << m.body;
  for (const char* gauge : {"vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc"}) {
    EXPECT_NE(m.body.find(std::string("# TYPE ") + gauge + " gauge\n"), std::string::npos) << gauge;
    EXPECT_NE(m.body.find(std::string("\n") + gauge + "{"), std::string::npos) << gauge;
  }
  std::smatch info;
  const std::regex cache_info(R"(\nvllm:cache_config_info\{([^}]*)\} 1\.0\n)");
  ASSERT_TRUE(std::regex_search(m.body, info, cache_info)) << m.body.substr(0, 3000);
  const std::string labels = info[1];
  EXPECT_TRUE(std::regex_search(labels, std::regex(R"(block_size="16")"))) << labels;
  EXPECT_TRUE(std::regex_search(labels, std::regex(R"(num_gpu_blocks="[1-9][0-9]*")"))) << labels;
  EXPECT_EQ(s.stop(), 0) << s.log();
}

TEST(GieProtocol, DrainTurnsHealthTo503AndLosesNoRequestInFlight) {
  const DefaultModelDir model;
  ASSERT_FALSE(model.path.empty());
  ServerProcess s;
  ASSERT_TRUE(s.start(model.path, {"--shutdown-timeout", "60"})) << s.log();
  constexpr int kRequests = 6, kTokens = 400;
  std::atomic<int> complete{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kRequests; ++i)
    clients.emplace_back([&, i] {
      const json body = {{"prompt", "request " + std::to_string(i)}, {"max_tokens", kTokens}, {"ignore_eos", true}};
      const HttpResult r = s.request("POST", "/v1/completions", body.dump());
      if (r.status == 200 && r.json()["usage"]["completion_tokens"] == kTokens) ++complete;
      else ADD_FAILURE() << "request " << i << ": " << r.status << " " << r.body;
    });
  // Every request in the engine (running or queued) before the signal: one still on its way is a
  // new arrival, which the drain rightly refuses (a loaded machine showed it: CI, session 15).
  auto in_engine = [&] { return s.metric("vllm:num_requests_running") + s.metric("vllm:num_requests_waiting"); };
  const auto t0 = std::chrono::steady_clock::now();
  while (in_engine() < kRequests && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30))
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_GE(in_engine(), kRequests) << "the requests never all reached the engine";  // (the clients are joined below)
  kill(s.pid(), SIGTERM);
  bool saw_503 = false;
  int refused = -1;
  for (int i = 0; i < 200 && !saw_503; ++i) {
    saw_503 = s.get("/health").status == 503;
    if (!saw_503) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (saw_503) refused = s.request("POST", "/v1/completions", R"({"prompt": "late", "max_tokens": 2})").status;
  for (std::thread& t : clients) t.join();
  EXPECT_TRUE(saw_503) << "/health never answered 503 during the drain";
  EXPECT_EQ(refused, 503) << "a request arriving during the drain";
  EXPECT_EQ(complete.load(), kRequests) << "requests in flight were lost";
  EXPECT_EQ(s.wait_exit(std::chrono::milliseconds(20000)), 0) << "the drain ends with exit 0\n" << s.log();
}

}  // namespace
}  // namespace pagoda::server::test

namespace pagoda::server::test {
namespace {

// Readiness while loading: the port is open from the start of the load and answers 503 (a large
// tokenizer makes the load last about a second here); then the same port serves, with no refused
// connection in between.
TEST(GieProtocol, HealthIs503WhileTheModelLoadsThenServesOnTheSamePort) {
  const DefaultModelDir model;
  ASSERT_FALSE(model.path.empty());
  const std::string tokenizer = source_path("tests/data/qwen3-tokenizer");
  ASSERT_TRUE(std::filesystem::exists(tokenizer + "/tokenizer.json")) << "tools/fetch_test_data.sh writes it";
  // A free port, known before the server prints it.
  int port = 0;
  {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    close(fd);
  }
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/health";
  std::atomic<bool> done{false};
  std::vector<int> seen;  // HTTP codes in order (0: no connection)
  std::thread prober([&] {
    while (!done) {
      const pagoda::testing::CommandResult r =
          pagoda::testing::run_command("curl -s -o /dev/null -m 2 -w '%{http_code}' " + url);
      const int code = std::atoi(r.out.c_str());
      if (seen.empty() || seen.back() != code) seen.push_back(code);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  ServerProcess s;
  const bool started = s.start(model.path, {"--port", std::to_string(port), "--host", "127.0.0.1", "--tokenizer",
                                            tokenizer});
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  done = true;
  prober.join();
  ASSERT_TRUE(started) << s.log();
  std::string order;
  for (int c : seen) order += std::to_string(c) + " ";
  // Before the process listens: 0; while it loads: 503; then 200 — and never 0 again after a 503.
  const auto first_503 = std::find(seen.begin(), seen.end(), 503);
  ASSERT_NE(first_503, seen.end()) << "never 503 while loading: " << order;
  EXPECT_EQ(seen.back(), 200) << order;
  EXPECT_EQ(std::find(first_503, seen.end(), 0), seen.end()) << "a refused connection after loading began: " << order;
  EXPECT_EQ(s.stop(), 0) << s.log();
}

}  // namespace
}  // namespace pagoda::server::test
