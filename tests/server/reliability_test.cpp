// The front end under hostile traffic (issue: "A front end that holds under hostile traffic"):
// each attack that once broke `pagoda serve`, reproduced against a real server on 127.0.0.1 —
// bounded in count and time — and answered as specified, with the server still serving a normal
// request afterwards and its resident memory back within 10% of where it started.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "raw_http.h"
#include "server_harness.h"
#include "core/build_paths.h"

namespace pagoda::server::test {
namespace {

using namespace std::chrono_literals;


// The server of every case: the tiny test model, a short request deadline so that slow clients are
// cut off within the test's time.
class Reliability : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path.empty());
    ASSERT_TRUE(server_.start(dir_.path, {"--served-model-name", "tiny", "--max-model-len", "2048",
                                          "--request-timeout", "3"}))
        << server_.log();
    ASSERT_TRUE(normal_request_works());  // warms up the allocator before the baseline
    rss_start_ = rss_kib(server_.pid());
    ASSERT_GT(rss_start_, 0);
    kv_kib_ = kv_pool_kib(server_.log());
    ASSERT_GT(kv_kib_, 0) << "no 'Available KV cache memory' line in the server log:\n" << server_.log();
  }

  // The KV pool's size from the memory plan printout. On the CPU the pool's pages are committed as
  // blocks are first written, so resident memory may grow by up to this much without a leak.
  static long kv_pool_kib(const std::string& log) {
    const std::string key = "Available KV cache memory: ";
    const size_t at = log.find(key);
    if (at == std::string::npos) return 0;
    size_t used = 0;
    const double v = std::stod(log.substr(at + key.size()), &used);
    const std::string unit = log.substr(at + key.size() + used + 1, 3);
    const double kib = unit == "GiB" ? v * 1024 * 1024 : unit == "MiB" ? v * 1024 : unit == "KiB" ? v : v / 1024;
    return static_cast<long>(kib) + 1;
  }

  long rss_limit() const { return rss_start_ * 11 / 10 + kv_kib_; }

  // A normal chat request, answered with 200 and text; and /health.
  bool normal_request_works() {
    const HttpResult r = server_.request(
        "POST", "/v1/chat/completions",
        R"({"messages": [{"role": "user", "content": "hello"}], "max_tokens": 8, "temperature": 0})");
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(server_.get("/health").status, 200);
    return r.status == 200 && r.json()["choices"][0]["message"]["content"].is_string();
  }

  // Still serving, and memory back within 10% of the start plus the KV pool (allowing the allocator a
  // moment).
  void expect_recovered() {
    EXPECT_TRUE(normal_request_works()) << server_.log();
    long rss = 0;
    for (int i = 0; i < 20; ++i) {
      rss = rss_kib(server_.pid());
      if (rss <= rss_limit()) break;
      std::this_thread::sleep_for(100ms);
      normal_request_works();  // a large request's memory is trimmed after the next one
    }
    if (kRssMeaningful) {
      EXPECT_LE(rss, rss_limit()) << "RSS " << rss << " KiB, started at " << rss_start_ << " KiB, KV pool "
                                  << kv_kib_ << " KiB";
    }
  }

  std::string raw_exchange(const std::string& request, std::chrono::milliseconds timeout = 10s) {
    RawConn c(server_.port());
    EXPECT_TRUE(c.ok());
    c.send(request);
    return c.read_all(timeout);
  }

  TestModelDir dir_;
  ServerProcess server_;
  long rss_start_ = 0, kv_kib_ = 0;
};

