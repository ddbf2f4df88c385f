// `pagoda bench json`: how long a request body of the largest size takes to parse, for the shapes a
// hostile client would pick (the most keys in one object, the most keys in all, the deepest nesting,
// one long string), through the server's own parser. The bodies are built in memory; nothing listens.
#include <time.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "server/json_body.h"

namespace pagoda::cli {
namespace {

// `{"k0":0,"k1":0,...}` keys distinct, until the body has `bytes` bytes.
std::string one_object(size_t bytes) {
  std::string s = "{";
  s.reserve(bytes + 32);
  for (size_t i = 0; s.size() + 24 < bytes; ++i) {
    s += i ? ",\"k" : "\"k";
    s += std::to_string(i);
    s += "\":0";
  }
  return s + "}";
}

// `[{"a":0,"b":0,...},...]`: keys spread over many small objects.
std::string many_objects(size_t bytes) {
  std::string s = "[";
  s.reserve(bytes + 64);
  while (s.size() + 48 < bytes) s += s.size() > 1 ? ",{\"a\":0,\"b\":0,\"c\":0,\"d\":0}" : "{\"a\":0,\"b\":0,\"c\":0,\"d\":0}";
  return s + "]";
}

// One key repeated: every insert finds its key (a linear-scan object would do it in O(1) too, but
// the total-key bound must still stop it).
std::string repeated_key(size_t bytes) {
  std::string s = "{";
  s.reserve(bytes + 16);
  while (s.size() + 8 < bytes) s += s.size() > 1 ? ",\"a\":0" : "\"a\":0";
  return s + "}";
}

std::string long_string(size_t bytes) { return "{\"prompt\":\"" + std::string(bytes - 14, 'x') + "\"}"; }

// This thread's CPU time in ms: on a shared machine the wall time is mostly other processes' turn.
double cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

std::string deep(size_t bytes) { return std::string(bytes / 2, '[') + std::string(bytes / 2, ']'); }

void run_json_bench(size_t mib, bool nlohmann_too) {
  const size_t bytes = mib << 20;
  struct Case {
    const char* name;
    std::string (*make)(size_t);
  };
  const Case cases[] = {{"one object, distinct keys", one_object},
                        {"many 4-key objects", many_objects},
                        {"one key repeated", repeated_key},
                        {"one long string", long_string},
                        {"[[[...]]] nesting", deep}};
  std::printf("%-28s %8s %10s %9s %9s  %s\n", "body", "MiB", "keys", "wall ms", "cpu ms", "result");
  for (const Case& c : cases) {
    const std::string body = c.make(bytes);
    size_t keys = 0;
    for (size_t i = 0; i + 1 < body.size(); ++i) keys += body[i] == '"' && body[i + 1] == ':';
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_ms();
    std::string error;
    {
      const auto j = server::parse_json_bounded(body, server::kMaxJsonDepth, error);
      if (!j.is_discarded()) error.clear();
    }  // the value's destruction is part of the request's cost
    const double cpu = cpu_ms() - c0;
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%-28s %8.1f %10zu %9.1f %9.1f  %s\n", c.name, body.size() / 1048576.0, keys, ms, cpu,
                error.empty() ? "parsed" : ("refused: " + error).c_str());
    std::fflush(stdout);
  }
  if (!nlohmann_too) return;
  // nlohmann's own DOM parser on ordered_json, for comparison: quadratic in one object's keys.
  std::printf("\nnlohmann::ordered_json::parse, one object of distinct keys:\n");
  for (size_t kib : {128, 256, 512}) {
    const std::string body = one_object(kib << 10);
    const double c0 = cpu_ms();
    const auto j = nlohmann::ordered_json::parse(body, nullptr, false);
    const double theirs = cpu_ms() - c0;
    const double c1 = cpu_ms();
    std::string error;
    const auto k = server::parse_json_bounded(body, server::kMaxJsonDepth, error);
    const double ours = cpu_ms() - c1;
    std::printf("  %5zu KiB, %7zu keys: nlohmann %9.1f cpu ms, pagoda %7.1f cpu ms\n", kib, j.size(), theirs, ours);
    std::fflush(stdout);
  }
}

}  // namespace

void add_json_bench(CLI::App* bench, int* exit_code) {
  auto* js = bench->add_subcommand("json", "Request-body JSON parse time at the body limit, for the shapes a "
                                           "hostile client would send (keys, nesting, strings)");
  auto mib = std::make_shared<size_t>(64);
  auto compare = std::make_shared<bool>(false);
  js->add_option("--mib", *mib, "Body size in MiB (the default is serve's --max-body-bytes)")
      ->capture_default_str();
  js->add_flag("--compare-nlohmann", *compare, "Also time nlohmann's own parser on smaller bodies");
  js->callback([mib, compare, exit_code] {
    run_json_bench(*mib, *compare);
    *exit_code = 0;
  });
}

}  // namespace pagoda::cli
