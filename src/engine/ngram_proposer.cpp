#include "engine/ngram_proposer.h"

#include <algorithm>

namespace pagoda {

std::vector<int32_t> propose_ngram(std::span<const int32_t> tokens, int32_t k, int32_t min_n, int32_t max_n) {
  const auto len = static_cast<int64_t>(tokens.size());
  for (int64_t n = std::min<int64_t>(max_n, len - 1); n >= min_n && n >= 1; --n) {
    const std::span<const int32_t> suffix = tokens.subspan(static_cast<size_t>(len - n));
    // The most recent earlier occurrence whose continuation has k tokens (the likeliest to repeat);
    // in text that repeats with a short period the latest ones are cut short by the end of the
    // tokens, so an earlier one with a longer continuation wins then.
    int64_t best_from = -1, best_count = 0;
    for (int64_t start = len - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const int64_t from = start + n;
      const int64_t count = std::min<int64_t>(k, len - from);
      if (count > best_count) best_from = from, best_count = count;
      if (count == k) break;
    }
    if (best_count > 0) return {tokens.begin() + best_from, tokens.begin() + best_from + best_count};
  }
  return {};
}

}  // namespace pagoda