std::string nested_array(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

// 1. JSON nested 20,000 levels deep, wherever a client can put it: a 400 naming the limit.
TEST_F(Reliability, DeepJsonIsRejectedAtParseTime) {
  const std::string deep = nested_array(20000);
  const std::string args = nlohmann::json(nested_array(20000)).dump();  // a JSON string holding it
  const std::vector<std::pair<std::string, std::string>> bodies = {
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi", "extra": )" + deep + "}]}"},
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function",
        "function": {"name": "f", "parameters": )" + deep + "}}]}"},
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"x": )" +
                                   deep + "}}"},
      {"/tokenize", R"({"messages": [{"role": "user", "content": )" + deep + "}]}"},
  };
  for (const auto& [path, body] : bodies) {
    const HttpResult r = server_.request("POST", path, body);
    EXPECT_EQ(r.status, 400) << path << ": " << r.body.substr(0, 300);
    EXPECT_NE(r.body.find("64 levels"), std::string::npos) << r.body.substr(0, 300);
  }
  // Arguments of an earlier tool call arrive as a JSON string: parsed with the same bound, so a
  // deep one stays a string instead of reaching the template.
  const std::string call_body =
      R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": null, "tool_calls":
         [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": )" + args +
      R"(}}]}, {"role": "tool", "tool_call_id": "c1", "content": "ok"}], "max_tokens": 4})";
  const HttpResult r = server_.request("POST", "/v1/chat/completions", call_body);
  EXPECT_TRUE(r.status == 200 || r.status == 400) << r.body.substr(0, 300);
  expect_recovered();
}

// 2. The body limit holds whatever the framing: chunked past 64 MiB, and gzip that inflates past it.
TEST_F(Reliability, BodyLimitHoldsForChunkedAndCompressedBodies) {
  {
    RawConn c(server_.port());
    ASSERT_TRUE(c.ok());
    c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           "Transfer-Encoding: chunked\r\n\r\n");
    const std::string chunk(1 << 20, 'a');
    char size_line[32];
    std::snprintf(size_line, sizeof size_line, "%zx\r\n", chunk.size());
    int sent_mib = 0;
    for (; sent_mib < 100; ++sent_mib)
      if (!c.send(size_line + chunk + "\r\n")) break;
    const std::string resp = c.read_all(10s);
    EXPECT_EQ(status_of(resp), 413) << resp.substr(0, 300);
    EXPECT_LT(sent_mib, 100) << "the server read all of a 100 MiB body";
  }
  {
    const std::string gz = gzip_of_repeated(' ', size_t{400} << 20);  // 400 MiB of spaces: valid JSON padding
    ASSERT_LT(gz.size(), size_t{1} << 20);
    const std::string resp = raw_exchange(post_request("/v1/completions", gz, "Content-Encoding: gzip\r\n"));
    EXPECT_EQ(status_of(resp), 413) << resp.substr(0, 300);
    EXPECT_NE(resp.find("inflates"), std::string::npos);
  }
  {  // within the limit, a gzip body is decoded and served
    const std::string body = R"({"prompt": "hello", "max_tokens": 2})";
    z_stream zs{};
    deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    std::string gz(deflateBound(&zs, body.size()), '\0');
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(body.data()));
    zs.avail_in = static_cast<uInt>(body.size());
    zs.next_out = reinterpret_cast<Bytef*>(gz.data());
    zs.avail_out = static_cast<uInt>(gz.size());
    deflate(&zs, Z_FINISH);
    gz.resize(zs.total_out);
    deflateEnd(&zs);
    const std::string resp = raw_exchange(post_request("/v1/completions", gz, "Content-Encoding: gzip\r\nConnection: close\r\n"));
    EXPECT_EQ(status_of(resp), 200) << resp.substr(0, 300);
  }
  expect_recovered();
}

