// `pagoda tokenize` on real tokenizers of the new families, with a whole chat prompt as jinja2
// renders it with the model's template (tests/fixtures/chat_templates/<chat>_renders.json) on
// standard input: the ids must be the reference tokenizer's (tests/fixtures/tokenizer/
// <tokenizer>_reference.json, tools/tokenizer_reference.py), and --decode must give the text back.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "../support/run_command.h"
#include "core/build_paths.h"

namespace {

using nlohmann::json;

const std::string kRoot = PAGODA_SOURCE_DIR;

json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path << " is missing";
  std::ostringstream buf;
  buf << in.rdbuf();
  return in ? json::parse(buf.str()) : json::object();
}

std::string join(const std::vector<int32_t>& ids) {
  std::string out;
  for (int32_t id : ids) {
    if (!out.empty()) out += ' ';
    out += std::to_string(id);
  }
  return out;
}

struct Row {
  const char* tokenizer;  // tests/fixtures/tokenizer/<tokenizer>_reference.json
  const char* data;       // tests/data/<data>
  const char* chat;       // tests/fixtures/chat_templates/<chat>_renders.json
  const char* chat_case;  // the conversation to send
};

const Row kRows[] = {
    {"mistral_nemo", "mistral_nemo-tokenizer", "mistral_nemo", "two_tool_calls_two_results"},
    {"llama3_2", "llama3_2-tokenizer", "llama3_2", "tool_calls_then_answer"},
};

class TokenizeChat : public ::testing::TestWithParam<Row> {};

TEST_P(TokenizeChat, PromptFromStdinGivesReferenceIds) {
  const Row& row = GetParam();
  const std::string dir = kRoot + "/tests/data/" + row.data;
  ASSERT_TRUE(std::filesystem::exists(dir + "/tokenizer.json")) << dir << " is missing: run tools/fetch_test_data.sh";
  std::string prompt;
  const json renders = read_json(kRoot + "/tests/fixtures/chat_templates/" + row.chat + "_renders.json");
  for (const json& c : renders.at("cases"))
    if (c.at("name") == row.chat_case) prompt = c.at("render");
  ASSERT_FALSE(prompt.empty()) << row.chat_case;
  std::vector<int32_t> want;
  const json reference = read_json(kRoot + "/tests/fixtures/tokenizer/" + row.tokenizer + "_reference.json");
  for (const json& c : reference.at("cases"))
    if (c.at("text") == prompt) want = c.at("ids").get<std::vector<int32_t>>();
  ASSERT_FALSE(want.empty()) << "the render is missing from the tokenizer fixture: tools/tokenizer_reference.py --model "
                             << row.tokenizer;

  const std::filesystem::path file = std::filesystem::path(::testing::TempDir()) /
                                     ("pagoda_tokenize_chat_" + std::string(row.tokenizer) + ".txt");
  std::ofstream(file, std::ios::binary) << prompt;
  const std::string bin = PAGODA_BINARY;
  const auto r = pagoda::testing::run_command(bin + " tokenize --model " + dir + " < " + file.string() + " 2>&1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, join(want) + "\n");
  const auto d = pagoda::testing::run_command(bin + " tokenize --decode --model " + dir + " '" + join(want) + "' 2>&1");
  ASSERT_EQ(d.code, 0) << d.out;
  EXPECT_EQ(d.out, prompt + "\n");
  std::filesystem::remove(file);
}

INSTANTIATE_TEST_SUITE_P(Models, TokenizeChat, ::testing::ValuesIn(kRows),
                         [](const ::testing::TestParamInfo<Row>& p) { return std::string(p.param.tokenizer); });

}  // namespace
