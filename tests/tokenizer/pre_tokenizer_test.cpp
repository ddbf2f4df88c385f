// Pre-tokenizer pieces: Qwen's Split regex on tricky whitespace, Split behaviours, ByteLevel.
#include "tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "tokenizer_test_util.h"

namespace pagoda {
namespace {

using Pieces = std::vector<std::string>;

Pieces pieces(const nlohmann::json& j, const std::string& text) {
  const std::string label = "test";
  const PreTokenizer p = PreTokenizer::from_json(j, tokjson::Where{label, "pre_tokenizer"});
  Pieces out;
  p.for_each_piece(text, [&](std::string_view s) { out.emplace_back(s); });
  return out;
}

Pieces qwen(const std::string& text) { return pieces(test::qwen_split_pre_tokenizer(), text); }

nlohmann::json split(const std::string& pattern, const std::string& behavior, bool invert = false) {
  return {{"type", "Split"},
          {"pattern", {{"Regex", pattern}}},
          {"behavior", behavior},
          {"invert", invert}};
}

TEST(QwenPreTokenizer, WordsNumbersPunctuation) {
  EXPECT_EQ(qwen("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(qwen("I'm 123 ok!!\n\nx"),
            (Pieces{"I", "'m", " ", "1", "2", "3", " ok", "!!\n\n", "x"}));
  EXPECT_EQ(qwen("IT'S"), (Pieces{"IT", "'S"}));      // the contractions are case-insensitive
  EXPECT_EQ(qwen("a  b"), (Pieces{"a", " ", " b"}));  // \s+(?!\S) leaves the last space to " b"
  EXPECT_EQ(qwen("a \n b"), (Pieces{"a", " \n", " b"}));
  EXPECT_EQ(qwen("x   "), (Pieces{"x", "   "}));
}

// Hugging Face's \s is Unicode White_Space. Each case is built so that the split differs if the
// character is classified the other way.
TEST(QwenPreTokenizer, UnicodeWhitespaceMatchesOniguruma) {
  // Whitespace: a run of them before a letter keeps its last one for the letter's piece.
  EXPECT_EQ(qwen("x\u00a0\u00a0y"), (Pieces{"x", "\u00a0", "\u00a0y"}));
  EXPECT_EQ(qwen("\u0085\u0085x"), (Pieces{"\u0085", "\u0085x"}));
  EXPECT_EQ(qwen("a\u1680\u1680b"), (Pieces{"a", "\u1680", "\u1680b"}));
  EXPECT_EQ(qwen("x\u3000\u3000 y"), (Pieces{"x", "\u3000\u3000", " y"}));
  EXPECT_EQ(qwen("x\u2028\u2028 y"), (Pieces{"x", "\u2028\u2028", " y"}));
  EXPECT_EQ(qwen("a\x0b\x0c b"), (Pieces{"a", "\x0b\x0c", " b"}));
  // Not whitespace (PCRE2's own \s would take U+180E): they group as punctuation.
  EXPECT_EQ(qwen("z  \u180e"), (Pieces{"z", " ", " \u180e"}));
  EXPECT_EQ(qwen("\u200b\u200b x"), (Pieces{"\u200b\u200b", " x"}));
  EXPECT_EQ(qwen("a\x1c\x1c b"), (Pieces{"a", "\x1c\x1c", " b"}));
}

TEST(Regex, WhitespaceRewriteLeavesEscapesAlone) {
  EXPECT_EQ(Regex::unicode_whitespace("\\s+(?!\\S)"), "\\p{White_Space}+(?!\\P{White_Space})");
  EXPECT_EQ(Regex::unicode_whitespace("[^\\s\\p{L}]"), "[^\\p{White_Space}\\p{L}]");
  EXPECT_EQ(Regex::unicode_whitespace("\\\\s"), "\\\\s");  // an escaped backslash, then 's'
  EXPECT_EQ(Regex::unicode_whitespace("\\Q\\s\\E\\s"), "\\Q\\s\\E\\p{White_Space}");
}

TEST(SplitPreTokenizer, Behaviours) {
  const std::string text = "a,b,,c";
  EXPECT_EQ(pieces(split(",", "Isolated"), text), (Pieces{"a", ",", "b", ",", ",", "c"}));
  EXPECT_EQ(pieces(split(",", "Removed"), text), (Pieces{"a", "b", "c"}));
  EXPECT_EQ(pieces(split(",", "MergedWithPrevious"), text), (Pieces{"a,", "b,", ",", "c"}));
  EXPECT_EQ(pieces(split(",", "MergedWithNext"), text), (Pieces{"a", ",b", ",", ",c"}));
  EXPECT_EQ(pieces(split(",", "Contiguous"), text), (Pieces{"a", ",", "b", ",,", "c"}));
  EXPECT_EQ(pieces(split("[a-z]", "Removed", true), text), (Pieces{"a", "b", "c"}));
  const nlohmann::json literal = {{"type", "Split"},
                                  {"pattern", {{"String", "."}}},
                                  {"behavior", "Isolated"},
                                  {"invert", false}};
  EXPECT_EQ(pieces(literal, "a.b"), (Pieces{"a", ".", "b"}));  // "." is not a regex here
  EXPECT_EQ(pieces(literal, "ab"), (Pieces{"ab"}));
}

TEST(ByteLevelPreTokenizer, Gpt2RegexAndPrefixSpace) {
  const nlohmann::json j = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  // The last step is ByteLevel, so pieces stay raw bytes (the model maps them).
  EXPECT_EQ(pieces(j, "Hello  world's"), (Pieces{" Hello", " ", " world", "'s"}));
  EXPECT_EQ(pieces(j, " x"), (Pieces{" x"}));
  // Followed by another step, ByteLevel maps bytes to its alphabet first.
  const nlohmann::json seq = {{"type", "Sequence"}, {"pretokenizers", {j, split("z", "Isolated")}}};
  EXPECT_EQ(pieces(seq, "a b"), (Pieces{"\xC4\xA0"
                                        "a",
                                        "\xC4\xA0"
                                        "b"}));
}

}  // namespace
}  // namespace pagoda
