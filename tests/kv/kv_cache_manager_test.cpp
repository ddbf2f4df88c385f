#include "kv/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace pagoda {
namespace {

TEST(KvCacheManager, SlotMappingOfPartialBlocks) {
  const int32_t bs = 4;
  KvCacheManager kv(8, bs);
  std::vector<int32_t> slots;
  ASSERT_TRUE(kv.append_slots(/*seq=*/7, 6, &slots));  // 6 tokens: 2 blocks, the 2nd half full
  const std::vector<int32_t>& t = kv.block_table(7);
  ASSERT_EQ(t.size(), 2u);
  ASSERT_EQ(slots.size(), 6u);
  for (int32_t i = 0; i < 6; ++i) {
    EXPECT_EQ(slots[static_cast<size_t>(i)], t[static_cast<size_t>(i / bs)] * bs + i % bs) << i;
  }
  EXPECT_EQ(kv.num_tokens(7), 6);
  EXPECT_EQ(kv.max_appendable(7), 2 + 6 * bs);

  // Two more tokens fill the second block without a new one.
  std::vector<int32_t> more;
  EXPECT_EQ(kv.blocks_needed(7, 2), 0);
  ASSERT_TRUE(kv.append_slots(7, 2, &more));
  EXPECT_EQ(kv.block_table(7).size(), 2u);
  EXPECT_EQ(more, (std::vector<int32_t>{t[1] * bs + 2, t[1] * bs + 3}));
  EXPECT_EQ(kv.num_free_blocks(), 6);
}

TEST(KvCacheManager, BlockTableGrowsAtBlockBoundaries) {
  const int32_t bs = 4;
  KvCacheManager kv(16, bs);
  for (int32_t n = 1; n <= 13; ++n) {
    // Before appending token n-1 (0-based), a new block is needed exactly when n-1 is a multiple of bs.
    EXPECT_EQ(kv.blocks_needed(3, 1), (n - 1) % bs == 0 ? 1 : 0) << n;
    std::vector<int32_t> slot;
    ASSERT_TRUE(kv.append_slots(3, 1, &slot));
    EXPECT_EQ(static_cast<int32_t>(kv.block_table(3).size()), (n + bs - 1) / bs) << n;
    const int32_t i = n - 1;
    EXPECT_EQ(slot[0], kv.block_table(3)[static_cast<size_t>(i / bs)] * bs + i % bs);
  }
  EXPECT_EQ(kv.num_free_blocks(), 16 - 4);
  kv.free(3);
  EXPECT_EQ(kv.num_free_blocks(), 16);
  EXPECT_FALSE(kv.has(3));
  EXPECT_EQ(kv.num_tokens(3), 0);
}

TEST(KvCacheManager, SequencesGetDisjointSlotsAndFailuresChangeNothing) {
  KvCacheManager kv(3, 2);
  std::vector<int32_t> s1, s2;
  ASSERT_TRUE(kv.append_slots(1, 3, &s1));  // 2 blocks
  EXPECT_FALSE(kv.can_append(2, 3));        // would need 2, 1 free
  EXPECT_FALSE(kv.append_slots(2, 3, &s2));
  EXPECT_TRUE(s2.empty());
  EXPECT_EQ(kv.num_tokens(2), 0);
  EXPECT_EQ(kv.num_free_blocks(), 1);
  ASSERT_TRUE(kv.append_slots(2, 2, &s2));
  for (int32_t a : s1) {
    for (int32_t b : s2) EXPECT_NE(a, b);
  }
  EXPECT_DOUBLE_EQ(kv.usage(), 1.0);
  // Seq 1 still has room for one token in its last block.
  EXPECT_TRUE(kv.can_append(1, 1));
  EXPECT_FALSE(kv.can_append(1, 2));
  kv.free(1);
  kv.free(2);
  kv.free(2);  // unknown ids are ignored
  EXPECT_EQ(kv.num_free_blocks(), 3);
}

TEST(StateSlotPool, AllocateFree) {
  StateSlotPool pool(2);
  EXPECT_EQ(pool.num_slots(), 2);
  const int32_t a = pool.allocate();
  const int32_t b = pool.allocate();
  EXPECT_NE(a, b);
  EXPECT_TRUE(a == 0 || a == 1);
  EXPECT_TRUE(b == 0 || b == 1);
  EXPECT_EQ(pool.allocate(), -1);
  EXPECT_EQ(pool.num_free(), 0);
  pool.free(a);
  EXPECT_FALSE(pool.in_use(a));
  EXPECT_THROW(pool.free(a), std::logic_error);
  EXPECT_THROW(pool.free(5), std::logic_error);
  EXPECT_EQ(pool.allocate(), a);
  EXPECT_EQ(StateSlotPool(0).num_free(), 0);
}

}  // namespace
}  // namespace pagoda
