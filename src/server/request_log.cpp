#include "server/request_log.h"

#include <cstdio>
#include <sstream>

#include "server/metrics.h"

namespace pagoda::server {
namespace {

// Client strings reach the log bounded and on one line: at most kMaxChars bytes (cut at a UTF-8
// boundary), quotes, backslashes and control bytes escaped.
constexpr size_t kMaxChars = 32;
constexpr size_t kMaxItems = 8;

std::string quoted(const std::string& s) {
  size_t n = std::min(s.size(), kMaxChars);
  while (n < s.size() && n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  std::string out = "'";
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\\' || c == '\'') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += "'";
  if (n < s.size()) out += "...";
  return out;
}

template <typename T, typename F>
std::string list(const std::vector<T>& items, F item) {
  std::string out = "[";
  for (size_t i = 0; i < items.size() && i < kMaxItems; ++i) out += (i ? ", " : "") + item(items[i]);
  if (items.size() > kMaxItems) out += ", ... (" + std::to_string(items.size()) + " in all)";
  return out + "]";
}

std::string num(double v) { return format_metric_value(v); }

std::string fixed1(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

}  // namespace

std::string format_sampling_params(const SamplingParams& p) {
  std::ostringstream o;
  o << "SamplingParams(n=" << p.n << ", presence_penalty=" << num(p.presence_penalty)
    << ", frequency_penalty=" << num(p.frequency_penalty) << ", repetition_penalty=" << num(p.repetition_penalty)
    << ", temperature=" << num(p.temperature) << ", top_p=" << num(p.top_p) << ", top_k=" << p.top_k
    << ", min_p=" << num(p.min_p) << ", seed=" << (p.seed ? std::to_string(*p.seed) : "None")
    << ", stop=" << list(p.stop.list(), quoted)
    << ", stop_token_ids=" << list(p.stop_token_ids.list(), [](int32_t t) { return std::to_string(t); })
    << ", ignore_eos=" << (p.ignore_eos ? "True" : "False")
    << ", max_tokens=" << (p.max_tokens ? std::to_string(*p.max_tokens) : "None") << ", min_tokens=" << p.min_tokens
    << ", logprobs=" << (p.logprobs ? std::to_string(*p.logprobs) : "None") << ")";
  return o.str();
}

std::string format_request_line(const FinishedRequestLog& r) {
  char e2e[64];
  std::snprintf(e2e, sizeof(e2e), "%.3f", r.e2e_s);
  return "Finished request " + std::to_string(r.id) + ": prompt_tokens: " + std::to_string(r.prompt_tokens) +
         ", params: " + (r.params ? format_sampling_params(*r.params) : "None") +
         ", finish_reason: " + r.finish_reason + ", output_tokens: " + std::to_string(r.output_tokens) +
         ", e2e: " + e2e + " s";
}

StatsLogger::StatsLogger(RequestLogOptions options) : options_(std::move(options)) {}

void StatsLogger::emit(LogLevel level, const std::string& line) const {
  if (options_.sink) options_.sink(level, line);
  else if (static_cast<int>(level) >= static_cast<int>(log_level())) log_write(level, line);
}

bool StatsLogger::dormant() const { return !window_start_.has_value(); }

void StatsLogger::record(Clock::time_point step_start, int64_t prompt_tokens, int64_t generation_tokens) {
  // After an idle spell the interval starts with the work, not with the last line.
  if (dormant()) window_start_ = step_start;
  prompt_tokens_ += prompt_tokens;
  generation_tokens_ += generation_tokens;
}

std::optional<StatsLogger::Clock::time_point> StatsLogger::next_tick() const {
  if (!options_.log_stats || dormant()) return std::nullopt;
  return *window_start_ + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(options_.stats_interval_s));
}

std::string format_spec_decode_line(const SchedulerSnapshot& last, const SchedulerSnapshot& now, double dt) {
  const auto drafts = static_cast<double>(now.spec_num_drafts - last.spec_num_drafts);
  const auto drafted = static_cast<double>(now.spec_num_draft_tokens - last.spec_num_draft_tokens);
  const auto accepted = static_cast<double>(now.spec_num_accepted_tokens - last.spec_num_accepted_tokens);
  auto fixed2 = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", v);
    return std::string(buf);
  };
  std::string per_pos;
  for (size_t i = 0; i < now.spec_accepted_per_pos.size(); ++i) {
    const int64_t before = i < last.spec_accepted_per_pos.size() ? last.spec_accepted_per_pos[i] : 0;
    per_pos += (i ? ", " : "") + fixed2(drafts > 0 ? static_cast<double>(now.spec_accepted_per_pos[i] - before) / drafts : 0.0);
  }
  return "SpecDecoding metrics: Mean acceptance length: " + fixed2(drafts > 0 ? 1.0 + accepted / drafts : 1.0) +
         ", Accepted throughput: " + fixed2(dt > 0 ? accepted / dt : 0.0) +
         " tokens/s, Drafted throughput: " + fixed2(dt > 0 ? drafted / dt : 0.0) +
         " tokens/s, Accepted: " + std::to_string(static_cast<int64_t>(accepted)) +
         " tokens, Drafted: " + std::to_string(static_cast<int64_t>(drafted)) +
         " tokens, Per-position acceptance rate: " + per_pos + ", Avg Draft acceptance rate: " +
         fixed1(drafted > 0 ? 100.0 * accepted / drafted : 0.0) + "%";
}

