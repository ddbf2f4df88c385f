// Reads tests/fixtures/models/<name>/reference.json: prompts with the greedy tokens and last-position
// logits that Hugging Face transformers computed (tools/make_fixtures.py).
#pragma once

#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include "core/build_paths.h"

namespace pagoda::testing {

struct ReferenceCase {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> generated_ids;
  std::vector<float> prompt_last_logits;
};

inline std::string fixture_model_dir(const std::string& name) {
  return std::string(PAGODA_SOURCE_DIR) + "/tests/fixtures/models/" + name;
}

// A fixture's name as a gtest parameter name ("qwen3_5-tiny-text" -> "qwen3_5_tiny_text").
struct FixtureParamName {
  template <class ParamInfo>
  std::string operator()(const ParamInfo& p) const {
    std::string n = p.param;
    for (char& c : n)
      if (c == '-') c = '_';
    return n;
  }
};

inline std::vector<ReferenceCase> load_reference(const std::string& name) {
  std::ifstream in(fixture_model_dir(name) + "/reference.json");
  if (!in) throw std::runtime_error("missing reference fixture for " + name);
  const nlohmann::json j = nlohmann::json::parse(in);
  std::vector<ReferenceCase> cases;
  for (const auto& c : j.at("cases")) {
    ReferenceCase rc;
    rc.prompt_ids = c.at("prompt_ids").get<std::vector<int32_t>>();
    rc.generated_ids = c.at("generated_ids").get<std::vector<int32_t>>();
    rc.prompt_last_logits = c.at("prompt_last_logits").get<std::vector<float>>();
    cases.push_back(std::move(rc));
  }
  return cases;
}

// Random token ids in the tiny fixtures' vocabulary (512).
inline std::vector<int32_t> random_tokens(std::mt19937& rng, size_t n) {
  std::uniform_int_distribution<int32_t> d(0, 511);  // the fixtures' vocabulary
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = d(rng);
  return t;
}

}  // namespace pagoda::testing
