#include "engine/sampling_params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace pagoda {
namespace {

// The error message of `p`, or "" when valid.
std::string error_of(const SamplingParams& p) {
  auto e = validate_sampling_params(p);
  return e ? *e : std::string();
}

TEST(SamplingParams, DefaultsAreValid) {
  SamplingParams p;
  EXPECT_EQ(error_of(p), "");
  EXPECT_FALSE(p.greedy());
  p.temperature = 0;
  EXPECT_TRUE(p.greedy());
}

TEST(SamplingParams, EachBadFieldIsNamedWithItsRange) {
  struct Case {
    void (*set)(SamplingParams&);
    const char* expect;
  };
  const Case cases[] = {
      {[](SamplingParams& p) { p.n = 0; }, "n must be at least 1"},
      {[](SamplingParams& p) { p.temperature = -0.5; }, "temperature must be non-negative"},
      {[](SamplingParams& p) { p.temperature = std::numeric_limits<double>::quiet_NaN(); }, "temperature"},
      {[](SamplingParams& p) { p.top_p = 0.0; }, "top_p must be in (0, 1]"},
      {[](SamplingParams& p) { p.top_p = 1.01; }, "top_p must be in (0, 1]"},
      {[](SamplingParams& p) { p.top_k = -2; }, "top_k must be 0 or -1 (disable), or at least 1"},
      {[](SamplingParams& p) { p.min_p = 1.5; }, "min_p must be in [0, 1]"},
      {[](SamplingParams& p) { p.presence_penalty = 2.5; }, "presence_penalty must be in [-2, 2]"},
      {[](SamplingParams& p) { p.frequency_penalty = -3; }, "frequency_penalty must be in [-2, 2]"},
      {[](SamplingParams& p) { p.repetition_penalty = 0; }, "repetition_penalty must be greater than zero"},
      {[](SamplingParams& p) { p.max_tokens = 0; }, "max_tokens must be at least 1"},
      {[](SamplingParams& p) { p.min_tokens = -1; }, "min_tokens must be greater than or equal to 0"},
      {[](SamplingParams& p) { p.max_tokens = 3; p.min_tokens = 4; }, "min_tokens must be less than or equal to max_tokens=3"},
      {[](SamplingParams& p) { p.logprobs = -1; }, "logprobs must be non-negative"},
      {[](SamplingParams& p) { p.stop = {"ok", ""}; }, "stop cannot contain an empty string"},
      {[](SamplingParams& p) { p.stop_token_ids = {5, -1}; }, "stop_token_ids"},
  };
  for (const Case& c : cases) {
    SamplingParams p;
    c.set(p);
    const std::string err = error_of(p);
    EXPECT_NE(err.find(c.expect), std::string::npos) << "expected '" << c.expect << "' in '" << err << "'";
  }
}

TEST(SamplingParams, BoundaryValuesAreValid) {
  SamplingParams p;
  p.temperature = 0;
  p.top_k = -1;
  p.top_p = 1.0;
  p.min_p = 1.0;
  p.presence_penalty = -2;
  p.frequency_penalty = 2;
  p.repetition_penalty = 0.01;
  p.max_tokens = 1;
  p.min_tokens = 1;
  p.logprobs = 0;
  EXPECT_EQ(error_of(p), "");
  p.top_k = 0;
  EXPECT_EQ(error_of(p), "");
  EXPECT_FALSE(p.top_k_enabled());
  p.top_k = 1;
  EXPECT_TRUE(p.top_k_enabled());
}

}  // namespace
}  // namespace pagoda
