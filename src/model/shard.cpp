#include "model/shard.h"

#include <string>

#include "core/error.h"

namespace pagoda {
namespace {

int64_t split(int64_t n, int32_t world, const char* what) {
  check(n % world == 0, std::string("tensor parallelism: ") + what + " (" + std::to_string(n) +
                            ") does not divide over " + std::to_string(world) + " ranks; choose a size that divides it");
  return n / world;
}

}  // namespace

ModelConfig rank_view(const ModelConfig& cfg, const ShardSpec& shard) {
  check(shard.world >= 1 && shard.rank >= 0 && shard.rank < shard.world,
        "tensor parallelism: rank " + std::to_string(shard.rank) + " outside a group of " + std::to_string(shard.world));
  if (shard.world == 1) return cfg;
  ModelConfig local = cfg;
  local.num_heads = split(cfg.num_heads, shard.world, "num_attention_heads");
  local.num_kv_heads = split(cfg.num_kv_heads, shard.world, "num_key_value_heads");
  local.intermediate_size = split(cfg.intermediate_size, shard.world, "intermediate_size");
  if (cfg.linear_num_value_heads > 0) {
    local.linear_num_key_heads = split(cfg.linear_num_key_heads, shard.world, "linear_num_key_heads");
    local.linear_num_value_heads = split(cfg.linear_num_value_heads, shard.world, "linear_num_value_heads");
  }
  return local;
}

}  // namespace pagoda
