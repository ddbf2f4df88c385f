// The Vulkan decode-sized linear's two shaders: gemv16.comp (16-byte loads of 16-bit weights whose
// rows are whole 16-byte vectors) and gemv.comp (any weights), each on every linear case of the op
// table against the naive formula, with the dispatches counted: by default gemv16 for each bf16 /
// f16 case of K a multiple of 8 and at most 64 tokens, gemv for the others (f32 weights, K = 37);
// with PAGODA_VULKAN_GEMV=scalar gemv alone. Where this build or machine has no Vulkan device the
// tests skip, naming why.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "../support/vulkan_device.h"
#include "bench/op_table.h"
#include "op_table_naive_seq.h"
#ifdef PAGODA_HAS_VULKAN
#include "backend/vulkan/vulkan_backend.h"
#endif

namespace pagoda {
namespace {

#ifdef PAGODA_HAS_VULKAN
struct GemvEnv {
  explicit GemvEnv(const char* mode) {
    if (mode) setenv("PAGODA_VULKAN_GEMV", mode, 1);
  }
  ~GemvEnv() { unsetenv("PAGODA_VULKAN_GEMV"); }
};

class VulkanGemvPath : public ::testing::TestWithParam<const char*> {};

TEST_P(VulkanGemvPath, EveryLinearCaseMatchesTheNaiveFormulaOnTheShaderItShouldTake) {
  const std::string why = testing::vulkan_missing();
  if (!why.empty()) GTEST_SKIP() << "no Vulkan device: " << why;
  const bool scalar = std::string(GetParam()) == "scalar";
  GemvEnv env(scalar ? "scalar" : nullptr);
  auto made = make_backend("vulkan", 0, "float32");
  auto* be = dynamic_cast<VulkanBackend*>(made.get());
  ASSERT_NE(be, nullptr);
  int64_t want16 = 0, want_scalar = 0;
  for (const optable::OpCase& c : optable::test_cases()) {
    if (c.op != "linear") continue;
    SCOPED_TRACE(c.label);
    const optable::OpData in = c.make(DType::F32);
    const auto got = optable::run_case(*be, c, in);
    const auto want = naive::formulas().at(c.op)(in);
    const optable::Tol tol = c.tol(DType::F32, "out");
    const auto& g = got.at("out");
    const auto& w = want.at("out");
    ASSERT_EQ(g.size(), w.size());
    size_t bad = 0;
    for (size_t i = 0; i < g.size(); ++i)
      if (!(std::fabs(double(g[i]) - w[i]) <= tol.atol + tol.rtol * std::fabs(w[i]))) ++bad;
    EXPECT_EQ(bad, 0u) << "out vs naive";
    const optable::HostTensor& x = in.t.at("x");
    const optable::HostTensor& wt = in.t.at("w");
    if (x.shape[0] > 64) continue;  // the tiled shader
    const bool sixteen = wt.dtype == DType::BF16 || wt.dtype == DType::F16;
    (!scalar && sixteen && wt.shape[1] % 8 == 0 ? want16 : want_scalar) += 1;
  }
  EXPECT_EQ(be->dispatches("gemv16"), want16);
  EXPECT_EQ(be->dispatches("gemv"), want_scalar);
  if (!scalar) EXPECT_GT(want16, 0) << "no case reached gemv16";
}

INSTANTIATE_TEST_SUITE_P(Modes, VulkanGemvPath, ::testing::Values("default", "scalar"),
                         [](const auto& p) { return std::string(p.param); });
#else
TEST(VulkanGemvPath, NeedsTheVulkanBackend) { GTEST_SKIP() << "this build has no Vulkan backend"; }
#endif

}  // namespace
}  // namespace pagoda
