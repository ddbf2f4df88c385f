// /metrics as vLLM serves it. The reference is tests/fixtures/vllm_metrics.json: vLLM's
// PrometheusStatLogger families transcribed from vLLM's source and rendered by prometheus_client
// itself after a list of observations (tools/vllm_metrics_reference.py). The same observations go
// into pagoda's EngineMetrics with --metrics-prefix vllm; the two texts, parsed, must hold the same
// families with the same types, help, samples, label sets, bucket bounds and values.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "../support/engine_driver.h"
#include "core/error.h"
#include "server/async_engine.h"
#include "server/engine_metrics.h"
#include "server/metrics.h"
#include "server/request_log.h"
#include "core/build_paths.h"

namespace pagoda::server {
namespace {

using json = nlohmann::json;

// --- a Prometheus text (0.0.4) parser, independent of the renderer ----------------------------

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  std::string value;
};

struct Family {
  std::string type, help;
  std::vector<Sample> samples;
};

std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char c = s[++i];
    out += c == 'n' ? '\n' : c;
  }
  return out;
}

Sample parse_sample(const std::string& line) {
  Sample s;
  size_t i = line.find_first_of("{ ");
  s.name = line.substr(0, i);
  if (line[i] == '{') {
    ++i;
    while (line[i] != '}') {
      const size_t eq = line.find('=', i);
      const std::string key = line.substr(i, eq - i);
      size_t j = eq + 2;  // past ="
      std::string raw;
      while (line[j] != '"') {
        if (line[j] == '\\') raw += line[j++];
        raw += line[j++];
      }
      EXPECT_EQ(s.labels.count(key), 0u) << "label " << key << " twice in: " << line;
      s.labels[key] = unescape(raw);
      i = j + 1;
      if (line[i] == ',') ++i;
    }
    ++i;
  }
  EXPECT_EQ(line[i], ' ') << line;
  s.value = line.substr(i + 1);
  return s;
}

// Families by the name of their TYPE line; each sample belongs to the TYPE line before it.
std::map<std::string, Family> parse_exposition(const std::string& text) {
  std::map<std::string, Family> out;
  std::string current;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    if (line.rfind("# HELP ", 0) == 0) {
      const size_t sp = line.find(' ', 7);
      out[line.substr(7, sp - 7)].help = unescape(line.substr(sp + 1));
    } else if (line.rfind("# TYPE ", 0) == 0) {
      const size_t sp = line.find(' ', 7);
      current = line.substr(7, sp - 7);
      out[current].type = line.substr(sp + 1);
    } else if (line[0] != '#') {
      EXPECT_FALSE(current.empty()) << "sample before any TYPE line: " << line;
      Sample s = parse_sample(line);
      const std::string& base = current;
      const bool ok = s.name == base || (out[base].type == "histogram" &&
                                         (s.name == base + "_bucket" || s.name == base + "_count" ||
                                          s.name == base + "_sum"));
      EXPECT_TRUE(ok) << "sample " << s.name << " under TYPE " << base;
      out[base].samples.push_back(std::move(s));
    }
  }
  return out;
}

std::string series_key(const Sample& s) {
  std::string k = s.name + "{";
  for (const auto& [name, value] : s.labels) k += name + "=" + value + ",";
  return k + "}";
}

std::map<std::string, std::string> sample_map(const Family& f) {
  std::map<std::string, std::string> out;
  for (const Sample& s : f.samples) out[series_key(s)] = s.value;
  return out;
}

std::vector<std::string> bucket_bounds(const Family& f) {
  std::vector<std::string> out;
  for (const Sample& s : f.samples)
    if (s.name.size() > 7 && s.name.compare(s.name.size() - 7, 7, "_bucket") == 0) out.push_back(s.labels.at("le"));
  return out;
}

// --- the fixture --------------------------------------------------------------------------------

const json& fixture() {
  static const json j = [] {
    std::ifstream in(std::string(PAGODA_SOURCE_DIR) + "/tests/fixtures/vllm_metrics.json");
    EXPECT_TRUE(in.good()) << "tests/fixtures/vllm_metrics.json missing";
    return json::parse(in);
  }();
  return j;
}

