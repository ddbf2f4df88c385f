// /v1/embeddings end to end: an embedding-model directory made at test time from the tiny Qwen3
// fixture (sentence-transformers modules.json + 1_Pooling with last-token pooling + Normalize, and
// Qwen3-Embedding's tokenizer post-processor that appends <|endoftext|>), served with no flag (found
// from modules.json), checked with the official `openai` client (tests/server/embeddings_test.mjs)
// and curl against the independent reference; --runner pooling / --task embed on a plain directory;
// the 400s of the other runner.
#include <gtest/gtest.h>

#include "../model/lora_fixture.h"
#include "../support/embedding_fixture.h"
#include "server_harness.h"

namespace pagoda::server::test {
namespace {

using pagoda::testing::compare_vectors;
using pagoda::testing::embedding_fixture_path;
using pagoda::testing::load_embedding_cases;

const std::string kKey = "test-key";
const std::string kAuth = "Authorization: Bearer " + kKey;

// make_test_model_dir() turned into a Qwen3-Embedding-style directory.
void make_embedding_model(const std::string& dir) {
  nlohmann::json tok = tiny_tokenizer_json();
  tok["post_processor"] = nlohmann::json::parse(R"({"type": "TemplateProcessing",
    "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}],
    "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
             {"SpecialToken": {"id": "<|endoftext|>", "type_id": 1}}],
    "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [500], "tokens": ["<|endoftext|>"]}}})");
  write_file(dir + "/tokenizer.json", tok.dump());
  write_file(dir + "/modules.json", R"([
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}])");
  fs::create_directories(dir + "/1_Pooling");
  fs::create_directories(dir + "/2_Normalize");
  write_file(dir + "/1_Pooling/config.json",
             R"({"word_embedding_dimension": 64, "pooling_mode_cls_token": false, "pooling_mode_mean_tokens": false,
                 "pooling_mode_max_tokens": false, "pooling_mode_mean_sqrt_len_tokens": false,
                 "pooling_mode_weightedmean_tokens": false, "pooling_mode_lasttoken": true, "include_prompt": true})");
}

std::string embeddings_body(const nlohmann::json& input, const std::string& extra = "") {
  return R"({"model": "emb", "encoding_format": "float", "input": )" + input.dump() + extra + "}";
}

void expect_error(const HttpResult& r, int status, const std::string& words) {
  EXPECT_EQ(r.status, status) << r.body;
  const nlohmann::json j = r.json();
  ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
  EXPECT_NE(j["error"]["message"].get<std::string>().find(words), std::string::npos) << r.body;
}

TEST(ServerEmbeddings, OpenAiClientAgainstReference) {
  const TestModelDir model_dir;
  ASSERT_FALSE(model_dir.path.empty());
  make_embedding_model(model_dir.path);
  ServerProcess s;  // no flag: modules.json makes it an embedding model
  ASSERT_TRUE(s.start(model_dir.path, {"--api-key", kKey, "--served-model-name", "emb", "--max-model-len", "256",
                                       "--max-num-batched-tokens", "64"}))
      << s.log();
  const CommandResult r = run_command("node " + source_path("tests/server/embeddings_test.mjs") + " " +
                                      std::to_string(s.port()) + " " + kKey + " emb " + embedding_fixture_path() +
                                      " 2>&1");
  EXPECT_EQ(r.code, 0) << r.out << "\n--- server log ---\n" << s.log();
  EXPECT_EQ(s.stop(), 0) << s.log();
}

TEST(ServerEmbeddings, CurlRequestsAndErrors) {
  const TestModelDir model_dir;
  ASSERT_FALSE(model_dir.path.empty());
  make_embedding_model(model_dir.path);
  ServerProcess s;
  ASSERT_TRUE(s.start(model_dir.path, {"--api-key", kKey, "--served-model-name", "emb", "--max-model-len", "256"}))
      << s.log();
  const auto cases = load_embedding_cases();
  // Every case in one request: strings and token-id lists mixed, answered in order.
  nlohmann::json inputs = nlohmann::json::array();
  size_t tokens = 0;
  for (const auto& c : cases) {
    inputs.push_back(c.input);
    tokens += c.token_ids.size();
  }
  const HttpResult r = s.request("POST", "/v1/embeddings", embeddings_body(inputs), {kAuth});
  ASSERT_EQ(r.status, 200) << r.body;
  const nlohmann::json j = r.json();
  ASSERT_EQ(j["data"].size(), cases.size()) << r.body;
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["usage"]["prompt_tokens"], tokens);
  EXPECT_EQ(j["usage"]["total_tokens"], tokens);
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(j["data"][i]["index"], i);
    const auto m = compare_vectors(j["data"][i]["embedding"].get<std::vector<double>>(), cases[i].embedding);
    EXPECT_TRUE(m.ok()) << cases[i].name << ": cosine " << m.cosine << ", max abs diff " << m.max_abs_diff;
  }
  // add_special_tokens false: no <|endoftext|>, so a different vector and one token fewer.
  const HttpResult plain =
      s.request("POST", "/v1/embeddings", embeddings_body("Hello world", R"(, "add_special_tokens": false)"), {kAuth});
  ASSERT_EQ(plain.status, 200) << plain.body;
  EXPECT_EQ(plain.json()["usage"]["prompt_tokens"], cases[0].token_ids.size() - 1);
  EXPECT_FALSE(compare_vectors(plain.json()["data"][0]["embedding"].get<std::vector<double>>(), cases[0].embedding).ok());

  expect_error(s.request("POST", "/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}]})",
                         {kAuth}),
               400, "The model does not support Chat Completions API");
  expect_error(s.request("POST", "/v1/completions", R"({"prompt": "hi"})", {kAuth}), 400,
               "The model does not support Completions API");
  expect_error(s.request("POST", "/v1/embeddings", embeddings_body(nlohmann::json::array({1, 512})), {kAuth}), 400,
               "outside the vocabulary");
  expect_error(s.request("POST", "/v1/embeddings", embeddings_body(std::vector<int>(300, 5)), {kAuth}), 400,
               "maximum context length");
  expect_error(s.request("POST", "/v1/embeddings", R"({"input": {"a": 1}})", {kAuth}), 400, "'input' must be");
  expect_error(s.request("POST", "/v1/embeddings", R"({"model": "emb"})", {kAuth}), 400, "'input' is required");
  expect_error(s.request("POST", "/v1/embeddings", embeddings_body("x", R"(, "dimensions": -3)"), {kAuth}), 400,
               "greater than 0");
  expect_error(s.request("POST", "/v1/embeddings", embeddings_body(nlohmann::json::array({"x", 3})), {kAuth}), 400,
               "'input' must be");
  // truncate_prompt_tokens keeps the last k tokens (vLLM).
  const auto& c = cases[4];  // token ids
  std::vector<int32_t> longer = {9, 9, 9};
  longer.insert(longer.end(), c.token_ids.begin(), c.token_ids.end());
  const HttpResult t = s.request(
      "POST", "/v1/embeddings",
      embeddings_body(longer, R"(, "truncate_prompt_tokens": )" + std::to_string(c.token_ids.size())), {kAuth});
  ASSERT_EQ(t.status, 200) << t.body;
  EXPECT_TRUE(compare_vectors(t.json()["data"][0]["embedding"].get<std::vector<double>>(), c.embedding).ok());
  EXPECT_EQ(s.get("/health").status, 200);
  EXPECT_EQ(s.stop(), 0) << s.log();
}

