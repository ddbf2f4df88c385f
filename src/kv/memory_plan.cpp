#include "kv/memory_plan.h"

#include "core/format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/error.h"

namespace pagoda {

int64_t blocks_for_tokens(int64_t tokens, int32_t block_size) {
  return (tokens + block_size - 1) / block_size;
}

namespace {

void check_inputs(const MemoryPlanInputs& in) {
  check(in.total_bytes >= 0, "memory plan: total memory must be >= 0");
  check(in.utilization > 0.0 && in.utilization <= 1.0,
        "--gpu-memory-utilization must be in (0, 1], got " + std::to_string(in.utilization));
  check(in.weight_bytes >= 0 && in.activation_bytes >= 0 && in.state_bytes_per_seq >= 0,
        "memory plan: byte counts must be >= 0");
  check(in.max_num_seqs >= 1, "--max-num-seqs must be >= 1, got " + std::to_string(in.max_num_seqs));
  check(in.kv_bytes_per_token >= 1, "memory plan: KV bytes per token must be >= 1");
  check(in.block_size >= 1, "--block-size must be >= 1, got " + std::to_string(in.block_size));
  check(in.max_model_len >= 1, "--max-model-len must be >= 1, got " + std::to_string(in.max_model_len));
  check(in.kv_cache_memory_bytes >= 0, "--kv-cache-memory must be >= 0");
  check(in.num_blocks_override >= 0, "--num-gpu-blocks-override must be >= 0");
  check(in.snapshot_fraction >= 0 && in.snapshot_fraction < 1,
        "--state-snapshot-memory-fraction must be in [0, 1), got " + std::to_string(in.snapshot_fraction));
}

}  // namespace

MemoryPlan plan_memory(const MemoryPlanInputs& in) {
  check_inputs(in);
  MemoryPlan p;
  p.usable_bytes = static_cast<int64_t>(std::floor(static_cast<double>(in.total_bytes) * in.utilization));
  p.weight_bytes = in.weight_bytes;
  p.activation_bytes = in.activation_bytes;
  p.state_bytes = in.state_bytes_per_seq * in.max_num_seqs;
  p.kv_bytes_per_block = in.kv_bytes_per_token * in.block_size;
  p.block_size = in.block_size;
  p.max_model_len = in.max_model_len;

  const int64_t left = p.usable_bytes - p.weight_bytes - p.activation_bytes - p.state_bytes;
  int64_t kv_budget = in.kv_cache_memory_bytes > 0 ? in.kv_cache_memory_bytes : left;
  const int64_t min_blocks = blocks_for_tokens(in.max_model_len, in.block_size);
  if (in.snapshot_fraction > 0 && in.state_bytes_per_seq > 0) {
    // Snapshots take their share of the cache memory (of the KV bytes an override asks for, scaled
    // up to the whole), but never the blocks that one sequence of max_model_len needs, and never
    // more snapshots than blocks (each is tied to one block).
    const double f = in.snapshot_fraction;
    const int64_t override_kv = in.num_blocks_override * p.kv_bytes_per_block;
    const int64_t cache_bytes = in.num_blocks_override > 0
                                    ? static_cast<int64_t>(static_cast<double>(override_kv) / (1 - f))
                                    : std::max<int64_t>(kv_budget, 0);
    int64_t n = static_cast<int64_t>(static_cast<double>(cache_bytes) * f) / in.state_bytes_per_seq;
    if (in.num_blocks_override == 0) {
      const int64_t spare = kv_budget - min_blocks * p.kv_bytes_per_block;
      n = std::min(n, spare > 0 ? spare / in.state_bytes_per_seq : 0);
    }
    const int64_t blocks = in.num_blocks_override > 0 ? in.num_blocks_override
                                                      : std::max<int64_t>(kv_budget, 0) / p.kv_bytes_per_block;
    p.num_snapshots = std::clamp<int64_t>(n, 0, blocks);
    if (in.max_state_slots > 0)
      p.num_snapshots = std::clamp<int64_t>(p.num_snapshots, 0, in.max_state_slots - in.max_num_seqs);
    p.snapshot_bytes = p.num_snapshots * in.state_bytes_per_seq;
    if (in.num_blocks_override == 0) kv_budget -= p.snapshot_bytes;
  }
  const int64_t from_memory = kv_budget > 0 ? kv_budget / p.kv_bytes_per_block : 0;
  p.num_blocks = in.num_blocks_override > 0 ? in.num_blocks_override : from_memory;
  if (in.max_blocks > 0 && p.num_blocks > in.max_blocks) {
    check(in.num_blocks_override == 0, "--num-gpu-blocks-override " + std::to_string(in.num_blocks_override) +
                                           " is more KV blocks than this device's largest tensor holds (" +
                                           std::to_string(in.max_blocks) + " per layer): lower it");
    p.num_blocks = in.max_blocks;
  }

  if (p.num_blocks < min_blocks) {
    std::ostringstream os;
    os << "KV cache needs at least " << format_bytes(min_blocks * p.kv_bytes_per_block) << " ("
       << min_blocks << " blocks of " << in.block_size << " tokens) for one sequence of max_model_len "
       << in.max_model_len << ", but ";
    if (in.num_blocks_override > 0) {
      os << "--num-gpu-blocks-override gives " << p.num_blocks << " blocks";
    } else if (in.kv_cache_memory_bytes > 0) {
      os << "--kv-cache-memory gives " << format_bytes(in.kv_cache_memory_bytes);
    } else {
      os << format_bytes(left > 0 ? left : 0) << " is left (usable " << format_bytes(p.usable_bytes)
         << " - weights " << format_bytes(p.weight_bytes) << " - activations "
         << format_bytes(p.activation_bytes) << " - recurrent state " << format_bytes(p.state_bytes) << ")";
    }
    os << "; raise --gpu-memory-utilization / --kv-cache-memory or lower --max-model-len";
    if (p.state_bytes > 0) os << " / --max-num-seqs";
    throw Error(os.str());
  }
  p.kv_bytes = p.num_blocks * p.kv_bytes_per_block;
  p.unused_bytes = left - p.snapshot_bytes - p.kv_bytes;
  p.kv_capacity_tokens = p.num_blocks * in.block_size;
  p.max_concurrency = static_cast<double>(p.kv_capacity_tokens) / static_cast<double>(in.max_model_len);
  return p;
}

std::string MemoryPlan::describe() const {
  std::ostringstream os;
  char conc[32];
  std::snprintf(conc, sizeof conc, "%.2f", max_concurrency);
  os << "Memory plan: usable " << format_bytes(usable_bytes) << " = weights " << format_bytes(weight_bytes)
     << " + activations " << format_bytes(activation_bytes) << " + recurrent state "
     << format_bytes(state_bytes);
  if (num_snapshots > 0) os << " + state snapshots " << format_bytes(snapshot_bytes);
  os << " + KV cache " << format_bytes(kv_bytes) << " + unused " << format_bytes(unused_bytes) << "\n";
  if (num_snapshots > 0)
    os << "Prefix-cache state snapshots: " << num_snapshots << " (" << format_bytes(snapshot_bytes / num_snapshots)
       << " each)\n";
  os << "Available KV cache memory: " << format_bytes(kv_bytes) << " (" << num_blocks << " blocks of "
     << block_size << " tokens, " << format_bytes(kv_bytes_per_block) << " per block)\n";
  os << "KV cache size: " << kv_capacity_tokens << " tokens\n";
  os << "Maximum concurrency for " << max_model_len << " tokens per request: " << conc << "x\n";
  return os.str();
}

}  // namespace pagoda
