// The CUDA communicator on two GPUs (run by hand on a machine of 2 or more, tools/device/tp_gpu.sh):
// every sum — through the peer-memory kernel (one block, many blocks, a view not 16-byte aligned) and
// through NCCL (larger than a slot) — equals the rank-order fp32 sum computed here on the host, on
// both ranks, eagerly and replayed from CUDA graphs with new inputs each time.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "backend/communicator.h"
#include "backend/devices.h"
#include "core/dtype.h"

namespace pagoda {
namespace {

constexpr int kWorld = 2;

struct Case {
  DType dtype;
  int64_t rows, cols;
  int64_t offset = 0;  // elements before the tensor in its buffer (0: aligned)
};

// Values the dtype holds exactly, so that the host's fp32 sum is the reference whatever the order.
std::vector<float> inputs(int64_t n, int rank, uint32_t seed, DType dtype) {
  std::mt19937 rng(seed * 31 + static_cast<uint32_t>(rank));
  std::uniform_int_distribution<int> d(-64, 64);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = static_cast<float>(d(rng)) * (dtype == DType::F32 ? 0.0078125f : 0.125f);
  return v;
}

std::vector<uint8_t> encode(const std::vector<float>& v, DType dtype) {
  std::vector<uint8_t> out(v.size() * dtype_size(dtype));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::F32) std::memcpy(out.data() + 4 * i, &v[i], 4);
    else if (dtype == DType::BF16) { const uint16_t b = f32_to_bf16(v[i]); std::memcpy(out.data() + 2 * i, &b, 2); }
    else { const uint16_t h = f32_to_f16(v[i]); std::memcpy(out.data() + 2 * i, &h, 2); }
  }
  return out;
}

float decode(const uint8_t* p, DType dtype) {
  if (dtype == DType::F32) { float f; std::memcpy(&f, p, 4); return f; }
  uint16_t b;
  std::memcpy(&b, p, 2);
  return dtype == DType::BF16 ? bf16_to_f32(b) : f16_to_f32(b);
}

void on_both(const std::function<void(int)>& fn) {
  std::thread other([&] { fn(1); });
  fn(0);
  other.join();
}

TEST(CudaCommunicator, SumsEqualTheRankOrderSumOnTheHostEagerAndInGraphs) {
  ASSERT_GE(cuda_device_count(), kWorld) << "needs 2 GPUs (a machine of kind nvidia-h200-x2 or more)";
  std::vector<std::unique_ptr<Communicator>> comms = make_communicators("cuda", kWorld, 0);
  std::vector<std::unique_ptr<Backend>> bes;
  for (int r = 0; r < kWorld; ++r) bes.push_back(make_backend("cuda", 0, "bfloat16", r));
  const std::vector<Case> cases = {
      {DType::BF16, 1, 5120},        // a decode row of the 27B shape: one block
      {DType::BF16, 64, 5120},       // 640 KiB: many blocks
      {DType::BF16, 512, 5120},      // 5 MiB: over a 4 MiB slot, through NCCL
      {DType::F32, 100, 64},         // fp32 (the fixtures' dtype)
      {DType::F16, 8, 8},            // one 16-byte group a row
      {DType::BF16, 4, 1024, 1},     // a view 2 bytes past an aligned address
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(dtype_name(c.dtype)) + " " + std::to_string(c.rows) + "x" + std::to_string(c.cols) +
                 " offset " + std::to_string(c.offset));
    const int64_t n = c.rows * c.cols;
    const size_t esz = dtype_size(c.dtype);
    std::vector<Buffer> bufs;
    std::vector<Tensor> xs;
    for (int r = 0; r < kWorld; ++r) {
      bufs.push_back(bes[static_cast<size_t>(r)]->alloc(static_cast<size_t>(n + c.offset) * esz));
      xs.emplace_back(static_cast<char*>(bufs.back().data()) + c.offset * static_cast<int64_t>(esz), c.dtype,
                      Device::CUDA, std::initializer_list<int64_t>{c.rows, c.cols});
    }
    // Three rounds: eager, then a graph of the sum captured on both ranks and replayed twice.
    std::vector<int64_t> graphs(kWorld, -1);
    for (uint32_t round = 0; round < 3; ++round) {
      std::vector<std::vector<float>> in(kWorld);
      for (int r = 0; r < kWorld; ++r) in[static_cast<size_t>(r)] = inputs(n, r, round + 7, c.dtype);
      std::vector<std::vector<uint8_t>> out(kWorld, std::vector<uint8_t>(static_cast<size_t>(n) * esz));
      on_both([&](int r) {
        Backend& be = *bes[static_cast<size_t>(r)];
        be.synchronize();  // makes the rank's device current on this thread
        const std::vector<uint8_t> bytes = encode(in[static_cast<size_t>(r)], c.dtype);
        Tensor& x = xs[static_cast<size_t>(r)];
        be.copy_to_device(x.data, bytes.data(), bytes.size());
        if (round == 0) {
          comms[static_cast<size_t>(r)]->all_reduce_sum(be, x);
        } else {
          if (round == 1) {
            be.synchronize();
            be.begin_capture();
            comms[static_cast<size_t>(r)]->all_reduce_sum(be, x);
            graphs[static_cast<size_t>(r)] = be.end_capture();
          }
          be.replay(graphs[static_cast<size_t>(r)]);
        }
        be.copy_to_host(out[static_cast<size_t>(r)].data(), x.data, out[static_cast<size_t>(r)].size());
      });
      int64_t wrong = 0;
      for (int r = 0; r < kWorld; ++r)
        for (int64_t i = 0; i < n; ++i) {
          const float want = in[0][static_cast<size_t>(i)] + in[1][static_cast<size_t>(i)];
          const float got = decode(out[static_cast<size_t>(r)].data() + static_cast<size_t>(i) * esz, c.dtype);
          if (got != want && wrong++ < 5)
            ADD_FAILURE() << "round " << round << " rank " << r << " element " << i << ": " << got << ", want " << want;
        }
      EXPECT_EQ(wrong, 0) << "round " << round;
    }
    for (int r = 0; r < kWorld; ++r) bes[static_cast<size_t>(r)]->destroy_graph(graphs[static_cast<size_t>(r)]);
  }
}

