// Added tokens: leftmost-longest matching, lstrip/rstrip, single_word, normalized, special.
#include <gtest/gtest.h>

#include "tokenizer_test_util.h"

namespace pagoda {
namespace {

using test::AddedSpec;
using test::MiniTokenizer;
using Ids = std::vector<int32_t>;

// No merges, so plain text encodes to its bytes and the added tokens stand out.
std::unique_ptr<Tokenizer> make() {
  MiniTokenizer m;
  m.normalizer = {{"type", "NFC"}};
  AddedSpec l{"<L>"};
  l.special = true;
  l.lstrip = true;
  AddedSpec r{"<R>"};
  r.rstrip = true;
  AddedSpec lr{"<LR>"};
  lr.lstrip = lr.rstrip = true;
  AddedSpec word{"word"};
  word.single_word = true;
  AddedSpec norm{"<N\u00e9>"};
  norm.normalized = true;
  AddedSpec s{"<s>"};
  s.special = true;
  AddedSpec sx{"<s>x"};
  m.added = {l, r, lr, word, norm, s, sx};
  return m.build();
}

enum : int32_t { kL = 256, kR, kLR, kWord, kNorm, kS, kSx };

TEST(AddedTokens, IdsFollowTheVocab) {
  auto tok = make();
  EXPECT_EQ(tok->token_to_id("<L>"), kL);
  EXPECT_EQ(tok->token_to_id("<s>x"), kSx);
  EXPECT_EQ(tok->vocab_size(), kSx + 1);
  ASSERT_EQ(tok->added_tokens().size(), 7u);
  EXPECT_TRUE(tok->is_special(kL));
  EXPECT_FALSE(tok->is_special(kR));
  EXPECT_FALSE(tok->is_special('a'));
}

TEST(AddedTokens, LstripAbsorbsWhitespaceBefore) {
  auto tok = make();
  EXPECT_EQ(tok->encode("a  <L>b"), (Ids{'a', kL, 'b'}));
  EXPECT_EQ(tok->encode("a\t\n<L>"), (Ids{'a', kL}));
  EXPECT_EQ(tok->encode("a <L> b"), (Ids{'a', kL, ' ', 'b'}));  // only the left side
}

TEST(AddedTokens, RstripAbsorbsWhitespaceAfter) {
  auto tok = make();
  EXPECT_EQ(tok->encode("a<R> \t b"), (Ids{'a', kR, 'b'}));
  EXPECT_EQ(tok->encode("a <R> b"), (Ids{'a', ' ', kR, 'b'}));
}

TEST(AddedTokens, StripUsesUnicodeWhitespace) {
  auto tok = make();
  // U+3000 is whitespace (E3 80 80); U+200B (zero width space) is not.
  EXPECT_EQ(tok->encode("a \u3000<LR>\u3000 b"), (Ids{'a', kLR, 'b'}));
  EXPECT_EQ(tok->encode("a\u200b<LR>"), (Ids{'a', 0xE2, 0x80, 0x8B, kLR}));
}

TEST(AddedTokens, StrippedWhitespaceIsNotCountedTwice) {
  auto tok = make();
  // <R> takes the spaces; <L> finds nothing left to strip.
  EXPECT_EQ(tok->encode("x<R>  <L>y"), (Ids{'x', kR, kL, 'y'}));
  EXPECT_EQ(tok->encode("<L><L>"), (Ids{kL, kL}));
}

TEST(AddedTokens, SingleWordOnlyMatchesWholeWords) {
  auto tok = make();
  EXPECT_EQ(tok->encode("a word b"), (Ids{'a', ' ', kWord, ' ', 'b'}));
  EXPECT_EQ(tok->encode("word,"), (Ids{kWord, ','}));
  EXPECT_EQ(tok->encode("words"), (Ids{'w', 'o', 'r', 'd', 's'}));
  EXPECT_EQ(tok->encode("sword"), (Ids{'s', 'w', 'o', 'r', 'd'}));
  // '_' and combining marks count as word characters (Rust regex \w), so no match here either.
  EXPECT_EQ(tok->encode("word_"), (Ids{'w', 'o', 'r', 'd', '_'}));
  EXPECT_EQ(tok->encode("\u0301word"), (Ids{0xCC, 0x81, 'w', 'o', 'r', 'd'}));
}

TEST(AddedTokens, NormalizedTokensMatchAfterNormalization) {
  auto tok = make();
  EXPECT_EQ(tok->encode("<N\u00e9>"), Ids{kNorm});
  EXPECT_EQ(tok->encode("<Ne\u0301>"), Ids{kNorm});  // NFC composes e + U+0301 first
  EXPECT_EQ(tok->encode("a<Ne\u0301>b"), (Ids{'a', kNorm, 'b'}));
}

TEST(AddedTokens, LongestMatchWins) {
  auto tok = make();
  EXPECT_EQ(tok->encode("<s>x"), Ids{kSx});
  EXPECT_EQ(tok->encode("<s>y"), (Ids{kS, 'y'}));
  EXPECT_EQ(tok->encode("<s<s>"), (Ids{'<', 's', kS}));
}

TEST(AddedTokens, DecodeKeepsOrSkipsSpecialTokens) {
  auto tok = make();
  const Ids ids{kL, 'a', kR, kS, 'b'};
  EXPECT_EQ(tok->decode(ids), "<L>a<R><s>b");
  EXPECT_EQ(tok->decode(ids, /*skip_special_tokens=*/true), "a<R>b");
}

TEST(AddedTokens, PrefixSpaceIsAddedToEverySegment) {
  MiniTokenizer m;
  m.pre_tokenizer = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  m.added = {AddedSpec{"<R>"}};
  auto tok = m.build();
  // As in Hugging Face, each text segment between added tokens gets its own leading space.
  EXPECT_EQ(tok->encode("a<R>b"), (Ids{' ', 'a', 256, ' ', 'b'}));
  EXPECT_EQ(tok->encode(" a"), (Ids{' ', 'a'}));
}

}  // namespace
}  // namespace pagoda
