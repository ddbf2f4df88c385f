// `pagoda serve` on the default model through the structured-output clients people use
// (tests/server/structured_clients_test.mjs, npm packages from tools/fetch_test_data.sh): openai-node's
// zodResponseFormat and zodFunction with chat.completions.parse, LangChain JS's
// ChatOpenAI.withStructuredOutput, the Vercel AI SDK's generateObject. Each output must pass the zod
// schema it was asked for; a schema feature the server refuses fails the test with the 400.
#include <gtest/gtest.h>

#include <filesystem>

#include "server_harness.h"

namespace pagoda::server::test {
namespace {

const std::string kKey = "structured-key";

TEST(ServerStructuredClients, ZodSchemasThroughOpenAiLangChainAndAiSdk) {
  for (const char* package : {"openai", "zod", "@langchain/openai", "@langchain/core", "ai", "@ai-sdk/openai-compatible"})
    ASSERT_TRUE(std::filesystem::exists(source_path(std::string("tests/data/node/node_modules/") + package + "/package.json")))
        << "the " << package << " npm package is missing: run tools/fetch_test_data.sh";
  const DefaultModelDir dir;
  ASSERT_FALSE(dir.path.empty());
  ServerProcess s;
  ASSERT_TRUE(s.start(dir.path, {"--api-key", kKey, "--served-model-name", "tiny", "--max-model-len", "1024"}))
      << s.log();
  const CommandResult r = run_command("node " + source_path("tests/server/structured_clients_test.mjs") + " " +
                                      std::to_string(s.port()) + " " + kKey + " tiny 2>&1");
  EXPECT_EQ(r.code, 0) << r.out << "\n--- server log ---\n" << s.log();
  EXPECT_NE(r.out.find("# pass 4"), std::string::npos) << r.out;  // every test ran, none skipped
  EXPECT_EQ(s.stop(), 0) << s.log();
}

}  // namespace
}  // namespace pagoda::server::test
