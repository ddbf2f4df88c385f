#include "bench/serve_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <sstream>

namespace pagoda::bench {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

Distribution distribution_ms(const std::vector<double>& seconds, const std::vector<double>& ps) {
  Distribution d;
  std::vector<double> ms(seconds.size());
  std::transform(seconds.begin(), seconds.end(), ms.begin(), [](double s) { return s * 1000.0; });
  if (!ms.empty()) {
    d.mean = std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size());
    double sq = 0;
    for (double x : ms) sq += (x - d.mean) * (x - d.mean);
    d.std = std::sqrt(sq / static_cast<double>(ms.size()));
    d.median = percentile(ms, 50);
  }
  for (double p : ps) d.percentiles.emplace_back(p, percentile(ms, p));
  return d;
}

namespace {

// Most requests in flight at once: a sweep over the [start, start + latency] intervals.
int32_t peak_in_flight(const std::vector<RequestResult>& results) {
  std::vector<std::pair<double, int>> events;
  for (const auto& r : results) {
    events.emplace_back(r.start, +1);
    events.emplace_back(r.start + r.latency, -1);
  }
  std::sort(events.begin(), events.end());  // an end before a start at the same instant
  int32_t cur = 0, peak = 0;
  for (const auto& [t, d] : events) peak = std::max(peak, cur += d);
  return peak;
}

// Output tokens per whole second of the run (first token at start + ttft, the rest spread evenly
// until the end), the busiest second's count.
double busiest_second(const std::vector<RequestResult>& results) {
  std::map<int64_t, double> per_s;
  for (const auto& r : results) {
    if (!r.success || r.output_tokens <= 0) continue;
    const double first = r.start + r.ttft, end = r.start + r.latency;
    for (int32_t k = 0; k < r.output_tokens; ++k) {
      const double t = r.output_tokens > 1 ? first + (end - first) * k / (r.output_tokens - 1) : first;
      per_s[static_cast<int64_t>(std::floor(t))] += 1;
    }
  }
  double best = 0;
  for (const auto& [s, n] : per_s) best = std::max(best, n);
  return best;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string pct_name(double p) {
  std::string s = fmt("%g", p);
  std::replace(s.begin(), s.end(), '.', '_');
  return s;
}

}  // namespace

BenchSummary summarize(const std::vector<RequestResult>& results, double duration,
                       const std::vector<double>& percentiles) {
  BenchSummary s;
  s.duration = duration;
  std::vector<double> ttfts, tpots, itls, e2els;
  for (const auto& r : results) {
    if (!r.success) {
      ++s.failed;
      if (s.errors.size() < 5 && std::find(s.errors.begin(), s.errors.end(), r.error) == s.errors.end())
        s.errors.push_back(r.error);
      continue;
    }
    ++s.completed;
    s.total_input_tokens += r.prompt_len;
    s.total_output_tokens += r.output_tokens;
    if (r.cached_tokens >= 0) {
      s.cached_tokens = std::max<int64_t>(s.cached_tokens, 0) + r.cached_tokens;
      s.cached_of_input_tokens += r.prompt_len;
    }
    ttfts.push_back(r.ttft);
    if (r.output_tokens > 1) tpots.push_back(r.tpot());
    itls.insert(itls.end(), r.itl.begin(), r.itl.end());
    e2els.push_back(r.latency);
  }
  std::vector<RequestResult> ok;
  for (const auto& r : results)
    if (r.success) ok.push_back(r);
  s.peak_concurrency = peak_in_flight(results);
  s.max_output_tokens_per_s = busiest_second(ok);
  s.ttft = distribution_ms(ttfts, percentiles);
  s.tpot = distribution_ms(tpots, percentiles);
  s.itl = distribution_ms(itls, percentiles);
  s.e2el = distribution_ms(e2els, percentiles);
  return s;
}

std::string summary_table(const BenchSummary& s, const std::string& title) {
  std::string out;
  auto rule = [&](const std::string& name, char c) {
    const size_t width = 50, pad = name.empty() ? width : width - std::min(width, name.size() + 2);
    const std::string side_l(pad / 2, c), side_r(pad - pad / 2, c);
    out += name.empty() ? std::string(width, c) + "\n" : side_l + " " + name + " " + side_r + "\n";
  };
  auto row = [&](const std::string& name, const std::string& value) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "%-40s %s\n", (name + ":").c_str(), value.c_str());
    out += buf;
  };
  auto num = [](double v) { return fmt("%.2f", v); };
  auto count = [](double v) { return fmt("%.0f", v); };
  rule(title, '=');
  row("Successful requests", count(static_cast<double>(s.completed)));
  row("Failed requests", count(static_cast<double>(s.failed)));
  if (s.max_concurrency > 0) row("Maximum request concurrency", count(s.max_concurrency));
  row("Request rate (req/s)", std::isinf(s.request_rate) ? "inf" : num(s.request_rate));
  row("Benchmark duration (s)", num(s.duration));
  row("Total input tokens", count(static_cast<double>(s.total_input_tokens)));
  row("Total generated tokens", count(static_cast<double>(s.total_output_tokens)));
  row("Request throughput (req/s)", num(s.request_throughput()));
  row("Input token throughput (tok/s)", num(s.input_throughput()));
  row("Output token throughput (tok/s)", num(s.output_throughput()));
  row("Peak output token throughput (tok/s)", num(s.max_output_tokens_per_s));
  row("Peak concurrent requests", count(s.peak_concurrency));
  row("Total token throughput (tok/s)", num(s.total_token_throughput()));
  if (s.spec_drafts >= 0) {
    rule("Speculative Decoding", '-');
    row("Acceptance rate (%)", num(100.0 * s.spec_acceptance_rate()));
    row("Acceptance length", num(s.spec_acceptance_length()));
    row("Drafts", count(static_cast<double>(s.spec_drafts)));
    row("Draft tokens", count(static_cast<double>(s.spec_draft_tokens)));
    row("Accepted tokens", count(static_cast<double>(s.spec_accepted_tokens)));
    std::string per_pos;
    for (size_t i = 0; i < s.spec_accepted_per_pos.size(); ++i)
      per_pos += (i ? ", " : "") + num(s.spec_drafts > 0 ? 100.0 * static_cast<double>(s.spec_accepted_per_pos[i]) /
                                                               static_cast<double>(s.spec_drafts)
                                                         : 0.0);
    row("Per-position acceptance (%)", per_pos);
    rule("", '-');
  }
  row("Prefix cache hit rate (%)", s.cached_tokens < 0 ? std::string("n/a (serve with --enable-prompt-tokens-details)")
                                                       : num(100.0 * s.prefix_cache_hit_rate()));
  auto block = [&](const std::string& heading, const std::string& key, const Distribution& d) {
    rule(heading, '-');
    row("Mean " + key + " (ms)", num(d.mean));
    row("Median " + key + " (ms)", num(d.median));
    for (const auto& [p, v] : d.percentiles) row(std::string("P").append(fmt("%g", p)).append(" ").append(key).append(" (ms)"), num(v));
  };
  block("Time to First Token", "TTFT", s.ttft);
  block("Time per Output Token (excl. 1st token)", "TPOT", s.tpot);
  block("Inter-token Latency", "ITL", s.itl);
  block("End-to-end Latency", "E2EL", s.e2el);
  rule("", '=');
  for (const auto& e : s.errors) out += "error: " + e + "\n";
  return out;
}