// 3. Slowloris: connections that send a byte now and then get 408 at the request deadline, and
// /health and completions are answered meanwhile as if they were not there.
TEST_F(Reliability, SlowClientsAreCutOffAndDelayNothing) {
  constexpr int kSlow = 300;
  std::vector<std::unique_ptr<RawConn>> slow;
  for (int i = 0; i < kSlow; ++i) {
    slow.push_back(std::make_unique<RawConn>(server_.port()));
    ASSERT_TRUE(slow.back()->ok());
    slow.back()->send("G");
  }
  const auto start = Clock::now();
  std::vector<double> health_ms;
  while (ms_since(start) < 2000) {
    for (auto& c : slow) c->send("E");  // a byte every 200 ms: never a whole header
    const auto t = Clock::now();
    EXPECT_EQ(server_.get("/health").status, 200);
    health_ms.push_back(ms_since(t));
    std::this_thread::sleep_for(200ms);
  }
  // The median, not the worst: on a shared 2-core machine one probe can wait for the scheduler, while
  // slow clients that held up the server would slow every probe.
  std::sort(health_ms.begin(), health_ms.end());
  const double median_health = health_ms[health_ms.size() / 2];
  const auto t = Clock::now();
  EXPECT_TRUE(normal_request_works());
  EXPECT_LT(ms_since(t), 5000);
  if (kTimingsMeaningful) {
    EXPECT_LT(median_health, 100) << "/health took " << median_health << " ms (median of " << health_ms.size()
                                  << ") beside " << kSlow << " slow clients";
  }
  int answered_408 = 0;
  for (auto& c : slow)
    if (status_of(c->read_all(5s, 4096)) == 408) ++answered_408;
  EXPECT_EQ(answered_408, kSlow);
  EXPECT_LT(ms_since(start), 8000) << "slow clients were not cut off at --request-timeout 3";
  slow.clear();
  expect_recovered();
}

// 4. Headers are limited in count and in bytes: 431, and the connection is dropped.
TEST_F(Reliability, HeaderCountAndSizeAreLimited) {
  std::string many = "GET /health HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 10000; ++i) many += "X-H" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(status_of(raw_exchange(many + "\r\n")), 431);

  std::string count_only = "GET /health HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 300; ++i) count_only += "X-" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(status_of(raw_exchange(count_only + "\r\n")), 431);  // 300 > 256 headers, 4 KiB

  {  // one 70 MiB header: the server stops reading at its limit
    RawConn c(server_.port());
    ASSERT_TRUE(c.ok());
    c.send("GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ");
    const std::string mib(1 << 20, 'b');
    int sent = 0;
    for (; sent < 70; ++sent)
      if (!c.send(mib)) break;
    EXPECT_EQ(status_of(c.read_all(5s)), 431);
    EXPECT_LT(sent, 70);
  }
  const std::string long_url = "GET /health?" + std::string(10000, 'q') + " HTTP/1.1\r\nHost: x\r\n\r\n";
  const int url_status = status_of(raw_exchange(long_url));
  EXPECT_TRUE(url_status == 414 || url_status == 431) << url_status;
  expect_recovered();
}

// 5. A request's memory is bounded before anything is allocated for it.
TEST_F(Reliability, PerRequestMemoryIsBounded) {
  nlohmann::json stop = nlohmann::json::array();
  for (int i = 0; i < 1000; ++i) stop.push_back(std::string(16384, static_cast<char>('a' + i % 26)));
  const nlohmann::json big = {{"prompt", "hello"}, {"n", 256}, {"max_tokens", 4}, {"stop", stop}};
  HttpResult r = server_.request("POST", "/v1/completions", big.dump());
  EXPECT_EQ(r.status, 400) << r.body.substr(0, 300);
  EXPECT_EQ(r.json()["error"]["param"], "stop") << r.body.substr(0, 300);

  // 91 bytes asking for a 56 MB response.
  r = server_.request("POST", "/v1/completions",
                      R"({"prompt":"hi","n":256,"logprobs":20,"max_tokens":400,"ignore_eos":true})");
  EXPECT_EQ(r.status, 400) << r.body.substr(0, 300);
  EXPECT_NE(r.body.find("--max-request-output-budget"), std::string::npos) << r.body.substr(0, 300);

  // Within the limits the same shape works.
  r = server_.request("POST", "/v1/completions",
                      R"({"prompt":"hi","n":4,"logprobs":2,"max_tokens":4,"stop":["zz","yy"]})");
  EXPECT_EQ(r.status, 200) << r.body.substr(0, 300);
  EXPECT_EQ(r.json()["choices"].size(), 4u);
  expect_recovered();
}

