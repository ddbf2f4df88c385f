// The server through engine faults (docs/faults.md), injected into a real `pagoda serve` with
// PAGODA_INJECT_FAULT: the request the fault hits gets a 500 that says what failed; five streams
// running beside it complete with the text they give without the fault; a request afterwards
// succeeds; the idle server uses no CPU (before, one failed step made every later step fail in a
// loop that burnt a core). A fatal fault turns /health to 503 and ends the process with code 4
// within the shutdown timeout.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <functional>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "server_harness.h"

namespace pagoda::server::test {
namespace {

using namespace std::chrono_literals;

// Starts the server with PAGODA_INJECT_FAULT=spec (the child inherits it; this process unsets it).
bool start_with_fault(ServerProcess& s, const std::string& dir, const std::string& spec,
                      std::vector<std::string> args = {}) {
  setenv("PAGODA_INJECT_FAULT", spec.c_str(), 1);
  args.insert(args.end(), {"--served-model-name", "tiny", "--max-model-len", "512"});
  const bool ok = s.start(dir, args);
  unsetenv("PAGODA_INJECT_FAULT");
  return ok;
}

// User + system CPU time of a process, in clock ticks (/proc/<pid>/stat fields 14 and 15).
long cpu_ticks(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream rest(text.substr(paren + 2));
  std::string field;
  long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stol(field);
    if (i == 15) stime = std::stol(field);
  }
  return utime + stime;
}

// Idle CPU near zero: under a tenth of a core over one second.
void expect_idle(const ServerProcess& s) {
  std::this_thread::sleep_for(200ms);  // the last request's tail
  const long before = cpu_ticks(s.pid());
  std::this_thread::sleep_for(1s);
  const long after = cpu_ticks(s.pid());
  ASSERT_GE(before, 0);
  EXPECT_LE(after - before, sysconf(_SC_CLK_TCK) / 10) << "the idle server is spinning:\n" << s.log();
}

std::string completion_body(const std::string& prompt, bool stream, const std::string& extra = "") {
  return R"({"model": "tiny", "prompt": ")" + prompt + R"(", "max_tokens": 16, "temperature": 0, "ignore_eos": true)" +
         (stream ? R"(, "stream": true)" : "") + extra + "}";
}

struct StreamResult {
  std::string text;
  std::string finish_reason;
  bool done = false;
};

StreamResult stream_completion(const ServerProcess& s, const std::string& prompt) {
  const std::string cmd = "curl -sN -m 60 -H 'Content-Type: application/json' -d '" + completion_body(prompt, true) +
                          "' " + s.url("/v1/completions");
  const CommandResult r = run_command(cmd);
  StreamResult out;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("data: ", 0) != 0) continue;
    const std::string data = line.substr(6);
    if (data == "[DONE]") {
      out.done = true;
      continue;
    }
    const nlohmann::json j = nlohmann::json::parse(data, nullptr, false);
    if (!j.is_object() || !j.contains("choices") || j["choices"].empty()) continue;
    out.text += j["choices"][0].value("text", "");
    if (j["choices"][0]["finish_reason"].is_string()) out.finish_reason = j["choices"][0]["finish_reason"];
  }
  return out;
}

const std::vector<std::string> kPrompts = {"the quick brown fox", "hello there", "one two three four",
                                           "a long time ago in", "lorem ipsum dolor"};

// What each prompt gives alone (greedy), non-streamed.
std::vector<std::string> baseline(const ServerProcess& s) {
  std::vector<std::string> texts;
  for (const std::string& p : kPrompts) {
    const HttpResult r = s.request("POST", "/v1/completions", completion_body(p, false));
    EXPECT_EQ(r.status, 200) << r.body;
    texts.push_back(r.json()["choices"][0].value("text", ""));
  }
  return texts;
}

