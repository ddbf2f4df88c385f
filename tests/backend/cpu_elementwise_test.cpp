// silu_mul, sigmoid_gate, gather_rows, embedding and reshape_and_cache against their formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "backend/backend.h"
#include "core/error.h"
#include "cpu_test_util.h"

namespace pagoda {
namespace {

using cpu_test::Blob;

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST(CpuElementwise, SiluMulOfFusedGateUp) {
  auto be = make_backend("cpu", 2);
  std::mt19937 rng(1);
  const int64_t T = 6, I = 37, ld_in = 2 * I + 4, ld_out = I + 2;
  Blob gu(DType::F32, T * ld_in), out(DType::F32, T * ld_out);
  const auto v = cpu_test::random_vector(rng, T * ld_in, -6, 6);
  for (int64_t i = 0; i < T * ld_in; ++i) gu.set(i, v[static_cast<size_t>(i)]);
  out.fill(3.0f);
  Tensor ot = out.strided({T, I}, ld_out);
  be->silu_mul(gu.strided({T, 2 * I}, ld_in), ot);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < I; ++i) {
      const double g = gu.get(t * ld_in + i), u = gu.get(t * ld_in + I + i);
      ASSERT_NEAR(out.get(t * ld_out + i), g * sigmoid(g) * u, 1e-5 * (1 + std::abs(g * u)));
    }
    EXPECT_EQ(out.get(t * ld_out + I), 3.0f);
  }
}

TEST(CpuElementwise, SigmoidGateInPlace) {
  auto be = make_backend("cpu", 2);
  std::mt19937 rng(2);
  const int64_t T = 5, n = 48, ld_gate = 96;
  Blob a(DType::F32, T * n), gate(DType::F32, T * ld_gate);
  const auto av = cpu_test::random_vector(rng, T * n),
             gv = cpu_test::random_vector(rng, T * ld_gate, -8, 8);
  for (int64_t i = 0; i < T * n; ++i) a.set(i, av[static_cast<size_t>(i)]);
  for (int64_t i = 0; i < T * ld_gate; ++i) gate.set(i, gv[static_cast<size_t>(i)]);
  Tensor at = a.tensor({T, n});
  be->sigmoid_gate(at, gate.strided({T, n}, ld_gate), at);  // out aliases a
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < n; ++i)
      ASSERT_NEAR(
          a.get(t * n + i),
          av[static_cast<size_t>(t * n + i)] * sigmoid(gv[static_cast<size_t>(t * ld_gate + i)]),
          1e-6);
}

TEST(CpuElementwise, GatherRows) {
  auto be = make_backend("cpu", 2);
  for (DType t : {DType::F32, DType::BF16}) {
    const int64_t R = 10, W = 33;
    Blob x(t, R * W), out(t, 4 * W);
    for (int64_t i = 0; i < R * W; ++i) x.set(i, static_cast<float>(i));
    std::vector<int32_t> rows{9, 0, 3, 3};
    Tensor ot = out.tensor({4, W});
    be->gather_rows(x.tensor({R, W}), cpu_test::i32_tensor(rows), ot);
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < W; ++j)
        ASSERT_EQ(out.get(i * W + j), x.get(rows[static_cast<size_t>(i)] * W + j));
    std::vector<int32_t> bad{10};
    Tensor o1 = out.tensor({1, W});
    EXPECT_THROW(be->gather_rows(x.tensor({R, W}), cpu_test::i32_tensor(bad), o1), Error);
  }
}

TEST(CpuElementwise, EmbeddingFromEveryTableType) {
  auto be = make_backend("cpu", 2);
  std::mt19937 rng(3);
  for (DType t : {DType::F32, DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(t));
    const int64_t V = 50, H = 24, ld = 30;
    Blob table(t, V * H), out(DType::F32, 5 * ld);
    const auto tv = cpu_test::random_vector(rng, V * H);
    for (int64_t i = 0; i < V * H; ++i) table.set(i, tv[static_cast<size_t>(i)]);
    std::vector<int32_t> ids{0, 49, 7, 7, 23};
    Tensor ot = out.strided({5, H}, ld);
    be->embedding(table.tensor({V, H}), cpu_test::i32_tensor(ids), ot);
    for (int64_t r = 0; r < 5; ++r)
      for (int64_t j = 0; j < H; ++j)
        ASSERT_EQ(out.get(r * ld + j), table.get(ids[static_cast<size_t>(r)] * H + j));
    std::vector<int32_t> bad{50};
    Tensor o1 = out.tensor({1, H});
    EXPECT_THROW(be->embedding(table.tensor({V, H}), cpu_test::i32_tensor(bad), o1), Error);
  }
}

TEST(CpuCache, ReshapeAndCacheConvertsAndSkipsMinusOne) {
  auto be = make_backend("cpu", 2);
  std::mt19937 rng(4);
  for (DType ct : {DType::F32, DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(ct));
    const int64_t T = 6, Hkv = 2, D = 16, row = Hkv * D, nb = 3, bs = 4, ld = 3 * row;
    Blob kv(DType::F32, T * ld), kc(ct, nb * bs * row), vc(ct, nb * bs * row);
    const auto vals = cpu_test::random_vector(rng, T * ld);
    for (int64_t i = 0; i < T * ld; ++i) kv.set(i, vals[static_cast<size_t>(i)]);
    kc.fill(-9.0f);
    vc.fill(-9.0f);
    std::vector<int32_t> slots{5, -1, 0, 11, -1, 6};
    Tensor kct = kc.tensor({nb, bs, Hkv, D}), vct = vc.tensor({nb, bs, Hkv, D});
    be->reshape_and_cache(kv.strided({T, Hkv, D}, ld, 0), kv.strided({T, Hkv, D}, ld, row),
                          cpu_test::i32_tensor(slots), kct, vct);
    std::vector<bool> written(static_cast<size_t>(nb * bs), false);
    for (int64_t t = 0; t < T; ++t) {
      const int32_t s = slots[static_cast<size_t>(t)];
      if (s < 0) continue;
      written[static_cast<size_t>(s)] = true;
      for (int64_t e = 0; e < row; ++e) {
        ASSERT_EQ(kc.get(s * row + e),
                  cpu_test::round_to(ct, vals[static_cast<size_t>(t * ld + e)]));
        ASSERT_EQ(vc.get(s * row + e),
                  cpu_test::round_to(ct, vals[static_cast<size_t>(t * ld + row + e)]));
      }
    }
    for (int64_t s = 0; s < nb * bs; ++s)
      if (!written[static_cast<size_t>(s)])
        for (int64_t e = 0; e < row; ++e) {
          ASSERT_EQ(kc.get(s * row + e), -9.0f);
          ASSERT_EQ(vc.get(s * row + e), -9.0f);
        }
    std::vector<int32_t> beyond{static_cast<int32_t>(nb * bs), 0, 0, 0, 0, 0};
    EXPECT_THROW(
        be->reshape_and_cache(kv.strided({T, Hkv, D}, ld, 0), kv.strided({T, Hkv, D}, ld, row),
                              cpu_test::i32_tensor(beyond), kct, vct),
        Error);
  }
}

}  // namespace
}  // namespace pagoda