// 6. A client that hangs up on a non-streaming request aborts it within a step.
TEST_F(Reliability, DisconnectedNonStreamingRequestsAreAborted) {
  constexpr int kClients = 40;
  std::vector<std::unique_ptr<RawConn>> conns;
  const std::string body = R"({"prompt": "tell me", "max_tokens": 1500, "ignore_eos": true})";
  for (int i = 0; i < kClients; ++i) {
    conns.push_back(std::make_unique<RawConn>(server_.port()));
    ASSERT_TRUE(conns.back()->send(post_request("/v1/completions", body)));
  }
  std::this_thread::sleep_for(500ms);
  EXPECT_GT(server_.metric("vllm:num_requests_running") + server_.metric("vllm:num_requests_waiting"), 0);
  conns.clear();  // every client hangs up
  const auto t = Clock::now();
  while (ms_since(t) < 3000 && (server_.metric("vllm:num_requests_running") > 0 ||
                                server_.metric("vllm:num_requests_waiting") > 0))
    std::this_thread::sleep_for(20ms);
  EXPECT_EQ(server_.metric("vllm:num_requests_running"), 0);
  EXPECT_EQ(server_.metric("vllm:kv_cache_usage_perc"), 0);
  EXPECT_LT(ms_since(t), 1000) << "aborting the abandoned requests took too long";
  const auto q = Clock::now();
  EXPECT_TRUE(normal_request_works());
  EXPECT_LT(ms_since(q), 2000);
  expect_recovered();
}

// 7. /health is answered on the I/O threads while generation and request parsing are busy.
TEST_F(Reliability, HealthIsNotQueuedBehindGeneration) {
  std::atomic<bool> done{false};
  std::vector<std::thread> load;
  for (int i = 0; i < 8; ++i)
    load.emplace_back([&] {
      while (!done)
        server_.request("POST", "/v1/completions", R"({"prompt": "load", "max_tokens": 64, "n": 4, "ignore_eos": true})");
    });
  std::this_thread::sleep_for(300ms);
  std::vector<double> times;
  for (int i = 0; i < 40; ++i) {
    RawConn c(server_.port());
    const auto t = Clock::now();
    c.send("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    EXPECT_EQ(status_of(c.read_all(5s)), 200);
    times.push_back(ms_since(t));
    std::this_thread::sleep_for(20ms);
  }
  done = true;
  for (auto& t : load) t.join();
  std::sort(times.begin(), times.end());
  // 40 samples: the p99 is the slowest. A /health that waited behind generations would take
  // seconds; 250 ms leaves room for the scheduling stalls of a 2-core machine running other tests
  // beside this one (50 ms failed there once at 69 ms).
  if (kTimingsMeaningful) {
    EXPECT_LT(times[times.size() * 99 / 100], 250) << "p99 of /health under load";
  }
  expect_recovered();
}

// 8. A second server on a port in use fails with a clear message and exit status 1.
TEST_F(Reliability, SecondServerOnTheSamePortFails) {
  const CommandResult r = run_command(std::string(PAGODA_BINARY) + " serve " + dir_.path +
                                      " --host 127.0.0.1 --port " + std::to_string(server_.port()) + " 2>&1");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("in use"), std::string::npos) << r.out;
  // and every connection still reaches the first server
  for (int i = 0; i < 20; ++i) EXPECT_EQ(server_.get("/health").status, 200);
  expect_recovered();
}