// Five streams beside `faulty` (run on its own thread): each completes with its baseline text.
void expect_streams_complete_beside(const ServerProcess& s, const std::vector<std::string>& expected,
                                    const std::function<void()>& faulty) {
  std::vector<StreamResult> results(kPrompts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < kPrompts.size(); ++i)
    threads.emplace_back([&, i] { results[i] = stream_completion(s, kPrompts[i]); });
  faulty();
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < results.size(); ++i) {
    SCOPED_TRACE("stream " + std::to_string(i));
    EXPECT_TRUE(results[i].done);
    EXPECT_EQ(results[i].finish_reason, "length");
    EXPECT_EQ(results[i].text, expected[i]);
  }
}

TEST(EngineFault, AGrammarAllocationFailureFailsThatRequestAloneAndTheServerGoesOn) {
  TestModelDir dir;
  ASSERT_FALSE(dir.path.empty());
  ServerProcess s;
  ASSERT_TRUE(start_with_fault(s, dir.path, "grammar-alloc:1")) << s.log();
  const std::vector<std::string> expected = baseline(s);
  const std::string json_object = R"(, "response_format": {"type": "json_object"})";
  expect_streams_complete_beside(s, expected, [&] {
    const HttpResult r = s.request("POST", "/v1/completions", completion_body("give me json", false, json_object));
    EXPECT_EQ(r.status, 500) << r.body;
    EXPECT_NE(r.body.find("structured-output state"), std::string::npos) << r.body;
  });
  // Afterwards: a plain request and one with a grammar both succeed.
  EXPECT_EQ(s.request("POST", "/v1/completions", completion_body("hello", false)).status, 200);
  const HttpResult g = s.request("POST", "/v1/completions", completion_body("give me json", false, json_object));
  EXPECT_EQ(g.status, 200) << g.body;
  EXPECT_EQ(s.metric("pagoda:engine_step_failures_total"), 0) << "a request's own allocation failed no step";
  EXPECT_EQ(s.get("/health").status, 200);
  expect_idle(s);
}

TEST(EngineFault, AFailedStepFailsItsRequestAndTheNextStepsRun) {
  TestModelDir dir;
  ASSERT_FALSE(dir.path.empty());
  ServerProcess s;
  ASSERT_TRUE(start_with_fault(s, dir.path, "step:1")) << s.log();  // the first step of the first request
  const HttpResult failed = s.request("POST", "/v1/completions", completion_body("the first request", false));
  EXPECT_EQ(failed.status, 500) << failed.body;
  EXPECT_NE(failed.body.find("injected fault"), std::string::npos) << failed.body;
  EXPECT_NE(failed.body.find("retry"), std::string::npos) << failed.body;
  const std::vector<std::string> expected = baseline(s);
  expect_streams_complete_beside(s, expected, [] {});
  EXPECT_EQ(s.request("POST", "/v1/completions", completion_body("hello", false)).status, 200);
  EXPECT_EQ(s.metric("pagoda:engine_step_failures_total"), 1);
  EXPECT_EQ(s.get("/health").status, 200);
  expect_idle(s);
}

TEST(EngineFault, AFatalFaultTurnsHealthTo503AndExitsWithCode4WithinTheShutdownTimeout) {
  TestModelDir dir;
  ASSERT_FALSE(dir.path.empty());
  ServerProcess s;
  ASSERT_TRUE(start_with_fault(s, dir.path, "fatal-step:1", {"--shutdown-timeout", "4"})) << s.log();
  ASSERT_EQ(s.get("/health").status, 200);
  const FatalExit e = watch_fatal_exit(
      s, [&] { return s.request("POST", "/v1/completions", completion_body("the request that meets it", false)); }, 7s);
  const HttpResult& r = e.answer;
  EXPECT_TRUE(r.status == 500 || r.status == 503) << r.status << " " << r.body;
  EXPECT_NE(r.body.find("fatal fault"), std::string::npos) << r.body;
  EXPECT_EQ(e.code, 4) << s.log();
  EXPECT_LT(e.seconds, 4.5) << "not within --shutdown-timeout";
  EXPECT_TRUE(e.health_seen.count(503)) << "/health never answered 503 before the exit";
  const std::string log = s.log();
  EXPECT_NE(log.find("fatal engine fault"), std::string::npos) << log;
  EXPECT_NE(log.find("exiting with code 4"), std::string::npos) << log;
}

}  // namespace
}  // namespace pagoda::server::test
