// `pagoda bench serve`'s numbers: what each request measured, and the summary vLLM's
// `bench serve` reports (the same keys in the JSON, the same rows in the table).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pagoda::bench {

// One request as the client saw it; times in seconds.
struct RequestResult {
  bool success = false;
  std::string error;
  int32_t prompt_len = 0;      // the server's usage.prompt_tokens when given, else the dataset's
  int32_t output_tokens = 0;   // usage.completion_tokens when given, else content chunks counted
  double start = 0;            // since the benchmark began
  double ttft = 0;             // to the first chunk carrying text
  double latency = 0;          // end to end: until the stream ended
  std::vector<double> itl;     // gaps between text chunks
  int32_t cached_tokens = -1;  // usage.prompt_tokens_details.cached_tokens; -1 when not given
  // (latency - ttft) / (output_tokens - 1); 0 for one-token outputs.
  double tpot() const { return output_tokens > 1 ? (latency - ttft) / (output_tokens - 1) : 0; }
};

// numpy.percentile's default ("linear"): p in [0, 100]. 0 for an empty set.
double percentile(std::vector<double> values, double p);

struct Distribution {
  double mean = 0, median = 0, std = 0;
  std::vector<std::pair<double, double>> percentiles;  // (p, value), milliseconds
};
// Of `seconds`, in milliseconds: mean, median, population standard deviation, and each of `ps`.
Distribution distribution_ms(const std::vector<double>& seconds, const std::vector<double>& ps);

struct BenchSummary {
  int64_t completed = 0, failed = 0;
  double duration = 0;  // seconds, first request sent to last one finished
  int64_t total_input_tokens = 0, total_output_tokens = 0;
  int32_t max_concurrency = 0;          // the limit asked for (0: none)
  double request_rate = 0;              // asked for (infinity: all at once)
  int32_t peak_concurrency = 0;         // most requests in flight at one time, seen
  double max_output_tokens_per_s = 0;   // the busiest whole second
  // Prompt tokens the server's prefix cache had, over the requests whose usage says so (-1: none
  // said: the server needs --enable-prompt-tokens-details).
  int64_t cached_tokens = -1, cached_of_input_tokens = 0;
  double prefix_cache_hit_rate() const {
    return cached_of_input_tokens > 0 ? static_cast<double>(cached_tokens) / static_cast<double>(cached_of_input_tokens) : 0;
  }
  // The server's speculative decoding during the run, from its /metrics before and after (vLLM's
  // spec_decode counters, any prefix); spec_drafts < 0 when it exposes none.
  int64_t spec_drafts = -1, spec_draft_tokens = 0, spec_accepted_tokens = 0;
  std::vector<int64_t> spec_accepted_per_pos;
  double spec_acceptance_rate() const {
    return spec_draft_tokens > 0 ? static_cast<double>(spec_accepted_tokens) / static_cast<double>(spec_draft_tokens) : 0;
  }
  double spec_acceptance_length() const {
    return spec_drafts > 0 ? 1.0 + static_cast<double>(spec_accepted_tokens) / static_cast<double>(spec_drafts) : 0;
  }
  double request_throughput() const { return duration > 0 ? completed / duration : 0; }
  double input_throughput() const { return duration > 0 ? total_input_tokens / duration : 0; }
  double output_throughput() const { return duration > 0 ? total_output_tokens / duration : 0; }
  double total_token_throughput() const {
    return duration > 0 ? (total_input_tokens + total_output_tokens) / duration : 0;
  }
  Distribution ttft, tpot, itl, e2el;
  std::vector<std::string> errors;  // the first few distinct ones
};

// Successful requests only count towards tokens and latencies (as vLLM counts them).
BenchSummary summarize(const std::vector<RequestResult>& results, double duration,
                       const std::vector<double>& percentiles);

// The table vLLM prints ("============ Serving Benchmark Result ============", ...).
std::string summary_table(const BenchSummary& s, const std::string& title = "Serving Benchmark Result");

// vLLM's --result-file keys (completed, failed, duration, request_throughput, output_throughput,
// total_token_throughput, {mean,median,std,pNN}_{ttft,tpot,itl,e2el}_ms, input_lens, output_lens,
// ttfts, itls, errors, ...), plus peak_concurrency.
nlohmann::ordered_json summary_json(const BenchSummary& s, const std::vector<RequestResult>& results);

// Speculative-decoding counters in a Prometheus text exposition: the sum over the samples of
// `<prefix>:spec_decode_<name>_total` (any prefix), by name ("num_drafts", "num_draft_tokens",
// "num_accepted_tokens"); per position for "num_accepted_tokens_per_pos" (index = the position
// label). nullopt when the exposition has no such family.
struct SpecDecodeCounters {
  int64_t drafts = 0, draft_tokens = 0, accepted_tokens = 0;
  std::vector<int64_t> accepted_per_pos;
};
std::optional<SpecDecodeCounters> parse_spec_decode_counters(const std::string& exposition);
// Sets the spec_* fields of `s` to after - before.
void set_spec_decode(BenchSummary& s, const SpecDecodeCounters& before, const SpecDecodeCounters& after);

}  // namespace pagoda::bench
