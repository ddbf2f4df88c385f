// The projection object (model/linear.h) against a product written out here: a projection fused
// from parts (whole tensors, row ranges of one fused checkpoint tensor, reordered rows), its biases,
// a column block of its input, and its column- and row-parallel shards — each rank's output, put
// together as Megatron's layout says, equals the whole projection's.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../io/io_test_util.h"
#include "backend/backend.h"
#include "io/safetensors.h"
#include "model/linear.h"
#include "model/weight_store.h"

namespace pagoda {
namespace {

using io_test::TempDir;

constexpr int64_t K = 8, T = 3;  // input width, tokens

struct Host {
  std::vector<float> v;
  std::vector<int64_t> shape;
};

Host random(std::mt19937& rng, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Host h{std::vector<float>(static_cast<size_t>(n)), std::move(shape)};
  for (float& x : h.v) x = u(rng);
  return h;
}

// A checkpoint of f32 tensors: q [6, K], k [4, K], v [4, K] with biases, qkv = q | k | v fused in one
// tensor (Phi-3's qkv_proj), o [K, 6] with a bias.
class LinearTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937 rng(3);
    t_["q.weight"] = random(rng, {6, K});
    t_["k.weight"] = random(rng, {4, K});
    t_["v.weight"] = random(rng, {4, K});
    t_["q.bias"] = random(rng, {6});
    t_["k.bias"] = random(rng, {4});
    t_["v.bias"] = random(rng, {4});
    t_["o.weight"] = random(rng, {K, 6});
    t_["o.bias"] = random(rng, {K});
    Host qkv{{}, {14, K}};
    for (const char* n : {"q.weight", "k.weight", "v.weight"}) qkv.v.insert(qkv.v.end(), t_[n].v.begin(), t_[n].v.end());
    t_["qkv.weight"] = qkv;
    std::vector<io_test::Tensor> tensors;
    for (const auto& [name, h] : t_) tensors.push_back({name, "F32", h.shape, io_test::bytes_of(h.v)});
    io_test::write_file(dir_.file("model.safetensors"), io_test::build(tensors));
    ckpt_ = std::make_unique<Checkpoint>(Checkpoint::open_dir(dir_.path()));
    be_ = make_backend("cpu", 1);
    ws_ = std::make_unique<WeightStore>(*be_, *ckpt_);
    x_ = random(rng, {T, K});
  }

  // y[t, n] = Σ_k x[t, k] · W[rows[n], col_begin + k] + bias[rows[n]], W = tensor `w`, in double.
  std::vector<double> reference(const std::string& w, const std::vector<int64_t>& rows, const std::string& bias,
                                int64_t col_begin, int64_t cols, const std::vector<float>& x) const {
    const Host& W = t_.at(w);
    const int64_t in = W.shape[1];
    std::vector<double> y;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t r : rows) {
        double s = bias.empty() ? 0.0 : t_.at(bias).v[static_cast<size_t>(r)];
        for (int64_t k = 0; k < cols; ++k)
          s += static_cast<double>(x[static_cast<size_t>(t * cols + k)]) * W.v[static_cast<size_t>(r * in + col_begin + k)];
        y.push_back(s);
      }
    return y;
  }

  // Runs `l` on x [T, cols] and returns out [T, N] row-major.
  std::vector<float> run(const Linear& l, std::vector<float> x, int64_t cols) {
    const Tensor xt(x.data(), DType::F32, Device::CPU, {T, cols});
    std::vector<float> out(static_cast<size_t>(T * l.out_features()));
    Tensor ot(out.data(), DType::F32, Device::CPU, {T, l.out_features()});
    l.forward(*be_, xt, ot);
    return out;
  }

  static std::vector<int64_t> iota(int64_t begin, int64_t end) {
    std::vector<int64_t> r;
    for (int64_t i = begin; i < end; ++i) r.push_back(i);
    return r;
  }

  static LinearSpec qkv_spec(bool fused) {
    LinearSpec s{.in_features = K, .dtype = DType::F32, .shard = ShardKind::Column};
    if (fused) {
      s.parts = {{.weight = "qkv.weight", .rows = 14, .begin = 0, .end = 6, .bias = "q.bias"},
                 {.weight = "qkv.weight", .rows = 14, .begin = 6, .end = 10, .bias = "k.bias"},
                 {.weight = "qkv.weight", .rows = 14, .begin = 10, .end = 14, .bias = "v.bias"}};
    } else {
      s.parts = {{.weight = "q.weight", .rows = 6, .bias = "q.bias"},
                 {.weight = "k.weight", .rows = 4, .bias = "k.bias"},
                 {.weight = "v.weight", .rows = 4, .bias = "v.bias"}};
    }
    return s;
  }

  std::map<std::string, Host> t_;
  TempDir dir_;
  std::unique_ptr<Checkpoint> ckpt_;
  std::unique_ptr<Backend> be_;
  std::unique_ptr<WeightStore> ws_;
  Host x_;
};

void expect_near(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << "element " << i;
}

TEST_F(LinearTest, FusedFromThreeTensorsOrFromOneFusedTensorWithBiases) {
  for (bool fused : {false, true}) {
    SCOPED_TRACE(fused ? "qkv.weight split into three parts" : "q, k, v as three tensors");
    const Linear l = Linear::load(*ws_, qkv_spec(fused));
    EXPECT_EQ(l.out_features(), 14);
    EXPECT_TRUE(l.has_bias());
    const std::vector<float> y = run(l, x_.v, K);
    std::vector<double> want;
    const auto q = reference("q.weight", iota(0, 6), "q.bias", 0, K, x_.v);
    const auto k = reference("k.weight", iota(0, 4), "k.bias", 0, K, x_.v);
    const auto v = reference("v.weight", iota(0, 4), "v.bias", 0, K, x_.v);
    for (int64_t t = 0; t < T; ++t) {
      want.insert(want.end(), q.begin() + t * 6, q.begin() + (t + 1) * 6);
      want.insert(want.end(), k.begin() + t * 4, k.begin() + (t + 1) * 4);
      want.insert(want.end(), v.begin() + t * 4, v.begin() + (t + 1) * 4);
    }
    expect_near(y, want);
  }
}

