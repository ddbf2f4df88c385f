// Structured output through the engine on the shipped default model (which knows no JSON: only the
// grammar mask makes its outputs valid). Every schema of tests/structured/schemas.json, plus
// regexes, a choice list and a GBNF arithmetic grammar, at temperature 0 and 1, all in one batch;
// every output is checked by validators that are not ours (tests/structured/validate_outputs.py:
// python3-jsonschema, re, ast).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/engine.h"
#include "structured/compile.h"
#include "../structured/validation_cases.h"
#include "../support/vulkan_device.h"
#include "core/build_paths.h"

namespace pagoda {
namespace {

using nlohmann::json;
using structured::Constraint;
using structured::ConstraintKind;

const std::string kSource = PAGODA_SOURCE_DIR;
// Above every case's shortest completion (one byte a token): near the cap the mask steers each output
// to a complete one, so every output must end by EOS (finish_reason stop), none cut by the cap.
constexpr int32_t kMaxTokens = 128;

struct Case {
  json record;  // kind and spec for the validator
  Constraint constraint;
};

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (auto& [record, constraint] : ::pagoda::structured::testing::validation_cases()) cases.push_back({record, constraint});
  return cases;
}

TEST(StructuredEngine, EveryOutputOfTheDefaultModelValidatesIndependently) {
  EngineConfig config;
  config.max_num_seqs = 128;
  config.max_model_len = 512;
  config.kv_cache_memory_bytes = 64 << 20;
  Engine engine(kSource + "/models/default", config);
  ASSERT_NE(engine.tokenizer(), nullptr);
  std::vector<int32_t> eos;
  for (int64_t id : engine.model_config().eos_token_ids) eos.push_back(static_cast<int32_t>(id));
  auto trie = std::make_shared<structured::TokenTrie>(structured::vocabulary_bytes(*engine.tokenizer(), eos));

  const std::vector<Case> cases = all_cases();
  ASSERT_GE(cases.size(), 50u);
  const std::vector<int32_t> prompt = engine.tokenizer()->encode("Answer in JSON:");
  std::map<int64_t, std::pair<size_t, double>> index;  // request -> (case, temperature)
  for (size_t i = 0; i < cases.size(); ++i) {
    auto grammar =
        std::make_shared<structured::GrammarRuntime>(structured::compile_constraint(cases[i].constraint), trie, eos);
    for (double temperature : {0.0, 1.0}) {
      SamplingParams p;
      p.temperature = temperature;
      p.seed = static_cast<int64_t>(i);
      p.max_tokens = kMaxTokens;
      p.grammar = grammar;
      index[engine.add_request(prompt, p)] = {i, temperature};
    }
  }
  std::map<int64_t, std::string> text;
  std::map<int64_t, FinishReason> reason;
  while (engine.has_unfinished())
    for (const RequestOutput& o : engine.step()) {
      text[o.id] += o.new_text;
      if (o.finished) reason[o.id] = o.finish_reason;
    }

  const std::string out_path = ::testing::TempDir() + "/structured_engine_outputs.jsonl";
  std::ofstream out(out_path);
  for (const auto& [id, ct] : index) {
    const auto& [i, temperature] = ct;
    EXPECT_EQ(reason[id], FinishReason::Stop)
        << "case " << i << " at temperature " << temperature << " did not finish: " << cases[i].record.dump()
        << "\n  output: " << text[id];
    json rec = cases[i].record;
    rec["output"] = text[id];
    rec["temperature"] = temperature;
    out << rec.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
  }
  out.close();
  const std::string cmd = "python3 " + kSource + "/tests/structured/validate_outputs.py " + out_path;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// Greedy rows under a grammar are masked where the logits are (Backend::apply_token_mask, then the
// device argmax): on Vulkan (lavapipe in CI) the tokens of six schemas equal the CPU backend's,
// and the outputs validate. Skips, naming why, where there is no Vulkan device.
TEST(StructuredEngine, VulkanMasksOnTheDeviceAndGivesTheCpusTokens) {
  const std::string why = ::pagoda::testing::vulkan_missing();
  if (!why.empty()) GTEST_SKIP() << "no Vulkan device: " << why;
  const std::vector<Case> cases = all_cases();
  ASSERT_GE(cases.size(), 6u);
  auto run = [&](const std::string& device, std::vector<std::string>* texts) {
    EngineConfig config;
    config.device = device;
    config.dtype = "float32";
    config.max_model_len = 256;
    config.kv_cache_memory_bytes = 16 << 20;
    Engine engine(kSource + "/models/default", config);
    std::vector<int32_t> eos;
    for (int64_t id : engine.model_config().eos_token_ids) eos.push_back(static_cast<int32_t>(id));
    auto trie = std::make_shared<structured::TokenTrie>(structured::vocabulary_bytes(*engine.tokenizer(), eos));
    const std::vector<int32_t> prompt = engine.tokenizer()->encode("Answer in JSON:");
    std::map<int64_t, size_t> index;
    for (size_t i = 0; i < 6; ++i) {
      SamplingParams p;
      p.temperature = 0;
      p.max_tokens = 48;
      p.grammar = std::make_shared<structured::GrammarRuntime>(structured::compile_constraint(cases[i].constraint), trie, eos);
      index[engine.add_request(prompt, p)] = i;
    }
    std::vector<std::vector<int32_t>> ids(6);
    texts->assign(6, "");
    while (engine.has_unfinished())
      for (const RequestOutput& o : engine.step()) {
        const size_t i = index.at(o.id);
        ids[i].insert(ids[i].end(), o.new_token_ids.begin(), o.new_token_ids.end());
        (*texts)[i] += o.new_text;
      }
    return ids;
  };
  std::vector<std::string> cpu_text, vk_text;
  const auto want = run("cpu", &cpu_text);
  const auto got = run("vulkan", &vk_text);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "case " << i << ": " << vk_text[i];
  const std::string out_path = ::testing::TempDir() + "/structured_vulkan_outputs.jsonl";
  std::ofstream out(out_path);
  for (size_t i = 0; i < vk_text.size(); ++i) {
    json rec = cases[i].record;
    rec["output"] = vk_text[i];
    out << rec.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
  }
  out.close();
  const std::string cmd = "python3 " + kSource + "/tests/structured/validate_outputs.py " + out_path;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// vLLM's reasoning + structured outputs: the grammar starts after the reasoning's end token. Here
// the "end" is a token the model says unconstrained (taken from a plain greedy run): up to and
// including it the output is the plain run's (the model's text is no JSON, so a mask from the first
// token would change it), and what follows validates against the schema.
TEST(StructuredEngine, GrammarStartsAfterTheReasoningEndToken) {
  EngineConfig config;
  config.max_model_len = 512;
  config.kv_cache_memory_bytes = 16 << 20;
  Engine engine(kSource + "/models/default", config);
  std::vector<int32_t> eos;
  for (int64_t id : engine.model_config().eos_token_ids) eos.push_back(static_cast<int32_t>(id));
  const std::vector<int32_t> prompt = engine.tokenizer()->encode("And God said");
  auto run = [&](const SamplingParams& p) {
    engine.add_request(prompt, p);
    std::vector<int32_t> ids;
    while (engine.has_unfinished())
      for (const RequestOutput& o : engine.step()) ids.insert(ids.end(), o.new_token_ids.begin(), o.new_token_ids.end());
    return ids;
  };
  SamplingParams plain;
  plain.temperature = 0;
  plain.max_tokens = 6;
  plain.ignore_eos = true;
  const std::vector<int32_t> free_ids = run(plain);
  ASSERT_EQ(free_ids.size(), 6u);
  const int32_t end_token = free_ids[2];
  const size_t k = static_cast<size_t>(std::find(free_ids.begin(), free_ids.end(), end_token) - free_ids.begin());

  const json schema = json::parse(R"({"type":"object","properties":{"n":{"type":"integer"},"s":{"type":"string","maxLength":5}},"required":["n","s"]})");
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = kMaxTokens;
  p.grammar = std::make_shared<structured::GrammarRuntime>(
      structured::compile_constraint({ConstraintKind::kJsonSchema, schema.dump(), {}}),
      std::make_shared<structured::TokenTrie>(structured::vocabulary_bytes(*engine.tokenizer(), eos)), eos);
  p.grammar_after_token = end_token;
  std::vector<int32_t> ids = run(p);
  ASSERT_GT(ids.size(), k + 1);
  EXPECT_TRUE(std::equal(free_ids.begin(), free_ids.begin() + static_cast<std::ptrdiff_t>(k + 1), ids.begin()));
  if (std::find(eos.begin(), eos.end(), ids.back()) != eos.end()) ids.pop_back();
  const std::string answer = engine.tokenizer()->decode(std::vector<int32_t>(ids.begin() + static_cast<std::ptrdiff_t>(k + 1), ids.end()));
  const std::string out_path = ::testing::TempDir() + "/structured_after_reasoning.jsonl";
  std::ofstream(out_path) << json{{"kind", "schema"}, {"spec", schema}, {"output", answer}}.dump() << "\n";
  const std::string cmd = "python3 " + kSource + "/tests/structured/validate_outputs.py " + out_path;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n  output: " << answer;
}

}  // namespace
}  // namespace pagoda
