// CPU backend op micro-benchmarks: linear (decode GEMV and prefill GEMM) at Qwen3-0.6B shapes,
// paged attention decode over a 1k context, and the thread pool's fork-join overhead.
// Speed is reported here and in docs/benchmarks.md, never asserted.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "core/dtype.h"
#include "core/thread_pool.h"

namespace pagoda {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// args: T, N, K, weight dtype (0 = F32, 1 = BF16)
void BM_CpuLinear(benchmark::State& state) {
  const int64_t T = state.range(0), N = state.range(1), K = state.range(2);
  const DType wt = state.range(3) == 0 ? DType::F32 : DType::BF16;
  CpuBackend be(0);
  std::vector<float> x = random_floats(static_cast<size_t>(T * K), 1);
  std::vector<float> wf = random_floats(static_cast<size_t>(N * K), 2);
  std::vector<uint16_t> wb;
  void* wp = wf.data();
  if (wt == DType::BF16) {
    wb.resize(wf.size());
    for (size_t i = 0; i < wf.size(); ++i) wb[i] = f32_to_bf16(wf[i]);
    wp = wb.data();
  }
  std::vector<float> out(static_cast<size_t>(T * N));
  Tensor xt(x.data(), DType::F32, Device::CPU, {T, K}), w(wp, wt, Device::CPU, {N, K}),
      ot(out.data(), DType::F32, Device::CPU, {T, N});
  for (auto _ : state) {
    be.linear(xt, w, ot);
    benchmark::DoNotOptimize(out.data());
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * T * N * K * iters / 1e9, benchmark::Counter::kIsRate);
  state.counters["weight_GB/s"] = benchmark::Counter(
      static_cast<double>(N * K) * static_cast<double>(dtype_size(wt)) * iters / 1e9,
      benchmark::Counter::kIsRate);
  state.SetLabel(be.name());
}
BENCHMARK(BM_CpuLinear)
    ->ArgNames({"T", "N", "K", "bf16"})
    ->Args({1, 1024, 1024, 0})
    ->Args({1, 6144, 1024, 0})
    ->Args({64, 1024, 1024, 0})
    ->Args({64, 6144, 1024, 0})
    ->Args({1, 6144, 1024, 1})
    ->Args({64, 6144, 1024, 1})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// args: batch of decoding sequences, context length, cache dtype (0 = F32, 1 = BF16).
// Qwen3-0.6B attention: 16 query heads, 8 kv heads, head_dim 128, block size 16.
void BM_CpuPagedAttentionDecode(benchmark::State& state) {
  const int S = static_cast<int>(state.range(0)), ctx = static_cast<int>(state.range(1));
  const DType ct = state.range(2) == 0 ? DType::F32 : DType::BF16;
  const int hq = 16, hkv = 8, D = 128, bs = 16;
  const int blocks_per_seq = (ctx + bs - 1) / bs, num_blocks = S * blocks_per_seq;
  CpuBackend be(0);
  const size_t cache_elems = static_cast<size_t>(num_blocks) * bs * hkv * D;
  std::vector<char> kc(cache_elems * dtype_size(ct)), vc(cache_elems * dtype_size(ct));
  {
    std::vector<float> src = random_floats(cache_elems, 3);
    for (size_t i = 0; i < cache_elems; ++i) {
      if (ct == DType::F32) {
        reinterpret_cast<float*>(kc.data())[i] = src[i];
        reinterpret_cast<float*>(vc.data())[i] = -src[i];
      } else {
        reinterpret_cast<uint16_t*>(kc.data())[i] = f32_to_bf16(src[i]);
        reinterpret_cast<uint16_t*>(vc.data())[i] = f32_to_bf16(-src[i]);
      }
    }
  }
  std::vector<int32_t> tables(static_cast<size_t>(num_blocks));
  std::iota(tables.begin(), tables.end(), 0);
  std::shuffle(tables.begin(), tables.end(), std::mt19937(4));
  std::vector<int32_t> cu(static_cast<size_t>(S + 1)), lens(static_cast<size_t>(S), ctx);
  std::iota(cu.begin(), cu.end(), 0);
  std::vector<float> q = random_floats(static_cast<size_t>(S * hq * D), 5),
                     out(static_cast<size_t>(S * hq * D));
  StepMeta meta;
  meta.cu_seqlens_q = Tensor(cu.data(), DType::I32, Device::CPU, {S + 1});
  meta.seq_lens = Tensor(lens.data(), DType::I32, Device::CPU, {S});
  meta.block_tables = Tensor(tables.data(), DType::I32, Device::CPU, {S, blocks_per_seq});
  meta.num_tokens = S;
  meta.num_seqs = S;
  meta.max_query_len = 1;
  meta.max_seq_len = ctx;
  meta.max_blocks_per_seq = blocks_per_seq;
  meta.block_size = bs;
  Tensor qt(q.data(), DType::F32, Device::CPU, {S, hq, D}),
      ot(out.data(), DType::F32, Device::CPU, {S, hq, D});
  Tensor kt(kc.data(), ct, Device::CPU, {num_blocks, bs, hkv, D}),
      vt(vc.data(), ct, Device::CPU, {num_blocks, bs, hkv, D});
  AttentionParams params;
  params.scale = 0.08838834764f;
  for (auto _ : state) {
    be.paged_attention(qt, kt, vt, meta, params, ot);
    benchmark::DoNotOptimize(out.data());
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["kv_GB/s"] = benchmark::Counter(
      2.0 * S * ctx * hkv * D * static_cast<double>(dtype_size(ct)) * iters / 1e9,
      benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] =
      benchmark::Counter(4.0 * S * ctx * hq * D * iters / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_CpuPagedAttentionDecode)
    ->ArgNames({"seqs", "ctx", "bf16"})
    ->Args({1, 1024, 0})
    ->Args({1, 1024, 1})
    ->Args({8, 1024, 0})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

void BM_CpuThreadPoolForkJoin(benchmark::State& state) {
  ThreadPool pool(0);
  std::vector<int64_t> sink(64);
  for (auto _ : state)
    pool.parallel_for(static_cast<int64_t>(pool.num_threads()),
                      [&](int64_t b, int64_t e) { sink[static_cast<size_t>(b)] += e; });
  benchmark::DoNotOptimize(sink.data());
}
BENCHMARK(BM_CpuThreadPoolForkJoin)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace pagoda
