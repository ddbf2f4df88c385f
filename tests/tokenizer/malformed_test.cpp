// Malformed tokenizer.json: every problem is a pagoda::Error naming what is wrong, never a crash.
#include <gtest/gtest.h>

#include "core/error.h"
#include "tokenizer_test_util.h"

namespace pagoda {
namespace {

using nlohmann::json;

json valid() {
  test::MiniTokenizer m;
  m.merges = {{"a", "b"}};
  m.added = {test::AddedSpec{"<x>"}};
  m.normalizer = {{"type", "NFC"}};
  m.pre_tokenizer = test::qwen_split_pre_tokenizer();
  return m.json();
}

// Asserts that loading j fails with a message containing each of `needles`.
void expect_error(const std::string& text, std::initializer_list<std::string> needles) {
  try {
    Tokenizer::from_json(text, "bad.json");
    ADD_FAILURE() << "no error for: " << text.substr(0, 200);
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("bad.json"), std::string::npos) << msg;
    for (const auto& n : needles)
      EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
  }
}

void expect_error(const json& j, std::initializer_list<std::string> needles) {
  expect_error(j.dump(), needles);
}

TEST(MalformedTokenizer, ValidBaselineLoads) {
  auto tok = Tokenizer::from_json(valid().dump(), "good");
  EXPECT_EQ(tok->encode("ab<x>").size(), 2u);
}

TEST(MalformedTokenizer, EveryTruncationFails) {
  const std::string text = valid().dump();
  for (size_t n = 0; n < text.size(); n += (n < 300 ? 1 : 37)) {
    EXPECT_THROW(Tokenizer::from_json(text.substr(0, n), "bad.json"), Error) << n;
  }
}

TEST(MalformedTokenizer, NotJsonOrNotAnObject) {
  expect_error(std::string("{\"model\": "), {"not valid JSON"});
  expect_error(std::string("[]"), {"object"});
  expect_error(std::string("null"), {"object"});
  expect_error(std::string(200000, '['), {"bad.json"});
  expect_error(std::string("{}"), {"model", "missing"});
}

TEST(MalformedTokenizer, ModelProblems) {
  json j = valid();
  j["model"]["type"] = "WordPiece";
  expect_error(j, {"model.type", "WordPiece"});
  j = valid();
  j["model"] = json::array();
  expect_error(j, {"model"});
  j = valid();
  j["model"].erase("vocab");
  expect_error(j, {"model.vocab", "missing"});
  j = valid();
  j["model"]["vocab"] = json::array({"a"});
  expect_error(j, {"model.vocab"});
  j = valid();
  j["model"]["byte_fallback"] = "yes";
  expect_error(j, {"byte_fallback"});
  j = valid();
  j["model"]["dropout"] = 0.1;
  expect_error(j, {"dropout"});
  j = valid();
  j["model"]["continuing_subword_prefix"] = "##";
  expect_error(j, {"continuing_subword_prefix"});
  j = valid();
  j["truncation"] = {{"max_length", 8}};
  expect_error(j, {"truncation"});
}

TEST(MalformedTokenizer, VocabIds) {
  for (const json& bad_id :
       {json(-1), json(1.5), json("7"), json(1ull << 40), json(2147483648ll), json(nullptr)}) {
    json j = valid();
    j["model"]["vocab"]["zz"] = bad_id;
    expect_error(j, {"model.vocab.zz"});
  }
  json j = valid();
  j["model"]["vocab"]["zz"] = 5;  // already 'byte 5'
  expect_error(j, {"id 5", "zz"});
  j = valid();
  j["model"]["vocab"]["zz"] = 10000000;  // in range but leaves the table mostly holes
  expect_error(j, {"sparse"});
}

TEST(MalformedTokenizer, Merges) {
  json j = valid();
  j["model"]["merges"].push_back({"a", "nope"});
  expect_error(j, {"model.merges[1]", "nope"});
  j = valid();
  j["model"]["merges"].push_back({"b", "a"});  // "ba" is not in the vocab
  expect_error(j, {"model.merges[1]", "'ba'"});
  j = valid();
  j["model"]["merges"].push_back(json::array({1, 2}));
  expect_error(j, {"model.merges[1]"});
  j = valid();
  j["model"]["merges"].push_back("nospace");
  expect_error(j, {"model.merges[1]", "nospace"});
  j = valid();
  j["model"]["merges"] = "a b";
  expect_error(j, {"model.merges"});
}

TEST(MalformedTokenizer, AddedTokens) {
  json j = valid();
  j["added_tokens"][0]["id"] = 999;  // HF would number it 257
  expect_error(j, {"added_tokens[0].id", "<x>", "257"});
  j = valid();
  j["added_tokens"][0]["content"] = 5;
  expect_error(j, {"added_tokens[0].content"});
  j = valid();
  j["added_tokens"][0]["lstrip"] = "yes";
  expect_error(j, {"added_tokens[0].lstrip"});
  j = valid();
  j["added_tokens"] = json::object();
  expect_error(j, {"added_tokens"});
}

TEST(MalformedTokenizer, UnsupportedComponentsAreNamed) {
  json j = valid();
  j["normalizer"] = {{"type", "Lowercase"}};
  expect_error(j, {"normalizer.type", "Lowercase"});
  j = valid();
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFKC"}}}}};
  expect_error(j, {"normalizer.normalizers[0].type", "NFKC"});
  j = valid();
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  expect_error(j, {"pre_tokenizer.type", "Whitespace"});
  j = valid();
  j["decoder"] = {{"type", "WordPiece"}};
  expect_error(j, {"decoder.type", "WordPiece"});
  j = valid();
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  expect_error(j, {"pre_tokenizer.pretokenizers[0].pattern.Regex", "(unclosed"});
  j = valid();
  j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Sideways";
  expect_error(j, {"behavior", "Sideways"});
  j = valid();
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"Glob", "*"}};
  expect_error(j, {"pattern"});
}

