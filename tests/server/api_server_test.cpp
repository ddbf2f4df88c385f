// `pagoda serve` through tests/server/api_test.mjs (the official `openai` npm client): logit_bias,
// echo, accepted no-op fields, prefix caching (cached_tokens, cache_salt, counters), structured outputs on the default
// model (and tool_choice through the Vercel AI SDK, ai_sdk_test.mjs), /version /ping /load; and
// chat messages rendered as jinja2 renders them — Qwen3's template from the model directory, and
// DeepSeek-V3's given with --chat-template (which also checks the flag).
#include <gtest/gtest.h>

#include "server_harness.h"

namespace pagoda::server::test {
namespace {

const std::string kKey = "api-key";

std::string api_test(const ServerProcess& s, const std::string& args) {
  return "node " + source_path("tests/server/api_test.mjs") + " " + std::to_string(s.port()) + " " + kKey +
         " tiny " + args + " 2>&1";
}

TEST(ServerApi, ExtrasThroughTheOpenAiClient) {
  const TestModelDir dir;
  ASSERT_FALSE(dir.path.empty());
  ServerProcess s;
  ASSERT_TRUE(s.start(dir.path, {"--api-key", kKey, "--served-model-name", "tiny", "--max-model-len", "1024"}))
      << s.log();
  const CommandResult r = run_command(api_test(s, "api"));
  EXPECT_EQ(r.code, 0) << r.out << "\n--- server log ---\n" << s.log();
  const CommandResult q = run_command(api_test(s, "render " + source_path("tests/fixtures/chat_templates/qwen3_renders.json")));
  EXPECT_EQ(q.code, 0) << q.out;
  EXPECT_EQ(s.stop(), 0) << s.log();
}

TEST(ServerApi, PrefixCacheThroughTheOpenAiClient) {
  const TestModelDir dir;
  ASSERT_FALSE(dir.path.empty());
  ServerProcess s;
  ASSERT_TRUE(s.start(dir.path, {"--api-key", kKey, "--served-model-name", "tiny", "--max-model-len", "1024",
                                 "--enable-prompt-tokens-details"}))
      << s.log();
  const CommandResult r = run_command(api_test(s, "prefix"));
  EXPECT_EQ(r.code, 0) << r.out << "\n--- server log ---\n" << s.log();
  EXPECT_EQ(s.stop(), 0) << s.log();
}

// The shipped default model knows no JSON: only the grammar mask makes its outputs valid.
TEST(ServerApi, StructuredOutputsOnTheDefaultModel) {
  const DefaultModelDir dir;
  ASSERT_FALSE(dir.path.empty());
  ServerProcess s;
  ASSERT_TRUE(s.start(dir.path, {"--api-key", kKey, "--served-model-name", "tiny"})) << s.log();
  const CommandResult r = run_command(api_test(s, "structured"));
  EXPECT_EQ(r.code, 0) << r.out << "\n--- server log ---\n" << s.log();
  EXPECT_NE(r.out.find("ok 4 - structured outputs"), std::string::npos) << r.out;  // ran, not skipped
  EXPECT_EQ(r.out.find("default model # SKIP"), std::string::npos) << r.out;
  EXPECT_EQ(s.stop(), 0) << s.log();
}

// tool_choice required / named through the Vercel AI SDK (tests/server/ai_sdk_test.mjs): the SDK
// raises AI_ToolChoiceViolationError on calls that break the choice; the test checks the arguments.
// Once per --tool-call-parser: the grammar writes the calls in that family's syntax (Qwen's tags,
// Llama 3 JSON, Mistral's array, pythonic) and the parser must turn them back into tool_calls, whole
// and streamed.
class ServerApiToolParser : public ::testing::TestWithParam<const char*> {};

TEST_P(ServerApiToolParser, ToolChoiceThroughTheVercelAiSdk) {
  ASSERT_TRUE(std::filesystem::exists(source_path("tests/data/node/node_modules/ai/package.json")))
      << "the `ai` npm package is missing: run tools/fetch_test_data.sh";
  const DefaultModelDir dir;
  ASSERT_FALSE(dir.path.empty());
  ServerProcess s;
  ASSERT_TRUE(s.start(dir.path, {"--api-key", kKey, "--served-model-name", "tiny", "--tool-call-parser", GetParam()}))
      << s.log();
  const CommandResult r = run_command("node " + source_path("tests/server/ai_sdk_test.mjs") + " " +
                                      std::to_string(s.port()) + " " + kKey + " tiny 2>&1");
  EXPECT_EQ(r.code, 0) << r.out << "\n--- server log ---\n" << s.log();
  EXPECT_NE(r.out.find("# pass 2"), std::string::npos) << r.out;  // both ran, none skipped
  EXPECT_EQ(s.stop(), 0) << s.log();
}

INSTANTIATE_TEST_SUITE_P(Parsers, ServerApiToolParser,
                         ::testing::Values("hermes", "llama3_json", "mistral", "pythonic"),
                         [](const ::testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

TEST(ServerApi, HybridPrefixCacheHitsASharedSystemPrompt) {
  const DefaultModelDir dir;  // Qwen3.5: Gated DeltaNet layers, a chat template
  ASSERT_FALSE(dir.path.empty());
  ServerProcess s;
  ASSERT_TRUE(s.start(dir.path, {"--api-key", kKey, "--served-model-name", "tiny", "--enable-prompt-tokens-details"}))
      << s.log();
  const CommandResult r = run_command(api_test(s, "prefix-chat"));
  EXPECT_EQ(r.code, 0) << r.out << "\n--- server log ---\n" << s.log();
  EXPECT_EQ(s.stop(), 0) << s.log();
}

TEST(ServerApi, ChatTemplateFlagRendersDeepSeekV3AsJinja2) {
  const TestModelDir dir;
  ASSERT_FALSE(dir.path.empty());
  // DeepSeek-V3's special tokens; its template comes from the flag, not from this file.
  write_file(dir.path + "/tokenizer_config.json",
             nlohmann::json{{"bos_token", "<\xef\xbd\x9c" "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"},
                            {"eos_token", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"}}
                 .dump());
  ServerProcess s;
  ASSERT_TRUE(s.start(dir.path, {"--api-key", kKey, "--served-model-name", "tiny", "--chat-template",
                                 source_path("tests/fixtures/chat_templates/deepseek_v3.jinja")}))
      << s.log();
  const CommandResult r =
      run_command(api_test(s, "render " + source_path("tests/fixtures/chat_templates/deepseek_v3_renders.json")));
  EXPECT_EQ(r.code, 0) << r.out << "\n--- server log ---\n" << s.log();
  EXPECT_EQ(s.stop(), 0) << s.log();
}

}  // namespace
}  // namespace pagoda::server::test
