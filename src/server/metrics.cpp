#include "server/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

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

std::string escape_help(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

// {a="x",b="y"}, the labels sorted by name as prometheus_client writes them, plus an optional
// extra label (the histogram's le) sorted in with them.
std::string label_text(const Labels& labels, const std::string& extra_key = {},
                       const std::string& extra_value = {}) {
  Labels all = labels;
  if (!extra_key.empty()) all.emplace_back(extra_key, extra_value);
  if (all.empty()) return {};
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string out = "{";
  for (size_t i = 0; i < all.size(); ++i) {
    if (i) out += ",";
    out += all[i].first + "=\"" + escape_label_value(all[i].second) + "\"";
  }
  return out + "}";
}

// Python's repr() of a finite double: the shortest digits that round-trip, in fixed notation
// while the decimal exponent is in (-4, 16], else as d.ddde±XX.
std::string python_float_repr(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  if (ec != std::errc()) return "nan";
  std::string s(buf, end);
  std::string sign;
  if (s[0] == '-') {
    sign = "-";
    s.erase(0, 1);
  }
  const size_t e = s.find('e');
  const int exp10 = std::atoi(s.c_str() + e + 1);
  std::string digits;
  for (size_t i = 0; i < e; ++i)
    if (s[i] != '.') digits += s[i];
  const int decpt = exp10 + 1;  // value = 0.<digits> * 10^decpt
  const auto n = static_cast<int>(digits.size());
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) return sign + "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
    if (decpt >= n) return sign + digits + std::string(static_cast<size_t>(decpt - n), '0') + ".0";
    return sign + digits.substr(0, static_cast<size_t>(decpt)) + "." + digits.substr(static_cast<size_t>(decpt));
  }
  std::string out = sign + digits.substr(0, 1);
  if (n > 1) out += "." + digits.substr(1);
  const int a = std::abs(exp10);
  out += exp10 < 0 ? "e-" : "e+";
  if (a < 10) out += "0";
  return out + std::to_string(a);
}

}  // namespace

std::string format_metric_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  const std::string s = python_float_repr(v);
  // prometheus_client's floatToGoString: Go writes exponents sooner than Python (its own
  // quirk included: the exponent is always written as "e+0" followed by the digit count).
  const size_t dot = s.find('.');
  if (v > 0 && dot != std::string::npos && dot > 6) {
    std::string mantissa = s.substr(0, 1) + "." + s.substr(1, dot - 1) + s.substr(dot + 1);
    while (!mantissa.empty() && (mantissa.back() == '0' || mantissa.back() == '.')) mantissa.pop_back();
    return mantissa + "e+0" + std::to_string(dot - 1);
  }
  return s;
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
  static const std::string kTotal = "_total";
  std::string base = name;
  if (base.size() > kTotal.size() && base.compare(base.size() - kTotal.size(), kTotal.size(), kTotal) == 0)
    base.resize(base.size() - kTotal.size());
  std::lock_guard lock(mu_);
  auto& f = family(base, help, Type::Counter);
  f.counters.emplace_back(labels, std::make_unique<Counter>());
  return *f.counters.back().second;
}

Gauge& MetricsRegistry::gauge(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard lock(mu_);
  auto& f = family(name, help, Type::Gauge);
  f.gauges.emplace_back(labels, std::make_unique<Gauge>());
  return *f.gauges.back().second;
}

void MetricsRegistry::set_gauge_series(const std::string& name, const std::string& help, const Labels& labels,
                                       double value, size_t max_series) {
  std::lock_guard lock(mu_);
  auto& f = family(name, help, Type::Gauge);
  for (auto& [l, g] : f.gauges)
    if (l == labels) {
      g->set(value);
      return;
    }
  if (!f.gauges.empty() && f.gauges.size() >= max_series) {
    auto lowest = std::min_element(f.gauges.begin(), f.gauges.end(),
                                   [](const auto& a, const auto& b) { return a.second->value() < b.second->value(); });
    f.gauges.erase(lowest);
  }
  f.gauges.emplace_back(labels, std::make_unique<Gauge>());
  f.gauges.back().second->set(value);
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
    const std::string name = f->type == Type::Counter ? f->name + "_total" : f->name;
    out += "# HELP " + name + " " + escape_help(f->help) + "\n";
    out += "# TYPE " + name + " " + kTypeNames[static_cast<int>(f->type)] + "\n";
    for (const auto& [labels, c] : f->counters)
      out += name + label_text(labels) + " " + format_metric_value(c->value()) + "\n";
    for (const auto& [labels, g] : f->gauges)
      out += name + label_text(labels) + " " + format_metric_value(g->value()) + "\n";
    for (const auto& [labels, h] : f->histograms) {
      const auto& b = h->bounds();
      for (size_t i = 0; i <= b.size(); ++i) {
        const std::string le = i < b.size() ? format_metric_value(b[i]) : "+Inf";
        out += name + "_bucket" + label_text(labels, "le", le) + " " +
               format_metric_value(static_cast<double>(h->cumulative_count(i))) + "\n";
      }
      out += name + "_count" + label_text(labels) + " " + format_metric_value(static_cast<double>(h->count())) + "\n";
      out += name + "_sum" + label_text(labels) + " " + format_metric_value(h->sum()) + "\n";
    }
  }
  return out;
}

}  // namespace pagoda::server
