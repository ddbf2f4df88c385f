// Test driver: one sequence fed through a ModelRunner step by step, with its KV blocks in a given
// (e.g. shuffled) order and, for hybrid models, its own recurrent-state slot.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/step_batch.h"

namespace pagoda::testing {

struct SingleSequence {
  int32_t block_size;
  std::vector<int32_t> blocks;
  int32_t state_slot = -1;
  int32_t len = 0;

  // The batch that appends `new_tokens`; the last one samples.
  StepBatch step(const std::vector<int32_t>& new_tokens) {
    StepBatch b;
    b.block_size = block_size;
    for (size_t i = 0; i < new_tokens.size(); ++i) {
      const int32_t pos = len + static_cast<int32_t>(i);
      b.token_ids.push_back(new_tokens[i]);
      b.positions.push_back(pos);
      b.slot_mapping.push_back(blocks[static_cast<size_t>(pos / block_size)] * block_size +
                               pos % block_size);
    }
    b.has_initial_state = {static_cast<uint8_t>(len > 0)};
    len += static_cast<int32_t>(new_tokens.size());
    b.cu_seqlens_q = {0, static_cast<int32_t>(new_tokens.size())};
    b.seq_lens = {len};
    b.max_blocks_per_seq = (len + block_size - 1) / block_size;
    b.block_tables.assign(blocks.begin(), blocks.begin() + b.max_blocks_per_seq);
    b.state_slots = {state_slot};
    b.logits_rows = {static_cast<int32_t>(new_tokens.size()) - 1};
    return b;
  }
};

inline int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

inline float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

}  // namespace pagoda::testing