// Sums of different sizes back to back, no host wait between them (a step's two all-reduces a layer
// and the MoE's differ in size; the peer-memory kernel's grid differs with the size, so one call's
// blocks write regions another call's blocks may still read): five rounds of a 640 KiB and a 10 KiB
// sum alternating. Each sum doubles what the last left: 16 × (rank 0's + rank 1's) at the end.
TEST(CudaCommunicator, SumsOfAlternatingSizesBackToBack) {
  ASSERT_GE(cuda_device_count(), kWorld) << "needs 2 GPUs (a machine of kind nvidia-h200-x2 or more)";
  std::vector<std::unique_ptr<Communicator>> comms = make_communicators("cuda", kWorld, 0);
  std::vector<std::unique_ptr<Backend>> bes;
  for (int r = 0; r < kWorld; ++r) bes.push_back(make_backend("cuda", 0, "bfloat16", r));
  const std::vector<int64_t> rows = {64, 1};
  const int64_t cols = 5120;
  std::vector<std::vector<std::vector<float>>> in(kWorld);  // [rank][tensor]
  std::vector<std::vector<std::vector<uint8_t>>> out(kWorld);
  on_both([&](int r) {
    Backend& be = *bes[static_cast<size_t>(r)];
    be.synchronize();
    std::vector<Buffer> bufs;
    std::vector<Tensor> xs;
    for (size_t t = 0; t < rows.size(); ++t) {
      const int64_t n = rows[t] * cols;
      in[static_cast<size_t>(r)].push_back(inputs(n, r, 100 + static_cast<uint32_t>(t), DType::BF16));
      const std::vector<uint8_t> bytes = encode(in[static_cast<size_t>(r)].back(), DType::BF16);
      bufs.push_back(be.alloc(bytes.size()));
      xs.emplace_back(bufs.back().data(), DType::BF16, Device::CUDA, std::initializer_list<int64_t>{rows[t], cols});
      be.copy_to_device(xs.back().data, bytes.data(), bytes.size());
    }
    for (int round = 0; round < 5; ++round)
      for (Tensor& x : xs) comms[static_cast<size_t>(r)]->all_reduce_sum(be, x);
    for (size_t t = 0; t < xs.size(); ++t) {
      out[static_cast<size_t>(r)].emplace_back(xs[t].nbytes());
      be.copy_to_host(out[static_cast<size_t>(r)].back().data(), xs[t].data, xs[t].nbytes());
    }
  });
  for (size_t t = 0; t < rows.size(); ++t) {
    int64_t wrong = 0;
    for (int r = 0; r < kWorld; ++r)
      for (int64_t i = 0; i < rows[t] * cols; ++i) {
        const float want = 16.0f * (in[0][t][static_cast<size_t>(i)] + in[1][t][static_cast<size_t>(i)]);
        const float got = decode(out[static_cast<size_t>(r)][t].data() + 2 * static_cast<size_t>(i), DType::BF16);
        if (got != want && wrong++ < 5)
          ADD_FAILURE() << "tensor " << t << " rank " << r << " element " << i << ": " << got << ", want " << want;
      }
    EXPECT_EQ(wrong, 0) << "tensor " << t;
  }
}

