// argmax_rows: the Sampler's greedy rule (largest value, lowest index on ties, NaN never wins) on
// strided rows.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "backend/backend.h"
#include "cpu_test_util.h"
#include "engine/sampler.h"

namespace pagoda {
namespace {

using cpu_test::Blob;

TEST(CpuArgmaxRows, MatchesSamplerArgmaxWithTiesNanAndStride) {
  auto be = make_backend("cpu", 2);
  std::mt19937 rng(7);
  const int64_t R = 9, V = 1001, ld = V + 3;
  Blob logits(DType::F32, R * ld);
  std::uniform_real_distribution<float> u(-5, 5);
  for (int64_t i = 0; i < R * ld; ++i) logits.set(i, u(rng));
  const float inf = std::numeric_limits<float>::infinity();
  // Row 1: a tie of the maximum at 10 and 700 (lowest wins). Row 2: NaN before the maximum.
  logits.set(1 * ld + 10, 9.0f);
  logits.set(1 * ld + 700, 9.0f);
  logits.set(2 * ld + 0, std::nanf(""));
  logits.set(2 * ld + 500, 8.0f);
  // Row 3: everything -inf (index 0). Row 4: the maximum in the last column.
  for (int64_t j = 0; j < V; ++j) logits.set(3 * ld + j, -inf);
  logits.set(4 * ld + V - 1, 100.0f);
  Blob out(DType::I32, R);
  Tensor ot = out.tensor({R});
  be->argmax_rows(logits.strided({R, V}, ld), ot);
  const auto* got = static_cast<const int32_t*>(out.data());
  for (int64_t r = 0; r < R; ++r) {
    std::vector<float> row(static_cast<size_t>(V));
    for (int64_t j = 0; j < V; ++j) row[static_cast<size_t>(j)] = logits.get(r * ld + j);
    if (r == 2) row[0] = -inf;  // the Sampler never sees NaN; argmax_rows skips it
    EXPECT_EQ(got[r], argmax(row)) << "row " << r;
  }
  EXPECT_EQ(got[1], 10);
  EXPECT_EQ(got[2], 500);
  EXPECT_EQ(got[3], 0);
  EXPECT_EQ(got[4], V - 1);
}

}  // namespace
}  // namespace pagoda