bool StatsLogger::tick(Clock::time_point now, const SchedulerSnapshot& s) {
  const auto due = next_tick();
  if (!due || now < *due) return false;
  const double dt = std::chrono::duration<double>(now - *window_start_).count();
  const double prompt_throughput = static_cast<double>(prompt_tokens_) / dt;
  const double generation_throughput = static_cast<double>(generation_tokens_) / dt;
  // As vLLM: an interval idle like the one before it is noise on a quiet server.
  const bool idle = prompt_throughput == 0 && generation_throughput == 0 && last_prompt_throughput_ == 0 &&
                    last_generation_throughput_ == 0;
  char engine[32];
  std::snprintf(engine, sizeof engine, "Engine %03d: ", options_.engine_index);
  std::string line = engine + std::string("Avg prompt throughput: ") + fixed1(prompt_throughput) +
                     " tokens/s, Avg generation throughput: " + fixed1(generation_throughput) +
                     " tokens/s, Running: " + std::to_string(s.num_running) +
                     " reqs, Waiting: " + std::to_string(s.num_waiting) + " reqs, ";
  if (s.num_preemptions > last_preemptions_)
    line += "Preemptions: " + std::to_string(s.num_preemptions - last_preemptions_) + ", ";
  line += "GPU KV cache usage: " + fixed1(s.kv_usage * 100) + "%";
  if (s.prefix_caching) {
    // Over the lookups since the last line; over all of them when there were none since.
    int64_t q = s.prefix_cache_queries - last_prefix_queries_, h = s.prefix_cache_hits - last_prefix_hits_;
    if (q == 0) q = s.prefix_cache_queries, h = s.prefix_cache_hits;
    line += ", Prefix cache hit rate: " + fixed1(q > 0 ? 100.0 * static_cast<double>(h) / static_cast<double>(q) : 0.0) + "%";
    last_prefix_queries_ = s.prefix_cache_queries;
    last_prefix_hits_ = s.prefix_cache_hits;
  }
  if (s.lora) line += ", Running LoRA adapters: [" + s.lora_running + "], Waiting LoRA adapters: [" + s.lora_waiting + "]";
  emit(idle ? LogLevel::Debug : LogLevel::Info, line);
  if (s.spec_num_drafts > last_spec_.spec_num_drafts) emit(LogLevel::Info, format_spec_decode_line(last_spec_, s, dt));
  last_spec_ = s;

  last_prompt_throughput_ = prompt_throughput;
  last_generation_throughput_ = generation_throughput;
  last_preemptions_ = s.num_preemptions;
  prompt_tokens_ = generation_tokens_ = 0;
  if (idle) window_start_.reset();
  else window_start_ = now;
  return true;
}

}  // namespace pagoda::server
