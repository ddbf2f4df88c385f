// `pagoda bench structured`: grammar compile time and per-token mask time over a set of JSON
// schemas at a real tokenizer's vocabulary, with tokens drawn at random among those the mask
// allows (so every state a generation can reach is exercised, cached or not).
#pragma once

#include <cstdint>
#include <string>

namespace pagoda::bench {

struct StructuredBenchArgs {
  std::string tokenizer_dir;  // default: tests/data/qwen3-tokenizer
  std::string schemas_file;   // a JSON array of schemas; default: tests/structured/schemas.json
  int walks_per_schema = 3;
  int max_steps = 400;
  uint64_t seed = 1;
  // A JSONSchemaBench checkout (its data/<category>/*.json): per category, the fraction compiled,
  // the fraction whose generated output python3-jsonschema validates, compile time and mask p99.
  std::string jsonschemabench_dir;
};

void run_structured_bench(const StructuredBenchArgs& args);
void run_jsonschemabench(const StructuredBenchArgs& args);

}  // namespace pagoda::bench