// Applies one fixture observation ("vllm:<name>[/finished_reason]") to pagoda's metrics.
void apply(EngineMetrics& m, const std::string& op, const std::string& metric, double value) {
  const std::map<std::string, Gauge*> gauges = {{"vllm:num_requests_running", &m.num_requests_running},
                                                {"vllm:num_requests_waiting", &m.num_requests_waiting},
                                                {"vllm:kv_cache_usage_perc", &m.kv_cache_usage_perc}};
  const std::map<std::string, Counter*> counters = {
      {"vllm:num_preemptions", &m.num_preemptions_total},
      {"vllm:prompt_tokens", &m.prompt_tokens_total},
      {"vllm:generation_tokens", &m.generation_tokens_total},
      {"vllm:prefix_cache_queries", &m.prefix_cache_queries},
      {"vllm:prefix_cache_hits", &m.prefix_cache_hits},
      {"vllm:request_success/stop", &m.request_success(FinishReason::Stop)},
      {"vllm:request_success/length", &m.request_success(FinishReason::Length)},
      {"vllm:request_success/abort", &m.request_success(FinishReason::Abort)},
      {"vllm:request_success/error", &m.request_error()}};
  const std::map<std::string, Histogram*> histograms = {
      {"vllm:request_prompt_tokens", &m.request_prompt_tokens},
      {"vllm:request_generation_tokens", &m.request_generation_tokens},
      {"vllm:iteration_tokens_total", &m.iteration_tokens_total},
      {"vllm:request_max_num_generation_tokens", &m.request_max_num_generation_tokens},
      {"vllm:request_params_n", &m.request_params_n},
      {"vllm:request_params_max_tokens", &m.request_params_max_tokens},
      {"vllm:time_to_first_token_seconds", &m.time_to_first_token_seconds},
      {"vllm:time_per_output_token_seconds", &m.time_per_output_token_seconds},
      {"vllm:inter_token_latency_seconds", &m.inter_token_latency_seconds},
      {"vllm:request_time_per_output_token_seconds", &m.request_time_per_output_token_seconds},
      {"vllm:e2e_request_latency_seconds", &m.e2e_request_latency_seconds},
      {"vllm:request_queue_time_seconds", &m.request_queue_time_seconds},
      {"vllm:request_inference_time_seconds", &m.request_inference_time_seconds},
      {"vllm:request_prefill_time_seconds", &m.request_prefill_time_seconds},
      {"vllm:request_decode_time_seconds", &m.request_decode_time_seconds}};
  if (op == "set" && gauges.count(metric)) return gauges.at(metric)->set(value);
  if (op == "inc" && counters.count(metric)) return counters.at(metric)->inc(value);
  if (op == "observe" && histograms.count(metric)) return histograms.at(metric)->observe(value);
  FAIL() << "the fixture's " << op << " on " << metric << " has no pagoda metric";
}

bool is_created_series(const std::map<std::string, Family>& all, const std::string& name) {
  // prometheus_client's `_created` gauge beside each counter and histogram (not served by pagoda).
  static const std::string kCreated = "_created";
  if (name.size() <= kCreated.size() || name.compare(name.size() - kCreated.size(), kCreated.size(), kCreated) != 0)
    return false;
  const std::string base = name.substr(0, name.size() - kCreated.size());
  return all.count(base + "_total") || (all.count(base) && all.at(base).type == "histogram");
}

TEST(VllmMetrics, SameFamiliesTypesLabelsBucketsAndValuesAsVllm) {
  const json& f = fixture();
  std::set<std::string> not_exposed;
  for (const auto& [name, why] : f.at("not_exposed_by_pagoda").items()) not_exposed.insert(name);
  std::set<std::string> cache_fields;
  for (const auto& field : f.at("cache_config_fields")) cache_fields.insert(field.get<std::string>());

  for (const json& c : f.at("cases")) {
    SCOPED_TRACE("model " + c.at("model_name").get<std::string>());
    MetricsRegistry registry;
    EngineMetricsInfo info;
    info.model_name = c.at("model_name");
    info.metrics_prefix = "vllm";
    info.max_model_len = c.at("max_model_len");
    info.block_size = std::stoi(c.at("cache").at("block_size").get<std::string>());
    info.kv_cache_dtype = c.at("cache").at("cache_dtype");
    info.num_kv_blocks = std::stoll(c.at("cache").at("num_gpu_blocks").get<std::string>());
    EngineMetrics metrics(registry, info);
    for (const json& o : f.at("observations")) apply(metrics, o.at("op"), o.at("metric"), o.at("value"));

    const auto vllm = parse_exposition(c.at("exposition"));
    const auto pagoda = parse_exposition(registry.render());
    std::set<std::string> expected_names;
    for (const auto& [name, family] : vllm) {
      if (is_created_series(vllm, name)) continue;
      // Counters render as <name>_total; NOT_EXPOSED names the family as registered.
      const std::string base = family.type == "counter" ? name.substr(0, name.size() - 6) : name;
      if (not_exposed.count(base)) {
        EXPECT_EQ(pagoda.count(name), 0u) << name << " is listed as not exposed by pagoda";
        continue;
      }
      expected_names.insert(name);
      SCOPED_TRACE(name);
      ASSERT_EQ(pagoda.count(name), 1u) << "pagoda does not expose " << name;
      const Family& mine = pagoda.at(name);
      EXPECT_EQ(mine.type, family.type);
      EXPECT_EQ(mine.help, family.help);
      if (name == "vllm:cache_config_info") {
        // vLLM labels every CacheConfig field; pagoda the ones it has, under the same names.
        ASSERT_EQ(mine.samples.size(), 1u);
        for (const auto& [label, value] : mine.samples[0].labels) {
          EXPECT_TRUE(cache_fields.count(label)) << "label " << label << " is no CacheConfig field of vLLM";
          const std::string& theirs = family.samples[0].labels.at(label);
          // The fixture's engine left some fields unset ("None"); pagoda's are always set.
          if (theirs == "None" && label == "enable_prefix_caching") EXPECT_TRUE(value == "True" || value == "False");
          else EXPECT_EQ(value, theirs) << label;
        }
        EXPECT_EQ(mine.samples[0].value, family.samples[0].value);
        continue;
      }
      EXPECT_EQ(sample_map(mine), sample_map(family));
      if (family.type == "histogram") {
        EXPECT_EQ(bucket_bounds(mine), bucket_bounds(family)) << "bucket bounds";
      }
    }
    std::set<std::string> mine_names;
    // pagoda's own families keep the pagoda: prefix whatever --metrics-prefix says (docs/metrics.md).
    for (const auto& [name, family] : pagoda)
      if (name.rfind("pagoda:", 0) != 0) mine_names.insert(name);
    EXPECT_EQ(pagoda.count("pagoda:engine_step_failures_total"), 1u);
    EXPECT_EQ(mine_names, expected_names) << "pagoda exposes a family vLLM does not have, or lacks one";
  }
}

