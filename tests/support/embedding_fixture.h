// The reference embeddings of tests/fixtures/embeddings/qwen3-tiny-tied.json (made by
// tools/embedding_reference.py, an independent float64 implementation), and how the tests compare
// a vector with them.
#pragma once

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include "core/build_paths.h"

namespace pagoda::testing {

struct EmbeddingCase {
  std::string name;
  nlohmann::json input;            // a string or a list of token ids, as a request sends it
  std::vector<int32_t> token_ids;  // what the model runs (text: tokenized + <|endoftext|>)
  std::vector<double> embedding;   // L2-normalised last-token hidden state
  std::map<int, std::vector<double>> dimensions;  // d -> first d values, re-normalised
};

inline std::string embedding_fixture_path() {
  return std::string(PAGODA_SOURCE_DIR) + "/tests/fixtures/embeddings/qwen3-tiny-tied.json";
}

inline std::vector<EmbeddingCase> load_embedding_cases() {
  std::ifstream in(embedding_fixture_path());
  std::stringstream ss;
  ss << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(ss.str());
  std::vector<EmbeddingCase> out;
  for (const auto& c : j.at("cases")) {
    EmbeddingCase e;
    e.name = c.at("name").get<std::string>();
    e.input = c.at("input");
    e.token_ids = c.at("token_ids").get<std::vector<int32_t>>();
    e.embedding = c.at("embedding").get<std::vector<double>>();
    for (const auto& [d, v] : c.at("dimensions").items()) e.dimensions[std::stoi(d)] = v.get<std::vector<double>>();
    out.push_back(std::move(e));
  }
  return out;
}

// Tolerances for an fp32 engine against the float64 reference of a unit vector.
inline constexpr double kMinCosine = 0.99999;
inline constexpr double kMaxAbsDiff = 1e-6;  // fp32 rounding is ~1e-7 here

struct VectorMatch {
  double cosine = 0, max_abs_diff = 0;
  bool ok() const { return cosine >= kMinCosine && max_abs_diff <= kMaxAbsDiff; }
};

template <class A, class B>
VectorMatch compare_vectors(const A& got, const B& want) {
  VectorMatch m;
  if (got.size() != want.size() || got.empty()) {
    m.max_abs_diff = INFINITY;
    return m;
  }
  double dot = 0, ng = 0, nw = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    dot += g * w;
    ng += g * g;
    nw += w * w;
    m.max_abs_diff = std::max(m.max_abs_diff, std::fabs(g - w));
  }
  m.cosine = dot / std::sqrt(ng * nw);
  return m;
}

}  // namespace pagoda::testing
