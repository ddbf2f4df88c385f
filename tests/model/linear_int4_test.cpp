// 4-bit projections (model/linear_int4.h) against a product written out here from the formats'
// definitions. One logical matrix of 4-bit values, zero points and scales is packed as each
// format's writer packs it (int4_pack.h: AutoAWQ's GEMM layout, GPTQ, compressed-tensors
// pack-quantized) and loaded: the product equals Σ x · (q − z) · scale. Also
// fused parts with a row range, a column range of whole groups, per-channel scales, and the
// checkpoints that must be refused naming the tensor: a scale missing, misshaped or not finite, a
// GPTQ act-order g_idx, a column range that splits a group.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../io/io_test_util.h"
#include "int4_pack.h"
#include "backend/backend.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "model/linear.h"
#include "model/weight_store.h"

namespace pagoda {
namespace {

using io_test::TempDir;
using int4_test::Int4Matrix;
using int4_test::Layout;
using int4_test::pack;

constexpr int64_t K = 128, T = 3;

Int4Matrix make(std::mt19937& rng, int64_t rows, int64_t group, bool symmetric) {
  Int4Matrix m{rows, K, group, {}, {}, {}};
  for (int64_t i = 0; i < rows * K; ++i) m.q.push_back(static_cast<int>(rng() % 16));
  for (int64_t i = 0; i < rows * m.groups(); ++i) {
    m.z.push_back(symmetric ? 8 : static_cast<int>(rng() % 16));
    m.scale.push_back(std::ldexp(static_cast<float>(1 + rng() % 127), -12));
  }
  return m;
}

class LinearInt4Test : public ::testing::Test {
 protected:
  void SetUp() override {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::mt19937 rng(9);
    x_.resize(static_cast<size_t>(T * K));
    for (float& v : x_) v = u(rng);
  }

  // A checkpoint of `layout` with group `group` (0: per channel) holding q (48 rows) and k (16).
  void open(Layout layout, int64_t group, const std::function<void(std::vector<io_test::Tensor>&)>& edit = {},
            bool act_order = false) {
    std::mt19937 rng(static_cast<uint32_t>(static_cast<int>(layout) * 100 + group));
    const bool sym = layout == Layout::PackQuantized;
    m_["q"] = make(rng, 48, group > 0 ? group : K, sym);
    m_["k"] = make(rng, 16, group > 0 ? group : K, sym);
    std::vector<io_test::Tensor> tensors;
    for (const auto& [stem, m] : m_)
      for (auto& t : pack(stem, m, layout, act_order)) tensors.push_back(std::move(t));
    if (edit) edit(tensors);
    ws_.reset();  // its buffers belong to the backend replaced below
    ckpt_.reset();
    io_test::write_file(dir_.file("model.safetensors"), io_test::build(tensors));
    ckpt_ = std::make_unique<Checkpoint>(Checkpoint::open_dir(dir_.path()));
    be_ = make_backend("cpu", 1);
    WeightQuantization q;
    q.method = WeightQuantization::Method::Int4;
    q.int4_layout = layout;
    q.group_size = group;
    q.source = "test";
    ws_ = std::make_unique<WeightStore>(*be_, *ckpt_, q);
  }

  std::vector<float> run(const Linear& l, int64_t col_begin) {
    const int64_t cols = l.in_features();
    std::vector<float> x;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < cols; ++c) x.push_back(x_[static_cast<size_t>(t * K + col_begin + c)]);
    const Tensor xt(x.data(), DType::F32, Device::CPU, {T, cols});
    std::vector<float> out(static_cast<size_t>(T * l.out_features()));
    Tensor ot(out.data(), DType::F32, Device::CPU, {T, l.out_features()});
    l.forward(*be_, xt, ot);
    return out;
  }

  // y[t, :] = the listed (matrix, row) pairs' dequantized rows · x[t, cols), in double.
  std::vector<double> reference(const std::vector<std::pair<std::string, int64_t>>& rows, int64_t col_begin,
                                int64_t col_end) const {
    std::vector<double> y;
    for (int64_t t = 0; t < T; ++t)
      for (const auto& [name, r] : rows) {
        double s = 0;
        for (int64_t c = col_begin; c < col_end; ++c)
          s += static_cast<double>(x_[static_cast<size_t>(t * K + c)]) * m_.at(name).at(r, c);
        y.push_back(s);
      }
    return y;
  }

  static std::vector<std::pair<std::string, int64_t>> rows_of(const std::string& name, int64_t begin, int64_t end) {
    std::vector<std::pair<std::string, int64_t>> r;
    for (int64_t i = begin; i < end; ++i) r.emplace_back(name, i);
    return r;
  }

  static void expect_near(const std::vector<float>& got, const std::vector<double>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << i;
  }

