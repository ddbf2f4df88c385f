// FP8 projections (model/linear_fp8.h) against a product written out here from the formats'
// definitions: Qwen/DeepSeek block scales (`weight_scale_inv`, 16x32 blocks here, partial last
// blocks), compressed-tensors per-channel and per-tensor scales (`weight_scale`), parts fused into
// one projection (aligned blocks, or mixed kinds → a scale per row), a row range of a fused tensor,
// a column block, online quantization of an f32 tensor (--quantization fp8), and the checkpoints
// that must be refused naming the tensor: a scale missing, misshaped or not finite.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../io/io_test_util.h"
#include "backend/backend.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "model/linear.h"
#include "model/weight_store.h"

namespace pagoda {
namespace {

using io_test::TempDir;

constexpr int64_t K = 64, T = 3, BN = 16, BK = 32;

// e4m3fn by its definition (not pagoda's decoder): (-1)^s 2^(e-7) (1 + m/8), subnormal 2^-6 m/8.
double e4m3(uint8_t b) {
  const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -mag : mag;
}

struct Fp8Tensor {
  std::vector<uint8_t> q;  // [rows, cols]
  int64_t rows = 0, cols = 0;
  std::vector<float> scale;
  std::vector<int64_t> scale_shape;
  // The dequantized value of element (r, c) under the tensor's scale layout.
  double at(int64_t r, int64_t c) const {
    double s = scale[0];
    if (scale_shape.size() == 2 && scale_shape[1] == 1 && scale_shape[0] == rows) s = scale[static_cast<size_t>(r)];
    else if (scale_shape.size() == 2) s = scale[static_cast<size_t>((r / BN) * scale_shape[1] + c / BK)];
    return e4m3(q[static_cast<size_t>(r * cols + c)]) * s;
  }
};

enum class Layout { Block, Channel, Tensor };

Fp8Tensor make(std::mt19937& rng, int64_t rows, int64_t cols, Layout layout) {
  Fp8Tensor t{{}, rows, cols, {}, {}};
  for (int64_t i = 0; i < rows * cols; ++i) {
    uint8_t b = static_cast<uint8_t>(rng() & 0xff);
    if ((b & 0x7f) == 0x7f) b &= 0xf7;  // no NaN codes
    t.q.push_back(b);
  }
  if (layout == Layout::Block) t.scale_shape = {(rows + BN - 1) / BN, (cols + BK - 1) / BK};
  else if (layout == Layout::Channel) t.scale_shape = {rows, 1};
  else t.scale_shape = {};
  int64_t n = 1;
  for (int64_t d : t.scale_shape) n *= d;
  std::uniform_real_distribution<float> u(1e-3f, 4e-3f);
  for (int64_t i = 0; i < n; ++i) t.scale.push_back(u(rng));
  return t;
}

class LinearFp8Test : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937 rng(5);
    t_["q.weight"] = make(rng, 48, K, Layout::Block);    // three whole row blocks
    t_["k.weight"] = make(rng, 20, K, Layout::Block);    // a partial last row block
    t_["v.weight"] = make(rng, 16, K, Layout::Channel);  // compressed-tensors, per channel
    t_["o.weight"] = make(rng, 24, K, Layout::Tensor);   // per tensor
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    dense_.resize(static_cast<size_t>(12 * K));
    for (float& v : dense_) v = u(rng);
    x_.resize(static_cast<size_t>(T * K));
    for (float& v : x_) v = u(rng);
  }

  // Writes the checkpoint; `edit` may change a scale tensor first (bad-input cases).
  void open(const WeightQuantization& q, const std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>>&
                                             scale_edits = {},
            const std::vector<std::string>& drop = {}) {
    std::vector<io_test::Tensor> tensors;
    for (const auto& [name, t] : t_) {
      tensors.push_back({name, "F8_E4M3", {t.rows, t.cols}, std::string(t.q.begin(), t.q.end())});
      const std::string sname = name + (t.scale_shape.size() == 2 && t.scale_shape[1] != 1 ? "_scale_inv" : "_scale");
      auto shape = t.scale_shape;
      auto values = t.scale;
      if (auto it = scale_edits.find(sname); it != scale_edits.end()) std::tie(shape, values) = it->second;
      if (std::find(drop.begin(), drop.end(), sname) == drop.end())
        tensors.push_back({sname, "F32", shape, io_test::bytes_of(values)});
    }
    tensors.push_back({"dense.weight", "F32", {12, K}, io_test::bytes_of(dense_)});
    io_test::write_file(dir_.file("model.safetensors"), io_test::build(tensors));
    ckpt_ = std::make_unique<Checkpoint>(Checkpoint::open_dir(dir_.path()));
    be_ = make_backend("cpu", 1);
    ws_ = std::make_unique<WeightStore>(*be_, *ckpt_, q);
  }

