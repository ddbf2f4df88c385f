// SentencePiece-style BPE on a small hand-built tokenizer.json: Replace / Prepend normalizers, the
// Metaspace pre-tokenizer (vectors from HF's own metaspace.rs tests), byte_fallback with unk and
// fuse_unk, the Replace / ByteFallback / Fuse / Strip / Metaspace decoders (ByteFallback vectors
// from HF's byte_fallback.rs tests), streaming, and post_processor special tokens.
#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace pagoda {
namespace {

using nlohmann::json;
using Ids = std::vector<int32_t>;

const std::string kMeta = "\u2581";

// <unk>=0 <s>=1 </s>=2, byte tokens <0x00>..<0xEF> = 3 + byte (no <0xF0>..<0xFF>: characters
// starting with those bytes fall back to <unk>), then single characters and merge results.
struct Spm {
  json normalizer = {{"type", "Sequence"},
                     {"normalizers",
                      {{{"type", "Prepend"}, {"prepend", kMeta}},
                       {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kMeta}}}}};
  json pre_tokenizer = nullptr;
  json decoder = {{"type", "Sequence"},
                  {"decoders",
                   {{{"type", "Replace"}, {"pattern", {{"String", kMeta}}}, {"content", " "}},
                    {{"type", "ByteFallback"}},
                    {{"type", "Fuse"}},
                    {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  json post_processor = {
      {"type", "TemplateProcessing"},
      {"single",
       {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
        {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
      {"pair", json::array()},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}};
  bool fuse_unk = true;

  std::unique_ptr<Tokenizer> build() const {
    json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
    char name[8];
    for (int b = 0; b < 0xF0; ++b) {
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      vocab[name] = 3 + b;
    }
    int32_t next = 3 + 0xF0;
    for (const char* t : {"\u2581", "a", "b", "c", "H", "e", "y"}) vocab[t] = next++;
    json merges = json::array();
    for (auto [l, r] : {std::pair{"\u2581", "H"}, {"e", "y"}, {"\u2581H", "ey"}, {"a", "b"}}) {
      vocab[std::string(l) + r] = next++;
      merges.push_back({l, r});
    }
    json added = json::array();
    for (int i = 0; i < 3; ++i) {
      added.push_back({{"id", i},
                       {"content", i == 0   ? "<unk>"
                                   : i == 1 ? "<s>"
                                            : "</s>"},
                       {"special", true},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"single_word", false},
                       {"normalized", false}});
    }
    json j = {{"added_tokens", added},
              {"normalizer", normalizer},
              {"pre_tokenizer", pre_tokenizer},
              {"post_processor", post_processor},
              {"decoder", decoder},
              {"model",
               {{"type", "BPE"},
                {"unk_token", "<unk>"},
                {"fuse_unk", fuse_unk},
                {"byte_fallback", true},
                {"vocab", vocab},
                {"merges", merges}}}};
    return Tokenizer::from_json(j.dump(), "spm");
  }
};

int32_t id(const Tokenizer& t, const std::string& token) { return t.token_to_id(token).value(); }
int32_t byte(int b) { return 3 + b; }

TEST(SentencePieceNormalizer, ReplaceAndPrependInOrder) {
  const std::string label = "n";
  auto norm = [&](const json& j, const std::string& s) {
    return Normalizer::from_json(j, tokjson::Where{label, "normalizer"}).normalize(s);
  };
  const json llama = Spm{}.normalizer;
  EXPECT_EQ(norm(llama, "Hey  you"), kMeta + "Hey" + kMeta + kMeta + "you");
  EXPECT_EQ(norm(llama, ""), "");  // Prepend leaves an empty string empty
  // Order matters: Replace first turns the prepended character into nothing it would match.
  const json x_then_prepend = {
      {"type", "Sequence"},
      {"normalizers",
       {{{"type", "Replace"}, {"pattern", {{"String", "aa"}}}, {"content", "X"}},
        {{"type", "Prepend"}, {"prepend", "aa"}}}}};
  EXPECT_EQ(norm(x_then_prepend, "aaa"), "aaXa");  // non-overlapping, leftmost first
  const json regex = {{"type", "Replace"}, {"pattern", {{"Regex", "\\s+"}}}, {"content", "_"}};
  EXPECT_EQ(norm(regex, "a \t\n b\u3000c"), "a_b_c");
}

std::vector<std::string> metaspace_pieces(const json& j, const std::string& text, bool origin) {
  const std::string label = "p";
  const PreTokenizer p = PreTokenizer::from_json(j, tokjson::Where{label, "pre_tokenizer"});
  std::vector<std::string> out;
  p.for_each_piece(
      text, [&](std::string_view s) { out.emplace_back(s); }, origin);
  return out;
}

json metaspace(const std::string& scheme, bool split) {
  return {
      {"type", "Metaspace"}, {"replacement", kMeta}, {"prepend_scheme", scheme}, {"split", split}};
}

TEST(SentencePiecePreTokenizer, MetaspaceAsInHfTests) {
  using P = std::vector<std::string>;
  const std::string m = kMeta;
  EXPECT_EQ(metaspace_pieces(metaspace("always", true), "Hey friend!", true),
            (P{m + "Hey", m + "friend!"}));
  EXPECT_EQ(metaspace_pieces(metaspace("always", true), "Hey   friend!", true),
            (P{m + "Hey", m, m, m + "friend!"}));
  // Split on <s> first, then Metaspace "first" without splitting: only the piece at offset 0
  // gets the prepended character.
  const json seq = {{"type", "Sequence"},
                    {"pretokenizers",
                     {{{"type", "Split"},
                       {"pattern", {{"Regex", "(<s>)"}}},
                       {"behavior", "Isolated"},
                       {"invert", false}},
                      metaspace("first", false)}}};
  EXPECT_EQ(metaspace_pieces(seq, "Hey my friend <s>how" + m + "are you", true),
            (P{m + "Hey" + m + "my" + m + "friend" + m, "<s>", "how" + m + "are" + m + "you"}));
  EXPECT_EQ(metaspace_pieces(seq, " Hey <s>how <s>are <s> you", true),
            (P{m + "Hey" + m, "<s>", "how" + m, "<s>", "are" + m, "<s>", m + "you"}));
  EXPECT_EQ(metaspace_pieces(metaspace("first", true), "x y", false), (P{"x", m + "y"}));
  EXPECT_EQ(metaspace_pieces(metaspace("never", true), "x y", true), (P{"x", m + "y"}));
  // The legacy add_prefix_space=false means "never".
  const json legacy = {{"type", "Metaspace"}, {"replacement", kMeta}, {"add_prefix_space", false}};
  EXPECT_EQ(metaspace_pieces(legacy, "x y", true), (P{"x", m + "y"}));
}

TEST(SentencePieceBpe, MergesByteFallbackAndUnk) {
  const auto tok = Spm{}.build();
  const Tokenizer& t = *tok;
  EXPECT_EQ(t.encode("Hey ab"), (Ids{id(t, kMeta + "Hey"), id(t, kMeta), id(t, "ab")}));
  // 'é' is not in the vocabulary: its UTF-8 bytes C3 A9.
  EXPECT_EQ(t.encode("\u00e9"), (Ids{id(t, kMeta), byte(0xC3), byte(0xA9)}));
  // U+1D400 starts with F0, which has no byte token: <unk>, fused over the run.
  EXPECT_EQ(t.encode("\U0001D400\U0001D401a"), (Ids{id(t, kMeta), 0, id(t, "a")}));
  // HF leaves a pending unk pending across byte-fallback characters: it comes out after them.
  EXPECT_EQ(t.encode("\U0001D400\u00e9"), (Ids{id(t, kMeta), byte(0xC3), byte(0xA9), 0}));
  Spm no_fuse;
  no_fuse.fuse_unk = false;
  EXPECT_EQ(no_fuse.build()->encode("\U0001D400\U0001D401"), (Ids{id(t, kMeta), 0, 0}));
  // Special tokens are cut out first; Prepend then applies to the text after them too (Llama 2's
  // "legacy" behaviour).
  EXPECT_EQ(t.encode("<s>ab"), (Ids{1, id(t, kMeta), id(t, "ab")}));
  EXPECT_EQ(t.encode_with_special_tokens("ab"), (Ids{1, id(t, kMeta), id(t, "ab")}));
  EXPECT_EQ(t.encode_with_special_tokens(""), (Ids{1}));
}

TEST(SentencePieceDecoder, ReplaceByteFallbackFuseStrip) {
  const auto tok = Spm{}.build();
  const Tokenizer& t = *tok;
  const int32_t hey = id(t, kMeta + "Hey"), sp = id(t, kMeta), ab = id(t, "ab"), a = id(t, "a");
  EXPECT_EQ(t.decode({hey, sp, ab}), "Hey ab");  // Strip removes the first leading space only
  EXPECT_EQ(t.decode({sp, sp, ab}), " ab");
  EXPECT_EQ(t.decode({hey, byte(0xC3), byte(0xA9)}), "Hey\u00e9");
  EXPECT_EQ(t.decode({byte(0x61)}), "a");
  EXPECT_EQ(t.decode({byte(0xE5)}), "\uFFFD");
  EXPECT_EQ(t.decode({byte(0xE5), byte(0x8F)}), "\uFFFD\uFFFD");
  EXPECT_EQ(t.decode({byte(0xE5), byte(0x8F), byte(0xAB)}), "\u53EB");
  EXPECT_EQ(t.decode({byte(0xE5), byte(0x8F), byte(0xAB), a}), "\u53EBa");
  EXPECT_EQ(t.decode({byte(0xE5), byte(0x8F), a}), "\uFFFD\uFFFDa");
  // A valid prefix does not save an invalid run: every byte token becomes U+FFFD.
  EXPECT_EQ(t.decode({byte(0xC3), byte(0xA9), byte(0xC3), sp}), "\uFFFD\uFFFD\uFFFD ");
  EXPECT_EQ(t.decode({1, hey}), "<s> Hey");
  EXPECT_EQ(t.decode({1, hey}, /*skip_special_tokens=*/true), "Hey");
  EXPECT_EQ(t.token_bytes(byte(0xC3)), "\xC3");
  EXPECT_EQ(t.token_bytes(hey), " Hey");
}

TEST(SentencePieceDecoder, TrailingStripAndMetaspace) {
  Spm s;
  s.decoder = {{"type", "Sequence"},
               {"decoders",
                {{{"type", "Replace"}, {"pattern", {{"String", kMeta}}}, {"content", " "}},
                 {{"type", "Fuse"}},
                 {{"type", "Strip"}, {"content", " "}, {"start", 0}, {"stop", 2}},
                 {{"type", "Strip"}, {"content", "a"}, {"start", 1}, {"stop", 0}}}}};
  auto tok = s.build();
  const int32_t sp = id(*tok, kMeta), a = id(*tok, "a"), ab = id(*tok, "ab");
  EXPECT_EQ(tok->decode({a, sp, sp, sp}), " ");          // "a   " -> "a " -> " "
  EXPECT_EQ(tok->decode({ab, sp, sp, sp}), "b ");        // "ab   " -> "ab " -> "b "
  EXPECT_EQ(tok->decode({sp, sp, ab, sp, sp}), "  ab");  // nothing leading to strip for either
  s.decoder = {{"type", "Metaspace"}, {"replacement", kMeta}, {"prepend_scheme", "always"}};
  tok = s.build();
  const int32_t hey = id(*tok, kMeta + "Hey");
  EXPECT_EQ(tok->decode({hey, sp, ab}), "Hey ab");
  EXPECT_EQ(tok->decode({sp, sp, hey}), "  Hey");  // token 0 loses all its U+2581
  s.decoder["prepend_scheme"] = "never";
  EXPECT_EQ(s.build()->decode({hey, sp, ab}), " Hey ab");
}

// Streaming must give decode()'s text for any ids, whatever each decoder holds back.
TEST(SentencePieceDecoder, StreamingEqualsDecode) {
  std::vector<json> decoders;
  decoders.push_back(Spm{}.decoder);
  decoders.push_back(
      {{"type", "Sequence"},
       {"decoders",
        {{{"type", "Metaspace"}, {"replacement", kMeta}, {"prepend_scheme", "first"}},
         {{"type", "ByteFallback"}},
         {{"type", "Strip"}, {"content", "a"}, {"start", 1}, {"stop", 1}},
         {{"type", "Fuse"}},
         {{"type", "Strip"}, {"content", " "}, {"start", 2}, {"stop", 3}}}}});
  decoders.push_back({{"type", "Sequence"}, {"decoders", json::array()}});
  decoders.push_back(nullptr);
  std::mt19937 rng(5);
  for (const json& d : decoders) {
    Spm s;
    s.decoder = d;
    const auto tok = s.build();
    for (int round = 0; round < 300; ++round) {
      Ids ids;
      for (int k = static_cast<int>(rng() % 12); k > 0; --k) {
        const uint32_t pick = rng() % 4;
        ids.push_back(pick == 0   ? static_cast<int32_t>(rng() % 3)
                      : pick == 1 ? byte(0x80 + static_cast<int>(rng() % 0x70))
                                  : static_cast<int32_t>(3 + 0xF0 + rng() % 11));
      }
      for (bool skip : {false, true}) {
        IncrementalDecoder dec(*tok, skip);
        std::string streamed;
        for (int32_t i : ids) streamed += dec.push(i);
        streamed += dec.flush();
        EXPECT_EQ(streamed, tok->decode(ids, skip)) << d.dump() << " ids " << json(ids).dump();
      }
    }
  }
}

TEST(SentencePiecePostProcessor, TemplateRobertaSequenceAndUnsupported) {
  Spm s;
  s.post_processor = {{"type", "RobertaProcessing"}, {"cls", {"<s>", 1}}, {"sep", {"</s>", 2}}};
  EXPECT_EQ(s.build()->encode_with_special_tokens("ab"), (Ids{1, 243, 253, 2}));
  s.post_processor = {{"type", "Sequence"},
                      {"processors", {{{"type", "ByteLevel"}}, Spm{}.post_processor}}};
  EXPECT_EQ(s.build()->encode_with_special_tokens(""), (Ids{1}));
  s.post_processor = nullptr;
  EXPECT_EQ(s.build()->encode_with_special_tokens("ab"), (Ids{243, 253}));
  // An unknown post_processor does not stop loading (plain encode never needs it).
  s.post_processor = {{"type", "Futuristic"}};
  const auto tok = s.build();
  EXPECT_EQ(tok->encode("ab"), (Ids{243, 253}));
  try {
    tok->encode_with_special_tokens("ab");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Futuristic"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pagoda
