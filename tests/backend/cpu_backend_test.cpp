// CpuBackend memory, make_backend, upload_convert, and the thread pool the ops run on.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "cpu_test_util.h"

namespace pagoda {
namespace {

using cpu_test::Blob;

TEST(CpuBackend, AllocatesAlignedBuffersThatMove) {
  auto be = make_backend("cpu", 1);
  EXPECT_EQ(be->device(), Device::CPU);
  EXPECT_EQ(be->activation_dtype(), DType::F32);
  Buffer a = be->alloc(1000);
  ASSERT_NE(a.data(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 64, 0u);
  EXPECT_EQ(a.bytes(), 1000u);
  be->fill_zero(a.data(), 1000);
  Tensor t = a.tensor(DType::F32, {10, 25});
  EXPECT_EQ(t.data, a.data());
  EXPECT_EQ(t.device, Device::CPU);
  EXPECT_EQ(t.ptr<float>()[249], 0.0f);
  void* p = a.data();
  Buffer b = std::move(a);
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(a.data(), nullptr);
  b.reset();
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(be->alloc(0).bytes(), 0u);
}

TEST(CpuBackend, AllocFailureSaysHowMuchAndWhere) {
  auto be = make_backend("cpu", 1);
  const size_t huge = std::numeric_limits<size_t>::max() / 2;
  try {
    be->alloc(huge);
    FAIL() << "expected pagoda::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(std::to_string(huge)), std::string::npos) << msg;
    EXPECT_NE(msg.find("cpu"), std::string::npos) << msg;
  }
}

TEST(CpuBackend, MakeBackendChoices) {
  EXPECT_NE(make_backend("cpu", 2), nullptr);
  EXPECT_THROW(make_backend("tpu"), Error);
#ifndef PAGODA_HAS_CUDA
  try {
    make_backend("cuda");
    FAIL() << "expected pagoda::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("built without CUDA"), std::string::npos);
  }
#endif
}

TEST(CpuBackend, CopiesRoundTrip) {
  auto be = make_backend("cpu", 1);
  std::vector<int32_t> src{1, 2, 3, 4}, back(4);
  Buffer a = be->alloc(16), b = be->alloc(16);
  be->copy_to_device(a.data(), src.data(), 16);
  be->copy_on_device(b.data(), a.data(), 16);
  be->synchronize();
  be->copy_to_host(back.data(), b.data(), 16);
  EXPECT_EQ(back, src);
}

TEST(CpuBackend, UploadConvertEveryFloatPair) {
  auto be = make_backend("cpu", 2);
  std::mt19937 rng(1);
  const int64_t n = 40000;  // more than one conversion piece
  const auto vals = cpu_test::random_vector(rng, n, -100, 100);
  for (DType from : {DType::F32, DType::BF16, DType::F16})
    for (DType to : {DType::F32, DType::BF16, DType::F16}) {
      SCOPED_TRACE(std::string(dtype_name(from)) + "->" + dtype_name(to));
      Blob src(from, n), dst(to, n);
      for (int64_t i = 0; i < n; ++i) src.set(i, vals[static_cast<size_t>(i)]);
      Tensor d = dst.tensor({n / 100, 100});
      be->upload_convert(src.tensor({n}), d);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(dst.get(i), cpu_test::round_to(to, src.get(i))) << i;
    }
}

TEST(CpuBackend, UploadConvertHalfIsExactForEveryBitPattern) {
  auto be = make_backend("cpu", 2);
  Blob src(DType::F16, 65536), dst(DType::F32, 65536);
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    std::memcpy(static_cast<char*>(src.data()) + 2 * h, &bits, 2);
  }
  Tensor d = dst.tensor({65536});
  be->upload_convert(src.tensor({65536}), d);
  for (uint32_t h = 0; h < 65536; ++h) {
    const float want = f16_to_f32(static_cast<uint16_t>(h)), got = dst.get(h);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << h;
    } else {
      ASSERT_EQ(std::memcmp(&want, &got, 4), 0) << h << ": " << want << " vs " << got;
    }
  }
}

TEST(CpuBackend, UploadConvertStridedDestination) {
  auto be = make_backend("cpu", 1);
  Blob src(DType::BF16, 12), dst(DType::F32, 3 * 6);
  for (int i = 0; i < 12; ++i) src.set(i, static_cast<float>(i));
  dst.fill(-1.0f);
  Tensor d = dst.strided({3, 4}, 6);
  be->upload_convert(src.tensor({3, 4}), d);
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 4; ++c) EXPECT_EQ(dst.get(r * 6 + c), static_cast<float>(r * 4 + c));
    EXPECT_EQ(dst.get(r * 6 + 4), -1.0f);
  }
  Blob wrong(DType::F32, 11);
  Tensor w = wrong.tensor({11});
  EXPECT_THROW(be->upload_convert(src.tensor({12}), w), Error);
}

