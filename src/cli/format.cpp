#include "cli/format.h"

#include <cstdio>

namespace pagoda::cli {

std::string format_bytes(int64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[64];
  if (u == 0) std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  else std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

std::string format_count(int64_t n) {
  char buf[64];
  if (n >= 1000000000LL) std::snprintf(buf, sizeof buf, "%.2fB", n / 1e9);
  else if (n >= 1000000LL) std::snprintf(buf, sizeof buf, "%.1fM", n / 1e6);
  else if (n >= 10000LL) std::snprintf(buf, sizeof buf, "%.1fK", n / 1e3);
  else std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(n));
  return buf;
}

}  // namespace pagoda::cli
