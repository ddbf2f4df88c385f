// `pagoda serve --device vulkan` on the default model (models/default) answers the README's request,
// and at temperature 0 its answer is the CPU server's, word for word. Where this build or machine
// has no Vulkan device the test skips, naming why (CI has Mesa's lavapipe and runs it).
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

}  // namespace
}  // namespace pagoda::server::test
