#include "core/format.h"
#include "kv/memory_plan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/error.h"

namespace pagoda {
namespace {

MemoryPlanInputs qwen3_8b_like() {
  MemoryPlanInputs in;
  in.total_bytes = 80ll << 30;  // 80 GiB
  in.utilization = 0.9;
  in.weight_bytes = 16'000'000'000;
  in.activation_bytes = 2'000'000'000;
  in.state_bytes_per_seq = 1'000'000;
  in.max_num_seqs = 256;
  in.kv_bytes_per_token = 36 * 2 * 8 * 128 * 2;  // layers × (K,V) × kv heads × head_dim × bf16
  in.block_size = 16;
  in.max_model_len = 32768;
  return in;
}

TEST(MemoryPlan, ArithmeticHandComputed) {
  const MemoryPlan p = plan_memory(qwen3_8b_like());
  // 80 GiB × 0.9 = 77309411328; − 16e9 − 2e9 − 256 × 1e6 = 59053411328 left;
  // 147456 B/token × 16 = 2359296 B/block; 59053411328 / 2359296 = 25030 blocks, 232448 B over.
  EXPECT_EQ(p.usable_bytes, 77309411328ll);
  EXPECT_EQ(p.state_bytes, 256'000'000);
  EXPECT_EQ(p.kv_bytes_per_block, 2359296);
  EXPECT_EQ(p.num_blocks, 25030);
  EXPECT_EQ(p.kv_bytes, 25030ll * 2359296);
  EXPECT_EQ(p.unused_bytes, 232448);
  EXPECT_EQ(p.kv_capacity_tokens, 25030 * 16);
  EXPECT_DOUBLE_EQ(p.max_concurrency, 25030.0 * 16 / 32768);
  // The components add up to the usable memory exactly.
  EXPECT_EQ(p.weight_bytes + p.activation_bytes + p.state_bytes + p.kv_bytes + p.unused_bytes, p.usable_bytes);
}

TEST(MemoryPlan, ArithmeticRecomputedOverManyInputs) {
  for (int64_t total : {1ll << 30, 24ll << 30, 141ll << 30}) {
    for (double util : {0.5, 0.9, 1.0}) {
      for (int32_t bs : {8, 16, 128}) {
        MemoryPlanInputs in;
        in.total_bytes = total;
        in.utilization = util;
        in.weight_bytes = total / 7;
        in.activation_bytes = total / 50;
        in.state_bytes_per_seq = bs == 16 ? 123457 : 0;
        in.max_num_seqs = 64;
        in.kv_bytes_per_token = 28 * 2 * 2 * 128 * 2;
        in.block_size = bs;
        in.max_model_len = 256;
        const double usable = std::floor(static_cast<double>(total) * util);
        const int64_t expect_usable = static_cast<int64_t>(usable);
        const int64_t left = expect_usable - in.weight_bytes - in.activation_bytes - in.state_bytes_per_seq * 64;
        const int64_t per_block = in.kv_bytes_per_token * bs;
        const MemoryPlan p = plan_memory(in);
        EXPECT_EQ(p.usable_bytes, expect_usable);
        EXPECT_EQ(p.num_blocks, left / per_block);
        EXPECT_EQ(p.kv_bytes, (left / per_block) * per_block);
        EXPECT_EQ(p.unused_bytes, left % per_block);
      }
    }
  }
}

TEST(MemoryPlan, TooLittleMemoryIsAClearError) {
  MemoryPlanInputs in = qwen3_8b_like();
  in.total_bytes = 20ll << 30;  // 18 GiB usable: weights + activations + state leave ~1.07 GB
  in.max_model_len = 1 << 20;   // one sequence needs 65536 blocks = 144 GiB
  try {
    plan_memory(in);
    FAIL() << "expected pagoda::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("KV cache needs at least 144.00 GiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("max_model_len 1048576"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--gpu-memory-utilization"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--max-model-len"), std::string::npos) << msg;
  }
  // Weights alone above the usable memory: also an error, not a negative block count.
  in.max_model_len = 16;
  in.weight_bytes = 100ll << 30;
  EXPECT_THROW(plan_memory(in), Error);
}

TEST(MemoryPlan, ExactlyOneSequenceFits) {
  MemoryPlanInputs in;
  in.total_bytes = 1000 + 64 * 10;  // 10 blocks of 64 bytes after the weights
  in.utilization = 1.0;
  in.weight_bytes = 1000;
  in.max_num_seqs = 1;
  in.kv_bytes_per_token = 4;
  in.block_size = 16;
  in.max_model_len = 160;
  EXPECT_EQ(plan_memory(in).num_blocks, 10);
  in.max_model_len = 161;  // needs 11 blocks
  EXPECT_THROW(plan_memory(in), Error);
}

TEST(MemoryPlan, OverridesWin) {
  MemoryPlanInputs in = qwen3_8b_like();
  in.num_blocks_override = 4096;
  const MemoryPlan p = plan_memory(in);
  EXPECT_EQ(p.num_blocks, 4096);
  EXPECT_EQ(p.kv_bytes, 4096ll * 2359296);

  MemoryPlanInputs k = qwen3_8b_like();
  k.kv_cache_memory_bytes = 10ll << 30;
  EXPECT_EQ(plan_memory(k).num_blocks, (10ll << 30) / 2359296);

  in.num_blocks_override = 100;  // less than one 32768-token sequence (2048 blocks)
  EXPECT_THROW(plan_memory(in), Error);
}

// A device whose tensors are bounded (Vulkan: 2^32 elements) caps the blocks and the snapshots; the
// memory past them stays unused, and an override past the cap is refused by name.
TEST(MemoryPlan, TheDevicesLargestTensorCapsBlocksAndSnapshots) {
  MemoryPlanInputs in = qwen3_8b_like();
  in.snapshot_fraction = 0.1;
  const MemoryPlan free = plan_memory(in);
  ASSERT_GT(free.num_blocks, 10000);
  ASSERT_GT(free.num_snapshots, 300);
  in.max_blocks = 10000;
  in.max_state_slots = 256 + 300;  // the running sequences' slots, then 300 snapshots
  const MemoryPlan capped = plan_memory(in);
  EXPECT_EQ(capped.num_blocks, 10000);
  EXPECT_EQ(capped.num_snapshots, 300);
  EXPECT_EQ(capped.kv_bytes, 10000ll * capped.kv_bytes_per_block);
  EXPECT_EQ(capped.unused_bytes, capped.usable_bytes - capped.weight_bytes - capped.activation_bytes -
                                     capped.state_bytes - capped.snapshot_bytes - capped.kv_bytes);
  EXPECT_GT(capped.unused_bytes, free.unused_bytes);
  in.num_blocks_override = 10001;
  try {
    plan_memory(in);
    FAIL() << "an override past the device's cap must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--num-gpu-blocks-override 10001"), std::string::npos) << e.what();
  }
}

TEST(MemoryPlan, RejectsBadInputs) {
  MemoryPlanInputs in = qwen3_8b_like();
  in.utilization = 1.5;
  EXPECT_THROW(plan_memory(in), Error);
  in = qwen3_8b_like();
  in.block_size = 0;
  EXPECT_THROW(plan_memory(in), Error);
}

TEST(MemoryPlan, DescribeNamesTheNumbers) {
  const MemoryPlan p = plan_memory(qwen3_8b_like());
  const std::string s = p.describe();
  EXPECT_NE(s.find("25030 blocks"), std::string::npos) << s;
  EXPECT_NE(s.find("KV cache size: 400480 tokens"), std::string::npos) << s;
  EXPECT_NE(s.find("Maximum concurrency for 32768 tokens per request: 12.22x"), std::string::npos) << s;
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(3ll << 29), "1.50 GiB");
}

}  // namespace
}  // namespace pagoda