  std::string load_error(const std::string& weight, int64_t rows) {
    try {
      Linear::load(*ws_, {.parts = {{.weight = weight, .rows = rows}}, .in_features = K});
    } catch (const Error& e) {
      return e.what();
    }
    return "(loaded)";
  }

  std::map<std::string, Int4Matrix> m_;
  std::vector<float> x_;
  TempDir dir_;
  std::unique_ptr<Checkpoint> ckpt_;
  std::unique_ptr<Backend> be_;
  std::unique_ptr<WeightStore> ws_;
};

TEST_F(LinearInt4Test, EachLayoutMultipliesAsItsDefinitionSays) {
  for (Layout layout : {Layout::Awq, Layout::Gptq, Layout::PackQuantized})
    for (int64_t group : {int64_t{32}, int64_t{16}, int64_t{0}}) {
      SCOPED_TRACE("layout " + std::to_string(static_cast<int>(layout)) + " group " + std::to_string(group));
      open(layout, group);
      const Linear l = Linear::load(*ws_, {.parts = {{.weight = "q.weight", .rows = 48}}, .in_features = K});
      EXPECT_EQ(l.format(), WeightFormat::Int4);
      EXPECT_EQ(l.out_features(), 48);
      EXPECT_EQ(l.in_features(), K);
      expect_near(run(l, 0), reference(rows_of("q", 0, 48), 0, K));
    }
}

TEST_F(LinearInt4Test, FusedPartsRowRangesAndWholeGroupColumns) {
  for (Layout layout : {Layout::Awq, Layout::Gptq}) {
    open(layout, 32);
    {
      SCOPED_TRACE("k | rows [8, 40) of q");
      const Linear l = Linear::load(*ws_, {.parts = {{.weight = "k.weight", .rows = 16},
                                                     {.weight = "q.weight", .rows = 48, .begin = 8, .end = 40}},
                                           .in_features = K});
      auto want = rows_of("k", 0, 16);
      for (auto& r : rows_of("q", 8, 40)) want.push_back(r);
      expect_near(run(l, 0), reference(want, 0, K));
    }
    {
      SCOPED_TRACE("input columns [64, 128): two of the four groups");
      const Linear l = Linear::load(*ws_, {.parts = {{.weight = "q.weight", .rows = 48}}, .in_features = K,
                                           .col_begin = 64, .col_end = 128});
      EXPECT_EQ(l.in_features(), 64);
      expect_near(run(l, 64), reference(rows_of("q", 0, 48), 64, 128));
    }
    EXPECT_THROW(Linear::load(*ws_, {.parts = {{.weight = "q.weight", .rows = 48}}, .in_features = K, .col_begin = 16}),
                 Error)
        << "a column range that splits a group";
  }
}

TEST_F(LinearInt4Test, MissingMisshapedOrNonFiniteScalesAndActOrderAreRefusedNamingTheTensor) {
  auto drop = [](const std::string& name) {
    return [name](std::vector<io_test::Tensor>& ts) {
      std::erase_if(ts, [&](const io_test::Tensor& t) { return t.name == name; });
    };
  };
  {
    open(Layout::Awq, 32, drop("q.scales"));
    const std::string m = load_error("q.weight", 48);
    EXPECT_NE(m.find("'q.weight' has no 'q.scales'"), std::string::npos) << m;
  }
  {
    open(Layout::Gptq, 32, [](std::vector<io_test::Tensor>& ts) {
      for (auto& t : ts)
        if (t.name == "q.qzeros") {
          t.shape = {2, 12};
          t.data = io_test::bytes_of(std::vector<int32_t>(24, 0));
        }
    });
    const std::string m = load_error("q.weight", 48);
    EXPECT_NE(m.find("'q.qzeros' has shape [2, 12]"), std::string::npos) << m;
    EXPECT_NE(m.find("needs [4, 6]"), std::string::npos) << m;
  }
  {
    open(Layout::Gptq, 32, [](std::vector<io_test::Tensor>& ts) {
      for (auto& t : ts)
        if (t.name == "k.scales") {
          std::vector<float> v(4 * 16, 1e-3f);
          v[7] = INFINITY;
          t.data = io_test::bytes_of(v);
        }
    });
    const std::string m = load_error("k.weight", 16);
    EXPECT_NE(m.find("'k.scales' holds a non-finite value"), std::string::npos) << m;
  }
  {
    open(Layout::Gptq, 32, {}, /*act_order=*/true);
    const std::string m = load_error("q.weight", 48);
    EXPECT_NE(m.find("'q.g_idx' reorders the columns' groups"), std::string::npos) << m;
    EXPECT_NE(m.find("desc_act: false"), std::string::npos) << m;
  }
  {
    open(Layout::PackQuantized, 32, drop("q.weight_packed"));
    const std::string m = load_error("q.weight", 48);
    EXPECT_NE(m.find("projection 'q.weight' is in the checkpoint neither dense nor packed"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace pagoda
