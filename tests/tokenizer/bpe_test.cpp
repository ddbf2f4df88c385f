// BPE merge order and byte-level encoding on hand-made tokenizers.
#include <gtest/gtest.h>

#include <thread>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer_test_util.h"

namespace pagoda {
namespace {

using test::bytes_as_ids;
using test::id_of;
using test::MiniTokenizer;

TEST(ByteLevel, Gpt2Alphabet) {
  // Printable Latin-1 stands for itself; the other 68 bytes move to U+0100.. in byte order.
  EXPECT_EQ(byte_level::byte_to_codepoint('a'), 'a');
  EXPECT_EQ(byte_level::byte_to_codepoint(0xA1), 0xA1u);
  EXPECT_EQ(byte_level::byte_to_codepoint(0x00), 0x100u);
  EXPECT_EQ(byte_level::byte_to_codepoint(0x0A), 0x10Au);  // Ċ
  EXPECT_EQ(byte_level::byte_to_codepoint(0x20), 0x120u);  // Ġ
  EXPECT_EQ(byte_level::byte_to_codepoint(0x7F), 0x121u);  // ġ
  EXPECT_EQ(byte_level::byte_to_codepoint(0xAD), 0x143u);  // Ń, the last one
  EXPECT_EQ(byte_level::byte_to_utf8(0x20), "\xC4\xA0");
  for (int b = 0; b < 256; ++b) {
    const std::string raw(1, static_cast<char>(b));
    std::string back;
    ASSERT_TRUE(byte_level::decode(byte_level::encode(raw), back));
    EXPECT_EQ(back, raw);
  }
  std::string out;
  EXPECT_FALSE(byte_level::decode("a b", out));  // a plain space is not in the alphabet
  EXPECT_TRUE(out.empty());
}

TEST(Bpe, MergesApplyLowestRankFirst) {
  MiniTokenizer m;
  m.merges = {{"a", "b"}, {"b", "c"}, {"ab", "c"}};
  auto tok = m.build();
  // (a,b) has rank 0 so it wins over (b,c); then (ab,c) applies.
  EXPECT_EQ(tok->encode("abc"), std::vector<int32_t>{id_of(*tok, "abc")});
  // Without a, (b,c) is the only choice.
  EXPECT_EQ(tok->encode("bc"), std::vector<int32_t>{id_of(*tok, "bc")});
}

TEST(Bpe, RankNotPositionDecides) {
  MiniTokenizer m;
  m.merges = {{"b", "c"}, {"a", "b"}};
  auto tok = m.build();
  // (b,c) outranks (a,b); once bc is formed, (a,bc) is not a merge.
  EXPECT_EQ(tok->encode("abc"), (std::vector<int32_t>{'a', id_of(*tok, "bc")}));
}

TEST(Bpe, TiesGoToTheLeftmostPair) {
  MiniTokenizer m;
  m.merges = {{"a", "a"}};
  auto tok = m.build();
  const int32_t aa = id_of(*tok, "aa");
  EXPECT_EQ(tok->encode("aaa"), (std::vector<int32_t>{aa, 'a'}));
  EXPECT_EQ(tok->encode("aaaaa"), (std::vector<int32_t>{aa, aa, 'a'}));
}

TEST(Bpe, MergesChainAcrossLevels) {
  MiniTokenizer m;
  m.merges = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {" ", "w"}};
  auto tok = m.build();
  EXPECT_EQ(tok->encode("hello"), std::vector<int32_t>{id_of(*tok, "hello")});
  // No pre-tokenizer split: " w" merges inside the one piece.
  EXPECT_EQ(tok->encode("hello wo"),
            (std::vector<int32_t>{id_of(*tok, "hello"), id_of(*tok, " w"), 'o'}));
}

TEST(Bpe, OlderStringFormOfMergesIsAccepted) {
  MiniTokenizer m;
  m.merges = {{"a", "b"}};
  nlohmann::json j = m.json();
  j["model"]["merges"] = {"a b"};
  auto tok = Tokenizer::from_json(j.dump(), "string merges");
  EXPECT_EQ(tok->encode("ab"), std::vector<int32_t>{id_of(*tok, "ab")});
}

TEST(Bpe, EveryByteRoundTrips) {
  auto tok = MiniTokenizer{}.build();
  std::string all;
  for (int b = 1; b < 256; ++b) all.push_back(static_cast<char>(b));
  all.push_back('\0');
  // Invalid UTF-8 is replaced before encoding, so use the valid part for the id check.
  const std::string ascii = all.substr(0, 127);
  EXPECT_EQ(tok->encode(ascii), bytes_as_ids(ascii));
  EXPECT_EQ(tok->decode(bytes_as_ids(ascii)), ascii);
  EXPECT_EQ(tok->token_bytes(0x20), " ");
  EXPECT_EQ(tok->vocab_size(), 256);
}

TEST(Bpe, InvalidUtf8InputBecomesReplacementCharacter) {
  auto tok = MiniTokenizer{}.build();
  // "a", C3 followed by a non-continuation byte, "b": one U+FFFD (EF BF BD) for the lone C3.
  EXPECT_EQ(tok->encode("a\xC3"
                        "b"),
            (std::vector<int32_t>{'a', 0xEF, 0xBF, 0xBD, 'b'}));
  // A truncated 4-byte sequence at the end is one maximal subpart.
  EXPECT_EQ(tok->encode("\xF0\x9F\x98"), (std::vector<int32_t>{0xEF, 0xBF, 0xBD}));
}

TEST(Bpe, UnknownCharactersUseUnkOrAreDropped) {
  const auto make = [](bool with_unk, bool fuse) {
    nlohmann::json vocab = {{"<unk>", 0}, {"a", 1}, {"b", 2}, {"ab", 3}};
    nlohmann::json model = {{"type", "BPE"},
                            {"vocab", vocab},
                            {"merges", nlohmann::json::array({nlohmann::json::array({"a", "b"})})}};
    if (with_unk) model["unk_token"] = "<unk>";
    model["fuse_unk"] = fuse;
    nlohmann::json j = {{"model", model}, {"pre_tokenizer", nullptr}, {"decoder", nullptr}};
    return Tokenizer::from_json(j.dump(), "unk");
  };
  EXPECT_EQ(make(true, false)->encode("xxaby"), (std::vector<int32_t>{0, 0, 3, 0}));
  EXPECT_EQ(make(true, true)->encode("xxaby"), (std::vector<int32_t>{0, 3, 0}));
  // With no unk token the x is dropped, which leaves a and b adjacent, so they merge.
  EXPECT_EQ(make(false, false)->encode("axb"), (std::vector<int32_t>{3}));
  // Without a decoder, Hugging Face joins the tokens with spaces.
  EXPECT_EQ(make(true, false)->decode({3, 0, 1}), "ab <unk> a");
}

TEST(Bpe, IgnoreMergesTakesWholeWordsFromTheVocab) {
  MiniTokenizer m;
  m.merges = {{"b", "c"}, {"a", "b"}, {"ab", "c"}};  // "abc" is in the vocab but unreachable
  nlohmann::json j = m.json();
  auto plain = Tokenizer::from_json(j.dump(), "plain");
  j["model"]["ignore_merges"] = true;
  auto ignoring = Tokenizer::from_json(j.dump(), "ignore_merges");
  EXPECT_EQ(plain->encode("abc"), (std::vector<int32_t>{'a', id_of(*plain, "bc")}));
  EXPECT_EQ(ignoring->encode("abc"), std::vector<int32_t>{id_of(*ignoring, "abc")});
}

TEST(Bpe, LongPiecesAreHandled) {
  MiniTokenizer m;
  m.merges = {{"a", "a"}, {"aa", "aa"}};
  auto tok = m.build();
  const std::string text(100001, 'a');  // longer than the cache takes; odd length
  const auto ids = tok->encode(text);
  ASSERT_EQ(ids.size(), 25001u);
  for (size_t i = 0; i + 1 < ids.size(); ++i) ASSERT_EQ(ids[i], id_of(*tok, "aaaa"));
  EXPECT_EQ(ids.back(), 'a');
  EXPECT_EQ(tok->decode(ids), text);
}

TEST(Bpe, RepeatedEncodesAgree) {
  // The second call is served from the piece cache; it must give the same ids.
  MiniTokenizer m;
  m.merges = {{"t", "h"}, {"th", "e"}, {" ", "the"}};
  m.pre_tokenizer = test::qwen_split_pre_tokenizer();
  auto tok = m.build();
  const std::string text = "the cat and the hat; the end";
  const auto first = tok->encode(text);
  EXPECT_EQ(tok->encode(text), first);
  EXPECT_EQ(first[0], id_of(*tok, "the"));
  EXPECT_EQ(tok->decode(first), text);
}

TEST(Bpe, ConcurrentEncodesAgree) {
  // encode() is const and shared between request threads; the piece cache and regex state must
  // not mix up results.
  MiniTokenizer m;
  m.merges = {{"t", "h"}, {"th", "e"}, {" ", "the"}, {"a", "n"}, {" ", "an"}};
  m.pre_tokenizer = test::qwen_split_pre_tokenizer();
  auto tok = m.build();
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i)
    texts.push_back("the an " + std::to_string(i * 7919) + " than then " +
                    std::string(i % 13, 'n'));
  std::vector<std::vector<int32_t>> expected;
  for (const auto& t : texts) expected.push_back(tok->encode(t));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          if (tok->encode(texts[(i + t * 31) % texts.size()]) !=
              expected[(i + t * 31) % texts.size()])
            ++mismatches[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace pagoda
