// LoRA adapters served: `pagoda serve --lora-modules` with two tiny random PEFT adapters on the
// test model, through the official `openai` client (tests/server/lora_test.mjs): /v1/models lists
// both with the base model as parent, each adapter's greedy tokens are those of its merged
// weights (W + s·B·A, tests/model/lora_fixture.h) run in-process, the base model's are the base
// model's, and an unknown name is a 404; /metrics has vllm:lora_requests_info; `bench serve
// --lora-modules` spreads its requests over the adapters.
#include <gtest/gtest.h>

#include "../model/lora_fixture.h"
#include "engine/engine.h"
#include "engine_greedy.h"
#include "server_harness.h"
#include "core/build_paths.h"

namespace pagoda::server::test {
namespace {

TEST(ServerLora, TwoAdaptersAndTheBaseAnswerAsTheirWeightsThroughTheOpenAiClient) {
  const TestModelDir model_dir;
  ASSERT_FALSE(model_dir.path.empty());
  io_test::TempDir tmp;
  const std::string fixture = "qwen3-tiny-tied";
  std::vector<std::string> merged;
  std::vector<std::string> modules;
  for (int i = 0; i < 2; ++i) {
    const lora_test::AdapterSpec spec{.rank = 4 + 4 * i, .alpha = 8, .seed = static_cast<uint32_t>(31 + i)};
    const std::string dir = tmp.file("a" + std::to_string(i));
    const auto pairs = lora_test::write_adapter(fixture, spec, dir);
    merged.push_back(tmp.file("merged" + std::to_string(i)));
    lora_test::write_merged(fixture, pairs, spec, merged.back());
    modules.push_back("a" + std::to_string(i) + "=" + dir);
  }
  ServerProcess s;
  ASSERT_TRUE(s.start(model_dir.path, {"--api-key", "k", "--served-model-name", "tiny", "--max-model-len", "256",
                                       "--lora-modules", modules[0], modules[1], "--max-loras", "2",
                                       "--max-lora-rank", "8"}))
      << s.log();
  const std::vector<int32_t> prompt = {17, 300, 45, 260, 99, 12, 301, 77, 5, 410, 66};
  nlohmann::json ids = prompt;
  const CommandResult r = run_command("PAGODA_PROMPT='" + ids.dump() + "' node " +
                                      source_path("tests/server/lora_test.mjs") + " " + std::to_string(s.port()) +
                                      " k tiny a0 a1 2>&1");
  ASSERT_EQ(r.code, 0) << r.out << "\n--- server log ---\n" << s.log();
  const size_t at = r.out.find("TOKENS ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const nlohmann::json got = nlohmann::json::parse(r.out.substr(at + 7, r.out.find('\n', at) - at - 7));
  EXPECT_EQ(got["tiny"].get<std::vector<int32_t>>(), engine_greedy(testing::fixture_model_dir(fixture), prompt));
  EXPECT_EQ(got["a0"].get<std::vector<int32_t>>(), engine_greedy(merged[0], prompt));
  EXPECT_EQ(got["a1"].get<std::vector<int32_t>>(), engine_greedy(merged[1], prompt));
  EXPECT_NE(got["a0"], got["tiny"]);
  // vLLM's lora_requests_info, as the inference gateway reads it: a series per (running, waiting)
  // set, valued at the time it was last seen; a0 and a1 were each seen running.
  const std::string metrics = s.get("/metrics", {"Authorization: Bearer k"}).body;
  for (const char* name : {"a0", "a1"})
    EXPECT_TRUE(metrics.find("vllm:lora_requests_info{max_lora=\"2\",running_lora_adapters=\"" + std::string(name) +
                             "\",waiting_lora_adapters=\"\"}") != std::string::npos)
        << name << "\n" << metrics;
  // `bench serve --lora-modules` (vLLM's): every request names one of the adapters; a name the server
  // does not serve fails them all.
  const std::string bench = std::string(PAGODA_BINARY) + " bench serve --base-url http://127.0.0.1:" +
                            std::to_string(s.port()) + " --api-key k --num-prompts 6 --random-input-len 8 "
                            "--random-output-len 3 --lora-modules ";
  CommandResult b = run_command(bench + "a0 a1 2>&1");
  EXPECT_EQ(b.code, 0) << b.out;
  EXPECT_NE(b.out.find("Successful requests:"), std::string::npos) << b.out;
  b = run_command(bench + "no-such-adapter 2>&1");
  EXPECT_EQ(b.code, 1) << b.out;
  EXPECT_NE(b.out.find("6 of 6 requests failed; the first error: HTTP 404"), std::string::npos) << b.out;
  EXPECT_EQ(s.stop(), 0) << s.log();
}

// PEFT's own adapters (tests/fixtures/lora, made by tools/make_lora_fixtures.py with peft) on the
// test server's model: one from --lora-modules, one loaded at run time through vLLM's
// POST /v1/load_lora_adapter (VLLM_ALLOW_RUNTIME_LORA_UPDATING=True). Through the openai client each
// answers PEFT's greedy tokens for its reference prompts, and the base model the base's; then the
// runtime one is unloaded: /v1/models drops it and a request naming it gets a 404.
TEST(ServerLora, PeftAdaptersAtStartAndLoadedAtRunTimeAnswerAsPeftAndUnload) {
  const TestModelDir model_dir;
  ASSERT_FALSE(model_dir.path.empty());
  const std::string a = lora_test::peft_fixture_dir("qwen3-tiny-tied-lora");
  const std::string b = lora_test::peft_fixture_dir("qwen3-tiny-tied-lora-attn");
  ASSERT_TRUE(std::filesystem::exists(b + "/reference.json")) << "run tools/make_lora_fixtures.py";
  ::setenv("VLLM_ALLOW_RUNTIME_LORA_UPDATING", "True", 1);
  ServerProcess s;
  const bool started = s.start(model_dir.path, {"--api-key", "k", "--served-model-name", "tiny", "--max-model-len",
                                                "256", "--lora-modules", "peft_a=" + a, "--max-loras", "2",
                                                "--max-lora-rank", "8"});
  ::unsetenv("VLLM_ALLOW_RUNTIME_LORA_UPDATING");
  ASSERT_TRUE(started) << s.log();
  const std::vector<std::string> auth = {"Authorization: Bearer k"};
  HttpResult r = s.request("POST", "/v1/load_lora_adapter",
                           nlohmann::json{{"lora_name", "peft_b"}, {"lora_path", b}}.dump(), auth);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("Success"), std::string::npos) << r.body;
  r = s.request("POST", "/v1/load_lora_adapter", nlohmann::json{{"lora_name", "peft_b"}, {"lora_path", b}}.dump(), auth);
  EXPECT_EQ(r.status, 400) << r.body;  // already loaded
  r = s.request("POST", "/v1/load_lora_adapter",
                nlohmann::json{{"lora_name", "wrong"}, {"lora_path", lora_test::peft_fixture_dir("gemma3-tiny-text-lora")}}
                    .dump(),
                auth);
  EXPECT_EQ(r.status, 400) << r.body;  // another model's adapter, named by its directory
  EXPECT_NE(r.body.find("gemma3-tiny-text-lora"), std::string::npos) << r.body;

  std::map<std::string, nlohmann::json> refs;
  for (const auto& [name, dir] : {std::pair{"peft_a", a}, std::pair{"peft_b", b}}) {
    std::ifstream in(dir + "/reference.json");
    refs[name] = nlohmann::json::parse(in);
  }
  for (const char* name : {"peft_a", "peft_b"})
    for (const nlohmann::json& c : refs[name]["cases"]) {
      const nlohmann::json& prompt = c["prompt_ids"];
      SCOPED_TRACE(std::string(name) + ", prompt of " + std::to_string(prompt.size()) + " tokens");
      const CommandResult n = run_command("PAGODA_PROMPT='" + prompt.dump() + "' PAGODA_MAX_TOKENS=" +
                                          std::to_string(c["generated_ids"].size()) + " node " +
                                          source_path("tests/server/lora_test.mjs") + " " + std::to_string(s.port()) +
                                          " k tiny peft_a peft_b 2>&1");
      ASSERT_EQ(n.code, 0) << n.out << "\n--- server log ---\n" << s.log();
      const size_t at = n.out.find("TOKENS ");
      ASSERT_NE(at, std::string::npos) << n.out;
      const nlohmann::json got = nlohmann::json::parse(n.out.substr(at + 7, n.out.find('\n', at) - at - 7));
      EXPECT_EQ(got[name], c["generated_ids"]);
      EXPECT_NE(got[name], got["tiny"]);
    }
  const std::string metrics = s.get("/metrics", {"Authorization: Bearer k"}).body;
  EXPECT_NE(metrics.find("running_lora_adapters=\"peft_b\""), std::string::npos) << metrics;

  r = s.request("POST", "/v1/unload_lora_adapter", nlohmann::json{{"lora_name", "peft_b"}}.dump(), auth);
  EXPECT_EQ(r.status, 200) << r.body;
  r = s.request("POST", "/v1/unload_lora_adapter", nlohmann::json{{"lora_name", "peft_b"}}.dump(), auth);
  EXPECT_EQ(r.status, 404) << r.body;
  const nlohmann::json models = nlohmann::json::parse(s.get("/v1/models", {"Authorization: Bearer k"}).body);
  std::vector<std::string> ids;
  for (const auto& m : models["data"]) ids.push_back(m["id"]);
  EXPECT_EQ(ids, (std::vector<std::string>{"tiny", "peft_a"}));
  r = s.request("POST", "/v1/completions", nlohmann::json{{"model", "peft_b"}, {"prompt", "hi"}, {"max_tokens", 1}}.dump(),
                auth);
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(s.stop(), 0) << s.log();
}

// Without VLLM_ALLOW_RUNTIME_LORA_UPDATING the routes answer 404 saying how to turn them on.
TEST(ServerLora, RuntimeLoadingIsOffUnlessAllowed) {
  const TestModelDir model_dir;
  ASSERT_FALSE(model_dir.path.empty());
  ServerProcess s;
  ASSERT_TRUE(s.start(model_dir.path, {"--enable-lora", "--max-lora-rank", "8"})) << s.log();
  const HttpResult r =
      s.request("POST", "/v1/load_lora_adapter",
                nlohmann::json{{"lora_name", "x"}, {"lora_path", lora_test::peft_fixture_dir("qwen3-tiny-tied-lora")}}.dump(),
                {});
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_NE(r.body.find("VLLM_ALLOW_RUNTIME_LORA_UPDATING"), std::string::npos) << r.body;
  EXPECT_EQ(s.stop(), 0) << s.log();
}

}  // namespace
}  // namespace pagoda::server::test
