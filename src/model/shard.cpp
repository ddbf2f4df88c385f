#include "model/shard.h"

#include <memory>
#include <string>

#include "core/error.h"
#include "model/moe_block.h"

namespace pagoda {
namespace {

int64_t split(int64_t n, int32_t world, const char* what) {
  check(n % world == 0, std::string("tensor parallelism: ") + what + " (" + std::to_string(n) +
                            ") does not divide over " + std::to_string(world) + " ranks; choose a size that divides it");
  return n / world;
}

// Heads that may be fewer than the ranks (KV heads, the GDN's key heads): then each rank holds one,
// shared by world / n ranks, as vLLM replicates KV heads.
int64_t split_or_share(int64_t n, int32_t world, const char* what) {
  if (n < world && n > 0) {
    check(world % n == 0, std::string("tensor parallelism: ") + what + " (" + std::to_string(n) +
                              ") cannot be shared evenly by " + std::to_string(world) +
                              " ranks; choose a size that is a multiple or a divisor of it");
    return 1;
  }
  return split(n, world, what);
}

}  // namespace

ModelConfig rank_view(const ModelConfig& cfg, const ShardSpec& shard) {
  check(shard.world >= 1 && shard.rank >= 0 && shard.rank < shard.world,
        "tensor parallelism: rank " + std::to_string(shard.rank) + " outside a group of " + std::to_string(shard.world));
  if (shard.world == 1) return cfg;
  ModelConfig local = cfg;
  local.num_heads = split(cfg.num_heads, shard.world, "num_attention_heads");
  local.num_kv_heads = split_or_share(cfg.num_kv_heads, shard.world, "num_key_value_heads");
  local.intermediate_size = split(cfg.intermediate_size, shard.world, "intermediate_size");
  if (const MoeFields* moe = moe_fields(cfg)) {  // every expert's columns, and the shared expert's
    auto fields = std::make_shared<MoeFields>(*moe);
    // Expert parallelism keeps experts whole (fewer of them a rank: num_experts stays, the routing
    // is over all of them); the shared expert is split either way.
    if (!shard.expert_parallel)
      fields->expert_intermediate_size = split(moe->expert_intermediate_size, shard.world, "moe_intermediate_size");
    fields->shared_expert_intermediate_size =
        split(moe->shared_expert_intermediate_size, shard.world, "shared_expert_intermediate_size");
    local.family_fields = fields;
  }
  if (cfg.linear_num_value_heads > 0) {
    local.linear_num_key_heads = split_or_share(cfg.linear_num_key_heads, shard.world, "linear_num_key_heads");
    local.linear_num_value_heads = split(cfg.linear_num_value_heads, shard.world, "linear_num_value_heads");
  }
  return local;
}

std::pair<int64_t, int64_t> shard_rows(int64_t n, const ShardSpec& r, const std::string& what, int64_t units) {
  check(r.world >= 1 && r.rank >= 0 && r.rank < r.world,
        "shard rank " + std::to_string(r.rank) + " outside a group of " + std::to_string(r.world));
  if (units > 0 && units < r.world) {
    check(r.world % units == 0 && n % units == 0,
          what + ": its " + std::to_string(units) + " heads cannot be shared evenly by " + std::to_string(r.world) +
              " tensor-parallel ranks; choose a size that is a multiple of " + std::to_string(units));
    const int64_t per = n / units, unit = r.rank / (r.world / units);
    return {unit * per, (unit + 1) * per};
  }
  check(n % r.world == 0, what + " (" + std::to_string(n) + ") does not split evenly over " +
                              std::to_string(r.world) + " tensor-parallel ranks");
  const int64_t per = n / r.world;
  return {r.rank * per, (r.rank + 1) * per};
}

}  // namespace pagoda