  static WeightQuantization blocks() {
    WeightQuantization q;
    q.method = WeightQuantization::Method::Fp8;
    q.block_n = BN;
    q.block_k = BK;
    return q;
  }

  std::vector<float> run(const Linear& l, int64_t cols) {
    std::vector<float> x(x_.begin(), x_.begin() + T * cols);
    const Tensor xt(x.data(), DType::F32, Device::CPU, {T, cols});
    std::vector<float> out(static_cast<size_t>(T * l.out_features()));
    Tensor ot(out.data(), DType::F32, Device::CPU, {T, l.out_features()});
    l.forward(*be_, xt, ot);
    return out;
  }

  // y[t, :] = the listed (tensor, row) pairs' dequantized rows · x[t, col_begin ..), in double.
  std::vector<double> reference(const std::vector<std::pair<std::string, int64_t>>& rows, int64_t col_begin,
                                int64_t cols) const {
    std::vector<double> y;
    for (int64_t t = 0; t < T; ++t)
      for (const auto& [name, r] : rows) {
        double s = 0;
        for (int64_t c = 0; c < cols; ++c)
          s += static_cast<double>(x_[static_cast<size_t>(t * cols + c)]) * t_.at(name).at(r, col_begin + c);
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
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4 * (1 + std::fabs(want[i]))) << i;
  }

  std::map<std::string, Fp8Tensor> t_;
  std::vector<float> dense_, x_;
  TempDir dir_;
  std::unique_ptr<Checkpoint> ckpt_;
  std::unique_ptr<Backend> be_;
  std::unique_ptr<WeightStore> ws_;
};

TEST_F(LinearFp8Test, EachScaleLayoutMultipliesAsItsDefinitionSays) {
  open(blocks());
  for (const auto& [name, rows] : {std::pair{"q.weight", 48}, std::pair{"k.weight", 20}, std::pair{"v.weight", 16},
                                   std::pair{"o.weight", 24}}) {
    SCOPED_TRACE(name);
    const Linear l = Linear::load(*ws_, {.parts = {{.weight = name, .rows = rows}}, .in_features = K});
    EXPECT_EQ(l.format(), WeightFormat::Fp8);
    EXPECT_EQ(l.out_features(), rows);
    expect_near(run(l, K), reference(rows_of(name, 0, rows), 0, K));
  }
}

TEST_F(LinearFp8Test, FusedPartsRowRangesAndAColumnBlock) {
  open(blocks());
  {
    SCOPED_TRACE("q | k: whole blocks, then a partial one at the end: the checkpoint's blocks");
    const Linear l = Linear::load(*ws_, {.parts = {{.weight = "q.weight", .rows = 48}, {.weight = "k.weight", .rows = 20}},
                                         .in_features = K});
    EXPECT_EQ(l.scale().size(0), 3 + 2);
    auto want = rows_of("q.weight", 0, 48);
    for (auto& r : rows_of("k.weight", 0, 20)) want.push_back(r);
    expect_near(run(l, K), reference(want, 0, K));
  }
  {
    SCOPED_TRACE("k | q | v: a partial block mid-way and a per-channel part: one scale row per output row");
    const Linear l = Linear::load(*ws_, {.parts = {{.weight = "k.weight", .rows = 20}, {.weight = "q.weight", .rows = 48},
                                                   {.weight = "v.weight", .rows = 16}},
                                         .in_features = K});
    EXPECT_EQ(l.scale().size(0), 20 + 48 + 16);
    auto want = rows_of("k.weight", 0, 20);
    for (auto& r : rows_of("q.weight", 0, 48)) want.push_back(r);
    for (auto& r : rows_of("v.weight", 0, 16)) want.push_back(r);
    expect_near(run(l, K), reference(want, 0, K));
  }
  {
    SCOPED_TRACE("rows [16, 40) of q (not whole blocks at the end) over input columns [32, 64)");
    const Linear l = Linear::load(*ws_, {.parts = {{.weight = "q.weight", .rows = 48, .begin = 16, .end = 40}},
                                         .in_features = K, .col_begin = 32, .col_end = 64});
    EXPECT_EQ(l.in_features(), 32);
    expect_near(run(l, 32), reference(rows_of("q.weight", 16, 40), 32, 32));
  }
  EXPECT_THROW(Linear::load(*ws_, {.parts = {{.weight = "q.weight", .rows = 48}}, .in_features = K, .col_begin = 16}),
               Error)
      << "a column block that splits a scale block";
}