nlohmann::ordered_json summary_json(const BenchSummary& s, const std::vector<RequestResult>& results) {
  nlohmann::ordered_json j;
  j["completed"] = s.completed;
  j["failed"] = s.failed;
  j["duration"] = s.duration;
  j["total_input_tokens"] = s.total_input_tokens;
  j["total_output_tokens"] = s.total_output_tokens;
  j["request_throughput"] = s.request_throughput();
  j["input_throughput"] = s.input_throughput();
  j["output_throughput"] = s.output_throughput();
  j["total_token_throughput"] = s.total_token_throughput();
  j["max_output_tokens_per_s"] = s.max_output_tokens_per_s;
  j["max_concurrent_requests"] = s.peak_concurrency;
  j["peak_concurrency"] = s.peak_concurrency;
  if (s.spec_drafts >= 0) {
    j["spec_decode_acceptance_rate"] = s.spec_acceptance_rate();
    j["spec_decode_acceptance_length"] = s.spec_acceptance_length();
    j["spec_decode_num_drafts"] = s.spec_drafts;
    j["spec_decode_draft_tokens"] = s.spec_draft_tokens;
    j["spec_decode_accepted_tokens"] = s.spec_accepted_tokens;
    j["spec_decode_accepted_per_pos"] = s.spec_accepted_per_pos;
  }
  j["prefix_cache_hit_rate"] = s.cached_tokens < 0 ? nlohmann::ordered_json(nullptr)
                                                   : nlohmann::ordered_json(s.prefix_cache_hit_rate());
  j["max_concurrency"] = s.max_concurrency > 0 ? nlohmann::ordered_json(s.max_concurrency) : nullptr;
  j["request_rate"] = std::isinf(s.request_rate) ? nlohmann::ordered_json("inf") : nlohmann::ordered_json(s.request_rate);
  auto put = [&](const std::string& key, const Distribution& d) {
    j["mean_" + key + "_ms"] = d.mean;
    j["median_" + key + "_ms"] = d.median;
    j["std_" + key + "_ms"] = d.std;
    for (const auto& [p, v] : d.percentiles) j[std::string("p").append(pct_name(p)).append("_").append(key).append("_ms")] = v;
  };
  put("ttft", s.ttft);
  put("tpot", s.tpot);
  put("itl", s.itl);
  put("e2el", s.e2el);
  nlohmann::ordered_json input_lens = nlohmann::ordered_json::array(), output_lens = input_lens,
                         ttfts = input_lens, itls = input_lens, errors = input_lens;
  for (const auto& r : results) {
    input_lens.push_back(r.prompt_len);
    output_lens.push_back(r.success ? r.output_tokens : 0);
    ttfts.push_back(r.success ? r.ttft : 0.0);
    itls.push_back(r.itl);
    errors.push_back(r.error);
  }
  j["input_lens"] = std::move(input_lens);
  j["output_lens"] = std::move(output_lens);
  j["ttfts"] = std::move(ttfts);
  j["itls"] = std::move(itls);
  j["errors"] = std::move(errors);
  return j;
}

