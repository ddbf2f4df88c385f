// Images in, served (docs/vision.md): `pagoda serve` on the tiny multimodal Qwen3.5 fixture, chat
// messages of text and base64 images through the official openai client (vision_test.mjs) answer
// transformers' greedy tokens for the fixture's reference prompts, with prefix-cache hits on a
// repeated image and the same tokens with the cache off; a text-only server refuses images.
// Hostile images: reliability_images_test.cpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "vision_server.h"

namespace pagoda::server::test {
namespace {

TEST(ServerVision, ImagesThroughTheOpenAiClientAnswerTransformersTokensWithCacheHits) {
  const VisionModelDir dir;
  const nlohmann::json ref = vision_test::reference();
  const std::vector<size_t> which = {4, 5};  // the cases written in letters
  nlohmann::json cases = nlohmann::json::array();
  for (size_t i : which)
    cases.push_back({{"parts", case_parts(ref, i)}, {"max_tokens", ref.at("cases").at(i).at("generated_ids").size()}});
  for (const bool caching : {true, false}) {
    SCOPED_TRACE(caching ? "prefix caching on" : "prefix caching off");
    ServerProcess s;
    std::vector<std::string> args = {"--api-key", "k", "--served-model-name", "vis", "--max-model-len", "256",
                                     "--enable-prompt-tokens-details"};
    if (!caching) args.push_back("--no-enable-prefix-caching");
    ASSERT_TRUE(s.start(dir.path, args)) << s.log();
    const CommandResult r = run_command("PAGODA_CASES='" + cases.dump() + "' node " +
                                        source_path("tests/server/vision_test.mjs") + " " + std::to_string(s.port()) +
                                        " k vis 2>&1");
    ASSERT_EQ(r.code, 0) << r.out << s.log();
    const size_t at = r.out.find("RESULTS ");
    ASSERT_NE(at, std::string::npos) << r.out;
    const nlohmann::json got = nlohmann::json::parse(r.out.substr(at + 8, r.out.find('\n', at) - at - 8));
    ASSERT_EQ(got.size(), which.size() + 1);
    for (size_t k = 0; k < which.size(); ++k) {
      const auto& c = ref.at("cases").at(which[k]);
      EXPECT_EQ(got[k]["prompt"], c.at("prompt_ids")) << "the server's prompt ids, placeholders expanded";
      EXPECT_EQ(got[k]["tokens"], c.at("generated_ids")) << "case " << which[k];
    }
    const nlohmann::json& again = got.back();
    EXPECT_EQ(again["tokens"], ref.at("cases").at(which[0]).at("generated_ids"));
    EXPECT_EQ(again["cached"].get<int>(), caching ? 16 : 0) << "the repeated image's first block";
    EXPECT_EQ(s.stop(), 0) << s.log();
  }
}

TEST(ServerVision, ATextOnlyServerRefusesImages) {
  const VisionModelDir dir;
  ServerProcess s;
  ASSERT_TRUE(s.start(dir.path, {"--served-model-name", "vis", "--max-model-len", "256", "--limit-mm-per-prompt",
                                 "{\"image\": 0}"}))
      << s.log();
  const nlohmann::json body = {
      {"model", "vis"}, {"max_tokens", 2},
      {"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64,AAAA"}}}}}}}}}};
  const HttpResult r = s.request("POST", "/v1/chat/completions", body.dump(), {});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("--limit-mm-per-prompt is 0"), std::string::npos) << r.body;
  const HttpResult text = s.request(
      "POST", "/v1/chat/completions",
      nlohmann::json{{"model", "vis"}, {"max_tokens", 2}, {"messages", {{{"role", "user"}, {"content", "AB"}}}}}.dump(), {});
  EXPECT_EQ(text.status, 200) << text.body;
  EXPECT_EQ(s.stop(), 0) << s.log();
}

}  // namespace
}  // namespace pagoda::server::test
