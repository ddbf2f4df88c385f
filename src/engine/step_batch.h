// One engine step flattened into a varlen batch (docs/design.md §4), on the host. The Scheduler fills
// it; the ModelRunner uploads it into a StepMeta for the kernels.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "engine/multimodal.h"

namespace pagoda {

struct StepBatch {
  std::vector<int32_t> token_ids;          // [T]
  std::vector<int32_t> positions;          // [T]
  std::vector<int32_t> cu_seqlens_q;       // [S+1]
  std::vector<int32_t> seq_lens;           // [S] context length after this step
  std::vector<int32_t> block_tables;       // [S * max_blocks_per_seq], row-major, padded with 0
  std::vector<int32_t> slot_mapping;       // [T], -1 = skip
  std::vector<int32_t> state_slots;        // [S] recurrent-state slot (hybrid models), else -1
  std::vector<uint8_t> has_initial_state;  // [S] 0 for a sequence's first chunk
  std::vector<int32_t> logits_rows;        // [S'] flat rows that sample (last token of a sequence)
  std::vector<int32_t> hidden_rows;        // [T] or empty: StepMeta::hidden_rows (draft heads)
  std::vector<int32_t> lora_slots;         // [T] LoRA adapter slot of each token, -1 none; empty: none
  // (slot, adapter id): adapters each worker writes into its slots before the step (lora_slots.h).
  std::vector<std::pair<int32_t, int32_t>> lora_loads;
  // Images: [3, T] multimodal rotary positions (temporal, height, width rows) when some token of
  // the step is an image's, else empty; and the rows whose embeddings are images' encoder outputs.
  std::vector<int32_t> mrope_positions;
  struct ImageRows {
    int32_t row = 0;    // first row of the step
    int32_t first = 0;  // first of the image's merged tokens those rows take
    int32_t count = 0;
    std::shared_ptr<const ImageInput> image;
  };
  std::vector<ImageRows> image_rows;
  int32_t max_blocks_per_seq = 0;
  int32_t block_size = 0;

  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
  int32_t num_seqs() const { return static_cast<int32_t>(seq_lens.size()); }
};

}  // namespace pagoda
