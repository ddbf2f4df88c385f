// The engine's own greedy tokens for one prompt (8 tokens, EOS ignored) on the model in `dir`: what
// a server test expects the server to answer for that model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace pagoda::server::test {

inline std::vector<int32_t> engine_greedy(const std::string& dir, const std::vector<int32_t>& prompt) {
  EngineConfig config;
  config.max_model_len = 256;
  Engine engine(dir, config);
  SamplingParams p;
  p.temperature = 0;
  p.ignore_eos = true;
  p.max_tokens = 8;
  engine.add_request(prompt, p);
  std::vector<int32_t> out;
  for (int steps = 0; engine.has_unfinished() && steps < 1000; ++steps)
    for (const RequestOutput& o : engine.step()) out.insert(out.end(), o.new_token_ids.begin(), o.new_token_ids.end());
  return out;
}

}  // namespace pagoda::server::test
