// The fair queue's admission rules, without an engine: newcomers get a reserved sequence, one
// client's many choices are taken in turn with another's, and unstarted prompt tokens are bounded.
#include <gtest/gtest.h>

#include "server/fair_queue.h"

namespace pagoda::server {
namespace {

std::vector<int64_t> prompts(size_t n, int64_t tokens) { return std::vector<int64_t>(n, tokens); }

// Takes what the queue lets go, giving each choice the next engine id.
std::vector<FairQueue::Admit> take(FairQueue& q, int64_t& next_id, std::vector<int64_t>* ids = nullptr) {
  auto admits = q.take();
  for (const auto& a : admits) {
    if (ids) ids->push_back(next_id);
    q.admitted(a, next_id++);
  }
  return admits;
}

TEST(FairQueue, NewcomerGetsReservedSequenceWhileHeavyClientWaits) {
  FairQueue q({.max_seqs = 4, .reserved_seqs = 1, .max_unstarted_tokens = 1 << 20});
  int64_t id = 0;
  std::vector<int64_t> heavy_ids;
  q.push(1, "heavy", prompts(8, 10));
  q.push(2, "heavy", prompts(8, 10));
  EXPECT_EQ(take(q, id, &heavy_ids).size(), 3u);  // 4 sequences, 1 kept for newcomers
  for (int64_t e : heavy_ids) q.started(e);
  // Generation 2 is no newcomer: its client already runs generation 1.
  EXPECT_TRUE(take(q, id).empty());
  q.push(3, "light", prompts(1, 5));
  std::vector<int64_t> light_ids;
  const auto light = take(q, id, &light_ids);
  ASSERT_EQ(light.size(), 1u);
  EXPECT_EQ(light[0].generation, 3u);
  EXPECT_EQ(q.in_engine(), 4);
  // Once the light request and a heavy choice end, the heavy client gets one more (not the
  // reserved one).
  q.finished(light_ids[0]);
  q.finished(heavy_ids[0]);
  EXPECT_EQ(take(q, id).size(), 1u);
  EXPECT_EQ(q.in_engine(), 3);
}

TEST(FairQueue, ClientsAreServedInTurn) {
  FairQueue q({.max_seqs = 2, .reserved_seqs = 0, .max_unstarted_tokens = 1 << 20});
  int64_t id = 0;
  q.push(1, "a", prompts(4, 1));
  q.push(2, "a", prompts(4, 1));
  q.push(3, "b", prompts(4, 1));
  std::vector<uint64_t> order;
  std::vector<int64_t> ids;
  for (int round = 0; round < 6; ++round) {
    for (const auto& a : take(q, id, &ids)) order.push_back(a.generation);
    q.finished(ids.front());
    ids.erase(ids.begin());
  }
  // a, b, then whichever client has fewer in the engine: b's turns interleave with a's.
  ASSERT_GE(order.size(), 6u);
  int b = 0;
  for (size_t i = 0; i < 6; ++i) b += order[i] == 3;
  EXPECT_GE(b, 2) << "client b got too few of the first six turns";
}

TEST(FairQueue, UnstartedPromptTokensAreBounded) {
  FairQueue q({.max_seqs = 64, .reserved_seqs = 4, .max_unstarted_tokens = 4096});
  int64_t id = 0;
  std::vector<int64_t> ids;
  q.push(1, "batch", prompts(1024, 2040));  // an embeddings request of 1,024 long inputs
  EXPECT_EQ(take(q, id, &ids).size(), 2u);  // 2 x 2,040 <= 4,096
  EXPECT_TRUE(take(q, id).empty());
  q.push(2, "one", prompts(1, 10));  // a newcomer goes past the bound: it waits behind two inputs at most
  EXPECT_EQ(take(q, id).size(), 1u);
  q.finished(ids[0]);  // an embedding input's one output is also its last
  EXPECT_EQ(take(q, id, &ids).size(), 1u);
  EXPECT_TRUE(q.has_waiting());
  EXPECT_EQ(q.drop(1), 1021u);
  EXPECT_FALSE(q.has_waiting());
}

// --scheduling-policy priority: of the waiting generations the lowest priority value goes first,
// whatever the arrival order; equal priorities keep arrival order.
TEST(FairQueue, LowerPriorityValueIsTakenFirst) {
  FairQueue q({.max_seqs = 1, .reserved_seqs = 0, .max_unstarted_tokens = 1 << 20});
  int64_t id = 0;
  std::vector<int64_t> ids;
  q.push(1, "", prompts(1, 4), 0);
  ASSERT_EQ(take(q, id, &ids).size(), 1u);  // the one sequence is busy from here
  q.push(2, "", prompts(1, 4), 5);
  q.push(3, "", prompts(1, 4), 0);
  q.push(4, "", prompts(1, 4), -5);
  q.push(5, "", prompts(1, 4), 0);
  std::vector<uint64_t> order;
  for (int i = 0; i < 4; ++i) {
    q.started(ids.back());
    q.finished(ids.back());
    const auto next = take(q, id, &ids);
    ASSERT_EQ(next.size(), 1u);
    order.push_back(next[0].generation);
  }
  EXPECT_EQ(order, (std::vector<uint64_t>{4, 3, 5, 2}));
}

}  // namespace
}  // namespace pagoda::server
