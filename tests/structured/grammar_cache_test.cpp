// The compiled-grammar cache is bounded by bytes (issue 41: after a huge grammar, ~1.86 GB stayed
// cached): entries are weighed as they are now (a runtime grows as requests walk it), the least
// recently used go first, a grammar past the bound on its own is not kept, and a spent runtime
// weighs next to nothing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "structured/gbnf.h"
#include "structured/grammar_cache.h"
#include "structured/matcher.h"

namespace pagoda::structured {
namespace {

// A byte-level vocabulary of 2,048 tokens: every byte, then multi-byte words, then EOS.
std::shared_ptr<const TokenTrie> trie() {
  static const std::shared_ptr<const TokenTrie> t = [] {
    std::vector<std::string> v;
    for (int b = 0; b < 256; ++b) v.emplace_back(1, static_cast<char>(b));
    for (int i = 0; v.size() < 2047; ++i) v.push_back("w" + std::to_string(i));
    v.emplace_back();  // EOS, 2047
    return std::make_shared<TokenTrie>(v);
  }();
  return t;
}

std::shared_ptr<GrammarRuntime> runtime(const std::string& gbnf) {
  return std::make_shared<GrammarRuntime>(parse_gbnf(gbnf), trie(), std::vector<int32_t>{2047});
}

// `n` distinct literals: a grammar whose size (and first mask's work) grows with n.
std::string choice_grammar(int n, const std::string& tag) {
  std::string g = "root ::= ";
  for (int i = 0; i < n; ++i) g += (i ? " | \"" : "\"") + tag + std::to_string(i) + "\"";
  return g + "\n";
}

// `n` literals one after the other: a large grammar whose states stay single stacks.
std::string sequence_grammar(int n, const std::string& tag) {
  std::string g = "root ::=";
  for (int i = 0; i < n; ++i) g += " \"" + tag + std::to_string(i) + "\"";
  return g + "\n";
}

// Walks `rt` over the masks of every prefix of the first `n` of its literals: its memos and mask
// cache grow.
void use(GrammarRuntime& rt, int n, const std::string& tag) {
  TokenMask mask;
  for (int i = 0; i < n; ++i) {
    const std::string word = tag + std::to_string(i);
    State s = rt.initial();
    for (char c : word) {
      rt.fill_mask(s, mask);
      s = rt.advance(s, static_cast<unsigned char>(c));
      ASSERT_FALSE(s.empty());
    }
  }
}

TEST(StructuredGrammarCache, RuntimeBytesGrowWithUseAndDropWhenSpent) {
  auto rt = runtime(choice_grammar(500, "x"));
  const size_t fresh = rt->bytes();
  EXPECT_GT(fresh, 500u * 3 * sizeof(Element)) << "the grammar itself counts";
  use(*rt, 200, "x");
  EXPECT_GT(rt->bytes(), fresh + 100u * 256) << "memos and cached masks count";
  // A budget error spends it: its automaton's memory goes, and it weighs no more than when new.
  auto spent = std::make_shared<GrammarRuntime>(parse_gbnf(choice_grammar(500, "x")), trie(), std::vector<int32_t>{2047},
                                                ParserBudget{8, size_t{64} << 20});
  TokenMask mask;
  EXPECT_THROW(spent->fill_mask(spent->initial(), mask), Error);
  EXPECT_FALSE(spent->failure().empty());
  EXPECT_LE(spent->bytes(), fresh);
}

TEST(StructuredGrammarCache, BoundedByBytesLeastRecentlyUsedFirst) {
  std::vector<std::shared_ptr<GrammarRuntime>> rts;
  for (int i = 0; i < 6; ++i) rts.push_back(runtime(choice_grammar(500, "g" + std::to_string(i) + "-")));
  const size_t one = rts[0]->bytes();
  // Room for about three of them.
  GrammarCache cache(one * 3 + one / 2);
  for (int i = 0; i < 6; ++i) {
    cache.insert("k" + std::to_string(i), rts[static_cast<size_t>(i)]);
    EXPECT_LE(cache.bytes(), cache.max_bytes()) << "after inserting " << i;
  }
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.find("k0"), nullptr) << "the least recently used went first";
  EXPECT_EQ(cache.find("k2"), nullptr);
  ASSERT_NE(cache.find("k3"), nullptr);  // now the most recent
  EXPECT_EQ(cache.find("k3"), rts[3]);
  // k4 grows past the rest in use: the next use of the cache evicts by what entries weigh now.
  use(*rts[4], 300, "g4-");
  ASSERT_GT(rts[4]->bytes(), one * 2);
  cache.trim();
  EXPECT_LE(cache.bytes(), cache.max_bytes());
  EXPECT_EQ(cache.find("k4"), nullptr) << "the grown one was the least recently used";
  EXPECT_NE(cache.find("k5"), nullptr);
  EXPECT_NE(cache.find("k3"), nullptr);
  // A grammar past the bound on its own is not kept (its holder still has it).
  auto huge = runtime(sequence_grammar(20000, "h"));
  ASSERT_GT(huge->bytes(), cache.max_bytes());
  cache.insert("huge", huge);
  EXPECT_EQ(cache.find("huge"), nullptr);
  EXPECT_LE(cache.bytes(), cache.max_bytes());
  TokenMask mask;
  huge->fill_mask(huge->initial(), mask);  // still usable by the request that compiled it
  EXPECT_TRUE(mask_allows(mask, 'h'));
}

TEST(StructuredGrammarCache, EntryCountIsBoundedToo) {
  GrammarCache cache(size_t{1} << 40, 4);
  for (int i = 0; i < 10; ++i) cache.insert("k" + std::to_string(i), runtime("root ::= \"a\"\n"));
  EXPECT_EQ(cache.size(), 4u);
  EXPECT_NE(cache.find("k9"), nullptr);
  EXPECT_EQ(cache.find("k5"), nullptr);
}

}  // namespace
}  // namespace pagoda::structured