TEST_F(LinearTest, ReorderedRowsAndAColumnBlockOfTheInput) {
  // Rows 5, 0, 3 of q (a regrouping such as a gated q_proj's), over input columns [2, 6).
  const std::vector<int64_t> order = {5, 0, 3};
  const Linear l = Linear::load(*ws_, {.parts = {{.weight = "q.weight", .rows = 6, .order = order}},
                                       .in_features = K, .dtype = DType::F32, .col_begin = 2, .col_end = 6});
  EXPECT_EQ(l.in_features(), 4);
  std::vector<float> x(x_.v.begin(), x_.v.begin() + T * 4);
  expect_near(run(l, x, 4), reference("q.weight", order, "", 2, 4, x));
}

TEST_F(LinearTest, ColumnShardsTakeEachPartsShareOfRows) {
  for (bool fused : {false, true}) {
    SCOPED_TRACE(fused ? "fused tensor" : "three tensors");
    for (int32_t rank = 0; rank < 2; ++rank) {
      const Linear l = Linear::load(*ws_, qkv_spec(fused), ShardSpec{.rank = rank, .world = 2});
      EXPECT_EQ(l.shard(), ShardKind::Column);
      ASSERT_EQ(l.out_features(), 7);  // 3 of q, 2 of k, 2 of v
      const auto q = reference("q.weight", iota(3 * rank, 3 * rank + 3), "q.bias", 0, K, x_.v);
      const auto k = reference("k.weight", iota(2 * rank, 2 * rank + 2), "k.bias", 0, K, x_.v);
      const auto v = reference("v.weight", iota(2 * rank, 2 * rank + 2), "v.bias", 0, K, x_.v);
      std::vector<double> want;
      for (int64_t t = 0; t < T; ++t) {
        want.insert(want.end(), q.begin() + t * 3, q.begin() + (t + 1) * 3);
        want.insert(want.end(), k.begin() + t * 2, k.begin() + (t + 1) * 2);
        want.insert(want.end(), v.begin() + t * 2, v.begin() + (t + 1) * 2);
      }
      expect_near(run(l, x_.v, K), want);
    }
  }
}

// Sums nothing: the test adds the ranks' partial products itself.
struct LocalSum : Communicator {
  int rank() const override { return 0; }
  int world() const override { return 2; }
  void all_reduce_sum(Backend&, Tensor&) override { ++calls; }
  void all_gather_cols(Backend&, const Tensor&, Tensor&, Tensor&) override { ADD_FAILURE() << "a projection gathered"; }
  void abort(const std::string&) override {}
  int calls = 0;
};

TEST_F(LinearTest, RowShardsSumToTheWholeProductWithTheBiasOnce) {
  LocalSum comm;
  std::vector<double> sum(static_cast<size_t>(T * K), 0.0);
  std::mt19937 rng(9);
  const std::vector<float> xo = random(rng, {T, 6}).v;
  for (int32_t rank = 0; rank < 2; ++rank) {
    const Linear l = Linear::load(*ws_, {.parts = {{.weight = "o.weight", .rows = K, .bias = "o.bias"}},
                                         .in_features = 6, .dtype = DType::F32, .shard = ShardKind::Row},
                                  ShardSpec{.rank = rank, .world = 2, .comm = &comm});
    ASSERT_EQ(l.in_features(), 3);
    EXPECT_EQ(l.has_bias(), rank == 0);
    std::vector<float> xr;
    for (int64_t t = 0; t < T; ++t)
      xr.insert(xr.end(), xo.begin() + t * 6 + 3 * rank, xo.begin() + t * 6 + 3 * rank + 3);
    const std::vector<float> y = run(l, xr, 3);
    for (size_t i = 0; i < y.size(); ++i) sum[i] += y[i];
  }
  EXPECT_EQ(comm.calls, 2) << "each rank's forward sums through the communicator";
  const std::vector<double> want = reference("o.weight", iota(0, K), "o.bias", 0, 6, xo);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(sum[i], want[i], 1e-5);
}

TEST_F(LinearTest, ShardsThatDoNotDivideAndRowShardsWithoutACommunicatorAreRefused) {
  const std::string uneven = io_test::error_of([&] { Linear::load(*ws_, qkv_spec(false), ShardSpec{.rank = 0, .world = 4}); });
  EXPECT_TRUE(io_test::contains(uneven, "q.weight (6) does not split evenly over 4"));
  const std::string no_comm = io_test::error_of([&] {
    Linear::load(*ws_, {.parts = {{.weight = "o.weight", .rows = K}}, .in_features = 6, .dtype = DType::F32,
                        .shard = ShardKind::Row},
                 ShardSpec{.rank = 1, .world = 2});
  });
  EXPECT_TRUE(io_test::contains(no_comm, "needs the group's communicator"));
  const std::string missing = io_test::error_of([&] {
    Linear::load(*ws_, {.parts = {{.weight = "nope.weight", .rows = 2}}, .in_features = K, .dtype = DType::F32});
  });
  EXPECT_TRUE(io_test::contains(missing, "missing tensor 'nope.weight'"));
}

}  // namespace
}  // namespace pagoda