TEST(MalformedTokenizer, SentencePieceComponents) {
  const std::string meta = "\u2581";
  json j = valid();
  j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", ""}}}, {"content", "x"}};
  expect_error(j, {"normalizer.pattern.String", "empty"});
  j = valid();
  j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", "(x"}}}, {"content", "x"}};
  expect_error(j, {"normalizer.pattern.Regex", "(x"});
  j = valid();
  j["normalizer"] = {{"type", "Prepend"}};
  expect_error(j, {"normalizer.prepend", "missing"});
  j = valid();
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "ab"}};
  expect_error(j, {"pre_tokenizer.replacement", "one character"});
  j = valid();
  j["pre_tokenizer"] = {
      {"type", "Metaspace"}, {"replacement", meta}, {"prepend_scheme", "sometimes"}};
  expect_error(j, {"prepend_scheme", "sometimes"});
  j = valid();
  j["pre_tokenizer"] = {{"type", "Metaspace"},
                        {"replacement", meta},
                        {"prepend_scheme", "first"},
                        {"add_prefix_space", false}};
  expect_error(j, {"add_prefix_space"});
  j = valid();
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders",
                   {{{"type", "Fuse"}},
                    {{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", "b"}}}}};
  expect_error(j, {"decoder", "only Strip may follow Fuse"});
  j = valid();
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders", {{{"type", "ByteFallback"}}, {{"type", "ByteFallback"}}}}};
  expect_error(j, {"decoder", "ByteFallback"});
  j = valid();
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders", {{{"type", "ByteLevel"}}, {{"type", "Fuse"}}}}};
  expect_error(j, {"decoder", "ByteLevel"});
  j = valid();
  j["decoder"] = {{"type", "Strip"}, {"content", " "}, {"start", 1}};
  expect_error(j, {"decoder.stop", "missing"});
  j = valid();
  j["decoder"] = {{"type", "Strip"}, {"content", " "}, {"start", -1}, {"stop", 0}};
  expect_error(j, {"decoder.start"});
  j = valid();
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", {{{"SpecialToken", {{"id", "<bos>"}, {"type_id", 0}}}}}},
                         {"special_tokens", json::object()}};
  expect_error(j, {"post_processor.special_tokens.<bos>", "missing"});
  j = valid();
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", {{{"Sequence", {{"id", "B"}, {"type_id", 0}}}}}}};
  expect_error(j, {"post_processor.single[0].Sequence.id"});
}

TEST(MalformedTokenizer, MissingFileIsNamed) {
  try {
    Tokenizer::load_dir("/nonexistent/dir");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/tokenizer.json"), std::string::npos);
  }
}

}  // namespace
}  // namespace pagoda
