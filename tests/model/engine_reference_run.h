// Runs reference cases (reference_fixture.h) through an engine greedily, all at once, and checks
// every case's tokens against transformers' — the tail shared by the engine-level fixture tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "reference_fixture.h"

namespace pagoda::testing {

// Adds every case `keep` accepts (all when empty) with temperature 0, ignore_eos and the reference's
// length, steps the engine until it is idle (at most max_steps) and expects each case's tokens.
inline void expect_engine_matches_reference(Engine& engine, const std::vector<ReferenceCase>& cases,
                                            const std::function<bool(const ReferenceCase&)>& keep = {},
                                            int max_steps = 20000) {
  std::map<int64_t, size_t> case_of;
  for (size_t i = 0; i < cases.size(); ++i) {
    if (keep && !keep(cases[i])) continue;
    SamplingParams p;
    p.temperature = 0;
    p.ignore_eos = true;
    p.max_tokens = static_cast<int32_t>(cases[i].generated_ids.size());
    case_of[engine.add_request(cases[i].prompt_ids, p)] = i;
  }
  std::map<int64_t, std::vector<int32_t>> tokens;
  for (int steps = 0; engine.has_unfinished() && steps < max_steps; ++steps)
    for (const RequestOutput& o : engine.step())
      tokens[o.id].insert(tokens[o.id].end(), o.new_token_ids.begin(), o.new_token_ids.end());
  EXPECT_FALSE(engine.has_unfinished());
  for (const auto& [id, i] : case_of) {
    SCOPED_TRACE("prompt of " + std::to_string(cases[i].prompt_ids.size()) + " tokens");
    EXPECT_EQ(tokens[id], cases[i].generated_ids);
  }
}

}  // namespace pagoda::testing
