// The real Qwen3 tokenizer (tests/data/qwen3-tokenizer, from tools/fetch_test_data.sh): reference
// ids from Hugging Face tokenizers, hand-checked cases, and decode(encode(s)) == NFC(s).
#include <gtest/gtest.h>
#include <utf8proc.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "core/build_paths.h"

namespace pagoda {
namespace {

const std::string kDir = std::string(PAGODA_SOURCE_DIR) + "/tests/data/qwen3-tokenizer";

class Qwen3Tokenizer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (std::filesystem::exists(kDir + "/tokenizer.json"))
      tok_ = Tokenizer::load_dir(kDir).release();
  }
  static void TearDownTestSuite() {
    delete tok_;
    tok_ = nullptr;
  }
  void SetUp() override {
    // A missing download must not pass as a skip: the data is part of the test setup.
    ASSERT_NE(tok_, nullptr) << kDir << "/tokenizer.json is missing: run tools/fetch_test_data.sh";
  }
  static int32_t id(const std::string& token) {
    auto v = tok_->token_to_id(token);
    EXPECT_TRUE(v.has_value()) << "'" << token << "' not in the Qwen3 vocab";
    return v.value_or(-1);
  }
  static Tokenizer* tok_;
};

Tokenizer* Qwen3Tokenizer::tok_ = nullptr;

std::string whole_nfc(const std::string& s) {
  utf8proc_uint8_t* out = nullptr;
  const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                              static_cast<utf8proc_ssize_t>(s.size()), &out,
                              static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  EXPECT_GE(n, 0);
  std::string r(reinterpret_cast<char*>(out), n < 0 ? 0 : static_cast<size_t>(n));
  std::free(out);
  return r;
}

TEST_F(Qwen3Tokenizer, ReferenceFixtureFromHuggingFace) {
  const char* override_path = std::getenv("PAGODA_QWEN3_REFERENCE");
  const std::string path =
      override_path != nullptr
          ? override_path
          : std::string(PAGODA_SOURCE_DIR) + "/tests/fixtures/tokenizer/qwen3_reference.json";
  ASSERT_TRUE(std::filesystem::exists(path))
      << path << " is missing: it is made by tools/tokenizer_reference.py (Hugging Face tokenizers)";
  std::ifstream in(path);
  const nlohmann::json fixture = nlohmann::json::parse(in);
  ASSERT_EQ(fixture.at("tokenizer").get<std::string>().rfind("qwen3", 0), 0u)
      << "not a Qwen3 fixture";
  const auto& cases = fixture.at("cases");
  ASSERT_FALSE(cases.empty());
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string text = cases[i].at("text");
    const auto ids = cases[i].at("ids").get<std::vector<int32_t>>();
    EXPECT_EQ(tok_->encode(text), ids) << "case " << i << ": " << text;
    EXPECT_EQ(tok_->decode(ids), cases[i].at("decoded").get<std::string>()) << "case " << i;
  }
}

TEST_F(Qwen3Tokenizer, Shape) {
  EXPECT_EQ(tok_->added_tokens().size(), 26u);
  EXPECT_EQ(tok_->vocab_size(), id("<|endoftext|>") + 26);
  EXPECT_TRUE(tok_->is_special(id("<|im_end|>")));
  EXPECT_FALSE(tok_->is_special(id("<think>")));  // non-special added token
}

TEST_F(Qwen3Tokenizer, HandCheckedCases) {
  // Whole words that are in the vocab come out as one token; 'Ġ' is the byte-level space.
  EXPECT_EQ(tok_->encode("Hello world"), (std::vector<int32_t>{id("Hello"), id("Ġworld")}));
  EXPECT_EQ(tok_->encode("<|im_start|>user\n"),
            (std::vector<int32_t>{id("<|im_start|>"), id("user"), id("Ċ")}));
  EXPECT_EQ(tok_->encode("<think>\n</think>"),
            (std::vector<int32_t>{id("<think>"), id("Ċ"), id("</think>")}));
  // Digits are split one by one by \p{N}.
  EXPECT_EQ(tok_->encode("2024"), (std::vector<int32_t>{id("2"), id("0"), id("2"), id("4")}));
  // "  \u00a0x": the space run keeps its last whitespace (U+00A0) for the letter after it.
  const auto tail = tok_->encode("\u00a0x");
  std::vector<int32_t> expected{id("a"), id("ĠĠ")};
  expected.insert(expected.end(), tail.begin(), tail.end());
  EXPECT_EQ(tok_->encode("a  \u00a0x"), expected);
  EXPECT_EQ(tok_->decode({id("<|im_start|>"), id("Hello"), id("<|im_end|>")}, true), "Hello");
}

TEST_F(Qwen3Tokenizer, DecodeOfEncodeIsNfc) {
  std::vector<std::string> texts = {"",
                                    " ",
                                    "Hello, world! It's 3.14 o'clock.",
                                    "def f(x):\n\treturn x  # ok\r\n",
                                    "自然语言处理",
                                    "こんにちは、世界",
                                    "Привет, мир",
                                    "مرحبا بالعالم",
                                    "नमस्ते",
                                    "e\u0301 A\u030a \u212b \u1100\u1161",
                                    "😀👍🏽👨‍👩‍👧 🇯🇵",
                                    "<|im_start|>system\nYou are<|im_end|>",
                                    "\u00a0\u3000\u2028\u0085\u180e\u200b\ufeff",
                                    std::string("nul\0byte", 8),
                                    "\x7f\x01\x1b[0m"};
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    std::string s;
    const int n = static_cast<int>(rng() % 24);
    for (int k = 0; k < n; ++k) {
      uint32_t cp = 0;
      switch (rng() % 4) {
        case 0:
          cp = 0x20 + rng() % 0x5F;
          break;
        case 1:
          cp = 0xA0 + rng() % 0x2000;
          break;
        case 2:
          cp = 0x3000 + rng() % 0x7000;
          break;
        default:
          cp = 0x10000 + rng() % 0x20000;
          break;
      }
      if (cp >= 0xD800 && cp < 0xE000) cp = 'x';
      utf8::append(s, cp);
    }
    texts.push_back(s);
  }
  for (const auto& s : texts) EXPECT_EQ(tok_->decode(tok_->encode(s)), whole_nfc(s)) << s;
}

TEST_F(Qwen3Tokenizer, InvalidUtf8IsReplacedNotFatal) {
  const auto ids = tok_->encode("ok\xFF\xC3(");
  EXPECT_EQ(tok_->decode(ids), "ok\xEF\xBF\xBD\xEF\xBF\xBD(");
}

}  // namespace
}  // namespace pagoda
