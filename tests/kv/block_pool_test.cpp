#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <stdexcept>

#include "core/error.h"

namespace pagoda {
namespace {

TEST(KvBlockPool, AllocateAndFreeAccounting) {
  KvBlockPool pool(10, 16);
  EXPECT_EQ(pool.num_blocks(), 10);
  EXPECT_EQ(pool.block_size(), 16);
  EXPECT_EQ(pool.num_free(), 10);

  std::vector<int32_t> a;
  ASSERT_TRUE(pool.allocate(3, a));
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(pool.num_free(), 7);
  EXPECT_EQ(pool.num_used(), 3);
  EXPECT_DOUBLE_EQ(pool.usage(), 0.3);

  std::vector<int32_t> b;
  ASSERT_TRUE(pool.allocate(4, b));
  EXPECT_EQ(pool.num_free(), 3);
  // All handed-out ids are distinct and in range, each with one owner.
  std::set<int32_t> ids(a.begin(), a.end());
  ids.insert(b.begin(), b.end());
  EXPECT_EQ(ids.size(), 7u);
  for (int32_t id : ids) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, 10);
    EXPECT_EQ(pool.ref_count(id), 1);
  }

  pool.free(a);
  EXPECT_EQ(pool.num_free(), 6);
  for (int32_t id : a) EXPECT_EQ(pool.ref_count(id), 0);
  pool.free(b);
  EXPECT_EQ(pool.num_free(), 10);
  EXPECT_DOUBLE_EQ(pool.usage(), 0.0);
}

TEST(KvBlockPool, ExhaustionFailsWithoutSideEffects) {
  KvBlockPool pool(4, 8);
  std::vector<int32_t> a;
  ASSERT_TRUE(pool.allocate(3, a));
  std::vector<int32_t> b{99};
  EXPECT_FALSE(pool.can_allocate(2));
  EXPECT_FALSE(pool.allocate(2, b));  // only 1 free
  EXPECT_EQ(b, std::vector<int32_t>{99});
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_TRUE(pool.allocate(1, b));
  EXPECT_EQ(b.size(), 2u);
  EXPECT_EQ(pool.num_free(), 0);
  std::vector<int32_t> c;
  EXPECT_FALSE(pool.allocate(1, c));
  EXPECT_TRUE(pool.allocate(0, c));  // zero blocks always succeed
  EXPECT_TRUE(c.empty());
}

TEST(KvBlockPool, DoubleFreeThrowsAndChangesNothing) {
  KvBlockPool pool(4, 8);
  std::vector<int32_t> a;
  ASSERT_TRUE(pool.allocate(2, a));
  pool.free(std::vector<int32_t>{a[0]});
  EXPECT_THROW(pool.free(std::vector<int32_t>{a[0]}), std::logic_error);
  // A list naming a live block and then a free one is refused as a whole.
  EXPECT_THROW(pool.free(std::vector<int32_t>{a[1], a[0]}), std::logic_error);
  EXPECT_EQ(pool.ref_count(a[1]), 1);
  EXPECT_EQ(pool.num_free(), 3);
  // The same block twice in one call is a double free too.
  EXPECT_THROW(pool.free(std::vector<int32_t>{a[1], a[1]}), std::logic_error);
  EXPECT_EQ(pool.ref_count(a[1]), 1);
  EXPECT_THROW(pool.free(std::vector<int32_t>{17}), std::logic_error);
  pool.free(std::vector<int32_t>{a[1]});
  EXPECT_EQ(pool.num_free(), 4);
}

TEST(KvBlockPool, SharedBlocksReturnWhenLastOwnerFrees) {
  KvBlockPool pool(2, 8);
  std::vector<int32_t> a;
  ASSERT_TRUE(pool.allocate(1, a));
  pool.share(a[0]);
  EXPECT_EQ(pool.ref_count(a[0]), 2);
  pool.free(a);
  EXPECT_EQ(pool.ref_count(a[0]), 1);
  EXPECT_EQ(pool.num_free(), 1);
  pool.free(a);
  EXPECT_EQ(pool.num_free(), 2);
  EXPECT_THROW(pool.share(a[0]), std::logic_error);
}

TEST(KvBlockPool, FreedBlocksAreReused) {
  KvBlockPool pool(3, 4);
  std::vector<int32_t> a;
  ASSERT_TRUE(pool.allocate(3, a));
  pool.free(std::vector<int32_t>{a[1]});
  std::vector<int32_t> b;
  ASSERT_TRUE(pool.allocate(1, b));
  EXPECT_EQ(b[0], a[1]);
}

TEST(KvBlockPool, RejectsBadShape) {
  EXPECT_THROW(KvBlockPool(-1, 16), Error);
  EXPECT_THROW(KvBlockPool(4, 0), Error);
}

}  // namespace
}  // namespace pagoda
