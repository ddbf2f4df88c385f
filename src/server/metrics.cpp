#include "server/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "core/error.h"

namespace pagoda::server {
namespace {

std::string escape_label_value(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

// {a="x",b="y"} plus an optional extra label (the histogram's le).
std::string label_text(const Labels& labels, const std::string& extra_key = {},
                       const std::string& extra_value = {}) {
  if (labels.empty() && extra_key.empty()) return {};
  std::string out = "{";
  bool first = true;
  auto add = [&](const std::string& k, const std::string& v) {
    if (!first) out += ",";
    first = false;
    out += k + "=\"" + escape_label_value(v) + "\"";
  };
  for (const auto& [k, v] : labels) add(k, v);
  if (!extra_key.empty()) add(extra_key, extra_value);
  return out + "}";
}

}  // namespace

std::string format_metric_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  if (ec != std::errc()) return "NaN";
  return std::string(buf, end);
}

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)) {
  check(std::is_sorted(bounds_.begin(), bounds_.end()), "histogram bounds must increase");
  buckets_ = std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1);
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0);
}

void Histogram::observe(double v) {
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
}

uint64_t Histogram::cumulative_count(size_t i) const {
  uint64_t total = 0;
  for (size_t b = 0; b <= std::min(i, bounds_.size()); ++b) total += buckets_[b].load(std::memory_order_relaxed);
  return total;
}

MetricsRegistry::Family& MetricsRegistry::family(const std::string& name, const std::string& help, Type type) {
  for (auto& f : families_) {
    if (f->name != name) continue;
    check(f->type == type, "metric " + name + " registered twice with different types");
    return *f;
  }
  families_.push_back(std::make_unique<Family>(Family{name, help, type, {}, {}, {}}));
  return *families_.back();
}

Counter& MetricsRegistry::counter(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard lock(mu_);
  auto& f = family(name, help, Type::Counter);
  f.counters.emplace_back(labels, std::make_unique<Counter>());
  return *f.counters.back().second;
}

Gauge& MetricsRegistry::gauge(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard lock(mu_);
  auto& f = family(name, help, Type::Gauge);
  f.gauges.emplace_back(labels, std::make_unique<Gauge>());
  return *f.gauges.back().second;
}

Histogram& MetricsRegistry::histogram(const std::string& name, const std::string& help,
                                      std::vector<double> bounds, const Labels& labels) {
  std::lock_guard lock(mu_);
  auto& f = family(name, help, Type::Histogram);
  f.histograms.emplace_back(labels, std::make_unique<Histogram>(std::move(bounds)));
  return *f.histograms.back().second;
}

std::string MetricsRegistry::render() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& f : families_) {
    static constexpr const char* kTypeNames[] = {"counter", "gauge", "histogram"};
    out += "# HELP " + f->name + " " + f->help + "\n";
    out += "# TYPE " + f->name + " " + kTypeNames[static_cast<int>(f->type)] + "\n";
    for (const auto& [labels, c] : f->counters)
      out += f->name + label_text(labels) + " " + format_metric_value(c->value()) + "\n";
    for (const auto& [labels, g] : f->gauges)
      out += f->name + label_text(labels) + " " + format_metric_value(g->value()) + "\n";
    for (const auto& [labels, h] : f->histograms) {
      const auto& b = h->bounds();
      for (size_t i = 0; i <= b.size(); ++i) {
        const std::string le = i < b.size() ? format_metric_value(b[i]) : "+Inf";
        out += f->name + "_bucket" + label_text(labels, "le", le) + " " +
               std::to_string(h->cumulative_count(i)) + "\n";
      }
      out += f->name + "_sum" + label_text(labels) + " " + format_metric_value(h->sum()) + "\n";
      out += f->name + "_count" + label_text(labels) + " " + std::to_string(h->count()) + "\n";
    }
  }
  return out;
}

}  // namespace pagoda::server