TEST_F(LinearFp8Test, MissingMisshapedOrNonFiniteScalesAreRefusedNamingTheTensor) {
  auto message = [&](const std::string& weight, int64_t rows) {
    try {
      Linear::load(*ws_, {.parts = {{.weight = weight, .rows = rows}}, .in_features = K});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(loaded)");
  };
  {
    open(blocks(), {}, {"q.weight_scale_inv"});
    const std::string m = message("q.weight", 48);
    EXPECT_NE(m.find("'q.weight' has no scale tensor"), std::string::npos) << m;
  }
  {
    open(blocks(), {{"q.weight_scale_inv", {{3, 3}, std::vector<float>(9, 1e-3f)}}});
    const std::string m = message("q.weight", 48);
    EXPECT_NE(m.find("'q.weight_scale_inv' has shape [3, 3]"), std::string::npos) << m;
    EXPECT_NE(m.find("needs [3, 2]"), std::string::npos) << m;
  }
  {
    std::vector<float> bad = t_["v.weight"].scale;
    bad[5] = NAN;
    open(blocks(), {{"v.weight_scale", {{16, 1}, bad}}});
    const std::string m = message("v.weight", 16);
    EXPECT_NE(m.find("'v.weight_scale' holds a non-finite value"), std::string::npos) << m;
  }
  {
    open(WeightQuantization{.method = WeightQuantization::Method::Fp8});  // no weight_block_size
    const std::string m = message("q.weight", 48);
    EXPECT_NE(m.find("'q.weight_scale_inv' has shape [3, 2]"), std::string::npos) << m;
    EXPECT_NE(m.find("no weight_block_size"), std::string::npos) << m;
  }
}

TEST_F(LinearFp8Test, OnlineQuantizationHasOneScalePerRowAndRoundsToTheNearestCode) {
  WeightQuantization q;
  apply_quantization_flag("fp8", q);
  open(q);
  const Linear l = Linear::load(*ws_, {.parts = {{.weight = "dense.weight", .rows = 12}}, .in_features = K});
  ASSERT_EQ(l.format(), WeightFormat::Fp8);
  ASSERT_EQ(l.scale().size(0), 12);
  ASSERT_EQ(l.scale().size(1), 1);
  const auto* codes = l.weight().ptr<const uint8_t>();
  const auto* scales = l.scale().ptr<const float>();
  std::vector<double> want;
  for (int64_t r = 0; r < 12; ++r) {
    double amax = 0;
    for (int64_t c = 0; c < K; ++c) amax = std::max(amax, std::fabs(double(dense_[static_cast<size_t>(r * K + c)])));
    EXPECT_NEAR(scales[r], amax / 448.0, 1e-7 * amax) << "row " << r;
    for (int64_t c = 0; c < K; ++c) {
      // The code is the nearest to w / scale: no other code is closer.
      const double v = dense_[static_cast<size_t>(r * K + c)] / double(scales[r]);
      const double got = std::fabs(e4m3(codes[r * K + c]) - v);
      for (int m = 0; m < 0x7f; ++m)
        ASSERT_LE(got, std::fabs(e4m3(static_cast<uint8_t>((v < 0 ? 0x80 : 0) | m)) - v) + 1e-12)
            << "row " << r << " col " << c;
    }
  }
  // And the product is the quantized matrix's (within fp32 rounding) and near the dense one.
  const std::vector<float> y = run(l, K);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t r = 0; r < 12; ++r) {
      double s = 0, dense = 0;
      for (int64_t c = 0; c < K; ++c) {
        s += x_[static_cast<size_t>(t * K + c)] * e4m3(codes[r * K + c]) * scales[r];
        dense += x_[static_cast<size_t>(t * K + c)] * dense_[static_cast<size_t>(r * K + c)];
      }
      EXPECT_NEAR(y[static_cast<size_t>(t * 12 + r)], s, 1e-4);
      EXPECT_NEAR(y[static_cast<size_t>(t * 12 + r)], dense, 0.25);  // e4m3 keeps ~2 significant digits
    }
  // lm_head is left dense, as vLLM leaves it.
  EXPECT_TRUE(q.keeps_dense("lm_head.weight"));
  EXPECT_FALSE(q.keeps_dense("model.layers.0.mlp.down_proj.weight"));
}

}  // namespace
}  // namespace pagoda
