// What an operator of a vLLM deployment relies on, on `pagoda serve`: --api-key guarding only /v1
// (probes and the Prometheus scrape stay open), VLLM_API_KEY, CORS as vLLM (Starlette) answers it,
// X-Request-Id in and out, an access log that can be turned off, timestamps on every log line.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "server_harness.h"
#include "core/build_paths.h"

namespace pagoda::server::test {
namespace {

struct Answer {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased; the last of a name
  std::string body;
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

// One request through curl with its response head: `-X METHOD`, extra -H lines, a JSON body.
Answer call(const ServerProcess& s, const std::string& method, const std::string& path,
            const std::vector<std::string>& headers = {}, const std::string& body = "") {
  std::string cmd = "curl -s -i -m 30 -X " + method;
  for (const auto& h : headers) cmd += " -H '" + h + "'";
  if (!body.empty()) cmd += " -H 'Content-Type: application/json' --data-binary '" + body + "'";
  cmd += " '" + s.url(path) + "'";
  const CommandResult r = run_command(cmd);
  Answer a;
  std::istringstream in(r.out);
  std::string line;
  // The last head (a 100 Continue may come first).
  while (std::getline(in, line)) {
    if (line.rfind("HTTP/", 0) != 0) continue;
    a.status = std::atoi(line.c_str() + line.find(' ') + 1);
    a.headers.clear();
    while (std::getline(in, line) && line != "\r" && !line.empty()) {
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(0, colon), value = line.substr(colon + 1);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      while (!value.empty() && (value.front() == ' ')) value.erase(0, 1);
      while (!value.empty() && (value.back() == '\r' || value.back() == ' ')) value.pop_back();
      a.headers[name] = value;
    }
    if (a.status >= 200) break;
  }
  std::stringstream rest;
  rest << in.rdbuf();
  a.body = rest.str();
  return a;
}

const std::string kKey = "ops-key";
const std::string kAuth = "Authorization: Bearer " + kKey;

// vLLM guards /v1 only: health checks, the scrape, /version and /tokenize need no key.
TEST(ServerOperations, ApiKeyGuardsOnlyV1AndTheScrapeStaysOpen) {
  TestModelDir dir;
  ServerProcess s;
  ASSERT_TRUE(s.start(dir.path, {"--api-key", kKey, "--served-model-name", "tiny", "--max-model-len", "256"}))
      << s.log();
  EXPECT_EQ(call(s, "GET", "/v1/models").status, 401);
  EXPECT_EQ(call(s, "POST", "/v1/completions", {}, R"({"prompt": "ab", "max_tokens": 1})").status, 401);
  EXPECT_EQ(call(s, "GET", "/v1/models", {"Authorization: Bearer wrong"}).status, 401);
  EXPECT_EQ(call(s, "GET", "/v1/models", {kAuth}).status, 200);
  const Answer done = call(s, "POST", "/v1/completions", {kAuth}, R"({"prompt": "ab", "max_tokens": 2})");
  ASSERT_EQ(done.status, 200) << done.body;
  // The Prometheus scrape without a key, and it counts the request just served.
  const Answer scrape = call(s, "GET", "/metrics");
  ASSERT_EQ(scrape.status, 200) << scrape.body;
  EXPECT_NE(scrape.header("content-type").find("text/plain"), std::string::npos);
  const std::regex series(R"(\n\w+:request_success_total\{[^}]*\} ([0-9.e+]+))");
  double served = 0;
  int n = 0;
  for (auto it = std::sregex_iterator(scrape.body.begin(), scrape.body.end(), series); it != std::sregex_iterator(); ++it, ++n)
    served += std::stod((*it)[1]);
  EXPECT_GT(n, 0) << scrape.body.substr(0, 3000);
  EXPECT_EQ(served, 1) << scrape.body.substr(0, 3000);
  EXPECT_EQ(call(s, "GET", "/health").status, 200);
  EXPECT_EQ(call(s, "GET", "/version").status, 200);
  EXPECT_EQ(call(s, "GET", "/load").status, 200);
  const Answer tok = call(s, "POST", "/tokenize", {}, R"({"prompt": "ab"})");
  EXPECT_EQ(tok.status, 200) << tok.body;
}

TEST(ServerOperations, TheKeyComesFromVllmApiKeyWhenNoFlagGivesIt) {
  TestModelDir dir;
  ServerProcess s;
  setenv("VLLM_API_KEY", "env-key", 1);
  const bool started = s.start(dir.path, {"--max-model-len", "256"});
  unsetenv("VLLM_API_KEY");
  ASSERT_TRUE(started) << s.log();
  EXPECT_EQ(call(s, "GET", "/v1/models").status, 401);
  EXPECT_EQ(call(s, "GET", "/v1/models", {"Authorization: Bearer env-key"}).status, 200);
  EXPECT_EQ(call(s, "GET", "/metrics").status, 200);
  // --api-key wins over the environment.
  ServerProcess s2;
  setenv("VLLM_API_KEY", "env-key", 1);
  const bool started2 = s2.start(dir.path, {"--max-model-len", "256", "--api-key", "flag-key"});
  unsetenv("VLLM_API_KEY");
  ASSERT_TRUE(started2) << s2.log();
  EXPECT_EQ(call(s2, "GET", "/v1/models", {"Authorization: Bearer env-key"}).status, 401);
  EXPECT_EQ(call(s2, "GET", "/v1/models", {"Authorization: Bearer flag-key"}).status, 200);
}

// Several keys (vLLM's --api-key takes a list; here the flag is repeated): any of them opens /v1.
TEST(ServerOperations, SeveralApiKeys) {
  TestModelDir dir;
  ServerProcess s;
  ASSERT_TRUE(s.start(dir.path, {"--api-key", "key-a", "--max-model-len", "256", "--api-key", "key-b"})) << s.log();
  EXPECT_EQ(call(s, "GET", "/v1/models", {"Authorization: Bearer key-a"}).status, 200);
  EXPECT_EQ(call(s, "GET", "/v1/models", {"Authorization: Bearer key-b"}).status, 200);
  EXPECT_EQ(call(s, "GET", "/v1/models", {"Authorization: Bearer key-c"}).status, 401);
  EXPECT_EQ(call(s, "GET", "/v1/models", {"Authorization: Bearer key-"}).status, 401);
  EXPECT_EQ(call(s, "GET", "/v1/models").status, 401);
}

// vLLM's defaults: any origin, method and header, no credentials; the preflight needs no key.
TEST(ServerOperations, CorsPreflightAndResponsesWithVllmsDefaults) {
  TestModelDir dir;
  ServerProcess s;
  ASSERT_TRUE(s.start(dir.path, {"--api-key", kKey, "--max-model-len", "256"})) << s.log();
  const Answer pre = call(s, "OPTIONS", "/v1/chat/completions",
                          {"Origin: https://app.example", "Access-Control-Request-Method: POST",
                           "Access-Control-Request-Headers: authorization, content-type"});
  EXPECT_EQ(pre.status, 200) << pre.body;
  EXPECT_EQ(pre.header("access-control-allow-origin"), "*");
  EXPECT_NE(pre.header("access-control-allow-methods").find("POST"), std::string::npos);
  EXPECT_EQ(pre.header("access-control-allow-headers"), "authorization, content-type");
  EXPECT_EQ(pre.header("access-control-max-age"), "600");
  EXPECT_EQ(pre.header("access-control-allow-credentials"), "");
  // The real request: its answer (an error too) lets the page read it.
  const Answer denied = call(s, "GET", "/v1/models", {"Origin: https://app.example"});
  EXPECT_EQ(denied.status, 401);
  EXPECT_EQ(denied.header("access-control-allow-origin"), "*");
  const Answer ok = call(s, "GET", "/v1/models", {"Origin: https://app.example", kAuth});
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.header("access-control-allow-origin"), "*");
  // No Origin: no CORS headers. OPTIONS without the preflight headers is no preflight.
  EXPECT_EQ(call(s, "GET", "/health").header("access-control-allow-origin"), "");
  EXPECT_EQ(call(s, "OPTIONS", "/v1/models").status, 405);
}

TEST(ServerOperations, CorsWithAnOriginListAndCredentials) {
  TestModelDir dir;
  ServerProcess s;
  ASSERT_TRUE(s.start(dir.path, {"--max-model-len", "256", "--allowed-origins", R"(["https://good.example"])",
                                 "--allowed-methods", R"(["GET", "POST"])", "--allowed-headers",
                                 R"(["Authorization"])", "--allow-credentials"}))
      << s.log();
  const Answer good = call(s, "OPTIONS", "/v1/completions",
                           {"Origin: https://good.example", "Access-Control-Request-Method: POST",
                            "Access-Control-Request-Headers: Authorization"});
  EXPECT_EQ(good.status, 200) << good.body;
  EXPECT_EQ(good.header("access-control-allow-origin"), "https://good.example");
  EXPECT_EQ(good.header("access-control-allow-credentials"), "true");
  EXPECT_EQ(good.header("access-control-allow-methods"), "GET, POST");
  EXPECT_EQ(good.header("vary"), "Origin");
  const Answer evil = call(s, "OPTIONS", "/v1/completions",
                           {"Origin: https://evil.example", "Access-Control-Request-Method: POST"});
  EXPECT_EQ(evil.status, 400);
  EXPECT_NE(evil.body.find("Disallowed CORS origin"), std::string::npos) << evil.body;
  const Answer bad_method = call(s, "OPTIONS", "/v1/completions",
                                 {"Origin: https://good.example", "Access-Control-Request-Method: DELETE"});
  EXPECT_EQ(bad_method.status, 400);
  EXPECT_NE(bad_method.body.find("method"), std::string::npos) << bad_method.body;
  const Answer bad_header = call(s, "OPTIONS", "/v1/completions",
                                 {"Origin: https://good.example", "Access-Control-Request-Method: POST",
                                  "Access-Control-Request-Headers: X-Secret"});
  EXPECT_EQ(bad_header.status, 400);
  EXPECT_NE(bad_header.body.find("headers"), std::string::npos) << bad_header.body;
  // Simple requests: the allowed origin is named, another gets nothing to read the answer with.
  EXPECT_EQ(call(s, "GET", "/v1/models", {"Origin: https://good.example"}).header("access-control-allow-origin"),
            "https://good.example");
  EXPECT_EQ(call(s, "GET", "/v1/models", {"Origin: https://evil.example"}).header("access-control-allow-origin"), "");
  // A list that is not JSON is refused at start.
  const CommandResult bad = run_command(std::string(PAGODA_BINARY) + " serve " + dir.path +
                                        " --allowed-origins '[\"unclosed' 2>&1");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--allowed-origins"), std::string::npos) << bad.out;
}

TEST(ServerOperations, XRequestIdInAndOut) {
  TestModelDir dir;
  ServerProcess s;
  ASSERT_TRUE(s.start(dir.path, {"--api-key", kKey, "--max-model-len", "256"})) << s.log();
  EXPECT_EQ(call(s, "GET", "/health", {"X-Request-Id: my-trace-42"}).header("x-request-id"), "my-trace-42");
  const Answer made = call(s, "GET", "/health");
  EXPECT_TRUE(std::regex_match(made.header("x-request-id"), std::regex("[0-9a-f]{32}"))) << made.header("x-request-id");
  EXPECT_NE(call(s, "GET", "/health").header("x-request-id"), made.header("x-request-id"));
  // On errors, whole answers and streams alike.
  EXPECT_EQ(call(s, "GET", "/v1/models", {"X-Request-Id: e1"}).header("x-request-id"), "e1");
  EXPECT_EQ(call(s, "GET", "/nowhere", {"X-Request-Id: e2"}).header("x-request-id"), "e2");
  const Answer whole = call(s, "POST", "/v1/completions", {kAuth, "X-Request-Id: w1"},
                            R"({"prompt": "ab", "max_tokens": 2})");
  EXPECT_EQ(whole.status, 200) << whole.body;
  EXPECT_EQ(whole.header("x-request-id"), "w1");
  const Answer stream = call(s, "POST", "/v1/completions", {kAuth, "X-Request-Id: s1"},
                             R"({"prompt": "ab", "max_tokens": 2, "stream": true})");
  EXPECT_EQ(stream.status, 200) << stream.body;
  EXPECT_EQ(stream.header("x-request-id"), "s1");
  EXPECT_NE(stream.body.find("[DONE]"), std::string::npos);
  // One that cannot be echoed safely (too long) is replaced.
  const std::string long_id(300, 'x');
  EXPECT_TRUE(std::regex_match(call(s, "GET", "/health", {"X-Request-Id: " + long_id}).header("x-request-id"),
                               std::regex("[0-9a-f]{32}")));
}

int count_lines(const std::string& text, const std::string& part) {
  int n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) n += line.find(part) != std::string::npos;
  return n;
}

TEST(ServerOperations, AccessLogLinesCarryTimestampsAndCanBeTurnedOff) {
  TestModelDir dir;
  {
    ServerProcess s;
    ASSERT_TRUE(s.start(dir.path, {"--max-model-len", "256", "--disable-access-log-for-endpoints", "/health,/metrics"}))
        << s.log();
    call(s, "GET", "/v1/models?x=1");
    call(s, "GET", "/nowhere");
    call(s, "GET", "/metrics");
    const int health_before = count_lines(s.log(), "\"GET /health HTTP/1.1\"");
    call(s, "GET", "/health");
    s.stop();
    const std::string log = s.log();
    EXPECT_EQ(count_lines(log, " - \"GET "), count_lines(log, "\"GET /v1/models?x=1 HTTP/1.1\" 200 OK") +
                                                   count_lines(log, "\"GET /nowhere HTTP/1.1\" 404 Not Found"))
        << log;
    EXPECT_EQ(count_lines(log, "\"GET /v1/models?x=1 HTTP/1.1\" 200 OK"), 1) << log;
    EXPECT_EQ(count_lines(log, "\"GET /nowhere HTTP/1.1\" 404 Not Found"), 1) << log;
    EXPECT_EQ(count_lines(log, "/metrics HTTP"), 0) << log;
    EXPECT_EQ(health_before, 0);
    EXPECT_EQ(count_lines(log, "/health HTTP"), 0) << log;
    // Every line of pagoda's log starts with its UTC time.
    std::istringstream in(log);
    int stamped = 0;
    for (std::string line; std::getline(in, line);) {
      if (line.find("[pagoda ") == std::string::npos) continue;
      EXPECT_TRUE(std::regex_search(line, std::regex(R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \[pagoda )"))) << line;
      ++stamped;
    }
    EXPECT_GT(stamped, 2) << log;
  }
  // Off, and off as vLLM's uvicorn is above its info level; on at info.
  for (const auto& [flags, lines] : std::vector<std::pair<std::vector<std::string>, int>>{
           {{"--disable-uvicorn-access-log"}, 0},
           {{"--uvicorn-log-level", "warning"}, 0},
           {{"--uvicorn-log-level", "info"}, 1}}) {
    std::vector<std::string> args = {"--max-model-len", "256"};
    args.insert(args.end(), flags.begin(), flags.end());
    ServerProcess s;
    ASSERT_TRUE(s.start(dir.path, args)) << s.log();
    call(s, "GET", "/v1/models");
    s.stop();
    EXPECT_EQ(count_lines(s.log(), "\"GET /v1/models HTTP/1.1\""), lines) << flags.back() << "\n" << s.log();
  }
}

}  // namespace
}  // namespace pagoda::server::test
