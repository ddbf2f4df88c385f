// The CPU's communicator (backend/host_communicator.cpp): ranks on threads sum their tensors; every
// rank gets the sum taken in rank order (the same bits everywhere), strided views included, tensor
// after tensor of different sizes; an aborted group makes a waiting rank throw instead of hang.
#include <gtest/gtest.h>

#include <chrono>
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
