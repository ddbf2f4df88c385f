// Tensor parallelism's vocabulary (Megatron's layout): how a projection is split over the ranks of
// a group, a rank's place in it, and the rank's view of the model config — its local head and
// column counts, which is all that layer code reads when it sizes and splits its activations.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "backend/communicator.h"
#include "io/model_config.h"

namespace pagoda {

enum class ShardKind : uint8_t {
  Replicated,  // every rank holds the whole matrix
  Column,      // each rank holds a slice of every part's output rows; outputs stay local
  Row,         // each rank holds a slice of the input columns; partial outputs are summed
};

class LoraSet;

// This rank's place in its tensor-parallel group; `comm` sums row-parallel outputs (needed when
// world > 1). With it travels what else every projection a worker loads takes: the LoRA adapters
// (model/lora.h), or null.
struct ShardSpec {
  int32_t rank = 0;
  int32_t world = 1;
  Communicator* comm = nullptr;
  LoraSet* lora = nullptr;
  // --enable-expert-parallel: a MoE layer's experts are placed whole, num_experts / world a rank,
  // instead of every expert's columns split over the ranks (moe_block.h).
  bool expert_parallel = false;
};

// The config as rank `shard.rank` of `shard.world` sees it: query heads, KV heads, the MLP's
// columns and the Gated DeltaNet heads divided by world (a rank holds whole heads). Sizes that do
// not divide are refused by name. world 1: the config itself.
ModelConfig rank_view(const ModelConfig& cfg, const ShardSpec& shard);

// Rows [lo, hi) of n for this rank of a column shard; throws naming `what` unless the ranks divide n
// evenly. With `units` (whole heads) fewer than the ranks, rank r takes unit r / (world / units),
// shared with its neighbours (vLLM replicates KV heads so).
std::pair<int64_t, int64_t> shard_rows(int64_t n, const ShardSpec& shard, const std::string& what, int64_t units = 0);

}  // namespace pagoda
