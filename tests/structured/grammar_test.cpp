// The grammar engine (src/structured): front-end errors, byte-level matching on a tiny vocabulary,
// and random walks under the token mask on the real Qwen3 vocabulary whose every output is checked
// by validators that are not ours (tests/structured/validate_outputs.py: python3-jsonschema, re,
// ast).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <iostream>
#include <random>

#include "core/error.h"
#include "structured/compile.h"
#include "structured/gbnf.h"
#include "structured/regex_to_gbnf.h"
#include "structured/matcher.h"
#include "tokenizer/tokenizer.h"
#include "validation_cases.h"
#include "core/build_paths.h"

namespace pagoda::structured {
namespace {

using nlohmann::json;

const std::string kSource = PAGODA_SOURCE_DIR;

// A vocabulary of every single byte plus a few multi-byte tokens, EOS = 256.
std::shared_ptr<const TokenTrie> byte_trie(std::vector<std::string> extra = {}) {
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) v.emplace_back(1, static_cast<char>(b));
  v.emplace_back();  // EOS
  for (auto& e : extra) v.push_back(e);
  return std::make_shared<TokenTrie>(v);
}

bool accepts(const std::string& gbnf, const std::string& text) {
  auto rt = std::make_shared<GrammarRuntime>(parse_gbnf(gbnf), byte_trie(), std::vector<int32_t>{256});
  Matcher m(rt);
  for (unsigned char c : text)
    if (!m.accept(c)) return false;
  return m.accept(256);
}

// \s and \S as both ECMA-262 (JSON Schema's regexes) and Python's re (jsonschema's validator) read
// them: \s writes only what both call whitespace, \S and [^\s] only what neither does.
TEST(RegexWhitespace, WritesOnlyWhatEveryValidatorAgreesOn) {
  const std::string nbsp = "\xC2\xA0", nel = "\xC2\x85", bom = "\xEF\xBB\xBF", fs = "\x1C";
  auto grammar = [](const char* regex) { return "root ::= " + regex_to_gbnf(regex) + "\n"; };
  const std::string space = grammar("\\s"), not_space = grammar("\\S"), klass = grammar("[^@\\s]");
  EXPECT_TRUE(accepts(space, " "));
  EXPECT_TRUE(accepts(space, nbsp));  // both
  EXPECT_FALSE(accepts(space, nel));  // Python only
  EXPECT_FALSE(accepts(space, bom));  // ECMA-262 only
  for (const std::string* g : {&not_space, &klass}) {
    EXPECT_TRUE(accepts(*g, "a"));
    for (const std::string& ws : {std::string(" "), nbsp, nel, bom, fs}) EXPECT_FALSE(accepts(*g, ws)) << *g;
  }
  EXPECT_FALSE(accepts(klass, "@"));
}

TEST(GrammarGbnf, MatchesExactlyTheLanguage) {
  const std::string g = "root ::= \"a\" [0-9]+ (\"x\" | \"yz\")?\n";
  EXPECT_TRUE(accepts(g, "a1"));
  EXPECT_TRUE(accepts(g, "a123yz"));
  EXPECT_TRUE(accepts(g, "a0x"));
  EXPECT_FALSE(accepts(g, "a"));
  EXPECT_FALSE(accepts(g, "a1y"));
  EXPECT_FALSE(accepts(g, "b1"));
  EXPECT_TRUE(accepts("root ::= [^a]{2,3}\n", "\xC3\xA9z"));  // é counts as one character
  EXPECT_FALSE(accepts("root ::= [^a]{2,3}\n", "za"));
  EXPECT_TRUE(accepts("root ::= x x\nx ::= \"q\"\n  | \"r\" # comment\n", "qr"));
}

// Near the token budget the mask leaves only tokens after which the grammar can still finish (its
// shortest completion, one byte a token, then EOS): a "model" that always wants another 'a' or '('
// still ends with a complete output, and uses the whole budget doing so.
TEST(GrammarBudget, OutputsEndCompleteWithinTheBudget) {
  auto run = [](const std::string& gbnf, int64_t budget) {
    auto rt = std::make_shared<GrammarRuntime>(parse_gbnf(gbnf), byte_trie({"aaaa", "(("}), std::vector<int32_t>{256});
    Matcher m(rt);
    std::string out;
    TokenMask mask;
    for (int64_t used = 0; used < budget; ++used) {
      m.fill_mask(mask, budget - used);
      int32_t pick = -1;
      for (int32_t want : {257, 258, int32_t{'a'}, int32_t{'('}})  // the longest first
        if (pick < 0 && mask_allows(mask, want)) pick = want;
      for (int32_t id = 0; pick < 0 && id < rt->vocab_size(); ++id)
        if (mask_allows(mask, id)) pick = id;
      EXPECT_TRUE(m.accept(pick));
      if (pick == 256) return out + "<eos>";
      out += pick == 257 ? "aaaa" : pick == 258 ? "((" : std::string(1, static_cast<char>(pick));
    }
    return out;
  };
  // 10 tokens: "[", seven "aaaa" while two tokens stay for "]" and EOS, "]", EOS.
  EXPECT_EQ(run("root ::= \"[\" [a-z]* \"]\"\n", 10), "[" + std::string(28, 'a') + "]<eos>");
  EXPECT_EQ(run("root ::= \"[\" [a-z]* \"]\"\n", 3), "[]<eos>");
  // Nesting: each "(" adds a ")" to the shortest completion. 8 tokens: "((", "((" (then "x" and
  // four ")" and EOS fit the 6 left), "x", ")" x4, EOS.
  EXPECT_EQ(run("root ::= \"x\" | \"(\" root \")\"\n", 8), "((((x))))<eos>");
  // No room for any complete output: the plain mask (the output is cut, as vLLM cuts it).
  EXPECT_EQ(run("root ::= \"abc\"\n", 2), "ab");
}

TEST(GrammarGbnf, ErrorsNameTheProblem) {
  auto msg = [](const std::string& g) {
    try {
      parse_gbnf(g);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg("root ::= e\ne ::= e \"+\" \"1\" | \"1\"\n").find("left-recursive"), std::string::npos);
  EXPECT_NE(msg("root ::= missing\n").find("'missing' is used but not defined"), std::string::npos);
  EXPECT_NE(msg("x ::= \"a\"\n").find("no rule named 'root'"), std::string::npos);
  EXPECT_NE(msg("root ::= \"a\"{3,1}\n").find("n < m"), std::string::npos);
  EXPECT_NE(msg("root ::= " + std::string(100, '(')).find("nested deeper"), std::string::npos);
}

TEST(GrammarSchema, UnsupportedFeaturesAreErrors) {
  auto msg = [](const std::string& schema) {
    try {
      compile_constraint({ConstraintKind::kJsonSchema, schema, {}});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg(R"({"type":"string","format":"uri","maxLength":10})").find("format 'uri'"), std::string::npos);
  EXPECT_NE(msg(R"({"type":"array","contains":{},"maxContains":2})").find("'maxContains'"), std::string::npos);
  EXPECT_NE(msg(R"({"type":"number","multipleOf":0.3})").find("multipleOf 0.3"), std::string::npos);
  EXPECT_NE(msg(R"({"$ref":"#/$defs/nope"})").find("does not resolve"), std::string::npos);
  EXPECT_NE(msg(R"({"type":"string","pattern":"(a)\\1"})").find("backreferences"), std::string::npos);
  EXPECT_NE(msg(std::string(200, '[') + std::string(200, ']')).find("deeper"), std::string::npos);
}

// Random walks on the Qwen3 vocabulary: each step picks a uniformly random token the mask allows
// (and checks the matcher takes it), stops at EOS; outputs go to the independent validator.
class GrammarWalk : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string dir = kSource + "/tests/data/qwen3-tokenizer";
    if (!std::filesystem::exists(dir + "/tokenizer.json")) return;
    tok_ = Tokenizer::load_dir(dir).release();
    eos_ = {*tok_->token_to_id("<|im_end|>"), *tok_->token_to_id("<|endoftext|>")};
    trie_ = new std::shared_ptr<const TokenTrie>(std::make_shared<TokenTrie>(vocabulary_bytes(*tok_, eos_)));
  }
  static void TearDownTestSuite() {
    delete trie_;
    delete tok_;
  }
  void SetUp() override {
    ASSERT_NE(tok_, nullptr) << "tests/data/qwen3-tokenizer is missing: run tools/fetch_test_data.sh";
  }

  // Returns the text, or nullopt when the walk did not finish within the step budget.
  static std::optional<std::string> walk(const Constraint& c, uint64_t seed) {
    auto rt = std::make_shared<GrammarRuntime>(compile_constraint(c), *trie_, eos_);
    Matcher m(rt);
    std::mt19937_64 rng(seed);
    std::string text;
    TokenMask mask;
    std::vector<int32_t> allowed;
    for (int step = 0; step < 4000; ++step) {
      m.fill_mask(mask, 4000 - step);  // near the budget the mask steers to a complete output
      allowed_ids(mask, allowed);
      EXPECT_FALSE(allowed.empty()) << "dead end after " << text;
      if (allowed.empty()) return std::nullopt;
      // Half of the time prefer a token that closes something (a quote or bracket), and stop as
      // soon as the grammar accepts half of the time, so walks through free strings end.
      int32_t t = allowed[rng() % allowed.size()];
      if (rng() % 2 == 0) {
        std::vector<int32_t> closing;
        for (int32_t id : allowed)
          if (const std::string& b = trie_->get()->bytes(id);
              b.find_first_of("\"]})") != std::string::npos && b.find_first_of("([{") == std::string::npos)
            closing.push_back(id);
        if (!closing.empty()) t = closing[rng() % closing.size()];
      }
      if (m.accepting() && rng() % 2 == 0) t = eos_[0];
      // A token the mask forbids must be refused.
      const auto probe = static_cast<int32_t>(rng() % static_cast<uint64_t>(rt->vocab_size()));
      if (!mask_allows(mask, probe)) {
        Matcher copy = m;
        EXPECT_FALSE(copy.accept(probe)) << "token " << probe << " is masked but accepted";
      }
      EXPECT_TRUE(m.accept(t)) << "token " << t << " is allowed but refused";
      if (t == eos_[0] || t == eos_[1]) return text;
      text += trie_->get()->bytes(t);
    }
    std::cerr << "unfinished walk: " << text.substr(0, 300) << "\n";
    return std::nullopt;
  }

  static Tokenizer* tok_;
  static std::vector<int32_t> eos_;
  static std::shared_ptr<const TokenTrie>* trie_;
};
Tokenizer* GrammarWalk::tok_ = nullptr;
std::vector<int32_t> GrammarWalk::eos_;
std::shared_ptr<const TokenTrie>* GrammarWalk::trie_ = nullptr;

TEST_F(GrammarWalk, EveryOutputValidatesIndependently) {
  // (record without output, constraint): the 44 schemas and the rest
  const std::vector<std::pair<json, Constraint>> cases = ::pagoda::structured::testing::validation_cases();
  ASSERT_GE(cases.size(), 40u + 9u);

  const std::string out_path = ::testing::TempDir() + "/structured_walk_outputs.jsonl";
  std::ofstream out(out_path);
  int written = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    for (uint64_t seed : {1ull}) {
      std::optional<std::string> text;
      try {
        text = walk(cases[i].second, seed * 1000 + i);
      } catch (const Error& e) {
        ADD_FAILURE() << "case " << i << " " << cases[i].first.dump() << ": " << e.what();
        continue;
      }
      ASSERT_TRUE(text.has_value()) << "case " << i << " did not finish: " << cases[i].first.dump();
      json rec = cases[i].first;
      rec["output"] = *text;
      out << rec.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
      ++written;
    }
  }
  out.close();
  ASSERT_EQ(written, static_cast<int>(cases.size()));
  const std::string cmd = "python3 " + kSource + "/tests/structured/validate_outputs.py " + out_path;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

}  // namespace
}  // namespace pagoda::structured