// SIGTERM: the deadline (--shutdown-timeout) covers connections too — a slow client and an idle
// keep-alive one do not hold the server past it.
TEST(ReliabilityShutdown, DeadlineCoversSlowAndIdleConnections) {
  const TestModelDir dir;
  ASSERT_FALSE(dir.path.empty());
  ServerProcess s;
  ASSERT_TRUE(s.start(dir.path, {"--shutdown-timeout", "1", "--request-timeout", "600", "--keep-alive-timeout", "600"}))
      << s.log();
  RawConn slow(s.port()), idle(s.port());
  ASSERT_TRUE(slow.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\n"));  // never finishes its header
  ASSERT_TRUE(idle.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));     // then stays open
  EXPECT_EQ(status_of(idle.read_response(std::chrono::seconds(5))), 200);
  const auto t = Clock::now();
  EXPECT_EQ(s.stop(std::chrono::seconds(20)), 0) << s.log();
  EXPECT_LT(ms_since(t), 4000) << "shutdown waited on the connections past --shutdown-timeout 1";
}

// The API key is compared in constant time and guards every route but /health; errors carry no
// file-system paths.
TEST_F(Reliability, ErrorsCarryNoPaths) {
  const HttpResult r = server_.request("POST", "/v1/completions", R"({"prompt": [999999]})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body.find(dir_.path), std::string::npos) << r.body;
  const std::string resp = raw_exchange("BREW /coffee HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(status_of(resp), 404) << resp;
  EXPECT_EQ(status_of(raw_exchange("this is not http\r\n\r\n")), 400);
}

// `{"k0":0,"k1":0,...}`: `keys` distinct keys in one object.
std::string object_of_keys(size_t keys) {
  std::string s = "{";
  for (size_t i = 0; i < keys; ++i) s += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":0";
  return s + "}";
}

// 9. Parsing is linear in the number of keys (nlohmann's ordered_json scanned all earlier keys on
// each insert: 200,000 keys took 77 s), and a body with more keys than any request needs is refused.
TEST_F(Reliability, JsonKeysParseInLinearTimeAndAreBounded) {
  // 100,000 keys (1.2 MiB): 27.8 s to parse when object inserts were linear scans, a fraction of a
  // second now. 200,000 proved no more and, parsed twice at once on a loaded 2-core CI machine, held
  // both HTTP workers long enough to push the light requests' p99 past 1 s.
  const std::string many = R"({"prompt": "hi", "x": )" + object_of_keys(100000) + "}";
  std::vector<double> latencies;
  std::atomic<int> heavy_done{0};
  std::vector<std::thread> heavy;
  for (int i = 0; i < 2; ++i)  // both HTTP workers
    heavy.emplace_back([&] {
      const HttpResult r = server_.request("POST", "/tokenize", many);
      EXPECT_TRUE(r.status == 200 || r.status == 400) << r.body.substr(0, 300);
      ++heavy_done;
    });
  const auto t = Clock::now();
  while (heavy_done < 2 && ms_since(t) < 30000) {
    const auto q = Clock::now();
    const HttpResult light = server_.request("POST", "/v1/completions", R"({"prompt": "hi", "max_tokens": 4})");
    EXPECT_EQ(light.status, 200) << light.body.substr(0, 300);
    latencies.push_back(ms_since(q));
  }
  for (auto& h : heavy) h.join();
  const double heavy_ms = ms_since(t);
  std::sort(latencies.begin(), latencies.end());
  if (kTimingsMeaningful) {
    EXPECT_LT(heavy_ms, 5000) << "two bodies of 100,000 keys";
    EXPECT_LT(latencies[latencies.size() * 99 / 100], 1000) << "p99 of a 4-token completion meanwhile";
  }
  // 1,100,000 keys in small objects (9 MiB): past the total bound.
  std::string objects = R"({"prompt": "hi", "x": [)";
  for (int i = 0; i < 1100000; ++i) objects += i ? ",{\"a\":0}" : "{\"a\":0}";
  objects += "]}";
  HttpResult r = server_.request("POST", "/v1/completions", objects);
  EXPECT_EQ(r.status, 400) << r.body.substr(0, 300);
  EXPECT_NE(r.body.find("object keys in all"), std::string::npos) << r.body.substr(0, 300);
  // A repeated key keeps its first place and takes the last value, as Python's json.loads.
  r = server_.request("POST", "/v1/completions", R"({"prompt": "hi", "max_tokens": 1000000, "ignore_eos": true, "max_tokens": 2})");
  EXPECT_EQ(r.status, 200) << r.body.substr(0, 300);
  EXPECT_EQ(r.json()["usage"]["completion_tokens"], 2);
  expect_recovered();
}

// 10. JSON routes take JSON only: a web page's "simple" text/plain or form post (no CORS preflight)
// is refused before the body is read as JSON.
TEST_F(Reliability, NonJsonContentTypeIsRefused) {
  const std::string body = R"({"prompt": "hi", "max_tokens": 2})";
  for (const std::string type : {"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""}) {
    const std::string head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" +
                             (type.empty() ? std::string() : "Content-Type: " + type + "\r\n") +
                             "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
    const std::string resp = raw_exchange(head + body);
    EXPECT_EQ(status_of(resp), 415) << type << ": " << resp.substr(0, 300);
  }
  const std::string ok = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: "
                         "Application/JSON; charset=utf-8\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  EXPECT_EQ(status_of(raw_exchange(ok + body)), 200);
  // No absolute path in any response: /v1/models names the model's folder, not where it lives.
  const HttpResult models = server_.get("/v1/models");
  ASSERT_EQ(models.status, 200);
  const std::string root = models.json()["data"][0]["root"];
  EXPECT_EQ(root.find('/'), std::string::npos) << root;
  EXPECT_EQ(models.body.find(dir_.path), std::string::npos) << models.body;
}

// 11. HTTP/1.0 framing (no chunked encoding: the stream ends with the connection), and a gzip body
// of several members (what `cat a.gz b.gz` makes) inflated whole.
TEST_F(Reliability, Http10StreamsAndMultiMemberGzip) {
  const std::string body = R"({"prompt": "hi", "max_tokens": 4, "stream": true})";
  const std::string resp = raw_exchange("POST /v1/completions HTTP/1.0\r\nContent-Type: application/json\r\n"
                                        "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  EXPECT_EQ(status_of(resp), 200) << resp.substr(0, 300);
  EXPECT_EQ(resp.find("chunked"), std::string::npos) << resp.substr(0, 300);
  EXPECT_NE(body_of(resp).rfind("data: [DONE]\n\n"), std::string::npos) << resp;

  const std::string json = R"({"prompt": "hi", "max_tokens": 3, "temperature": 0})";
  const std::string gz = gzip_of(json.substr(0, 20)) + gzip_of(json.substr(20));
  const std::string r = raw_exchange(post_request("/v1/completions", gz, "Content-Encoding: gzip\r\nConnection: close\r\n"));
  EXPECT_EQ(status_of(r), 200) << r.substr(0, 300);
  // Bytes after the end of the stream that are no gzip member: refused, not ignored.
  const std::string junk = raw_exchange(post_request("/v1/completions", gzip_of(json) + "junk",
                                                     "Content-Encoding: gzip\r\nConnection: close\r\n"));
  EXPECT_EQ(status_of(junk), 400) << junk.substr(0, 300);
}

// 12. A client that half-closes (SHUT_WR) after its request still gets its answer; one that sends
// another byte (a pipelined request, or garbage) and then hangs up is noticed and aborted.
TEST_F(Reliability, HalfCloseIsAnsweredAndHangUpAfterPipelinedBytesAborts) {
  for (const bool stream : {false, true}) {
    RawConn c(server_.port());
    const std::string body = std::string(R"({"prompt": "hi", "max_tokens": 8, "stream": )") + (stream ? "true}" : "false}");
    ASSERT_TRUE(c.send(post_request("/v1/completions", body)));
    c.shutdown_write();
    std::string resp = c.read_all(10s);
    // The server may have probed with interim 100 responses (RFC 9110 §15.2) before the answer.
    while (resp.rfind("HTTP/1.1 100 ", 0) == 0) resp = body_of(resp);
    EXPECT_EQ(status_of(resp), 200) << resp.substr(0, 300);
    EXPECT_NE(resp.find(stream ? "data: [DONE]" : "\"choices\""), std::string::npos) << resp;
  }
  std::vector<std::unique_ptr<RawConn>> conns;
  const std::string body = R"({"prompt": "tell me", "max_tokens": 1500, "ignore_eos": true})";
  for (int i = 0; i < 4; ++i) {
    conns.push_back(std::make_unique<RawConn>(server_.port()));
    ASSERT_TRUE(conns.back()->send(post_request("/v1/completions", body) + (i % 2 ? "G" : "GET /health HTTP/1.1\r\n")));
  }
  std::this_thread::sleep_for(500ms);
  EXPECT_GT(server_.metric("vllm:num_requests_running"), 0);
  conns.clear();
  const auto t = Clock::now();
  while (ms_since(t) < 5000 && server_.metric("vllm:num_requests_running") > 0) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(server_.metric("vllm:num_requests_running"), 0);
  EXPECT_LT(ms_since(t), 1000) << "the hang-ups after pipelined bytes went unnoticed";
  expect_recovered();
}

// 13. Flags that would disable a guard or overflow are refused or clamped; a second SIGTERM during
// the grace period exits at once.
TEST(ReliabilityFlags, EmptyApiKeyTimeoutsAndSecondSignal) {
  const TestModelDir dir;
  ASSERT_FALSE(dir.path.empty());
  const std::string serve = std::string(PAGODA_BINARY) + " serve " + dir.path + " --host 127.0.0.1 --port 0 ";
  CommandResult r = run_command(serve + "--api-key '' 2>&1");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("--api-key is empty"), std::string::npos) << r.out;
  r = run_command(serve + "--keep-alive-timeout nan 2>&1");
  EXPECT_EQ(r.code, 1) << r.out;

  // 1e10 s overflowed into "expired": each connection closed after one response.
  ServerProcess s;
  ASSERT_TRUE(s.start(dir.path, {"--keep-alive-timeout", "1e10", "--shutdown-timeout", "1e300"})) << s.log();
  RawConn c(s.port());
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(c.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
    EXPECT_EQ(status_of(c.read_response(5s)), 200) << "request " << i << " on one keep-alive connection";
  }
  // A long request in flight: the first SIGTERM waits for it (1e300 s, clamped, not "at once"); the
  // second ends the server.
  RawConn busy(s.port());
  ASSERT_TRUE(busy.send(post_request("/v1/completions", R"({"prompt": "x", "max_tokens": 1900, "n": 8, "ignore_eos": true})")));
  std::this_thread::sleep_for(300ms);
  kill(s.pid(), SIGTERM);
  std::this_thread::sleep_for(500ms);
  int status = 0;
  ASSERT_EQ(waitpid(s.pid(), &status, WNOHANG), 0) << "the first signal should wait for the request in flight";
  const auto t = Clock::now();
  const int code = s.stop(std::chrono::seconds(10));
  EXPECT_NE(code, -1) << "a second signal should end the server at once";
  EXPECT_LT(ms_since(t), 2000);
}

// 14. An embedding server has no generation routes, /v1/responses included.
TEST(ReliabilityPooling, ResponsesRouteRefusedOnPoolingRunner) {
  const TestModelDir dir;
  ASSERT_FALSE(dir.path.empty());
  ServerProcess s;
  ASSERT_TRUE(s.start(dir.path, {"--runner", "pooling"})) << s.log();
  const HttpResult r = s.request("POST", "/v1/responses", R"({"input": "hi", "max_output_tokens": 4})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("does not support Responses API"), std::string::npos) << r.body;
}

}  // namespace
}  // namespace pagoda::server::test
