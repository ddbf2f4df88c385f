// argmax_rows on CUDA against the CPU twin (ties, NaN, -inf rows, strided rows, the 151,936-entry
// vocabulary of Qwen3), and graph capture and replay: the recorded ops see the inputs as they are
// at each replay.
#include <cmath>
#include <limits>

#include "gpu_test_util.h"

namespace pagoda::test {
namespace {

std::vector<int32_t> argmax_on(Backend& b, const std::vector<float>& host, int64_t rows, int64_t vocab, int64_t ld) {
  auto d = upload(b, host, DType::F32, {rows * ld});
  Tensor logits(d.t.data, DType::F32, b.device(), {rows, vocab});
  logits.row_stride = ld;
  auto out = upload_i32(b, std::vector<int32_t>(size_t(rows), -7), {rows});
  b.argmax_rows(logits, out.t);
  std::vector<int32_t> got(static_cast<size_t>(rows));
  b.copy_to_host(got.data(), out.t.data, got.size() * 4);
  return got;
}

TEST(CudaSampling, ArgmaxRowsMatchesCpu) {
  Backends be;
  std::mt19937 rng(21);
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t vocab : {1, 7, 1000, 4099, 151936}) {
    for (int64_t pad : {0, 1, 4}) {
      const int64_t rows = 37, ld = vocab + pad;
      auto host = random_vec(rng, size_t(rows * ld), -10.0f, 10.0f, DType::F32);
      if (vocab > 10) {
        host[size_t(1 * ld + 3)] = 50.0f;  // a tie: the lower index wins
        host[size_t(1 * ld + vocab - 2)] = 50.0f;
        host[size_t(2 * ld + 0)] = std::nanf("");
        for (int64_t j = 0; j < vocab; ++j) host[size_t(3 * ld + j)] = -inf;
        host[size_t(4 * ld + vocab - 1)] = 60.0f;
        // Random bf16-like values: many exact ties of the maximum.
        for (int64_t j = 0; j < vocab; ++j) host[size_t(5 * ld + j)] = round_to(float(int(rng() % 9)), DType::BF16);
      }
      const auto g = argmax_on(*be.gpu, host, rows, vocab, ld);
      const auto c = argmax_on(*be.cpu, host, rows, vocab, ld);
      EXPECT_EQ(g, c) << "vocab " << vocab << " pad " << pad;
      if (vocab > 10) {
        EXPECT_EQ(g[1], 3);
        EXPECT_EQ(g[3], 0);
        EXPECT_EQ(g[4], vocab - 1);
      }
    }
  }
}

// One to three rows of a large vocabulary: each row is split over many blocks and reduced in a
// second pass. Ties across blocks, maxima at block edges, NaN and all -inf / all-NaN rows.
TEST(CudaSampling, ArgmaxFewRowsOfLargeVocab) {
  Backends be;
  std::mt19937 rng(22);
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t vocab : {151936, 152003, 5000}) {
    for (int64_t rows : {1, 2, 3}) {
      for (int64_t pad : {0, 3}) {
        SCOPED_TRACE("vocab " + std::to_string(vocab) + " rows " + std::to_string(rows) + " pad " + std::to_string(pad));
        const int64_t ld = vocab + pad;
        auto host = random_vec(rng, size_t(rows * ld), -10.0f, 10.0f, DType::F32);
        std::vector<int32_t> want(size_t(rows), -1);
        // row 0: a tie of the maximum in two far-apart blocks, NaN before either.
        host[0] = std::nanf("");
        host[size_t(2048)] = 70.0f;
        host[size_t(vocab - 1)] = 70.0f;
        want[0] = 2048;
        if (rows > 1) {  // row 1: the maximum at a block's last element, a NaN after it
          host[size_t(ld + 2047)] = 80.0f;
          host[size_t(ld + 2049)] = std::nanf("");
          want[1] = 2047;
        }
        if (rows > 2) {  // row 2: all -inf but one NaN: 0 (nothing beats -inf)
          for (int64_t j = 0; j < vocab; ++j) host[size_t(2 * ld + j)] = -inf;
          host[size_t(2 * ld + 9)] = std::nanf("");
          want[2] = 0;
        }
        const auto g = argmax_on(*be.gpu, host, rows, vocab, ld);
        const auto c = argmax_on(*be.cpu, host, rows, vocab, ld);
        EXPECT_EQ(g, c);
        EXPECT_EQ(g, want);
        // The same row sliced off a misaligned start (scalar loads).
        auto d = upload(*be.gpu, host, DType::F32, {rows * ld});
        Tensor logits(static_cast<float*>(d.t.data) + 1, DType::F32, be.gpu->device(), {1, vocab - 1});
        auto out = upload_i32(*be.gpu, std::vector<int32_t>(1, -7), {1});
        be.gpu->argmax_rows(logits, out.t);
        int32_t got1 = -7;
        be.gpu->copy_to_host(&got1, out.t.data, 4);
        EXPECT_EQ(got1, 2047);
      }
    }
  }
}

TEST(CudaSampling, GraphReplaySeesNewInputs) {
  Backends be;
  Backend& g = *be.gpu;
  ASSERT_TRUE(g.supports_graphs());
  std::mt19937 rng(22);
  const int64_t rows = 5, vocab = 3000;
  auto x = upload(g, random_vec(rng, size_t(rows * vocab), -1, 1, DType::F32), DType::F32, {rows, vocab});
  auto out = upload_i32(g, std::vector<int32_t>(size_t(rows), -1), {rows});
  g.argmax_rows(x.t, out.t);  // warm-up outside the capture
  g.synchronize();
  g.begin_capture();
  g.argmax_rows(x.t, out.t);
  const int64_t graph = g.end_capture();
  for (int round = 0; round < 3; ++round) {
    auto host = random_vec(rng, size_t(rows * vocab), -1, 1, DType::F32);
    std::vector<int32_t> want(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t j = int64_t(rng() % uint32_t(vocab));
      host[size_t(r * vocab + j)] = 2.0f + float(round);
      want[size_t(r)] = int32_t(j);
    }
    g.copy_to_device(x.t.data, host.data(), host.size() * 4);
    g.replay(graph);
    std::vector<int32_t> got(static_cast<size_t>(rows));
    g.copy_to_host(got.data(), out.t.data, got.size() * 4);
    EXPECT_EQ(got, want) << "replay " << round;
  }
  g.destroy_graph(graph);
}

}  // namespace
}  // namespace pagoda::test
