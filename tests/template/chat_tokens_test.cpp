// A chat end to end, as a chat request goes: the model's real chat template (tests/data/<dir>/
// tokenizer_config.json) renders the conversations of tests/fixtures/chat_templates/<chat>_renders.json,
// the model's tokenizer encodes the prompt without adding special tokens (the template writes BOS,
// as transformers' apply_chat_template(tokenize=True) encodes), and the ids must equal the
// reference tokenizer's for the jinja2 render (tests/fixtures/tokenizer/<tokenizer>_reference.json,
// whose strings include these renders: tools/tokenizer_reference.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "core/build_paths.h"

namespace pagoda {
namespace {

using nlohmann::ordered_json;

const std::string kRoot = PAGODA_SOURCE_DIR;

ordered_json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path << " is missing";
  if (!in) return ordered_json::object();
  std::ostringstream buf;
  buf << in.rdbuf();
  return ordered_json::parse(buf.str());
}

struct ChatTokensRow {
  const char* tokenizer;  // tests/fixtures/tokenizer/<tokenizer>_reference.json
  const char* data;       // tests/data/<data>: tokenizer.json + tokenizer_config.json
  const char* chat;       // tests/fixtures/chat_templates/<chat>_renders.json
  const char* bos;        // the BOS the template writes once, at the start
  size_t min_matched;     // renders the reference fixture encodes
};

// gemma3 and llama3_1 join when their reference fixtures are made again with the chat renders
// (tools/tokenizer_reference.py --model gemma3 / llama3_1): until then their fixtures hold none.
const ChatTokensRow kRows[] = {
    {"llama3_2", "llama3_2-tokenizer", "llama3_2", "<|begin_of_text|>", 15},
    {"mistral_nemo", "mistral_nemo-tokenizer", "mistral_nemo", "<s>", 15},
};

class ChatTokens : public ::testing::TestWithParam<ChatTokensRow> {};

TEST_P(ChatTokens, RenderThenEncodeMatchesReference) {
  const ChatTokensRow& row = GetParam();
  const std::string dir = kRoot + "/tests/data/" + row.data;
  ASSERT_TRUE(std::filesystem::exists(dir + "/tokenizer.json")) << dir << " is missing: run tools/fetch_test_data.sh";
  const auto tok = Tokenizer::load_dir(dir);
  const std::optional<ChatTemplate> tmpl = ChatTemplate::load_dir(dir);
  ASSERT_TRUE(tmpl.has_value());
  const ordered_json ref = read_json(kRoot + "/tests/fixtures/tokenizer/" + row.tokenizer + "_reference.json");
  std::map<std::string, std::vector<int32_t>> ids_of;
  for (const auto& c : ref.at("cases")) ids_of[c.at("text").get<std::string>()] = c.at("ids").get<std::vector<int32_t>>();
  const int32_t bos = tok->token_to_id(row.bos).value_or(-1);
  ASSERT_GE(bos, 0) << row.bos;

  size_t matched = 0;
  const ordered_json renders = read_json(kRoot + "/tests/fixtures/chat_templates/" + row.chat + "_renders.json");
  for (const auto& c : renders.at("cases")) {
    if (!c.contains("render") || c.contains("strftime_now")) continue;
    SCOPED_TRACE(c.at("name").get<std::string>());
    const std::string prompt = tmpl->render(c.at("context"));
    ASSERT_EQ(prompt, c.at("render").get<std::string>());
    const std::vector<int32_t> ids = tok->encode(prompt);
    // One BOS, the template's, first: none added by the tokenizer, none lost to the text around it.
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids.front(), bos);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), bos), 1);
    EXPECT_EQ(tok->decode(ids, /*skip_special_tokens=*/false), prompt);
    const auto it = ids_of.find(prompt);
    if (it == ids_of.end()) continue;
    EXPECT_EQ(ids, it->second);
    ++matched;
  }
  EXPECT_GE(matched, row.min_matched) << "renders missing from the tokenizer fixture: python3 tools/tokenizer_reference.py --model "
                                      << row.tokenizer;
}

INSTANTIATE_TEST_SUITE_P(Models, ChatTokens, ::testing::ValuesIn(kRows),
                         [](const ::testing::TestParamInfo<ChatTokensRow>& p) { return std::string(p.param.tokenizer); });

// Gemma 3 (SentencePiece-style BPE): its real template, then its tokenizer; the ids are checked
// against facts of its tokenizer.json (one <bos> = 2 first, each turn marker one special token)
// and the round trip, until its reference fixture holds the chat renders.
TEST(ChatTokensGemma3, TurnMarkersAreSingleTokens) {
  const std::string dir = kRoot + "/tests/data/gemma3-tokenizer";
  ASSERT_TRUE(std::filesystem::exists(dir + "/tokenizer.json")) << dir << " is missing: run tools/fetch_test_data.sh";
  const auto tok = Tokenizer::load_dir(dir);
  const std::optional<ChatTemplate> tmpl = ChatTemplate::load_dir(dir);
  ASSERT_TRUE(tmpl.has_value());
  const int32_t start = tok->token_to_id("<start_of_turn>").value_or(-1), end = tok->token_to_id("<end_of_turn>").value_or(-1);
  ASSERT_GE(start, 0);
  ASSERT_GE(end, 0);
  size_t checked = 0;
  const ordered_json renders = read_json(kRoot + "/tests/fixtures/chat_templates/gemma3_renders.json");
  for (const auto& c : renders.at("cases")) {
    if (!c.contains("render") || !c.at("context").contains("bos_token")) continue;
    SCOPED_TRACE(c.at("name").get<std::string>());
    const std::string prompt = tmpl->render(c.at("context"));
    ASSERT_EQ(prompt, c.at("render").get<std::string>());
    const std::vector<int32_t> ids = tok->encode(prompt);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids.front(), 2);  // <bos>
    EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 1);
    auto occurrences = [&](const std::string& marker) {
      size_t n = 0;
      for (size_t at = prompt.find(marker); at != std::string::npos; at = prompt.find(marker, at + 1)) ++n;
      return n;
    };
    EXPECT_EQ(static_cast<size_t>(std::count(ids.begin(), ids.end(), start)), occurrences("<start_of_turn>"));
    EXPECT_EQ(static_cast<size_t>(std::count(ids.begin(), ids.end(), end)), occurrences("<end_of_turn>"));
    EXPECT_EQ(tok->decode(ids, /*skip_special_tokens=*/false), prompt);
    ++checked;
  }
  EXPECT_GE(checked, 10u);
}

}  // namespace
}  // namespace pagoda
