// The Vulkan gated delta rule's two paths, each forced (PAGODA_VULKAN_GDN=recurrent|chunked) and
// the default mix, on every gated_delta_rule case of the op table against the naive formula, with
// the dispatches counted: the recurrent shader alone, the chunked pair alone, and in the default
// mode the pair for each case that has a sequence of more than 8 new tokens and the recurrent
// shader for each case with a shorter one (dk over 128: recurrent only). Where this build or machine
// has no Vulkan device the tests skip, naming why.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "../support/vulkan_device.h"
#include "bench/op_table.h"
#include "core/error.h"
#include "op_table_naive_seq.h"
#ifdef PAGODA_HAS_VULKAN
#include "backend/vulkan/vulkan_backend.h"
#endif

namespace pagoda {
namespace {

#ifdef PAGODA_HAS_VULKAN
// Sets PAGODA_VULKAN_GDN for the life of one backend made under it.
struct GdnEnv {
  explicit GdnEnv(const char* mode) { setenv("PAGODA_VULKAN_GDN", mode, 1); }
  ~GdnEnv() { unsetenv("PAGODA_VULKAN_GDN"); }
};

struct Expect {
  int64_t recurrent = 0, chunked = 0;
};

// Runs every gated_delta_rule case on a fresh backend made with `mode`, each output checked
// against the naive formula; returns the dispatch counts the cases predict and the backend made.
void run_cases(const char* mode, Expect* predicted, Expect* counted) {
  GdnEnv env(mode);
  auto made = make_backend("vulkan", 0, "float32");
  auto* be = dynamic_cast<VulkanBackend*>(made.get());
  ASSERT_NE(be, nullptr);
  const std::string m = mode;
  for (const optable::OpCase& c : optable::test_cases()) {
    if (c.op != "gated_delta_rule") continue;
    if (c.unsupported && !c.unsupported(*be).empty()) continue;  // e.g. the bf16-state case (CUDA's)
    SCOPED_TRACE(m + " " + c.label);
    const optable::OpData in = c.make(DType::F32);
    const auto got = optable::run_case(*be, c, in);
    const auto want = naive::formulas().at(c.op)(in);
    for (const std::string& name : c.outputs) {
      // A tenth of the op table's tolerance (shared with the CPU and CUDA chunked forms): both paths
      // stay under 1% of it on lavapipe (fp32; the chunked form sums in another order, through
      // e^{γ_r−γ_s} and T = (I+A)⁻¹, and the printed margins show how far).
      optable::Tol tol = c.tol(DType::F32, name);
      tol.atol /= 10;
      tol.rtol /= 10;
      const auto& g = got.at(name);
      const auto& w = want.at(name);
      ASSERT_EQ(g.size(), w.size());
      size_t bad = 0;
      double worst = 0;
      for (size_t i = 0; i < g.size(); ++i) {
        const double err = std::fabs(double(g[i]) - w[i]);
        worst = std::max(worst, err / (tol.atol + tol.rtol * std::fabs(w[i])));
        if (!(err <= tol.atol + tol.rtol * std::fabs(w[i]))) ++bad;
      }
      EXPECT_EQ(bad, 0u) << name << " vs naive";
      std::printf("[ %-9s ] %s %s: worst error %.4f of the tolerance\n", mode, c.label.c_str(), name.c_str(), worst);
    }
    const auto& cu = in.meta.cu_seqlens_q;
    bool any_long = false, any_short = false;
    for (size_t s = 0; s + 1 < cu.size(); ++s) (cu[s + 1] - cu[s] > 8 ? any_long : any_short) = true;
    const bool big_dk = in.p.at("dk") > 128;
    if (m == "recurrent" || big_dk) {
      predicted->recurrent += 1;
    } else if (m == "chunked") {
      predicted->chunked += 1;
    } else {
      predicted->chunked += any_long ? 1 : 0;
      predicted->recurrent += any_short ? 1 : 0;
    }
  }
  counted->recurrent = be->dispatches("delta_rule");
  counted->chunked = be->dispatches("delta_rule_chunk");
  EXPECT_EQ(be->dispatches("delta_chunk_prep"), counted->chunked) << "the pair runs together";
}

class VulkanGdnPath : public ::testing::TestWithParam<const char*> {};

TEST_P(VulkanGdnPath, EveryCaseMatchesTheNaiveFormulaOnThePathItShouldTake) {
  const std::string why = testing::vulkan_missing();
  if (!why.empty()) GTEST_SKIP() << "no Vulkan device: " << why;
  Expect predicted, counted;
  run_cases(GetParam(), &predicted, &counted);
  EXPECT_EQ(counted.recurrent, predicted.recurrent);
  EXPECT_EQ(counted.chunked, predicted.chunked);
  if (std::string(GetParam()) != "recurrent") {
    EXPECT_GT(counted.chunked, 0) << "no case reached the chunked shaders";
  }
  if (std::string(GetParam()) != "chunked") {
    EXPECT_GT(counted.recurrent, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, VulkanGdnPath, ::testing::Values("auto", "recurrent", "chunked"),
                         [](const auto& p) { return std::string(p.param); });

TEST(VulkanGdnPathEnv, AnUnknownPathIsRefusedByName) {
  const std::string why = testing::vulkan_missing();
  if (!why.empty()) GTEST_SKIP() << "no Vulkan device: " << why;
  GdnEnv env("blocked");
  try {
    make_backend("vulkan", 0, "float32");
    FAIL() << "PAGODA_VULKAN_GDN=blocked was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("PAGODA_VULKAN_GDN=blocked"), std::string::npos) << e.what();
  }
}
#else
TEST(VulkanGdnPath, NeedsTheVulkanBackend) { GTEST_SKIP() << "this build has no Vulkan backend"; }
#endif

}  // namespace
}  // namespace pagoda