TEST(CpuThreadPool, CoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (int64_t n : {0, 1, 7, 1000, 12345}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallel_for(
          n,
          [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
          },
          3);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << n << " " << i;
      std::vector<std::atomic<int>> hits2(static_cast<size_t>(n));
      pool.parallel_for_static(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits2[static_cast<size_t>(i)]++;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits2[static_cast<size_t>(i)].load(), 1);
    }
  }
}

TEST(CpuThreadPool, NestedCallsRunInlineAndErrorsPropagate) {
  ThreadPool pool(4);
  std::atomic<int64_t> total{0};
  pool.parallel_for(8, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      pool.parallel_for(10, [&](int64_t b2, int64_t e2) { total += e2 - b2; });
  });
  EXPECT_EQ(total.load(), 80);
  EXPECT_THROW(pool.parallel_for(100,
                                 [](int64_t b, int64_t) {
                                   if (b == 0) throw std::runtime_error("boom");
                                 }),
               std::runtime_error);
  // The pool still works after an exception.
  std::atomic<int64_t> after{0};
  pool.parallel_for(50, [&](int64_t b, int64_t e) { after += e - b; });
  EXPECT_EQ(after.load(), 50);
}

TEST(CpuThreadPool, ManyShortJobs) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  for (int r = 0; r < 300; ++r) pool.parallel_for(4, [&](int64_t b, int64_t e) { total += e - b; });
  EXPECT_EQ(total.load(), 1200);
}

TEST(CpuThreadPool, SmallWorkRunsInlineLargeWorkIsSplit) {
  ThreadPool pool(4);
  const auto least = static_cast<int64_t>(ThreadPool::kMaxInlineCost);  // always split from here
  EXPECT_EQ(pool.ranges_for(1000, 1.0, 16), 1);
  EXPECT_EQ(pool.ranges_for(static_cast<int64_t>(ThreadPool::kMinParallelCost) - 1, 1.0, 16), 1);
  EXPECT_EQ(pool.ranges_for(least, 1.0, 1000),
            static_cast<int64_t>(ThreadPool::kMaxInlineCost / ThreadPool::kMinChunkCost));
  EXPECT_EQ(pool.ranges_for(100 * least, 1.0, 16), 16);
  EXPECT_EQ(pool.ranges_for(10, 0.0, 16), 16);  // unknown cost: split
  const std::thread::id caller = std::this_thread::get_id();
  int calls = 0;  // inline: one call, on this thread
  pool.parallel_for(
      1000,
      [&](int64_t b, int64_t e) {
        ++calls;
        EXPECT_EQ(b, 0);
        EXPECT_EQ(e, 1000);
        EXPECT_EQ(std::this_thread::get_id(), caller);
      },
      1, 1.0);
  EXPECT_EQ(calls, 1);
  std::atomic<int> ranges{0};
  std::atomic<int64_t> covered{0};
  pool.parallel_for(
      1000,
      [&](int64_t b, int64_t e) {
        ++ranges;
        covered += e - b;
      },
      1, static_cast<double>(least));
  EXPECT_EQ(ranges.load(), 16);
  EXPECT_EQ(covered.load(), 1000);
  ranges = 0;
  pool.parallel_for_static(
      1000, [&](int64_t, int64_t) { ++ranges; }, 1, static_cast<double>(least) / 10.0);
  EXPECT_EQ(ranges.load(), 4);
}

TEST(CpuThreadPool, JobsOfMixedLengthsBackToBack) {
  // Workers join some jobs late or not at all; every job must still be complete on return.
  ThreadPool pool(3);
  for (int r = 0; r < 500; ++r) {
    const int64_t n = 1 + (r * 37) % 97;
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallel_for(n, [&](int64_t b, int64_t e) {
      volatile double sink = 0.0;
      for (int64_t i = b; i < e; ++i) {
        for (int k = 0; k < (r % 5) * 200; ++k) sink = sink + 1.0;
        hits[static_cast<size_t>(i)]++;
      }
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << r;
  }
}

}  // namespace
}  // namespace pagoda
