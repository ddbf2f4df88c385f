#include "bench/serve_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace pagoda::bench {
namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string label(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v >= 100 ? "%.0f" : v >= 10 ? "%.1f" : "%.2f", v);
  return buf;
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

// A step of 1, 2 or 5 × 10^k giving about `n` ticks over [0, hi].
double nice_step(double hi, int n) {
  const double raw = hi / n, p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

// One panel at (x0, y0), w × h: the CDF of `ms`.
std::string panel(double x0, double y0, double w, double h, const std::string& name, std::vector<double> ms) {
  std::string s = "<g>\n";
  const double l = x0 + 50, r = x0 + w - 15, t = y0 + 30, b = y0 + h - 40;
  s += "<text x='" + num((l + r) / 2) + "' y='" + num(y0 + 18) + "' text-anchor='middle' font-weight='bold'>" +
       escape(name) + " (ms), n = " + std::to_string(ms.size()) + "</text>\n";
  s += "<rect x='" + num(l) + "' y='" + num(t) + "' width='" + num(r - l) + "' height='" + num(b - t) +
       "' fill='none' stroke='#888'/>\n";
  if (ms.empty()) return s + "<text x='" + num((l + r) / 2) + "' y='" + num((t + b) / 2) +
                         "' text-anchor='middle'>no data</text>\n</g>\n";
  std::sort(ms.begin(), ms.end());
  const double hi = std::max(ms.back(), 1e-3), step = nice_step(hi, 5), xmax = std::ceil(hi / step) * step;
  auto px = [&](double v) { return l + (r - l) * v / xmax; };
  auto py = [&](double f) { return b - (b - t) * f; };
  for (double v = 0; v <= xmax + step / 2; v += step)
    s += "<line x1='" + num(px(v)) + "' y1='" + num(b) + "' x2='" + num(px(v)) + "' y2='" + num(b + 4) +
         "' stroke='#888'/><text x='" + num(px(v)) + "' y='" + num(b + 16) + "' text-anchor='middle'>" +
         label(v) + "</text>\n";
  for (double f : {0.0, 0.5, 1.0})
    s += "<text x='" + num(l - 6) + "' y='" + num(py(f) + 4) + "' text-anchor='end'>" + label(f) + "</text>\n";
  s += "<text x='" + num((l + r) / 2) + "' y='" + num(b + 32) + "' text-anchor='middle' fill='#555'>ms</text>\n";
  // The CDF as a step line, thinned to at most ~2000 points.
  std::string pts = num(px(ms.front())) + "," + num(py(0));
  const size_t n = ms.size(), stride = std::max<size_t>(1, n / 2000);
  for (size_t i = 0; i < n; i += stride) {
    const double f = static_cast<double>(i + 1) / static_cast<double>(n);
    pts.append(" ").append(num(px(ms[i]))).append(",").append(num(py(f)));
  }
  pts.append(" ").append(num(px(ms.back()))).append(",").append(num(py(1)));
  s += "<polyline fill='none' stroke='#1f77b4' stroke-width='1.5' points='" + pts + "'/>\n";
  auto mark = [&](double p, const char* color, const std::string& what) {
    const double v = percentile(ms, p);
    s += "<line x1='" + num(px(v)) + "' y1='" + num(t) + "' x2='" + num(px(v)) + "' y2='" + num(b) +
         "' stroke='" + color + "' stroke-dasharray='4,3'/><text x='" + num(std::min(px(v) + 3, r - 80)) +
         "' y='" + num(p < 90 ? t + 14 : t + 28) + "' fill='" + color + "'>" + what + " " + label(v) + "</text>\n";
  };
  mark(50, "#2ca02c", "p50");
  mark(99, "#d62728", "p99");
  return s + "</g>\n";
}

}  // namespace

std::string latency_svg(const std::vector<RequestResult>& results, const std::string& title) {
  std::vector<double> ttft, tpot, itl, e2el;
  for (const auto& r : results) {
    if (!r.success) continue;
    ttft.push_back(r.ttft * 1000);
    if (r.output_tokens > 1) tpot.push_back(r.tpot() * 1000);
    for (double g : r.itl) itl.push_back(g * 1000);
    e2el.push_back(r.latency * 1000);
  }
  const double W = 900, H = 640, pw = W / 2, ph = (H - 40) / 2;
  std::string s = "<svg xmlns='http://www.w3.org/2000/svg' width='" + num(W) + "' height='" + num(H) +
                  "' font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' fill='white'/>\n";
  s += "<text x='" + num(W / 2) + "' y='24' text-anchor='middle' font-size='15'>" + escape(title) + "</text>\n";
  s += panel(0, 40, pw, ph, "Time to first token", std::move(ttft));
  s += panel(pw, 40, pw, ph, "Time per output token", std::move(tpot));
  s += panel(0, 40 + ph, pw, ph, "Inter-token latency", std::move(itl));
  s += panel(pw, 40 + ph, pw, ph, "End-to-end latency", std::move(e2el));
  return s + "</svg>\n";
}

}  // namespace pagoda::bench
