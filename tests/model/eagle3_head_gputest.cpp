// EAGLE-3 heads on the CUDA backend in fp32 (the ops the MTP head uses, no new kernel): the target's
// aux hidden states, the head's first-pass logits and greedy drafts equal the torch reference of
// tools/make_eagle3_fixtures.py (eagle3_reference_check.h), as on the CPU.
#include <gtest/gtest.h>

#include "eagle3_reference_check.h"
#include "reference_fixture.h"

namespace pagoda {
namespace {

class CudaEagle3Reference : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaEagle3Reference, AuxStatesFirstPassLogitsAndDraftsMatchTheTorchHead) {
  std::string why;
  if (testing::eagle3_reference_missing(GetParam(), &why)) GTEST_SKIP() << why;
  testing::expect_eagle3_reference(GetParam(), "cuda", "float32", 1e-3f);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaEagle3Reference, ::testing::Values("qwen3-gqa4-eagle3", "llama3-untied-eagle3"),
                         testing::FixtureParamName());

}  // namespace
}  // namespace pagoda
