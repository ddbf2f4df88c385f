// The op table (src/bench/op_table.h) on every compiled backend: each case of each op against the
// naive formula of op_table_naive*.h and, for a backend other than the CPU, against the CPU op on
// the same inputs. A backend that is not compiled in or has no device skips (with the reason), and
// a case a backend cannot run is named as skipped — neither counts as passed.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend.h"
#include "bench/op_table.h"
#include "op_table_naive_seq.h"

namespace pagoda {
namespace {

using optable::OpCase;
using optable::OpData;
using optable::Tol;

const std::vector<OpCase>& cases() {
  static const std::vector<OpCase> c = optable::test_cases();
  return c;
}

std::vector<std::string> op_names() {
  std::vector<std::string> names;
  for (const OpCase& c : cases())
    if (std::find(names.begin(), names.end(), c.op) == names.end()) names.push_back(c.op);
  return names;
}

// The backends under test, made once: "cpu", "cuda" (bf16 activations), "cuda_fp32", "vulkan". Null with the
// reason where this build or machine has none.
std::map<std::string, std::unique_ptr<Backend>>& made_backends() {
  static std::map<std::string, std::unique_ptr<Backend>> made;
  return made;
}

// Destroyed when the tests end rather than by static destructors: NVIDIA's Vulkan driver tears down
// its own state at exit first, and a device destroyed after that crashes the process.
class BackendsTeardown : public ::testing::Environment {
 public:
  void TearDown() override { made_backends().clear(); }
};
::testing::Environment* const backends_teardown = ::testing::AddGlobalTestEnvironment(new BackendsTeardown);

Backend* backend(const std::string& kind, std::string* why) {
  auto& made = made_backends();
  static std::map<std::string, std::string> failed;
  if (made.count(kind)) return made[kind].get();
  if (failed.count(kind)) {
    *why = failed[kind];
    return nullptr;
  }
  try {
    if (kind == "cpu") made[kind] = make_backend("cpu");
    if (kind == "cuda") made[kind] = make_backend("cuda", 0, "bfloat16");
    if (kind == "cuda_fp32") made[kind] = make_backend("cuda", 0, "float32");
    if (kind == "vulkan") made[kind] = make_backend("vulkan", 0, "float32");
  } catch (const std::exception& e) {
    failed[kind] = e.what();
    *why = e.what();
    return nullptr;
  }
  return made[kind].get();
}

// The CPU computes in fp32: the same values with the bf16 tensors widened (weights, caches and
// activations alike; values are unchanged, so the CPU sees exactly what the other backend saw).
OpData for_cpu(OpData d) {
  for (auto& [name, t] : d.t)
    if (t.dtype == DType::BF16) t.dtype = DType::F32;
  return d;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, Tol tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0, worst = 0;
  double worst_excess = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(double(got[i]) - want[i]), lim = tol.atol + tol.rtol * std::fabs(want[i]);
    const bool both_nan = std::isnan(got[i]) && std::isnan(want[i]);  // untouched NaN cache slots
    const bool same_inf = std::isinf(want[i]) && double(got[i]) == want[i];  // masked logits
    if (!(err <= lim) && !both_nan && !same_inf) {
      ++bad;
      const double excess = std::isnan(err) ? 1e300 : err - lim;
      if (excess > worst_excess) worst_excess = excess, worst = i;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " elements differ; worst at " << worst
                     << ": got " << got[worst] << ", expected " << want[worst] << " (atol " << tol.atol << ", rtol "
                     << tol.rtol << ")";
}

class OpTable : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(OpTable, MatchesNaiveAndCpu) {
  const auto& [kind, op] = GetParam();
  std::string why;
  Backend* be = backend(kind, &why);
  if (!be) GTEST_SKIP() << kind << " backend not available: " << why;
  Backend* cpu = kind == "cpu" ? nullptr : backend("cpu", &why);
  const bool large_ok = std::getenv("PAGODA_OPTABLE_LARGE") != nullptr;
  // PAGODA_OPTABLE_MATCH=text: only the cases whose label holds it (a device script's focus).
  const char* match = std::getenv("PAGODA_OPTABLE_MATCH");
  const auto& naive = naive::formulas().at(op);
  int ran = 0;
  std::vector<std::string> skipped;
  for (const OpCase& c : cases()) {
    if (c.op != op || (match && *match && c.label.find(match) == std::string::npos)) continue;
    const std::string reason = c.unsupported ? c.unsupported(*be) : std::string();
    if (!reason.empty()) {
      skipped.push_back(c.label + ": " + reason);
      continue;
    }
    // Long contexts: too slow for the CPU under the sanitizers and for Vulkan on lavapipe in CI.
    if (c.large && (kind == "cpu" || kind == "vulkan") && !large_ok) {
      skipped.push_back(c.label + ": large (PAGODA_OPTABLE_LARGE=1 runs it)");
      continue;
    }
    SCOPED_TRACE(kind + " " + op + " " + c.label);
    const DType act = be->activation_dtype();
    const OpData in = c.make(act);
    const auto got = optable::run_case(*be, c, in);
    const naive::Outputs want = naive(in);
    for (const std::string& name : c.outputs) expect_close(got.at(name), want.at(name), c.tol(act, name), name + " vs naive");
    if (cpu) {
      const OpData cin = for_cpu(in);
      const auto ref = optable::run_case(*cpu, c, cin);
      for (const std::string& name : c.outputs) {
        const std::vector<double> r(ref.at(name).begin(), ref.at(name).end());
        // A bf16 output (a bf16 KV cache beside fp32 activations) was widened for the CPU, which
        // then keeps fp32 values: the device's are those rounded to bf16, half an ulp (2^-9
        // relative) away at most.
        Tol tol = c.tol(act, name);
        if (in.t.count(name) && in.t.at(name).dtype == DType::BF16) tol.rtol = std::max(tol.rtol, 1.0 / 256);
        expect_close(got.at(name), r, tol, name + " vs cpu");
      }
    }
    ++ran;
  }
  for (const std::string& s : skipped) std::printf("[  SKIPPED CASE ] %s %s %s\n", kind.c_str(), op.c_str(), s.c_str());
  if (ran == 0) GTEST_SKIP() << "no case of " << op << " runs on " << kind << " (" << skipped.size() << " skipped)";
}

INSTANTIATE_TEST_SUITE_P(Backends, OpTable,
                         ::testing::Combine(::testing::Values("cpu", "cuda", "cuda_fp32", "vulkan"),
                                            ::testing::ValuesIn(op_names())),
                         [](const auto& p) { return std::get<0>(p.param) + "_" + std::get<1>(p.param); });

TEST(OpTableCases, EveryOpHasCasesAndAFormula) {
  // backend.h's lists, not a copy of them: an op added there without cases fails here.
  std::set<std::string> want;
  for (Op op : all_ops()) want.insert(op_name(op));
  for (const std::string& fused : fused_op_names()) want.insert(fused);
  EXPECT_EQ(want.size(), all_ops().size() + fused_op_names().size()) << "a name appears twice";
  const std::vector<std::string> names = op_names();
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), want);
  for (const std::string& op : want) EXPECT_TRUE(naive::formulas().count(op)) << op;
  std::set<std::string> labels;
  for (const OpCase& c : cases()) EXPECT_TRUE(labels.insert(c.op + " " + c.label).second) << "duplicate " << c.label;
}

// The naive formulas must be able to fail: a wrong result is caught.
TEST(OpTableCases, ComparisonCatchesAWrongResult) {
  for (const OpCase& c : cases()) {
    if (c.op != "rms_norm") continue;
    const OpData in = c.make(DType::F32);
    auto want = naive::formulas().at(c.op)(in)["out"];
    std::vector<float> got(want.begin(), want.end());
    got[got.size() / 2] += 1e-3f;
    EXPECT_NONFATAL_FAILURE(expect_close(got, want, c.tol(DType::F32, "out"), "out"), "1 of");
    return;
  }
}

// The rope cases can tell a wrong pairing or a missing frequency scaling from the right one: the
// CPU's result disagrees with the naive formula of the other style, and of no scaling.
TEST(OpTableCases, RopeCasesCatchTheWrongStyleOrScaling) {
  std::string why;
  Backend* cpu = backend("cpu", &why);
  ASSERT_NE(cpu, nullptr) << why;
  for (const OpCase& c : cases()) {
    if (c.op != "rope") continue;
    SCOPED_TRACE(c.label);
    const OpData in = c.make(DType::F32);
    const auto got = optable::run_case(*cpu, c, in);
    OpData other_style = in;
    other_style.p["interleaved"] = in.param("interleaved") != 0 ? 0.0 : 1.0;
    EXPECT_NONFATAL_FAILURE(expect_close(got.at("x"), naive::formulas().at("rope")(other_style).at("x"),
                                         c.tol(DType::F32, "x"), "x"),
                            "elements differ");
    if (in.param("scaling") == 0) continue;
    OpData unscaled = in;
    unscaled.p["scaling"] = 0;
    unscaled.p["attention_factor"] = 1;
    EXPECT_NONFATAL_FAILURE(expect_close(got.at("x"), naive::formulas().at("rope")(unscaled).at("x"),
                                         c.tol(DType::F32, "x"), "x"),
                            "elements differ");
  }
}


// The vision cases can tell the wrong position row or attention across segments from the right
// ones: the CPU's result disagrees with the naive formula given every pair's axis moved to another
// row, and (cases of several non-empty segments) with all rows in one segment.
TEST(OpTableCases, VisionCasesCatchTheWrongAxisOrSegment) {
  std::string why;
  Backend* cpu = backend("cpu", &why);
  ASSERT_NE(cpu, nullptr) << why;
  int rope_checked = 0, segment_checked = 0;
  for (const OpCase& c : cases()) {
    if (c.op != "rope_axes" && c.op != "segment_attention") continue;
    SCOPED_TRACE(c.label);
    const OpData in = c.make(DType::F32);
    const auto got = optable::run_case(*cpu, c, in);
    OpData wrong = in;
    if (c.op == "rope_axes") {
      const auto rows = static_cast<int32_t>(in.at("positions").shape[0]);
      for (int32_t& a : wrong.t["axes"].i) a = (a + 1) % rows;
      const std::string out = c.outputs.at(0);
      EXPECT_NONFATAL_FAILURE(
          expect_close(got.at(out), naive::formulas().at(c.op)(wrong).at(out), c.tol(DType::F32, out), out),
          "elements differ");
      ++rope_checked;
      continue;
    }
    std::vector<int32_t>& cu = wrong.t["cu_seqlens"].i;
    int non_empty = 0;
    for (size_t s = 0; s + 1 < cu.size(); ++s) non_empty += cu[s + 1] > cu[s];
    if (non_empty < 2) continue;
    cu = {0, cu.back()};
    wrong.t["cu_seqlens"].shape = {2};
    EXPECT_NONFATAL_FAILURE(expect_close(got.at("out"), naive::formulas().at(c.op)(wrong).at("out"),
                                         c.tol(DType::F32, "out"), "out"),
                            "elements differ");
    ++segment_checked;
  }
  EXPECT_GT(rope_checked, 0);
  EXPECT_GT(segment_checked, 0);
}

}  // namespace
}  // namespace pagoda
