// The CPU's communicator (backend/host_communicator.cpp): ranks on threads sum their tensors; every
// rank gets the sum taken in rank order (the same bits everywhere), strided views included, tensor
// after tensor of different sizes; gathers place each rank's columns; the sum fused with the next
// norm is the sum then the norm; an aborted group makes a waiting rank throw instead of hang.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <future>
#include <random>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "backend/communicator.h"
#include "core/error.h"

namespace pagoda {
namespace {

TEST(HostCommunicator, EveryRankGetsTheRankOrderSumOfEveryTensor) {
  constexpr int kWorld = 3;
  auto comms = make_communicators("cpu", kWorld);
  ASSERT_EQ(comms.size(), 3u);
  const std::unique_ptr<Backend> be = make_backend("cpu", 1);
  // Three rounds of different shapes; round 1 reduces a strided view (every other 4 of 8 columns).
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{5, 7}, {4, 8}, {33, 3}};
  std::vector<std::vector<std::vector<float>>> data(kWorld);  // [rank][round]
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  for (auto& rank : data)
    for (const auto& [r, c] : shapes) {
      rank.emplace_back(static_cast<size_t>(r * c));
      for (float& v : rank.back()) v = u(rng);
    }
  std::vector<std::vector<std::vector<float>>> got = data;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kWorld; ++rank)
    threads.emplace_back([&, rank] {
      for (size_t round = 0; round < shapes.size(); ++round) {
        auto& v = got[static_cast<size_t>(rank)][round];
        const auto [r, c] = shapes[round];
        Tensor t(v.data(), DType::F32, Device::CPU, {r, c});
        if (round == 1) t = t.cols(0, 4);
        comms[static_cast<size_t>(rank)]->all_reduce_sum(*be, t);
      }
    });
  for (auto& t : threads) t.join();
  for (size_t round = 0; round < shapes.size(); ++round) {
    const auto [r, c] = shapes[round];
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) {
        const size_t at = static_cast<size_t>(i * c + j);
        const bool summed = round != 1 || j < 4;
        for (int rank = 0; rank < kWorld; ++rank) {
          float want = data[static_cast<size_t>(rank)][round][at];
          if (summed) want = (data[0][round][at] + data[1][round][at]) + data[2][round][at];
          // Bit for bit: the one rank-order sum, copied to all (and untouched columns left alone).
          EXPECT_EQ(got[static_cast<size_t>(rank)][round][at], want) << "round " << round << " rank " << rank;
        }
      }
  }
}

// A vocab-parallel lm_head's logits: rank r's [M, n] block lands in columns [r·n, (r+1)·n) of every
// rank's [M, world·n] output, a strided view of a wider buffer included.
TEST(HostCommunicator, GatherPlacesEachRanksColumnsInRankOrder) {
  constexpr int kWorld = 3, kRows = 4, kCols = 5, kWide = kWorld * kCols + 2;
  auto comms = make_communicators("cpu", kWorld);
  const std::unique_ptr<Backend> be = make_backend("cpu", 1);
  std::vector<std::vector<float>> in(kWorld), out(kWorld, std::vector<float>(kRows * kWide, -7.0f));
  for (int r = 0; r < kWorld; ++r)
    for (int i = 0; i < kRows * kCols; ++i) in[static_cast<size_t>(r)].push_back(static_cast<float>(100 * r + i));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kWorld; ++rank)
    threads.emplace_back([&, rank] {
      Tensor x(in[static_cast<size_t>(rank)].data(), DType::F32, Device::CPU, {kRows, kCols});
      Tensor wide(out[static_cast<size_t>(rank)].data(), DType::F32, Device::CPU, {kRows, kWide});
      Tensor dst = wide.cols(1, 1 + kWorld * kCols), scratch;
      comms[static_cast<size_t>(rank)]->all_gather_cols(*be, x, scratch, dst);
    });
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < kWorld; ++rank)
    for (int i = 0; i < kRows; ++i)
      for (int j = 0; j < kWide; ++j) {
        const int src = (j - 1) / kCols, col = (j - 1) % kCols;
        const float want = j == 0 || j == kWide - 1 ? -7.0f : static_cast<float>(100 * src + i * kCols + col);
        EXPECT_EQ(out[static_cast<size_t>(rank)][static_cast<size_t>(i * kWide + j)], want)
            << "rank " << rank << " row " << i << " column " << j;
      }
}