TEST(ServerEmbeddings, RunnerFlagsOnAPlainDirectory) {
  const TestModelDir model_dir;
  ASSERT_FALSE(model_dir.path.empty());
  const auto cases = load_embedding_cases();
  const auto& ids = cases[4];  // token ids: no tokenizer post-processor involved
  ASSERT_TRUE(ids.input.is_array());
  {
    ServerProcess s;  // a generative model
    ASSERT_TRUE(s.start(model_dir.path, {"--served-model-name", "emb"})) << s.log();
    expect_error(s.request("POST", "/v1/embeddings", embeddings_body(ids.input)), 400,
                 "The model does not support Embeddings API");
    EXPECT_EQ(s.request("POST", "/v1/completions", R"({"prompt": "hi", "max_tokens": 2})").status, 200);
    EXPECT_EQ(s.stop(), 0) << s.log();
  }
  for (const std::vector<std::string>& flags : std::vector<std::vector<std::string>>{
           {"--runner", "pooling"}, {"--task", "embed"}, {"--convert", "embed"}}) {
    ServerProcess s;
    std::vector<std::string> args = {"--served-model-name", "emb"};
    args.insert(args.end(), flags.begin(), flags.end());
    ASSERT_TRUE(s.start(model_dir.path, args)) << s.log();
    const HttpResult r = s.request("POST", "/v1/embeddings", embeddings_body(ids.input));
    ASSERT_EQ(r.status, 200) << flags[0] << ": " << r.body;
    const auto m = compare_vectors(r.json()["data"][0]["embedding"].get<std::vector<double>>(), ids.embedding);
    EXPECT_TRUE(m.ok()) << flags[0] << ": cosine " << m.cosine << ", max abs diff " << m.max_abs_diff;
    expect_error(s.request("POST", "/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}]})"),
                 400, "The model does not support Chat Completions API");
    EXPECT_EQ(s.stop(), 0) << s.log();
  }
  {
    ServerProcess s;  // contradicting flags stop the start-up with a message
    EXPECT_FALSE(s.start(model_dir.path, {"--runner", "generate", "--task", "embed"}));
    EXPECT_NE(s.log().find("contradicts"), std::string::npos) << s.log();
  }
}

TEST(ServerEmbeddings, RunnerGenerateOverridesModulesJson) {
  const TestModelDir model_dir;
  ASSERT_FALSE(model_dir.path.empty());
  make_embedding_model(model_dir.path);
  ServerProcess s;
  ASSERT_TRUE(s.start(model_dir.path, {"--runner", "generate"})) << s.log();
  expect_error(s.request("POST", "/v1/embeddings", embeddings_body("hi")), 400,
               "The model does not support Embeddings API");
  EXPECT_EQ(s.stop(), 0) << s.log();
}

// Embeddings run the base model alone: a request naming a LoRA adapter is refused, not answered
// without it.
TEST(ServerEmbeddings, ALoraAdapterNameIsRefusedNotIgnored) {
  const TestModelDir model_dir;
  ASSERT_FALSE(model_dir.path.empty());
  make_embedding_model(model_dir.path);
  io_test::TempDir tmp;
  lora_test::write_adapter("qwen3-tiny-tied", {.rank = 4, .alpha = 8, .seed = 5}, tmp.file("a0"));
  ServerProcess s;
  ASSERT_TRUE(s.start(model_dir.path, {"--served-model-name", "emb", "--lora-modules", "a0=" + tmp.file("a0")}))
      << s.log();
  const std::string body = R"({"model": "a0", "input": "Hello world"})";
  expect_error(s.request("POST", "/v1/embeddings", body), 400, "LoRA adapters are not applied to embeddings");
  EXPECT_EQ(s.request("POST", "/v1/embeddings", embeddings_body("Hello world")).status, 200);
  EXPECT_EQ(s.stop(), 0) << s.log();
}

}  // namespace
}  // namespace pagoda::server::test
