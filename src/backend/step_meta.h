// What the kernels of one step need to know about its varlen batch (docs/design.md §4), as tensors on
// the backend's device plus a few host scalars for launch planning. Built by the engine's
// ModelRunner from a StepBatch; kernels never see requests or the scheduler.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace pagoda {

struct AttentionPlan;

// Rows of a step whose input embedding is not the token's but an encoder's output (an image's
// merged vision tokens): rows [row, row + source.size(0)) of the embedding take source's rows.
struct EmbeddingOverride {
  int32_t row = 0;
  Tensor source;  // [n, hidden] activations, on the device
};

struct StepMeta {
  // Device tensors, all int32.
  Tensor token_ids;     // [T]
  Tensor positions;     // [T] absolute position of each new token
  Tensor cu_seqlens_q;  // [S+1] start of each sequence's new tokens in the flat arrays
  Tensor seq_lens;      // [S] context length after this step (what attention reads)
  Tensor block_tables;  // [S, max_blocks_per_seq] physical block of each logical block
  Tensor slot_mapping;  // [T] pool slot (block * block_size + offset) of each new token; -1 skips
  Tensor logits_rows;   // [S'] flat rows that produce logits
  Tensor state_slots;        // [S] recurrent-state slot of each sequence (hybrid models), else -1
  Tensor has_initial_state;  // [S] int32 0/1: 0 for a sequence's first chunk (state starts at zero)
  // [T] or empty: for draft heads that read another pass's hidden states (Qwen3.5's MTP head), the
  // row of that pass's hidden states each new token takes.
  Tensor hidden_rows;
  // [3, T] or empty: multimodal RoPE positions (temporal, height, width) of every new token, given
  // when the step holds image tokens (Qwen3.5: docs/vision.md); text tokens have three equal rows
  // equal to `positions`. Empty: every token rotates at `positions`.
  Tensor mrope_positions;
  // Encoder outputs that replace the embeddings of some rows (image placeholders); null: none.
  const std::vector<EmbeddingOverride>* embedding_overrides = nullptr;

  // Host scalars.
  int32_t num_tokens = 0;          // T
  int32_t num_seqs = 0;            // S
  int32_t num_logits_rows = 0;     // S'
  int32_t max_query_len = 0;       // longest chunk of new tokens in the step (1 = decode only)
  int32_t max_seq_len = 0;         // longest context
  int32_t max_blocks_per_seq = 0;  // columns of block_tables
  int32_t block_size = 0;

  // The step's attention plan (attention_plan.h), made once by the ModelRunner with
  // Backend::plan_attention and owned by it; every attention layer of the step reuses it. Null:
  // paged_attention plans for each call itself (tests, benchmarks).
  const AttentionPlan* attention_plan = nullptr;
};

}  // namespace pagoda
