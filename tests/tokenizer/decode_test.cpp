// Lossy UTF-8 decoding (maximal subparts, as Rust's from_utf8_lossy) and the streaming decoder.
#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace pagoda {
namespace {

using test::bytes_as_ids;
using test::MiniTokenizer;

const std::string kFffd = "\xEF\xBF\xBD";

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(LossyDecode, MaximalSubpartsEachBecomeOneReplacement) {
  auto tok = MiniTokenizer{}.build();
  auto decode = [&](const std::string& raw) { return tok->decode(bytes_as_ids(raw)); };
  // C3 wants a continuation byte; '(' is not one: one subpart of one byte.
  EXPECT_EQ(decode("\xC3("), kFffd + "(");
  // A 4-byte sequence cut short by the end: one subpart.
  EXPECT_EQ(decode("\xF0\x9F\x98"), kFffd);
  // The same cut short by 'A': one subpart, then 'A'.
  EXPECT_EQ(decode("\xF0\x9F\x98"
                   "A"),
            kFffd + "A");
  // ED A0 80 would be a surrogate; after ED only 80..9F may follow, so three subparts.
  EXPECT_EQ(decode("\xED\xA0\x80"), repeat(kFffd, 3));
  // C0 is never a lead byte (overlong), nor is AF: two.
  EXPECT_EQ(decode("\xC0\xAF"), repeat(kFffd, 2));
  // F4 90 would exceed U+10FFFF: F4 alone, then three lone continuation bytes.
  EXPECT_EQ(decode("\xF4\x90\x80\x80"), repeat(kFffd, 4));
  // E0 80: overlong, E0 needs A0..BF next.
  EXPECT_EQ(decode("\xE0\x80\x80"), repeat(kFffd, 3));
  // F1 80 80 is a good prefix broken by C0, which is itself invalid: two.
  EXPECT_EQ(decode("\xF1\x80\x80\xC0"), repeat(kFffd, 2));
  EXPECT_EQ(decode("\xFF\xFE"), repeat(kFffd, 2));
  EXPECT_EQ(decode("\x80\x80\x80"), repeat(kFffd, 3));
  // Valid text split over several byte tokens decodes whole.
  EXPECT_EQ(decode("\xE2\x82\xAC \xF0\x9F\x98\x80"), "\u20AC \U0001F600");
}

TEST(LossyDecode, UnknownIdsThrowNamingTheId) {
  auto tok = MiniTokenizer{}.build();
  for (int32_t bad : {-1, 256, 1 << 30}) {
    try {
      tok->decode({'a', bad});
      FAIL() << "no error for id " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::to_string(bad)), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(tok->token_bytes(300), Error);
  IncrementalDecoder dec(*tok);
  EXPECT_THROW(dec.push(-5), Error);
}

TEST(IncrementalDecoder, HoldsBackAnEmojiUntilComplete) {
  auto tok = MiniTokenizer{}.build();
  IncrementalDecoder dec(*tok);
  EXPECT_EQ(dec.push('a'), "a");
  EXPECT_EQ(dec.push(0xF0), "");
  EXPECT_EQ(dec.push(0x9F), "");
  EXPECT_EQ(dec.push(0x98), "");
  EXPECT_EQ(dec.push(0x80), "\U0001F600");
  EXPECT_EQ(dec.flush(), "");
}

TEST(IncrementalDecoder, EmitsReplacementAsSoonAsBytesCannotBeValid) {
  auto tok = MiniTokenizer{}.build();
  IncrementalDecoder dec(*tok);
  EXPECT_EQ(dec.push(0xF0), "");
  EXPECT_EQ(dec.push('A'), kFffd + "A");  // F0 then 'A' can never complete
  EXPECT_EQ(dec.push(0xE0), "");
  EXPECT_EQ(dec.push(0x80), kFffd + kFffd);  // E0 needs A0..BF; 80 alone is invalid too
  EXPECT_EQ(dec.push(0xFF), kFffd);          // never valid: no waiting
  EXPECT_EQ(dec.push(0xE2), "");
  EXPECT_EQ(dec.push(0x82), "");
  EXPECT_EQ(dec.flush(), kFffd);  // an unfinished tail is one replacement
}

TEST(IncrementalDecoder, MultiByteTokensAndSpecialTokens) {
  MiniTokenizer m;
  // Merged tokens holding the first half and the second half of the emoji's four bytes.
  m.merges = {{"\xF0", "\x9F"}, {"\x98", "\x80"}};
  test::AddedSpec eos{"<eos>"};
  eos.special = true;
  m.added = {eos};
  auto tok = m.build();
  const std::vector<int32_t> ids = tok->encode("x\U0001F600<eos>");
  ASSERT_EQ(ids.size(), 4u);
  IncrementalDecoder keep(*tok);
  IncrementalDecoder skip(*tok, /*skip_special_tokens=*/true);
  std::vector<std::string> kept;
  std::string skipped;
  for (int32_t id : ids) {
    kept.push_back(keep.push(id));
    skipped += skip.push(id);
  }
  EXPECT_EQ(kept, (std::vector<std::string>{"x", "", "\U0001F600", "<eos>"}));
  EXPECT_EQ(skipped + skip.flush(), "x\U0001F600");
}

// Whatever the bytes, the streamed pieces are valid UTF-8 and add up to decode() of the whole.
TEST(IncrementalDecoder, StreamEqualsDecodeOnRandomBytes) {
  auto tok = MiniTokenizer{}.build();
  std::mt19937 rng(1234);
  // Bias towards bytes that start or continue multi-byte sequences.
  const std::vector<uint8_t> interesting = {0x41, 0x20, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC2,
                                            0xC0, 0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF};
  for (int round = 0; round < 2000; ++round) {
    std::vector<int32_t> ids(rng() % 12);
    for (auto& id : ids) id = interesting[rng() % interesting.size()];
    IncrementalDecoder dec(*tok);
    std::string streamed;
    for (int32_t id : ids) {
      const std::string piece = dec.push(id);
      ASSERT_TRUE(utf8::is_valid(piece));
      streamed += piece;
    }
    streamed += dec.flush();
    ASSERT_EQ(streamed, tok->decode(ids));
  }
}

TEST(Utf8, NextClassifiesSequences) {
  EXPECT_EQ(utf8::next("\xE2\x82\xAC", 0).kind, utf8::StepKind::kValid);
  EXPECT_EQ(utf8::next("\xE2\x82\xAC", 0).cp, 0x20ACu);
  EXPECT_EQ(utf8::next("\xE2\x82", 0).kind, utf8::StepKind::kTruncated);
  EXPECT_EQ(utf8::next("\xE2\x82"
                       "a",
                       0)
                .kind,
            utf8::StepKind::kInvalid);
  EXPECT_EQ(utf8::next("\xE2\x82"
                       "a",
                       0)
                .len,
            2u);
  EXPECT_TRUE(utf8::is_valid("\U0010FFFF"));
  EXPECT_FALSE(utf8::is_valid("\xF4\x90\x80\x80"));
  EXPECT_TRUE(utf8::is_whitespace(0x85));
  EXPECT_TRUE(utf8::is_whitespace(0x3000));
  EXPECT_FALSE(utf8::is_whitespace(0x180E));
  EXPECT_FALSE(utf8::is_whitespace(0x200B));
}

}  // namespace
}  // namespace pagoda