std::optional<SpecDecodeCounters> parse_spec_decode_counters(const std::string& exposition) {
  SpecDecodeCounters c;
  bool any = false;
  std::istringstream in(exposition);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t colon = line.find(":spec_decode_");
    const size_t name_end = line.find_first_of("{ ");
    if (colon == std::string::npos || name_end == std::string::npos || colon > name_end) continue;
    const std::string name = line.substr(colon + 13, name_end - colon - 13);
    const size_t value_at = line.rfind(' ');
    if (value_at == std::string::npos) continue;
    double v = 0;
    try {
      v = std::stod(line.substr(value_at + 1));
    } catch (const std::exception&) {
      continue;  // not a number: not a sample we read
    }
    const auto n = static_cast<int64_t>(std::llround(v));
    if (name == "num_drafts_total") c.drafts += n;
    else if (name == "num_draft_tokens_total") c.draft_tokens += n;
    else if (name == "num_accepted_tokens_total") c.accepted_tokens += n;
    else if (name == "num_accepted_tokens_per_pos_total") {
      const size_t p = line.find("position=\"", name_end);
      if (p == std::string::npos) continue;
      const int64_t pos = std::strtoll(line.c_str() + p + 10, nullptr, 10);
      if (pos < 0 || pos > 1024) continue;  // a position this large is no draft position
      if (c.accepted_per_pos.size() <= static_cast<size_t>(pos)) c.accepted_per_pos.resize(static_cast<size_t>(pos) + 1, 0);
      c.accepted_per_pos[static_cast<size_t>(pos)] += n;
    } else {
      continue;
    }
    any = true;
  }
  if (!any) return std::nullopt;
  return c;
}

void set_spec_decode(BenchSummary& s, const SpecDecodeCounters& before, const SpecDecodeCounters& after) {
  s.spec_drafts = after.drafts - before.drafts;
  s.spec_draft_tokens = after.draft_tokens - before.draft_tokens;
  s.spec_accepted_tokens = after.accepted_tokens - before.accepted_tokens;
  s.spec_accepted_per_pos.assign(after.accepted_per_pos.size(), 0);
  for (size_t i = 0; i < after.accepted_per_pos.size(); ++i)
    s.spec_accepted_per_pos[i] =
        after.accepted_per_pos[i] - (i < before.accepted_per_pos.size() ? before.accepted_per_pos[i] : 0);
}

}  // namespace pagoda::bench
