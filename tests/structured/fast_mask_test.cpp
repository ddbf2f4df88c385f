// The mask from token classes (xgrammar's context-independent split, src/structured/token_classes.h)
// against the plain walk of the whole vocabulary trie from the state, bit for bit: on random walks
// of every validation case (all 44 schemas, json_object, regexes, a choice list, a GBNF grammar)
// over one shared trie of a quarter of the real Qwen3 vocabulary (so classes one grammar computed
// are reused by the next, through the shape cache), with and without a token budget in force.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "structured/compile.h"
#include "structured/matcher.h"
#include "tokenizer/tokenizer.h"
#include "validation_cases.h"
#include "core/build_paths.h"

namespace pagoda::structured {
namespace {

TEST(GrammarFastMask, EqualsTheFullTrieWalkBitForBit) {
  const std::string dir = std::string(PAGODA_SOURCE_DIR) + "/tests/data/qwen3-tokenizer";
  ASSERT_TRUE(std::filesystem::exists(dir + "/tokenizer.json")) << dir << " is missing: run tools/fetch_test_data.sh";
  auto tok = Tokenizer::load_dir(dir);
  const std::vector<int32_t> eos = {*tok->token_to_id("<|im_end|>"), *tok->token_to_id("<|endoftext|>")};
  std::vector<std::string> bytes = vocabulary_bytes(*tok, eos);
  // Every 4th token, but all of the short ones (single bytes and pairs: the JSON punctuation).
  for (size_t i = 0; i < bytes.size(); ++i)
    if (i % 4 != 0 && bytes[i].size() > 2) bytes[i].clear();
  auto trie = std::make_shared<const TokenTrie>(bytes);

  const auto cases = testing::validation_cases();
  ASSERT_GE(cases.size(), 49u);
  std::mt19937_64 rng(7);
  size_t compared = 0, budgeted = 0, uncertain_states = 0;
  TokenMask fast, slow;
  std::vector<int32_t> allowed;
  for (const auto& [record, constraint] : cases) {
    SCOPED_TRACE(record.dump());
    // Two runtimes of the grammar: the fast one keeps its caches, the reference has none.
    auto rt_fast = std::make_shared<GrammarRuntime>(compile_constraint(constraint), trie, eos);
    auto rt_slow = std::make_shared<GrammarRuntime>(compile_constraint(constraint), trie, eos);
    for (int walk = 0; walk < 2; ++walk) {
      Matcher a(rt_fast), b(rt_slow);
      std::string text;
      for (int step = 0; step < 40; ++step) {
        // Mostly the plain mask; sometimes a budget of a few tokens (the exact-walk path).
        const int64_t left = rng() % 4 == 0 ? static_cast<int64_t>(1 + rng() % 12) : INT64_MAX;
        a.fill_mask(fast, left);
        b.reference_mask(slow, left);
        ++compared;
        budgeted += left != INT64_MAX;
        ASSERT_EQ(fast, slow) << "step " << step << " after \"" << text << "\", tokens_left " << left;
        allowed_ids(fast, allowed);
        if (allowed.empty()) break;
        // Prefer tokens that leave a string or a bracket half of the time: more distinct states.
        int32_t t = allowed[rng() % allowed.size()];
        if (rng() % 2 == 0)
          for (int tries = 0; tries < 64; ++tries) {
            const int32_t u = allowed[rng() % allowed.size()];
            if (trie->bytes(u).find_first_of("\"]},") != std::string::npos) {
              t = u;
              break;
            }
          }
        if (t == eos[0] || t == eos[1]) break;
        ASSERT_TRUE(a.accept(t));
        ASSERT_TRUE(b.accept(t));
        text += trie->bytes(t);
        uncertain_states += trie->bytes(t).find('"') != std::string::npos;
      }
    }
  }
  // The comparison covered many states, the budget path, and string boundaries.
  EXPECT_GT(compared, 1500u);
  EXPECT_GT(budgeted, 300u);
  EXPECT_GT(uncertain_states, 100u);
}

}  // namespace
}  // namespace pagoda::structured
