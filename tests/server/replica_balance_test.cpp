// The data-parallel balancer's rule (server/data_parallel_engine.h): the replica with the fewest
// waiting + running requests; among those, the lowest KV cache usage; then the lowest rank.
#include <gtest/gtest.h>

#include <vector>

#include "server/data_parallel_engine.h"

namespace pagoda::server {
namespace {

TEST(ReplicaBalance, FewestRequestsFirst) {
  EXPECT_EQ(least_loaded_replica({{3, 0.1}, {1, 0.9}, {2, 0.0}}), 1u);
  EXPECT_EQ(least_loaded_replica({{0, 0.5}, {4, 0.0}}), 0u);
}

TEST(ReplicaBalance, EqualRequestsGoToTheLowerKvUsage) {
  EXPECT_EQ(least_loaded_replica({{2, 0.6}, {2, 0.2}, {2, 0.4}}), 1u);
  EXPECT_EQ(least_loaded_replica({{5, 0.3}, {2, 0.7}, {2, 0.5}}), 2u);
}

TEST(ReplicaBalance, CompleteTiesGoToTheLowestRank) {
  EXPECT_EQ(least_loaded_replica({{1, 0.25}, {1, 0.25}, {1, 0.25}}), 0u);
  EXPECT_EQ(least_loaded_replica({{2, 0.5}, {1, 0.25}, {1, 0.25}}), 1u);
  EXPECT_EQ(least_loaded_replica({{0, 0.0}}), 0u);
}

}  // namespace
}  // namespace pagoda::server
