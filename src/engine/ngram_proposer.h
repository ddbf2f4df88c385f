// Prompt-lookup drafts (vLLM's "ngram" method): find the longest suffix of the sequence's tokens,
// between prompt_lookup_max and prompt_lookup_min tokens long, that occurred earlier in the same
// sequence, and propose the tokens that followed its most recent earlier occurrence (that has k
// tokens after it, else the one with the most). Costs no model
// pass; pays off where the output quotes its input (code edits, summaries, extraction).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace pagoda {

// Up to `k` drafts for the token after `tokens` (empty when no suffix of length in
// [min_n, max_n] occurred before).
std::vector<int32_t> propose_ngram(std::span<const int32_t> tokens, int32_t k, int32_t min_n, int32_t max_n);

}  // namespace pagoda
