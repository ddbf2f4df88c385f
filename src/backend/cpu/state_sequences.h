// The sequences of a step as the recurrent-state ops see them (causal conv, gated delta rule):
// where each one's new tokens lie, which state slot it owns and whether that slot holds its state.
// Internal to src/backend/cpu.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/check.h"
#include "backend/step_meta.h"

namespace pagoda::cpu {

struct StateSequence {
  int64_t start = 0;         // first flat row of its new tokens
  int64_t len = 0;           // number of new tokens (q_len)
  int64_t slot = 0;          // its state slot
  bool has_initial = false;  // false: the state starts at zero
};

// Reads and checks meta's varlen layout against `num_tokens` rows and `num_slots` state slots:
// cu_seqlens_q ascending from 0 to num_tokens, every slot in range, no slot used twice.
inline std::vector<StateSequence> state_sequences(const StepMeta& meta, int64_t num_tokens,
                                                  int64_t num_slots, const char* op) {
  const int64_t S = meta.num_seqs;
  require(meta.cu_seqlens_q.numel() >= S + 1 && meta.state_slots.numel() >= S &&
              meta.has_initial_state.numel() >= S,
          op, "meta arrays are shorter than num_seqs");
  require(meta.cu_seqlens_q.dtype == DType::I32 && meta.state_slots.dtype == DType::I32 &&
              meta.has_initial_state.dtype == DType::I32,
          op, "meta arrays must be int32");
  const auto* cu = meta.cu_seqlens_q.ptr<const int32_t>();
  const auto* slots = meta.state_slots.ptr<const int32_t>();
  const auto* init = meta.has_initial_state.ptr<const int32_t>();
  require(S == 0 || cu[0] == 0, op, "cu_seqlens_q must start at 0");
  std::vector<StateSequence> seqs(static_cast<size_t>(S));
  std::vector<bool> used(static_cast<size_t>(num_slots), false);
  for (int64_t s = 0; s < S; ++s) {
    StateSequence& q = seqs[static_cast<size_t>(s)];
    q.start = cu[s];
    q.len = static_cast<int64_t>(cu[s + 1]) - cu[s];
    q.slot = slots[s];
    q.has_initial = init[s] != 0;
    require(q.len >= 0 && q.start + q.len <= num_tokens, op,
            "cu_seqlens_q must ascend within the step's tokens");
    require(q.slot >= 0 && q.slot < num_slots, op, "state slot out of range");
    require(!used[static_cast<size_t>(q.slot)], op, "two sequences share a state slot");
    used[static_cast<size_t>(q.slot)] = true;
  }
  require(S == 0 || cu[S] == num_tokens, op, "cu_seqlens_q must end at the step's token count");
  return seqs;
}

}  // namespace pagoda::cpu