// The fused sum + residual add + norm (a layer's row-parallel output into the next norm) equals the
// rank-order sum added to the residual and normalised as written out here (RMSNorm with weight).
TEST(HostCommunicator, SumAddNormIsTheSumThenTheResidualNorm) {
  constexpr int kWorld = 2, kCols = 6;
  auto comms = make_communicators("cpu", kWorld);
  const std::unique_ptr<Backend> be = make_backend("cpu", 1);
  const std::vector<std::vector<float>> part = {{1, 2, 3, 4, 5, 6}, {0.5f, -1, 0.25f, 2, -3, 1}};
  const std::vector<float> residual0 = {1, 1, 1, 1, 1, 1}, w = {1, 2, 1, 0.5f, 1, 1};
  std::vector<std::vector<float>> xs = part, res(kWorld, residual0), out(kWorld, std::vector<float>(kCols));
  std::vector<float> wcopy = w;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kWorld; ++rank)
    threads.emplace_back([&, rank] {
      const auto r = static_cast<size_t>(rank);
      Tensor x(xs[r].data(), DType::F32, Device::CPU, {1, kCols}), h(res[r].data(), DType::F32, Device::CPU, {1, kCols}),
          o(out[r].data(), DType::F32, Device::CPU, {1, kCols}), wt(wcopy.data(), DType::F32, Device::CPU, {kCols});
      comms[r]->all_reduce_add_rms_norm(*be, x, h, wt, o, 1e-6f, false);
    });
  for (auto& t : threads) t.join();
  std::vector<float> h(kCols);
  double ss = 0;
  for (int j = 0; j < kCols; ++j) {
    h[static_cast<size_t>(j)] = residual0[static_cast<size_t>(j)] + (part[0][static_cast<size_t>(j)] + part[1][static_cast<size_t>(j)]);
    ss += static_cast<double>(h[static_cast<size_t>(j)]) * h[static_cast<size_t>(j)];
  }
  const double inv = 1.0 / std::sqrt(ss / kCols + 1e-6);
  for (int rank = 0; rank < kWorld; ++rank)
    for (int j = 0; j < kCols; ++j) {
      const auto c = static_cast<size_t>(j);
      EXPECT_EQ(res[static_cast<size_t>(rank)][c], h[c]) << "residual, rank " << rank << " column " << j;
      EXPECT_NEAR(out[static_cast<size_t>(rank)][c], h[c] * inv * w[c], 1e-5) << "rank " << rank << " column " << j;
    }
}

TEST(HostCommunicator, AnAbortedGroupReleasesAWaitingRank) {
  auto comms = make_communicators("cpu", 2);
  const std::unique_ptr<Backend> be = make_backend("cpu", 1);
  std::vector<float> v(4, 1.0f);
  auto waiting = std::async(std::launch::async, [&] {
    Tensor t(v.data(), DType::F32, Device::CPU, {1, 4});
    comms[0]->all_reduce_sum(*be, t);  // rank 1 never comes
  });
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  comms[1]->abort("rank 1 failed: planted");
  ASSERT_EQ(waiting.wait_for(std::chrono::seconds(10)), std::future_status::ready) << "rank 0 still waits";
  try {
    waiting.get();
    ADD_FAILURE() << "the aborted all-reduce returned";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("planted"), std::string::npos) << e.what();
  }
}

TEST(HostCommunicator, ADeviceWithoutACommunicatorIsRefusedByName) {
  try {
    make_communicators("vulkan", 2);
    ADD_FAILURE() << "a vulkan group was made";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--tensor-parallel-size 2 on --device vulkan"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pagoda