// The row-parallel sum fused with the residual add and RMSNorm (what a layer's output meets next):
// the residual equals the host's rank-order sum added to it (exact: values the dtype holds), the
// normed output the host's norm of it within the dtype's rounding; through the peer-memory kernel
// (a row, many rows, fp32) and through NCCL + add_rms_norm (over a slot), eager and from graphs.
TEST(CudaCommunicator, SumAddNormEqualsTheHostsSumThenNormEagerAndInGraphs) {
  ASSERT_GE(cuda_device_count(), kWorld) << "needs 2 GPUs (a machine of kind nvidia-h200-x2 or more)";
  std::vector<std::unique_ptr<Communicator>> comms = make_communicators("cuda", kWorld, 0);
  std::vector<std::unique_ptr<Backend>> bes;
  for (int r = 0; r < kWorld; ++r) bes.push_back(make_backend("cuda", 0, "bfloat16", r));
  const std::vector<Case> cases = {{DType::BF16, 1, 5120}, {DType::BF16, 200, 5120}, {DType::F32, 3, 4096},
                                   {DType::BF16, 512, 5120}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(dtype_name(c.dtype)) + " " + std::to_string(c.rows) + "x" + std::to_string(c.cols));
    const int64_t n = c.rows * c.cols;
    const size_t esz = dtype_size(c.dtype), bytes = static_cast<size_t>(n) * esz;
    std::vector<float> w(static_cast<size_t>(c.cols));
    for (size_t j = 0; j < w.size(); ++j) w[j] = 0.5f + 0.125f * static_cast<float>(j % 9);
    std::vector<Buffer> bufs;
    std::vector<Tensor> xs, hs, outs, ws;
    for (int r = 0; r < kWorld; ++r) {
      Backend& be = *bes[static_cast<size_t>(r)];
      for (int k = 0; k < 3; ++k) bufs.push_back(be.alloc(bytes));
      xs.push_back(bufs[bufs.size() - 3].tensor(c.dtype, {c.rows, c.cols}));
      hs.push_back(bufs[bufs.size() - 2].tensor(c.dtype, {c.rows, c.cols}));
      outs.push_back(bufs[bufs.size() - 1].tensor(c.dtype, {c.rows, c.cols}));
      bufs.push_back(be.alloc(w.size() * 4));
      ws.push_back(bufs.back().tensor(DType::F32, {c.cols}));
      be.copy_to_device(ws.back().data, w.data(), w.size() * 4);
    }
    std::vector<int64_t> graphs(kWorld, -1);
    for (uint32_t round = 0; round < 3; ++round) {
      std::vector<std::vector<float>> in(kWorld);
      for (int r = 0; r < kWorld; ++r) in[static_cast<size_t>(r)] = inputs(n, r, round + 40, c.dtype);
      const std::vector<float> residual = inputs(n, 5, round + 80, c.dtype);  // the same on every rank
      std::vector<std::vector<uint8_t>> got_h(kWorld, std::vector<uint8_t>(bytes)), got_o = got_h;
      on_both([&](int r) {
        const auto i = static_cast<size_t>(r);
        Backend& be = *bes[i];
        be.synchronize();
        be.copy_to_device(xs[i].data, encode(in[i], c.dtype).data(), bytes);
        be.copy_to_device(hs[i].data, encode(residual, c.dtype).data(), bytes);
        auto run = [&] { comms[i]->all_reduce_add_rms_norm(be, xs[i], hs[i], ws[i], outs[i], 1e-6f, false); };
        if (round == 0) {
          run();
        } else {
          if (round == 1) {
            be.synchronize();
            be.begin_capture();
            run();
            graphs[i] = be.end_capture();
          }
          be.replay(graphs[i]);
        }
        be.copy_to_host(got_h[i].data(), hs[i].data, bytes);
        be.copy_to_host(got_o[i].data(), outs[i].data, bytes);
      });
      int64_t wrong = 0;
      for (int64_t row = 0; row < c.rows; ++row) {
        std::vector<float> h(static_cast<size_t>(c.cols));
        double ss = 0;
        for (int64_t j = 0; j < c.cols; ++j) {
          const auto at = static_cast<size_t>(row * c.cols + j);
          h[static_cast<size_t>(j)] = residual[at] + (in[0][at] + in[1][at]);
          ss += static_cast<double>(h[static_cast<size_t>(j)]) * h[static_cast<size_t>(j)];
        }
        const double inv = 1.0 / std::sqrt(ss / static_cast<double>(c.cols) + 1e-6);
        for (int r = 0; r < kWorld; ++r)
          for (int64_t j = 0; j < c.cols; ++j) {
            const auto at = static_cast<size_t>(row * c.cols + j);
            const float gh = decode(got_h[static_cast<size_t>(r)].data() + at * esz, c.dtype);
            const float go = decode(got_o[static_cast<size_t>(r)].data() + at * esz, c.dtype);
            const double want = h[static_cast<size_t>(j)] * inv * w[static_cast<size_t>(j)];
            const double tol = (c.dtype == DType::F32 ? 1e-5 : 1.6e-2) * (std::fabs(want) + 1e-3);
            if ((gh != h[static_cast<size_t>(j)] || std::fabs(go - want) > tol) && wrong++ < 5)
              ADD_FAILURE() << "round " << round << " rank " << r << " row " << row << " column " << j << ": residual "
                            << gh << " (want " << h[static_cast<size_t>(j)] << "), out " << go << " (want " << want
                            << ")";
          }
      }
      EXPECT_EQ(wrong, 0) << "round " << round;
    }
    for (int r = 0; r < kWorld; ++r) bes[static_cast<size_t>(r)]->destroy_graph(graphs[static_cast<size_t>(r)]);
  }
}

