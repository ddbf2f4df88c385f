// `pagoda serve` on the shipped default model through Anthropic's official npm client
// (tests/server/messages_test.mjs, `@anthropic-ai/sdk` from tools/fetch_test_data.sh): POST
// /v1/messages whole and streamed, tools, count_tokens, auth and errors.
#include <gtest/gtest.h>

#include <filesystem>

#include "server_harness.h"

namespace pagoda::server::test {
namespace {

const std::string kKey = "messages-key";

TEST(ServerMessages, AnthropicClient) {
  ASSERT_TRUE(std::filesystem::exists(source_path("tests/data/node/node_modules/@anthropic-ai/sdk/package.json")))
      << "the @anthropic-ai/sdk npm package is missing: run tools/fetch_test_data.sh";
  const DefaultModelDir dir;
  ASSERT_FALSE(dir.path.empty());
  ServerProcess s;
  ASSERT_TRUE(s.start(dir.path, {"--api-key", kKey, "--served-model-name", "tiny", "--max-model-len", "1024"}))
      << s.log();
  const CommandResult r = run_command("node " + source_path("tests/server/messages_test.mjs") + " " +
                                      std::to_string(s.port()) + " " + kKey + " tiny 2>&1");
  EXPECT_EQ(r.code, 0) << r.out << "\n--- server log ---\n" << s.log();
  EXPECT_NE(r.out.find("# pass 7"), std::string::npos) << r.out;  // every test ran, none skipped
  EXPECT_EQ(s.stop(), 0) << s.log();
}

}  // namespace
}  // namespace pagoda::server::test
