// A small Prometheus registry: counters, gauges and histograms with fixed label sets, rendered in
// the text exposition format (version 0.0.4) the way Python's prometheus_client renders it, since
// that is what vLLM serves and what dashboards built for it were tested against: counters named
// `<name>_total`, labels sorted by name, numbers as Python floats ("1.0", "1e+06"), histogram
// samples as buckets, `_count`, `_sum`. Every metric is created at start-up; updates are lock-free
// atomics, so the engine thread never waits for a scrape.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace pagoda::server {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  void inc(double by = 1.0) { value_.fetch_add(by, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Histogram {
 public:
  // `bounds`: the upper bounds of the buckets, increasing; +Inf is implied.
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  const std::vector<double>& bounds() const { return bounds_; }
  // Cumulative count of observations <= bounds()[i] (i == bounds().size(): all of them).
  uint64_t cumulative_count(size_t i) const;
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum() const { return sum_.load(std::memory_order_relaxed); }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // per bucket, not cumulative; last = +Inf
  std::atomic<uint64_t> count_{0};
  std::atomic<double> sum_{0.0};
};

class MetricsRegistry {
 public:
  // Adds one series to the family `name` (created on first use with `help`). The returned
  // reference lives as long as the registry. A counter family is exposed as `<name>_total`
  // (a `_total` given in `name` is dropped first, as prometheus_client does).
  Counter& counter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge& gauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram& histogram(const std::string& name, const std::string& help, std::vector<double> bounds,
                       const Labels& labels = {});

  // Sets the series of gauge family `name` with exactly `labels` (added on first use) to `value`:
  // for info gauges whose labels change at run time (vLLM's lora_requests_info). Past
  // `max_series` series in the family, the one of the lowest value goes.
  void set_gauge_series(const std::string& name, const std::string& help, const Labels& labels, double value,
                        size_t max_series = 64);

  // The whole registry in Prometheus text format. No `_created` series: see docs/metrics.md.
  std::string render() const;

 private:
  enum class Type { Counter, Gauge, Histogram };
  struct Family {
    std::string name, help;
    Type type;
    std::vector<std::pair<Labels, std::unique_ptr<Counter>>> counters;
    std::vector<std::pair<Labels, std::unique_ptr<Gauge>>> gauges;
    std::vector<std::pair<Labels, std::unique_ptr<Histogram>>> histograms;
  };
  Family& family(const std::string& name, const std::string& help, Type type);

  mutable std::mutex mu_;  // guards the family list (series are added at start-up)
  std::vector<std::unique_ptr<Family>> families_;
};

// A number as prometheus_client writes it (its floatToGoString): Python's repr of the float
// ("0.0", "2.5", "1e-05"), with Go's exponent form past six integer digits ("1.5e+06"), and
// +Inf / -Inf / NaN.
std::string format_metric_value(double v);

}  // namespace pagoda::server
