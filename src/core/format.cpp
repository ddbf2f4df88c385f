#include "core/format.h"

#include <cmath>
#include <cstdio>

namespace pagoda {

std::string format_bytes(int64_t bytes) {
  const double kib = 1024.0, mib = kib * 1024.0, gib = mib * 1024.0;
  const double a = std::fabs(static_cast<double>(bytes));
  char buf[64];
  if (a >= gib) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / gib);
  } else if (a >= mib) {
    std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / mib);
  } else if (a >= kib) {
    std::snprintf(buf, sizeof buf, "%.2f KiB", static_cast<double>(bytes) / kib);
  } else {
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  }
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

}  // namespace pagoda