TEST(VllmMetrics, GatewayMetricsKeepVllmNames) {
  // The Kubernetes Gateway API inference extension scrapes these two.
  MetricsRegistry registry;
  EngineMetricsInfo info;
  info.model_name = "m";
  info.metrics_prefix = "vllm";
  EngineMetrics metrics(registry, info);
  metrics.num_requests_waiting.set(4);
  metrics.kv_cache_usage_perc.set(0.25);
  const std::string text = registry.render();
  EXPECT_NE(text.find("\nvllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 4.0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nvllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.25\n"), std::string::npos);
}

// --data-parallel-size: one EngineMetrics per replica in one registry, told apart by `engine` (the
// rank, as vLLM's engine index): each family once, a series per replica, each with its own value.
TEST(VllmMetrics, DataParallelReplicasHaveASeriesEach) {
  MetricsRegistry registry;
  std::vector<std::unique_ptr<EngineMetrics>> replicas;
  for (int32_t r = 0; r < 2; ++r) {
    EngineMetricsInfo info;
    info.model_name = "m";
    info.engine_index = r;
    info.num_kv_blocks = 100 + r;
    replicas.push_back(std::make_unique<EngineMetrics>(registry, info));
  }
  replicas[0]->num_requests_running.set(3);
  replicas[1]->num_requests_running.set(5);
  replicas[1]->request_success(FinishReason::Length).inc();
  const std::string text = registry.render();
  EXPECT_NE(text.find("\nvllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3.0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nvllm:num_requests_running{engine=\"1\",model_name=\"m\"} 5.0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nvllm:request_success_total{engine=\"0\",finished_reason=\"length\",model_name=\"m\"} 0.0\n"),
            std::string::npos);
  EXPECT_NE(text.find("\nvllm:request_success_total{engine=\"1\",finished_reason=\"length\",model_name=\"m\"} 1.0\n"),
            std::string::npos);
  EXPECT_NE(text.find("engine=\"1\",num_gpu_blocks=\"101\"}"), std::string::npos) << text;
  size_t types = 0;
  for (size_t at = 0; (at = text.find("# TYPE vllm:num_requests_running gauge\n", at)) != std::string::npos; ++at) ++types;
  EXPECT_EQ(types, 1u) << "the family is written once, its series under it";
}

TEST(VllmMetrics, DefaultPrefixIsVllmPagodaOptsInAndBadPrefixesAreRefused) {
  MetricsRegistry registry;
  EngineMetricsInfo info;
  info.model_name = "m";
  EngineMetrics metrics(registry, info);
  const std::string text = registry.render();
  EXPECT_NE(text.find("# TYPE vllm:num_requests_waiting gauge\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE vllm:prompt_tokens_total counter\n"), std::string::npos);
  EXPECT_EQ(text.find("pagoda:num_requests"), std::string::npos);
  MetricsRegistry own;
  info.metrics_prefix = "pagoda";
  EngineMetrics opted(own, info);
  const std::string own_text = own.render();
  EXPECT_NE(own_text.find("# TYPE pagoda:num_requests_waiting gauge\n"), std::string::npos);
  EXPECT_EQ(own_text.find("vllm:"), std::string::npos);
  for (const char* bad : {"", "vllm:", "9x", "a-b", "a b"}) {
    MetricsRegistry r;
    info.metrics_prefix = bad;
    EXPECT_THROW(EngineMetrics(r, info), pagoda::Error) << "prefix '" << bad << "'";
  }
}

