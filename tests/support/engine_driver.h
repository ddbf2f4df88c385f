// Drives an Engine over reference cases: every prompt added at once, steps until all finish, each
// request's tokens collected in case order. Shared by the CPU engine tests and the GPU parity tests.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "../model/reference_fixture.h"
#include "engine/engine.h"

namespace pagoda::testing {

inline SamplingParams greedy(int32_t max_tokens) {
  SamplingParams p;
  p.temperature = 0;
  p.ignore_eos = true;
  p.max_tokens = max_tokens;
  return p;
}

inline std::vector<std::vector<int32_t>> run_all(Engine& engine, const std::vector<ReferenceCase>& cases,
                                                 const SamplingParams& params) {
  std::map<int64_t, size_t> index;
  for (size_t i = 0; i < cases.size(); ++i) index[engine.add_request(cases[i].prompt_ids, params)] = i;
  std::vector<std::vector<int32_t>> out(cases.size());
  while (engine.has_unfinished())
    for (const RequestOutput& o : engine.step()) {
      auto& toks = out[index.at(o.id)];
      toks.insert(toks.end(), o.new_token_ids.begin(), o.new_token_ids.end());
    }
  return out;
}

}  // namespace pagoda::testing
