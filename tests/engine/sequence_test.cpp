#include "engine/sequence.h"

#include <gtest/gtest.h>

namespace pagoda {
namespace {

TEST(Sequence, TokensPromptOutput) {
  Sequence s(3, {10, 11, 12}, SamplingParams{});
  EXPECT_EQ(s.num_prompt_tokens(), 3);
  EXPECT_EQ(s.num_output_tokens(), 0);
  s.append_token(42);
  EXPECT_EQ(s.num_tokens(), 4);
  EXPECT_EQ(s.num_output_tokens(), 1);
  ASSERT_EQ(s.output().size(), 1u);
  EXPECT_EQ(s.output()[0], 42);
  EXPECT_EQ(s.prompt()[2], 12);
  EXPECT_EQ(s.last_token(), 42);
  EXPECT_TRUE(s.is_prefilling());  // nothing computed yet
  s.num_computed_tokens = 3;
  EXPECT_FALSE(s.is_prefilling());
  EXPECT_EQ(s.num_uncomputed_tokens(), 1);
  EXPECT_STREQ(finish_reason_name(FinishReason::Length), "length");
  EXPECT_STREQ(finish_reason_name(FinishReason::Stop), "stop");
  EXPECT_STREQ(finish_reason_name(FinishReason::Abort), "abort");
}

TEST(Sequence, RngSeeding) {
  SamplingParams seeded;
  seeded.seed = 1234;
  Sequence a(1, {1}, seeded, /*engine_seed=*/7);
  Sequence b(2, {1}, seeded, /*engine_seed=*/8);
  std::mt19937_64 expect(1234);
  const uint64_t first = expect();
  EXPECT_EQ(a.rng()(), first);  // a request seed alone decides the stream
  EXPECT_EQ(b.rng()(), first);

  Sequence c(1, {1}, SamplingParams{}, 7);
  Sequence d(1, {1}, SamplingParams{}, 7);
  Sequence e(2, {1}, SamplingParams{}, 7);
  Sequence f(1, {1}, SamplingParams{}, 8);
  const uint64_t cv = c.rng()();
  EXPECT_EQ(d.rng()(), cv);   // same engine seed and id: same stream
  EXPECT_NE(e.rng()(), cv);   // other id
  EXPECT_NE(f.rng()(), cv);   // other engine seed
}

}  // namespace
}  // namespace pagoda
