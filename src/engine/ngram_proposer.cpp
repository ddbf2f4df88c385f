#include "engine/ngram_proposer.h"

#include <algorithm>

namespace pagoda {

std::vector<int32_t> propose_ngram(std::span<const int32_t> tokens, int32_t k, int32_t min_n, int32_t max_n) {
  const auto len = static_cast<int64_t>(tokens.size());
  const int64_t hi = std::min<int64_t>(max_n, len - 1), lo = std::max<int32_t>(min_n, 1);
  if (k <= 0 || hi < lo) return {};
  // One pass over the tokens serves every n (it runs for every running sequence every step, so it
  // must cost a compare a token, not one a token per n): the earlier positions e holding the last
  // token, newest first, each with how many tokens ending there match the suffix (at most hi). An
  // occurrence of the n-token suffix starting at s ends at e = s + n - 1 and is followed by
  // len - e - 1 tokens.
  const int32_t* d = tokens.data();
  const int32_t last = d[len - 1];
  struct Hit {
    int64_t end, matched;
  };
  std::vector<Hit> hits;
  // Blocks of 32 tokens: the compare-and-or over a block vectorises, and most blocks have no hit.
  constexpr int64_t kBlock = 32;
  for (int64_t top = len - 2; top >= lo - 1; top -= kBlock) {
    const int64_t bottom = std::max<int64_t>(lo - 1, top - kBlock + 1);
    bool any = false;
    for (int64_t e = bottom; e <= top; ++e) any |= d[e] == last;
    if (!any) continue;
    for (int64_t e = top; e >= bottom; --e) {
      if (d[e] != last) continue;
      int64_t m = 1;
      while (m < hi && e - m >= 0 && d[e - m] == d[len - 1 - m]) ++m;
      if (m >= lo) hits.push_back({e, m});
    }
  }
  // The longest suffix that occurred: the most recent occurrence with k tokens after it (the
  // likeliest to repeat); in text that repeats with a short period the latest ones are cut short by
  // the end of the tokens, so then the earliest, which has the most.
  for (int64_t n = hi; n >= lo; --n) {
    int64_t cut_short = -1;
    for (const Hit& h : hits) {
      if (h.matched < n) continue;
      if (len - h.end - 1 >= k) return {d + h.end + 1, d + h.end + 1 + k};
      cut_short = h.end;  // newest first: the last one seen is the earliest
    }
    if (cut_short >= 0) return {d + cut_short + 1, d + len};
  }
  return {};
}

}  // namespace pagoda
