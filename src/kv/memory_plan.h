// The start-up memory plan (docs/design.md §5): how the usable memory of the device splits between
// weights, the activation workspace, recurrent-state slots and KV blocks. The plan is pure
// arithmetic; the caller measures the inputs (weights loaded, a forward pass at
// max_num_batched_tokens for the workspace) and then allocates exactly what the plan says.
#pragma once

#include <cstdint>
#include <string>

namespace pagoda {

struct MemoryPlanInputs {
  // Usable memory = floor(total_bytes * utilization): device memory × --gpu-memory-utilization,
  // or an explicit CPU budget with utilization 1.
  int64_t total_bytes = 0;
  double utilization = 0.9;
  int64_t weight_bytes = 0;
  int64_t activation_bytes = 0;      // workspace of the largest step
  int64_t state_bytes_per_seq = 0;   // 0 for models without GDN layers
  int32_t max_num_seqs = 0;
  int64_t kv_bytes_per_token = 0;    // over all full-attention layers (ModelConfig::kv_bytes_per_token)
  int32_t block_size = 16;
  int32_t max_model_len = 0;
  // --kv-cache-memory: when > 0, the KV cache gets exactly this many bytes (rounded down to whole
  // blocks) instead of what is left of the usable memory (vLLM's kv_cache_memory_bytes).
  int64_t kv_cache_memory_bytes = 0;
  // --num-gpu-blocks-override: when > 0, the number of blocks, whatever the memory says.
  int64_t num_blocks_override = 0;
  // Prefix caching on a hybrid model: this fraction of the cache budget (what would go to KV
  // blocks) holds state snapshots of state_bytes_per_seq each (--state-snapshot-memory-fraction).
  double snapshot_fraction = 0;
  // The device's largest tensor bounds one layer's cache and state (0: no bound): at most this many
  // KV blocks, and this many state slots (max_num_seqs of them for running sequences, the rest
  // snapshots). Memory past them stays unused.
  int64_t max_blocks = 0;
  int64_t max_state_slots = 0;
};

struct MemoryPlan {
  int64_t usable_bytes = 0;
  int64_t weight_bytes = 0;
  int64_t activation_bytes = 0;
  int64_t state_bytes = 0;          // state_bytes_per_seq × max_num_seqs
  int64_t num_snapshots = 0;        // prefix-cache state snapshots (hybrid models)
  int64_t snapshot_bytes = 0;       // num_snapshots × state_bytes_per_seq
  int64_t kv_bytes_per_block = 0;   // kv_bytes_per_token × block_size
  int64_t num_blocks = 0;
  int64_t kv_bytes = 0;             // num_blocks × kv_bytes_per_block: what gets allocated
  int64_t unused_bytes = 0;         // usable − weights − activations − state − snapshots − kv (may be < 0
                                    // only when an override or explicit KV budget asks for more)
  int32_t block_size = 0;
  int32_t max_model_len = 0;
  int64_t kv_capacity_tokens = 0;   // num_blocks × block_size
  double max_concurrency = 0;       // kv_capacity_tokens / max_model_len

  // The plan as log lines, in the manner of vLLM's start-up log.
  std::string describe() const;
};

// Blocks that one sequence of `max_model_len` tokens needs.
int64_t blocks_for_tokens(int64_t tokens, int32_t block_size);

// Throws pagoda::Error for invalid inputs, or when the KV cache cannot hold even one sequence of
// max_model_len tokens (saying how much it needs and which flags to change).
MemoryPlan plan_memory(const MemoryPlanInputs& in);


}  // namespace pagoda