TEST(VllmMetrics, NumbersAsPrometheusClientWritesThem) {
  // Expected strings: Python's repr and prometheus_client's floatToGoString, worked by hand.
  const std::vector<std::pair<double, std::string>> cases = {
      {0.0, "0.0"},         {-0.0, "-0.0"},          {1.0, "1.0"},
      {2.5, "2.5"},         {0.1, "0.1"},            {1.0 / 3, "0.3333333333333333"},
      {0.0001, "0.0001"},   {0.00001, "1e-05"},      {1.5e-7, "1.5e-07"},
      {100000.0, "100000.0"}, {999999.0, "999999.0"}, {1000000.0, "1e+06"},
      {1234567.0, "1.234567e+06"}, {2560.0, "2560.0"}, {7680.0, "7680.0"},
      {123456789012.0, "1.23456789012e+011"},  // prometheus_client's own "e+0" quirk
      {1e16, "1e+16"},      {-1e16, "-1e+16"},       {-2000000.0, "-2000000.0"},
      {1e100, "1e+100"},    {5e-324, "5e-324"},      {1.7954457141966286e9, "1.7954457141966286e+09"}};
  for (const auto& [v, s] : cases) EXPECT_EQ(format_metric_value(v), s) << v;
  EXPECT_EQ(format_metric_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_metric_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(format_metric_value(std::nan("")), "NaN");
}

TEST(VllmMetrics, BuildOneTwoFiveBuckets) {
  // vLLM's docstring example: build_1_2_5_buckets(100) == [1, 2, 5, 10, 20, 50, 100].
  EXPECT_EQ(build_1_2_5_buckets(100), (std::vector<double>{1, 2, 5, 10, 20, 50, 100}));
  EXPECT_EQ(build_1_2_5_buckets(4), (std::vector<double>{1, 2}));
  EXPECT_TRUE(build_1_2_5_buckets(0).empty());
}

TEST(Metrics, PrometheusText) {
  MetricsRegistry r;
  r.counter("pagoda:x_total", "X.", {{"model_name", "m\"q"}}).inc(3);
  r.gauge("pagoda:g", "G\nline.", {{"z", "1"}, {"a", "2"}}).set(0.5);
  Histogram& h = r.histogram("pagoda:h_seconds", "H.", {0.1, 1.0});
  h.observe(0.0625);
  h.observe(0.5);
  h.observe(1.0);
  h.observe(4);
  const std::string text = r.render();
  EXPECT_NE(text.find("# HELP pagoda:x_total X.\n# TYPE pagoda:x_total counter\n"
                      "pagoda:x_total{model_name=\"m\\\"q\"} 3.0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# HELP pagoda:g G\\nline.\n"), std::string::npos) << text;
  EXPECT_NE(text.find("pagoda:g{a=\"2\",z=\"1\"} 0.5\n"), std::string::npos) << "labels sorted by name";
  EXPECT_NE(text.find("pagoda:h_seconds_bucket{le=\"0.1\"} 1.0\n"
                      "pagoda:h_seconds_bucket{le=\"1.0\"} 3.0\n"
                      "pagoda:h_seconds_bucket{le=\"+Inf\"} 4.0\n"
                      "pagoda:h_seconds_count 4.0\n"
                      "pagoda:h_seconds_sum 5.5625\n"),
            std::string::npos)
      << text;
}

// --- the stats line -------------------------------------------------------------------------------

struct Captured {
  std::vector<std::pair<LogLevel, std::string>> lines;
  RequestLogOptions options(bool stats = true) {
    RequestLogOptions o;
    o.log_stats = stats;
    o.sink = [this](LogLevel level, const std::string& line) { lines.emplace_back(level, line); };
    return o;
  }
};

TEST(StatsLog, LineEveryIntervalWhileBusyThenOneIdleLine) {
  using namespace std::chrono_literals;
  Captured cap;
  StatsLogger log(cap.options());
  const auto t0 = StatsLogger::Clock::time_point{} + 1000s;
  SchedulerSnapshot s{3, 2, 0.125, 0};
  EXPECT_FALSE(log.next_tick().has_value()) << "nothing to report before any work";
  log.record(t0, 500, 20);  // the interval starts with the work
  ASSERT_TRUE(log.next_tick().has_value());
  EXPECT_EQ(*log.next_tick(), t0 + 10s);
  EXPECT_FALSE(log.tick(t0 + 9s, s));
  log.record(t0 + 9s, 0, 30);
  ASSERT_TRUE(log.tick(t0 + 10s, s));
  ASSERT_EQ(cap.lines.size(), 1u);
  EXPECT_EQ(cap.lines[0].first, LogLevel::Info);
  EXPECT_EQ(cap.lines[0].second,
            "Engine 000: Avg prompt throughput: 50.0 tokens/s, Avg generation throughput: 5.0 tokens/s, "
            "Running: 3 reqs, Waiting: 2 reqs, GPU KV cache usage: 12.5%");

  // Busy again, with preemptions: they appear, as in vLLM, only when there were some.
  log.record(t0 + 12s, 0, 40);
  s.num_preemptions = 4;
  ASSERT_TRUE(log.tick(t0 + 20s, s));
  EXPECT_EQ(cap.lines[1].second,
            "Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 4.0 tokens/s, "
            "Running: 3 reqs, Waiting: 2 reqs, Preemptions: 4, GPU KV cache usage: 12.5%");

  // The first quiet interval is still logged (the last one was busy); the next goes to debug, and
  // then the logger sleeps until new work arrives.
  s = {0, 0, 0.0, 4};
  ASSERT_TRUE(log.tick(t0 + 30s, s));
  EXPECT_EQ(cap.lines[2].first, LogLevel::Info);
  EXPECT_NE(cap.lines[2].second.find("Avg generation throughput: 0.0 tokens/s, Running: 0 reqs"), std::string::npos);
  ASSERT_TRUE(log.tick(t0 + 40s, s));
  EXPECT_EQ(cap.lines[3].first, LogLevel::Debug);
  EXPECT_FALSE(log.next_tick().has_value());
  EXPECT_FALSE(log.tick(t0 + 500s, s));
  EXPECT_EQ(cap.lines.size(), 4u);
}

// A data-parallel replica's line names its rank, as vLLM's engine index.
TEST(StatsLog, ADataParallelReplicaNamesItsRank) {
  using namespace std::chrono_literals;
  Captured cap;
  RequestLogOptions o = cap.options();
  o.engine_index = 3;
  StatsLogger log(o);
  const auto t0 = StatsLogger::Clock::time_point{} + 1000s;
  log.record(t0, 10, 10);
  ASSERT_TRUE(log.tick(t0 + 10s, SchedulerSnapshot{1, 0, 0.5, 0}));
  ASSERT_EQ(cap.lines.size(), 1u);
  EXPECT_EQ(cap.lines[0].second.rfind("Engine 003: Avg prompt throughput: 1.0 tokens/s, ", 0), 0u) << cap.lines[0].second;
}

// LoRA (the "the stats line shows them"): the adapters running and waiting, by name.
TEST(StatsLog, LoraAdaptersRunningAndWaitingAreNamed) {
  using namespace std::chrono_literals;
  Captured cap;
  StatsLogger log(cap.options());
  const auto t0 = StatsLogger::Clock::time_point{} + 1000s;
  SchedulerSnapshot s{2, 1, 0.25, 0};
  s.lora = true;
  s.lora_running = "sql,chat";
  s.lora_waiting = "";
  log.record(t0, 10, 10);
  ASSERT_TRUE(log.tick(t0 + 10s, s));
  ASSERT_EQ(cap.lines.size(), 1u);
  EXPECT_EQ(cap.lines[0].second,
            "Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 1.0 tokens/s, "
            "Running: 2 reqs, Waiting: 1 reqs, GPU KV cache usage: 25.0%, Running LoRA adapters: [sql,chat], "
            "Waiting LoRA adapters: []");
}

TEST(StatsLog, PrefixCacheHitRateOverTheInterval) {
  using namespace std::chrono_literals;
  Captured cap;
  StatsLogger log(cap.options());
  const auto t0 = StatsLogger::Clock::time_point{} + 1000s;
  SchedulerSnapshot s{1, 0, 0.5, 0};
  s.prefix_caching = true;
  s.prefix_cache_queries = 1000;
  s.prefix_cache_hits = 250;
  log.record(t0, 100, 10);
  ASSERT_TRUE(log.tick(t0 + 10s, s));
  EXPECT_EQ(cap.lines[0].second,
            "Engine 000: Avg prompt throughput: 10.0 tokens/s, Avg generation throughput: 1.0 tokens/s, "
            "Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 50.0%, Prefix cache hit rate: 25.0%");
  // The next interval's own lookups: 600 of 1000.
  s.prefix_cache_queries = 2000;
  s.prefix_cache_hits = 850;
  log.record(t0 + 11s, 100, 10);
  ASSERT_TRUE(log.tick(t0 + 20s, s));
  EXPECT_NE(cap.lines[1].second.find("Prefix cache hit rate: 60.0%"), std::string::npos) << cap.lines[1].second;
  // None since: the rate of all lookups so far.
  log.record(t0 + 21s, 0, 10);
  ASSERT_TRUE(log.tick(t0 + 30s, s));
  EXPECT_NE(cap.lines[2].second.find("Prefix cache hit rate: 42.5%"), std::string::npos) << cap.lines[2].second;
}

TEST(StatsLog, SpecDecodingLineOverTheInterval) {
  using namespace std::chrono_literals;
  Captured cap;
  StatsLogger log(cap.options());
  const auto t0 = StatsLogger::Clock::time_point{} + 1000s;
  SchedulerSnapshot s{1, 0, 0.5, 0};
  s.spec_accepted_per_pos = {0, 0, 0, 0};
  log.record(t0, 100, 10);
  ASSERT_TRUE(log.tick(t0 + 10s, s));
  ASSERT_EQ(cap.lines.size(), 1u);  // no drafts yet: no line for them
  // 10 sequences brought 40 drafts over the next 2 s; 25 accepted: 9, 8, 5 and 3 by position.
  s.spec_num_drafts = 10;
  s.spec_num_draft_tokens = 40;
  s.spec_num_accepted_tokens = 25;
  s.spec_accepted_per_pos = {9, 8, 5, 3};
  log.record(t0 + 11s, 0, 10);
  ASSERT_TRUE(log.tick(t0 + 20s, s));
  ASSERT_EQ(cap.lines.size(), 3u);
  EXPECT_EQ(cap.lines[2].second,
            "SpecDecoding metrics: Mean acceptance length: 3.50, Accepted throughput: 2.50 tokens/s, Drafted "
            "throughput: 4.00 tokens/s, Accepted: 25 tokens, Drafted: 40 tokens, Per-position acceptance rate: "
            "0.90, 0.80, 0.50, 0.30, Avg Draft acceptance rate: 62.5%");
}

TEST(VllmMetrics, SpecDecodeCountersOnlyWithSpeculativeDecoding) {
  for (int32_t k : {0, 3}) {
    MetricsRegistry registry;
    EngineMetricsInfo info;
    info.model_name = "m";
    info.metrics_prefix = "vllm";
    info.num_speculative_tokens = k;
    EngineMetrics metrics(registry, info);
    EngineStats s;
    s.spec_num_drafts = 10;
    s.spec_num_draft_tokens = 30;
    s.spec_num_accepted_tokens = 17;
    s.spec_accepted_per_pos = {9, 5, 3};
    metrics.publish_spec_decode(s);
    s.spec_num_drafts = 12;  // published again: counters move by the difference
    s.spec_accepted_per_pos = {10, 5, 3};
    metrics.publish_spec_decode(s);
    const std::string text = registry.render();
    if (k == 0) {
      EXPECT_EQ(text.find("spec_decode"), std::string::npos) << text;
      continue;
    }
    EXPECT_NE(text.find("\nvllm:spec_decode_num_drafts_total{engine=\"0\",model_name=\"m\"} 12.0\n"), std::string::npos) << text;
    EXPECT_NE(text.find("\nvllm:spec_decode_num_draft_tokens_total{engine=\"0\",model_name=\"m\"} 30.0\n"), std::string::npos);
    EXPECT_NE(text.find("\nvllm:spec_decode_num_accepted_tokens_total{engine=\"0\",model_name=\"m\"} 17.0\n"), std::string::npos);
    EXPECT_NE(text.find("\nvllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",model_name=\"m\",position=\"0\"} 10.0\n"),
              std::string::npos);
    EXPECT_NE(text.find("\nvllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",model_name=\"m\",position=\"2\"} 3.0\n"),
              std::string::npos);
    EXPECT_NE(text.find("# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position."), std::string::npos) << text;
  }
}

TEST(StatsLog, DisabledWritesNothing) {
  using namespace std::chrono_literals;
  Captured cap;
  StatsLogger log(cap.options(false));
  const auto t0 = StatsLogger::Clock::time_point{} + 1000s;
  log.record(t0, 100, 100);
  EXPECT_FALSE(log.next_tick().has_value());
  EXPECT_FALSE(log.tick(t0 + 60s, SchedulerSnapshot{}));
  EXPECT_TRUE(cap.lines.empty());
}

TEST(RequestLog, LineIsBoundedAndOnOneLine) {
  SamplingParams p;
  p.temperature = 0.7;
  p.max_tokens = 64;
  p.seed = 5;
  p.stop = {std::string("a'b\\c\nd\x01") + std::string(100, 'x'), "\xe6\x97\xa5"};
  for (int i = 0; i < 20; ++i) p.stop_token_ids.push_back(i);
  FinishedRequestLog r{7, 12, 30, &p, "length", 0.4125};
  const std::string line = format_request_line(r);
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_LT(line.size(), 700u) << line;
  EXPECT_EQ(line.rfind("Finished request 7: prompt_tokens: 12, params: SamplingParams(n=1, ", 0), 0u) << line;
  EXPECT_NE(line.find("temperature=0.7, "), std::string::npos) << line;
  EXPECT_NE(line.find("seed=5, stop=['a\\'b\\\\c\\nd\\x01xxxxxxxxxxxxxxxxxxxxxxxx'..., '\xe6\x97\xa5'], "),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("stop_token_ids=[0, 1, 2, 3, 4, 5, 6, 7, ... (20 in all)]"), std::string::npos) << line;
  EXPECT_NE(line.find("max_tokens=64, "), std::string::npos) << line;
  EXPECT_NE(line.find("), finish_reason: length, output_tokens: 30, e2e: 0.412 s"), std::string::npos) << line;
}

// --- an engine behind AsyncEngine: what one generation records -----------------------------------

std::map<std::string, double> series(const std::string& text) {
  std::map<std::string, double> out;
  for (const auto& [name, f] : parse_exposition(text))
    for (const Sample& s : f.samples) {
      std::string key = s.name;
      for (const auto& [k, v] : s.labels)
        if (k != "model_name" && k != "engine") key += "|" + k + "=" + v;
      out[key] = std::stod(s.value);
    }
  return out;
}

TEST(RequestStats, OneGenerationOfTwoChoicesAsVllmCountsIt) {
  EngineConfig config;
  config.max_num_seqs = 4;
  config.max_model_len = 128;
  config.kv_cache_memory_bytes = 4 << 20;
  auto engine = std::make_unique<Engine>(testing::fixture_model_dir("qwen3-tiny-tied"), config);
  MetricsRegistry registry;
  EngineMetricsInfo info;
  info.model_name = "tiny";
  info.metrics_prefix = "vllm";
  info.max_model_len = 128;
  EngineMetrics metrics(registry, info);
  Captured cap;
  AsyncEngineOptions options;
  options.logging = cap.options(false);
  options.logging.log_requests = true;
  AsyncEngine async(std::move(engine), metrics, options);

  const std::vector<int32_t> prompt = {5, 6, 7, 8, 9, 10, 11};
  std::vector<ChoiceSpec> choices;
  for (int i = 0; i < 2; ++i) choices.push_back({prompt, testing::greedy(5)});
  std::string why;
  auto channel = async.submit(std::move(choices), why);
  ASSERT_TRUE(channel) << why;
  std::vector<ChoiceOutput> outs;
  while (channel->next(outs, std::chrono::milliseconds(1000))) outs.clear();
  ASSERT_TRUE(async.wait_idle(std::chrono::seconds(10)));
  async.stop();

  auto m = series(registry.render());
  EXPECT_EQ(m["vllm:request_success_total|finished_reason=length"], 2);
  EXPECT_EQ(m["vllm:prompt_tokens_total"], 14);
  EXPECT_EQ(m["vllm:generation_tokens_total"], 10);
  EXPECT_EQ(m["vllm:time_to_first_token_seconds_count"], 2);
  EXPECT_EQ(m["vllm:inter_token_latency_seconds_count"], 8) << "4 gaps between 5 tokens, twice";
  EXPECT_EQ(m["vllm:time_per_output_token_seconds_count"], 8);
  EXPECT_EQ(m["vllm:request_prompt_tokens_sum"], 14);
  EXPECT_EQ(m["vllm:request_generation_tokens_sum"], 10);
  EXPECT_EQ(m["vllm:request_params_max_tokens_sum"], 10);
  // vLLM's parent request: one n=2 observation, and the most tokens of its two choices.
  EXPECT_EQ(m["vllm:request_params_n_count"], 1);
  EXPECT_EQ(m["vllm:request_params_n_sum"], 2);
  EXPECT_EQ(m["vllm:request_max_num_generation_tokens_sum"], 5);
  // Every token of the steps is counted once: prompts at their first token, plus the outputs.
  EXPECT_EQ(m["vllm:iteration_tokens_total_sum"], 14 + 10);
  for (const char* h : {"e2e_request_latency", "request_queue_time", "request_prefill_time",
                        "request_decode_time", "request_inference_time"})
    EXPECT_EQ(m[std::string("vllm:") + h + "_seconds_count"], 2) << h;
  // inference = prefill + decode for each request; queue + inference <= e2e.
  EXPECT_NEAR(m["vllm:request_inference_time_seconds_sum"],
              m["vllm:request_prefill_time_seconds_sum"] + m["vllm:request_decode_time_seconds_sum"], 1e-9);
  EXPECT_LE(m["vllm:request_queue_time_seconds_sum"] + m["vllm:request_inference_time_seconds_sum"],
            m["vllm:e2e_request_latency_seconds_sum"] + 1e-9);
  // Mean time per output token of each request = its decode time / 4.
  EXPECT_NEAR(m["vllm:request_time_per_output_token_seconds_sum"], m["vllm:request_decode_time_seconds_sum"] / 4,
              1e-9);
  EXPECT_EQ(m["vllm:num_requests_running"], 0);
  EXPECT_EQ(m["vllm:kv_cache_usage_perc"], 0);

  ASSERT_EQ(cap.lines.size(), 2u) << "one line per request";
  for (const auto& [level, line] : cap.lines) {
    EXPECT_EQ(level, LogLevel::Info);
    EXPECT_NE(line.find(": prompt_tokens: 7, params: SamplingParams(n=1, "), std::string::npos) << line;
    EXPECT_NE(line.find("finish_reason: length, output_tokens: 5, e2e: "), std::string::npos) << line;
  }
}

}  // namespace
}  // namespace pagoda::server

