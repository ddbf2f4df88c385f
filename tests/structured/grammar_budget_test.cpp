// The parser budget (structured/automaton.h ParserBudget): an ambiguous grammar whose stack sets
// double with each byte is refused at compile time by the probe, a grammar that outgrows the budget
// later spends its runtime (memory freed, every user failed with the same error), and the grammars
// real requests use pass untouched.
#include <gtest/gtest.h>

#include "core/error.h"
#include "structured/compile.h"
#include "structured/gbnf.h"
#include "structured/matcher.h"

namespace pagoda::structured {
namespace {

std::shared_ptr<const TokenTrie> byte_trie() {
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) v.emplace_back(1, static_cast<char>(b));
  v.emplace_back();  // EOS, 256
  return std::make_shared<TokenTrie>(v);
}

std::shared_ptr<GrammarRuntime> runtime(const std::string& gbnf, ParserBudget budget = {}) {
  return std::make_shared<GrammarRuntime>(parse_gbnf(gbnf), byte_trie(), std::vector<int32_t>{256}, budget);
}

// Each "a" may close with "b" or with "c" later: after k bytes of "a", 2^k stacks. 50 bytes.
const std::string kDoubling = "root ::= x\nx ::= \"a\" x \"b\" | \"a\" x \"c\" | \"\"\n";

TEST(GrammarParserBudget, DoublingAmbiguityIsRefusedByTheProbe) {
  auto rt = runtime(kDoubling);
  try {
    rt->probe();
    FAIL() << "the probe accepted a grammar whose stack sets double with each byte";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("too ambiguous"), std::string::npos) << what;
    EXPECT_NE(what.find("aaaaaaaa"), std::string::npos) << "the error shows the text that reached it: " << what;
  }
  // Spent: its memory is freed and it fails the same way for anyone holding it.
  EXPECT_FALSE(rt->failure().empty());
  Matcher m(rt);
  TokenMask mask;
  EXPECT_THROW(m.fill_mask(mask), Error);
  EXPECT_THROW(m.accept('a'), Error);
}

TEST(GrammarParserBudget, GrowthPastTheBudgetMidOutputSpendsTheRuntime) {
  // Unprobed (as if the probe had missed it): the Error comes when the output reaches the blowup.
  auto rt = runtime(kDoubling, ParserBudget{64, size_t{64} << 20});
  Matcher m(rt);
  bool threw = false;
  for (int i = 0; i < 12 && !threw; ++i) {
    try {
      m.accept('a');
    } catch (const Error& e) {
      threw = true;
      EXPECT_NE(std::string(e.what()).find("at most 64"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(threw) << "2^12 stacks were tracked under a budget of 64";
  EXPECT_FALSE(rt->failure().empty());
  Matcher late(rt);  // a request that starts on the spent runtime fails at once
  TokenMask mask;
  EXPECT_THROW(late.fill_mask(mask), Error);
}

TEST(GrammarParserBudget, MemoryBudgetHolds) {
  // A deep, unambiguous grammar: every byte a new stack. A small memory budget stops it.
  auto rt = runtime("root ::= x\nx ::= \"(\" x \")\" | \"\"\n", ParserBudget{1024, 256 << 10});
  Matcher m(rt);
  EXPECT_THROW(
      {
        for (int i = 0; i < 100000; ++i) m.accept('(');
      },
      Error);
  EXPECT_NE(rt->failure().find("MiB of state"), std::string::npos) << rt->failure();
}

TEST(GrammarParserBudget, RealGrammarsPassTheProbe) {
  const std::vector<Constraint> cases = {
      {ConstraintKind::kJsonObject, "", {}, {}, true},
      {ConstraintKind::kJsonSchema,
       R"({"type":"object","properties":{"a":{"type":"array","items":{"anyOf":[{"type":"string"},{"type":"integer"}]}},
           "b":{"type":"string","pattern":"^[a-z]+(-[a-z]+)*$"}},"required":["a"]})",
       {},
       {},
       true},
      {ConstraintKind::kRegex, "(a|ab)*(c|bc)", {}, {}, true},
      {ConstraintKind::kGrammar, "root ::= (\"x\" | \"x\" \"x\")*\n", {}, {}, true},  // ambiguous, but linearly
      {ConstraintKind::kChoice, "", {"yes", "no", "yesterday"}, {}, true},
  };
  for (const Constraint& c : cases) {
    auto rt = std::make_shared<GrammarRuntime>(compile_constraint(c), byte_trie(), std::vector<int32_t>{256});
    EXPECT_NO_THROW(rt->probe()) << c.text;
    EXPECT_TRUE(rt->failure().empty());
  }
}

}  // namespace
}  // namespace pagoda::structured
