// `pagoda serve --device vulkan` on the default model (models/default) answers the README's request,
// and at temperature 0 its answer is the CPU server's, word for word; the official `openai` npm
// client's conformance script passes against it. Where this build or machine has no Vulkan device
// the tests skip, naming why (CI has Mesa's lavapipe and runs them).
#include <gtest/gtest.h>

#include "../support/vulkan_device.h"
#include "server_harness.h"

namespace pagoda::server::test {
namespace {

using pagoda::testing::vulkan_missing;

// The request of README.md, verbatim, and the same at temperature 0.
const char* kReadmeRequest =
    R"({"model": "qwen3_5-kjv", "messages": [{"role": "user", "content": "Who was Moses?"}]})";
const char* kGreedyRequest =
    R"({"model": "qwen3_5-kjv", "messages": [{"role": "user", "content": "Who was Moses?"}], "temperature": 0, "max_tokens": 24})";

std::string answer(const HttpResult& r) {
  const nlohmann::json j = r.json();
  if (!j.is_object() || !j.contains("choices")) return "";
  return j["choices"][0]["message"]["content"].get<std::string>();
}

TEST(VulkanServe, AnswersTheReadmeRequestOnTheDefaultModelAsTheCpuDoes) {
  const std::string why = vulkan_missing();
  if (!why.empty()) GTEST_SKIP() << "no Vulkan device: " << why;
  // What `pagoda serve` with no MODEL_DIR loads, under the name it serves it by (the README's).
  const std::string model = source_path("models/default");
  ServerProcess vk;
  ASSERT_TRUE(vk.start(model, {"--device", "vulkan", "--served-model-name", "qwen3_5-kjv", "--max-model-len", "128", "--max-num-seqs", "4"})) << vk.log();
  const HttpResult readme = vk.request("POST", "/v1/chat/completions", kReadmeRequest);
  ASSERT_EQ(readme.status, 200) << readme.body << "\n--- server log ---\n" << vk.log();
  EXPECT_FALSE(answer(readme).empty()) << readme.body;
  const HttpResult greedy_vk = vk.request("POST", "/v1/chat/completions", kGreedyRequest);
  ASSERT_EQ(greedy_vk.status, 200) << greedy_vk.body;
  EXPECT_NE(vk.log().find("device vulkan"), std::string::npos) << vk.log();
  EXPECT_EQ(vk.stop(), 0) << vk.log();

  ServerProcess cpu;
  ASSERT_TRUE(cpu.start(model, {"--device", "cpu", "--served-model-name", "qwen3_5-kjv", "--max-model-len", "128", "--max-num-seqs", "4"})) << cpu.log();
  const HttpResult greedy_cpu = cpu.request("POST", "/v1/chat/completions", kGreedyRequest);
  ASSERT_EQ(greedy_cpu.status, 200) << greedy_cpu.body;
  EXPECT_FALSE(answer(greedy_cpu).empty());
  EXPECT_EQ(answer(greedy_vk), answer(greedy_cpu));
  EXPECT_EQ(cpu.stop(), 0) << cpu.log();
}

// tests/server/openai_client_test.mjs (completions and chat, whole and streamed, n > 1, stops,
// logprobs, tools, usage) with the model on the Vulkan device.
TEST(VulkanServe, OpenAiClientConformance) {
  const std::string why = vulkan_missing();
  if (!why.empty()) GTEST_SKIP() << "no Vulkan device: " << why;
  const TestModelDir model_dir;
  ASSERT_FALSE(model_dir.path.empty());
  ServerProcess s;
  ASSERT_TRUE(s.start(model_dir.path, {"--device", "vulkan", "--api-key", "k", "--served-model-name", "tiny",
                                       "--max-model-len", "1024"}))
      << s.log();
  const CommandResult r = run_command("node " + source_path("tests/server/openai_client_test.mjs") + " " +
                                      std::to_string(s.port()) + " k tiny 2>&1");
  EXPECT_EQ(r.code, 0) << r.out << "\n--- server log ---\n" << s.log();
  EXPECT_NE(s.log().find("device vulkan"), std::string::npos) << s.log();
  EXPECT_EQ(s.stop(), 0) << s.log();
}

}  // namespace
}  // namespace pagoda::server::test