namespace pagoda::server {
namespace {

TEST(StatsLog, EngineThreadWritesTheLineWhileBusyAndOnceAfter) {
  EngineConfig config;
  config.max_num_seqs = 4;
  config.max_model_len = 128;
  config.kv_cache_memory_bytes = 4 << 20;
  auto engine = std::make_unique<Engine>(testing::fixture_model_dir("qwen3-tiny-tied"), config);
  MetricsRegistry registry;
  EngineMetricsInfo info;
  info.model_name = "tiny";
  info.max_model_len = 128;
  EngineMetrics metrics(registry, info);
  std::mutex mu;
  std::vector<std::pair<LogLevel, std::string>> lines;
  AsyncEngineOptions options;
  options.logging.stats_interval_s = 0.05;
  options.logging.sink = [&](LogLevel level, const std::string& line) {
    std::lock_guard lock(mu);
    lines.emplace_back(level, line);
  };
  AsyncEngine async(std::move(engine), metrics, options);
  std::string why;
  auto channel = async.submit({{{5, 6, 7}, testing::greedy(20)}}, why);
  ASSERT_TRUE(channel) << why;
  std::vector<ChoiceOutput> outs;
  while (channel->next(outs, std::chrono::milliseconds(1000))) outs.clear();
  // The engine is idle now: it still writes the line that closes the busy spell.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  async.stop();
  std::lock_guard lock(mu);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.front().first, LogLevel::Info);
  EXPECT_EQ(lines.front().second.rfind("Engine 000: Avg prompt throughput: ", 0), 0u) << lines.front().second;
  EXPECT_NE(lines.front().second.find(" reqs, GPU KV cache usage: "), std::string::npos) << lines.front().second;
  int info_lines = 0;
  for (const auto& [level, line] : lines) info_lines += level == LogLevel::Info;
  EXPECT_LE(info_lines, 8) << "an idle engine stops logging";
}

// The engine thread names the LoRA adapters running in its line (through the engine's catalog).
TEST(StatsLog, EngineThreadNamesTheRunningLoraAdapter) {
  EngineConfig config;
  config.max_num_seqs = 4;
  config.max_model_len = 512;
  config.kv_cache_memory_bytes = 4 << 20;
  config.lora.enabled = true;
  config.lora.max_lora_rank = 8;
  config.lora.modules = {{"sql", std::string(PAGODA_SOURCE_DIR) + "/tests/fixtures/lora/qwen3-tiny-tied-lora", ""}};
  auto engine = std::make_unique<Engine>(testing::fixture_model_dir("qwen3-tiny-tied"), config);
  MetricsRegistry registry;
  EngineMetricsInfo info;
  info.model_name = "tiny";
  info.max_model_len = 512;
  EngineMetrics metrics(registry, info);
  std::mutex mu;
  std::vector<std::string> lines;
  AsyncEngineOptions options;
  options.logging.stats_interval_s = 0.02;
  options.logging.sink = [&](LogLevel, const std::string& line) {
    std::lock_guard lock(mu);
    lines.push_back(line);
  };
  AsyncEngine async(std::move(engine), metrics, options);
  SamplingParams p = testing::greedy(400);
  p.lora = 0;  // the first adapter's id
  std::string why;
  auto channel = async.submit({{{5, 6, 7}, p}}, why);
  ASSERT_TRUE(channel) << why;
  std::vector<ChoiceOutput> outs;
  while (channel->next(outs, std::chrono::milliseconds(1000))) outs.clear();
  async.stop();
  std::lock_guard lock(mu);
  bool named = false;
  for (const std::string& line : lines) named = named || line.find("Running LoRA adapters: [sql]") != std::string::npos;
  EXPECT_TRUE(named) << (lines.empty() ? std::string("no line") : lines.front());
}

}  // namespace
}  // namespace pagoda::server