// A vocab-parallel lm_head's gather: rank r's fp32 [M, n] becomes columns [r·n, (r+1)·n) of both
// ranks' [M, 2n], eager and from a graph.
TEST(CudaCommunicator, GatherPlacesEachRanksColumns) {
  ASSERT_GE(cuda_device_count(), kWorld) << "needs 2 GPUs (a machine of kind nvidia-h200-x2 or more)";
  std::vector<std::unique_ptr<Communicator>> comms = make_communicators("cuda", kWorld, 0);
  std::vector<std::unique_ptr<Backend>> bes;
  for (int r = 0; r < kWorld; ++r) bes.push_back(make_backend("cuda", 0, "bfloat16", r));
  for (const int64_t rows : {int64_t{1}, int64_t{37}}) {
    const int64_t cols = 1000;
    std::vector<std::vector<float>> got(kWorld, std::vector<float>(static_cast<size_t>(rows * cols * kWorld)));
    on_both([&](int r) {
      Backend& be = *bes[static_cast<size_t>(r)];
      be.synchronize();
      std::vector<float> in(static_cast<size_t>(rows * cols));
      for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(r) * 1e6f + static_cast<float>(i);
      Buffer xb = be.alloc(in.size() * 4), sb = be.alloc(in.size() * 4 * kWorld), ob = be.alloc(in.size() * 4 * kWorld);
      Tensor x = xb.tensor(DType::F32, {rows, cols}), scratch = sb.tensor(DType::F32, {kWorld * rows, cols}),
             out = ob.tensor(DType::F32, {rows, kWorld * cols});
      be.copy_to_device(x.data, in.data(), in.size() * 4);
      comms[static_cast<size_t>(r)]->all_gather_cols(be, x, scratch, out);
      be.copy_to_host(got[static_cast<size_t>(r)].data(), out.data, got[static_cast<size_t>(r)].size() * 4);
      be.synchronize();
    });
    int64_t wrong = 0;
    for (int r = 0; r < kWorld; ++r)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < kWorld * cols; ++j) {
          const float want = static_cast<float>(j / cols) * 1e6f + static_cast<float>(i * cols + j % cols);
          const float v = got[static_cast<size_t>(r)][static_cast<size_t>(i * kWorld * cols + j)];
          if (v != want && wrong++ < 5)
            ADD_FAILURE() << "rows " << rows << " rank " << r << " (" << i << ", " << j << "): " << v << ", want " << want;
        }
    EXPECT_EQ(wrong, 0) << "rows " << rows;
  }
}

}  // namespace
}  // namespace pagoda
