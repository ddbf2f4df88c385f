#include "bench/membw.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

namespace pagoda {

double read_bandwidth_gbs(int threads, int64_t bytes, int reps) {
  threads = std::max(1, threads);
  const auto n = static_cast<size_t>(bytes / 8);
  std::vector<uint64_t> buf(n, 1);  // written once: every page resident before timing
  std::vector<uint64_t> sums(static_cast<size_t>(threads) * 8);  // a cache line per thread
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        const size_t b = n * static_cast<size_t>(t) / static_cast<size_t>(threads);
        const size_t e = n * static_cast<size_t>(t + 1) / static_cast<size_t>(threads);
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;  // four sums: the loads, not the adds, set the pace
        size_t i = b;
        for (; i + 4 <= e; i += 4) s0 += buf[i], s1 += buf[i + 1], s2 += buf[i + 2], s3 += buf[i + 3];
        for (; i < e; ++i) s0 += buf[i];
        sums[static_cast<size_t>(t) * 8] = s0 + s1 + s2 + s3;
      });
    for (auto& th : pool) th.join();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  uint64_t total = 0;
  for (uint64_t s : sums) total += s;
  if (total != n) return 0.0;  // the sums are used, so the loads cannot be dropped
  return static_cast<double>(n * 8) / best / 1e9;
}

int64_t resident_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return 0;
}

}  // namespace pagoda
