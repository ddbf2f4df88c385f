// Real tokenizers besides Qwen3 (tests/data/<dir>/tokenizer.json from tools/fetch_test_data.sh)
// against tests/fixtures/tokenizer/<name>_reference.json (tools/tokenizer_reference.py --model):
// byte-level BPE (Llama 3.1, Llama 3.2, Mistral NeMo, DeepSeek-V3, gpt-oss) and SentencePiece-style BPE (Gemma 3, Llama 2,
// and Llama 2 edited to use the Metaspace pre-tokenizer and decoder). Encode ids, decode text,
// streaming decode, special tokens from the post_processor, and decodes of hand-picked id lists
// (invalid byte-fallback runs, skipped special tokens).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "core/build_paths.h"

namespace pagoda {
namespace {

using nlohmann::json;

const std::string kRoot = PAGODA_SOURCE_DIR;

json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buf;
  buf << in.rdbuf();
  return json::parse(buf.str());
}

struct Loaded {
  json fixture;
  std::unique_ptr<Tokenizer> tok;
};

// Loaded once per name: the Gemma 3 file alone is 33 MB of JSON.
const Loaded& load(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Loaded>> cache;
  auto& slot = cache[name];
  if (slot) return *slot;
  slot = std::make_unique<Loaded>();
  const std::string fixture_path = kRoot + "/tests/fixtures/tokenizer/" + name + "_reference.json";
  if (!std::filesystem::exists(fixture_path)) return *slot;
  slot->fixture = read_json(fixture_path);
  const std::string data = kRoot + "/" + slot->fixture.at("tokenizer_json").get<std::string>();
  if (!std::filesystem::exists(data)) return *slot;
  json j = read_json(data);
  // The variants' edits (e.g. a Metaspace pre-tokenizer), exactly as the fixture script made them.
  for (const auto& [key, value] : slot->fixture.at("overrides").items()) j[key] = value;
  slot->tok = Tokenizer::from_json(j.dump(), data);
  return *slot;
}

class ReferenceTokenizer : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string fixture = "tests/fixtures/tokenizer/" + GetParam() + "_reference.json";
    loaded_ = &load(GetParam());
    // A missing file must not pass as a skip: the data is part of the test setup.
    ASSERT_FALSE(loaded_->fixture.is_null())
        << fixture << " is missing: tools/tokenizer_reference.py --model " << GetParam();
    ASSERT_NE(loaded_->tok, nullptr) << loaded_->fixture.at("tokenizer_json").get<std::string>()
                                     << " is missing: run tools/fetch_test_data.sh";
    tok_ = loaded_->tok.get();
  }
  const json& fixture() const { return loaded_->fixture; }

  const Loaded* loaded_ = nullptr;
  const Tokenizer* tok_ = nullptr;
};

// One test per model (ctest runs each test in its own process, and loading is the slow part).
TEST_P(ReferenceTokenizer, MatchesReference) {
  const json& cases = fixture().at("cases");
  ASSERT_GE(cases.size(), 50u);
  int failures = 0;
  for (size_t i = 0; i < cases.size() && failures < 10; ++i) {
    const std::string text = cases[i].at("text");
    const auto want = cases[i].at("ids").get<std::vector<int32_t>>();
    const auto got = tok_->encode(text);
    EXPECT_EQ(got, want) << "encode, case " << i << ": " << json(text).dump();
    EXPECT_EQ(tok_->decode(want), cases[i].at("decoded").get<std::string>())
        << "decode, case " << i << ": " << json(text).dump();
    failures += got != want;
  }
  for (const json& c : fixture().at("decode_cases")) {
    const auto ids = c.at("ids").get<std::vector<int32_t>>();
    const bool skip = c.at("skip_special_tokens");
    EXPECT_EQ(tok_->decode(ids, skip), c.at("text").get<std::string>())
        << "decode of " << c.at("ids").dump() << " skip_special_tokens " << skip;
  }
  for (const json& c : fixture().at("special_token_cases")) {
    const std::string text = c.at("text");
    EXPECT_EQ(tok_->encode_with_special_tokens(text), c.at("ids").get<std::vector<int32_t>>())
        << "encode with special tokens: " << json(text).dump();
  }
  // Streaming gives decode()'s text, one token at a time, whatever the decoder holds back.
  std::vector<std::pair<std::vector<int32_t>, bool>> lists;
  for (const json& c : cases) lists.emplace_back(c.at("ids"), false);
  for (const json& c : fixture().at("decode_cases")) {
    lists.emplace_back(c.at("ids"), c.at("skip_special_tokens").get<bool>());
  }
  for (const auto& [ids, skip] : lists) {
    IncrementalDecoder dec(*tok_, skip);
    std::string streamed;
    for (int32_t id : ids) streamed += dec.push(id);
    streamed += dec.flush();
    EXPECT_EQ(streamed, tok_->decode(ids, skip)) << "streamed " << json(ids).dump();
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ReferenceTokenizer,
                         ::testing::Values("gemma3", "llama3_1", "llama3_2", "mistral_nemo", "deepseek_v3", "gptoss", "llama2",
                                           "llama2_metaspace_first", "llama2_metaspace_always"));

// Facts about Gemma 3 read off its tokenizer.json by hand, independent of any fixture.
TEST(Gemma3Tokenizer, HandCheckedCases) {
  const Loaded& l = load("gemma3");
  ASSERT_NE(l.tok, nullptr) << "run tools/fetch_test_data.sh";
  const Tokenizer& tok = *l.tok;
  auto id = [&](const std::string& t) { return tok.token_to_id(t).value_or(-1); };
  // Spaces become U+2581 and there is no dummy prefix: "Hello world" is "Hello", "▁world".
  EXPECT_EQ(tok.encode("Hello world"), (std::vector<int32_t>{id("Hello"), id("\u2581world")}));
  EXPECT_EQ(tok.encode_with_special_tokens("Hello"), (std::vector<int32_t>{2, id("Hello")}));
  EXPECT_EQ(id("<bos>"), 2);
  // U+20000 is not in the vocabulary: its four UTF-8 bytes become <0xF0><0xA0><0x80><0x80>.
  EXPECT_EQ(tok.encode("\U00020000"),
            (std::vector<int32_t>{id("<0xF0>"), id("<0xA0>"), id("<0x80>"), id("<0x80>")}));
  EXPECT_EQ(tok.decode(tok.encode("a \U00020000 b")), "a \U00020000 b");
  // An invalid run of byte tokens gives one U+FFFD per token, as HF's ByteFallback decoder does.
  EXPECT_EQ(tok.decode({id("<0xE4>"), id("<0xB8>"), id("\u2581a")}), "\uFFFD\uFFFD a");
  EXPECT_EQ(tok.token_bytes(id("<0xE4>")), "\xE4");
  EXPECT_EQ(tok.token_bytes(id("\u2581world")), " world");
}

}  // namespace
}  // namespace pagoda
