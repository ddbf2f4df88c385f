// The n-gram proposer alone (engine/ngram_proposer.cpp): per-step cost of its lookup for 64 sequences
// of L random tokens (no match: the whole context is searched), as docs/benchmarks.md reports it:
//   g++ -O3 -std=c++20 -I src tools/ngram_lookup_bench.cpp src/engine/ngram_proposer.cpp -o /tmp/nb && /tmp/nb
#include "engine/ngram_proposer.h"
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>
int main() {
  std::mt19937 rng(1);
  for (int L : {311, 2000, 8000}) {
    std::vector<int32_t> t(L);
    for (auto& x : t) x = rng() % 151936;
    auto t0 = std::chrono::steady_clock::now();
    size_t n = 0;
    for (int i = 0; i < 64 * 100; ++i) n += pagoda::propose_ngram(t, 4, 2, 4).size();
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / 100;
    std::printf("L=%d: %.1f us per step of 64 sequences (%zu)\n", L, us, n);
  }
}
