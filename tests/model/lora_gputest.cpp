// LoRA adapters on CUDA (fp32, decode steps under CUDA graphs): the CPU test's cases (lora_test.cpp)
// — an adapter gives the greedy tokens and logprobs of its merged weights W + s·B·A, on a dense and
// a hybrid fixture, and a batch mixing four adapters and the base model gives each sequence what it
// gets alone — run on the device, through the shrink (linear) and lora_expand kernels and graph
// replays; more adapters than slots swap between replays; PEFT's own references (CudaLoraPeft).
#include <gtest/gtest.h>

#include "lora_fixture.h"

namespace pagoda {
namespace {

using namespace lora_test;

class CudaLora : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaLora, TheAdapterGivesTheMergedWeightsTokensAndLogprobs) {
  const std::string fixture = GetParam();
  io_test::TempDir tmp;
  const AdapterSpec spec{.rank = 4, .alpha = 8, .seed = 7};
  const auto pairs = write_adapter(fixture, spec, tmp.file("adapter"));
  write_merged(fixture, pairs, spec, tmp.file("merged"));
  const int32_t vocab = vocab_of(fixture);
  const std::vector<Req> with = {{prompt_of(1, 9, vocab), 0}, {prompt_of(2, 41, vocab), 0}};
  const std::vector<Req> plain = {{with[0].prompt}, {with[1].prompt}};
  const auto want = run(tmp.file("merged"), {}, plain, false, true, 10, "cuda", "float32");
  const auto got = run(testing::fixture_model_dir(fixture), {tmp.file("adapter")}, with, false, true, 10, "cuda",
                       "float32");
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    expect_same(got[i], want[i], 1e-3);
  }
}

TEST_P(CudaLora, AMixOfAdaptersAndTheBaseGivesEachSequenceItsTokensAlone) {
  const std::string fixture = GetParam();
  io_test::TempDir tmp;
  std::vector<std::string> dirs;
  for (uint32_t i = 0; i < 4; ++i) {
    dirs.push_back(tmp.file("a" + std::to_string(i)));
    write_adapter(fixture, {.rank = 2 + 2 * static_cast<int64_t>(i), .alpha = 8, .seed = 40 + i}, dirs.back());
  }
  const int32_t vocab = vocab_of(fixture);
  std::vector<Req> reqs;
  for (int32_t i = 0; i < 10; ++i)
    reqs.push_back({prompt_of(200 + static_cast<uint32_t>(i), 5 + 7 * static_cast<size_t>(i), vocab), i % 5 - 1});
  const auto alone = run(testing::fixture_model_dir(fixture), dirs, reqs, false, false, 10, "cuda", "float32");
  const auto together = run(testing::fixture_model_dir(fixture), dirs, reqs, true, false, 10, "cuda", "float32");
  for (size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    expect_same(together[i], alone[i], 1e-3);
  }
}

// Four adapters through two device slots (lora_fixture.h): adapters are written into slots between
// graph replays.
TEST_P(CudaLora, MoreAdaptersThanSlotsAreSwappedBetweenGraphReplays) {
  expect_swapping_changes_nothing(GetParam(), "cuda", "float32", 1e-3);
}

class CudaLoraPeft : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaLoraPeft, GivesPeftsTokensAndLogits) { expect_matches_peft(GetParam(), "cuda", "float32", 1e-3); }

TEST(CudaLoraPeftFixtures, EachFamilyHasPeftsAdapter) { EXPECT_GE(peft_fixtures().size(), 4u); }

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaLoraPeft, ::testing::ValuesIn(peft_fixtures()), testing::FixtureParamName());
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CudaLoraPeft);

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaLora, ::testing::Values("qwen3-tiny-tied", "qwen3_5-tiny-text"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace pagoda
