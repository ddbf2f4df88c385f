#include "bench/kernel_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>

#include <nlohmann/json.hpp>

#include "bench/op_table.h"
#include "core/dtype.h"
#include "core/error.h"

namespace pagoda {
namespace {

using Clock = std::chrono::steady_clock;

// Device buffers that live for one benchmark.
class Arena {
 public:
  explicit Arena(Backend& be) : be_(be) {}
  // A tensor of random values in [-1, 1) (or random ids in [0, id_range) for I32).
  Tensor random(DType t, std::initializer_list<int64_t> dims, int32_t id_range = 0) {
    Tensor shape(nullptr, t, be_.device(), dims);
    const size_t bytes = std::max<size_t>(shape.nbytes(), 16);
    bufs_.push_back(be_.alloc(bytes));
    shape.data = bufs_.back().data();
    fill(shape.data, bytes, t, id_range);
    return shape;
  }
  Tensor ints(const std::vector<int32_t>& v, std::initializer_list<int64_t> dims) {
    bufs_.push_back(be_.alloc(std::max<size_t>(v.size() * 4, 16)));
    be_.copy_to_device(bufs_.back().data(), v.data(), v.size() * 4);
    return Tensor(bufs_.back().data(), DType::I32, be_.device(), dims);
  }

 private:
  // Random bytes from a 4 MiB pattern of valid values, repeated (cheap for GiB-sized buffers).
  void fill(void* dst, size_t bytes, DType t, int32_t id_range) {
    static std::mt19937 rng(1234);
    const size_t es = dtype_size(t), n = std::min<size_t>(bytes, size_t{4} << 20) / es;
    std::vector<unsigned char> pat(n * es);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (size_t i = 0; i < n; ++i) {
      unsigned char* p = pat.data() + i * es;
      if (t == DType::I32) {
        const int32_t v = id_range > 0 ? static_cast<int32_t>(rng() % static_cast<uint32_t>(id_range)) : 0;
        std::memcpy(p, &v, 4);
      } else if (t == DType::F32) {
        const float v = u(rng);
        std::memcpy(p, &v, 4);
      } else if (t == DType::BF16) {
        const uint16_t v = f32_to_bf16(u(rng));
        std::memcpy(p, &v, 2);
      } else {
        const uint16_t v = f32_to_f16(u(rng));
        std::memcpy(p, &v, 2);
      }
    }
    for (size_t off = 0; off < bytes; off += pat.size())
      be_.copy_to_device(static_cast<char*>(dst) + off, pat.data(), std::min(pat.size(), bytes - off));
  }

  Backend& be_;
  std::vector<Buffer> bufs_;
};

// Median time of one call of f(i) (i = iteration, to rotate inputs), in microseconds. Calls are
// recorded into a graph and replayed where the backend can (and `graph` is true), so that launch
// gaps do not count.
double time_us(Backend& be, const std::function<void(int)>& f, bool quick, bool graph = true) {
  f(0);
  be.synchronize();
  auto t0 = Clock::now();
  f(1);
  be.synchronize();
  const double once = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  const int reps = static_cast<int>(std::clamp(2000.0 / std::max(once, 1.0), 3.0, 200.0));
  const int samples = quick ? 3 : 7;
  std::vector<double> t;
  if (graph && be.supports_graphs()) {
    be.begin_capture();
    for (int i = 0; i < reps; ++i) f(i);
    const int64_t g = be.end_capture();
    be.replay(g);
    be.synchronize();
    for (int s = 0; s < samples; ++s) {
      t0 = Clock::now();
      be.replay(g);
      be.synchronize();
      t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / reps);
    }
    be.destroy_graph(g);
  } else {
    for (int s = 0; s < samples; ++s) {
      t0 = Clock::now();
      for (int i = 0; i < reps; ++i) f(i);
      be.synchronize();
      t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / reps);
    }
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Copies of an input so that repeated calls do not run from the L2 cache (~50-60 MB on Hopper):
// enough copies to cover 256 MB, at most 16.
int copies_for(double bytes) { return static_cast<int>(std::clamp(256e6 / std::max(bytes, 1.0), 1.0, 16.0)); }

struct Ctx {
  Backend& be;
  const KernelBenchOptions& opt;
  KernelBenchResult& res;
  DType act;
  bool wanted(const std::string& kernel, const std::string& shape) const {
    return opt.filter.empty() || kernel.find(opt.filter) != std::string::npos ||
           shape.find(opt.filter) != std::string::npos;
  }
  void add(std::string kernel, std::string shape, double us, double bytes, double flops) {
    KernelBenchRow r{std::move(kernel), std::move(shape), us, bytes, flops};
    std::fprintf(stderr, "[bench] %-22s %-44s %10.2f us %9.1f GB/s %8.2f TFLOP/s\n", r.kernel.c_str(),
                 r.shape.c_str(), r.us, r.gb_s(), r.tflop_s());
    res.rows.push_back(std::move(r));
  }
};

std::string dims(std::initializer_list<int64_t> d) {
  std::string s;
  for (int64_t v : d) {
    if (!s.empty()) s += 'x';
    s += std::to_string(v);
  }
  return s;
}

void bench_ceilings(Ctx& c) {
  Arena ar(c.be);
  const bool cpu = c.be.device() == Device::CPU;
  const int64_t n = cpu ? (int64_t{64} << 20) : (c.opt.quick ? (int64_t{256} << 20) : (int64_t{1} << 30));
  Tensor a = ar.random(DType::F32, {n / 4}), b = ar.random(DType::F32, {n / 4});
  // Eager: a device-to-device copy recorded in a CUDA graph becomes a memcpy node that runs on a copy
  // engine (~2.7 TB/s on an H200, seen 2026-11-21) instead of the SM copy an eager call gets (~4.3).
  const double us = time_us(c.be, [&](int) { c.be.copy_on_device(b.data, a.data, static_cast<size_t>(n)); },
                            c.opt.quick, /*graph=*/false);
  c.res.copy_gb_s = 2.0 * static_cast<double>(n) / us * 1e-3;
  c.add("copy d2d (ceiling)", std::to_string(n >> 20) + " MiB", us, 2.0 * static_cast<double>(n), 0);
  const int64_t m = cpu ? 1024 : 8192;
  Tensor x = ar.random(c.act, {m, m}), w = ar.random(c.act, {m, m}), y = ar.random(c.act, {m, m});
  const double gus = time_us(c.be, [&](int) { c.be.linear(x, w, y); }, c.opt.quick);
  const double flops = 2.0 * static_cast<double>(m) * m * m;
  c.res.gemm_tflop_s = flops / gus * 1e-6;
  c.add("gemm (peak reference)", dims({m, m, m}), gus, 3.0 * m * m * dtype_size(c.act), flops);
}


// One op-table perf case: its inputs uploaded (rotated copies of the big ones), timed. Where the
// backend takes the skinny-GEMM kernel for a linear, cuBLASLt is timed beside it.
void bench_case(Ctx& c, const optable::OpCase& oc) {
  if (!c.wanted(oc.op, oc.label)) return;
  const optable::OpData data = oc.make(c.act);
  double rotated = 0;
  for (const std::string& name : oc.rotate) {
    const optable::HostTensor& h = data.at(name);
    rotated += static_cast<double>(h.numel()) * dtype_size(h.dtype);
  }
  const int copies = oc.rotate.empty() ? 1 : copies_for(rotated);
  optable::DeviceData dev(c.be, data, copies, oc.rotate);
  const auto run = [&] { return time_us(c.be, [&](int i) { oc.run(c.be, dev, i); }, c.opt.quick); };
  const double bytes = oc.bytes ? oc.bytes(c.act) : 0, flops = oc.flops ? oc.flops(c.act) : 0;
  if (oc.op == "linear" && c.be.linear_uses_gemv(dev.t("x"), dev.t("w"), dev.t("out"))) {
    c.add("linear gemv", oc.label, run(), bytes, flops);
    const int saved = c.be.set_gemv_max_tokens(0);
    c.add("linear cublaslt", oc.label, run(), bytes, flops);
    c.be.set_gemv_max_tokens(saved);
    return;
  }
  c.add(oc.op, oc.label, run(), bytes, flops);
}

}  // namespace

KernelBenchResult run_kernel_bench(Backend& be, const KernelBenchOptions& opt) {
  KernelBenchResult res;
  res.device = be.name();
  Ctx c{be, opt, res, be.activation_dtype()};
  bench_ceilings(c);
  const bool quick = opt.quick || be.device() == Device::CPU;
  for (const optable::OpCase& oc : optable::perf_cases(quick)) bench_case(c, oc);
  return res;
}

std::string kernel_bench_table(const KernelBenchResult& r) {
  std::string s;
  char line[512];
  std::snprintf(line, sizeof line, "device %s: copy %.0f GB/s (read + write), bf16 GEMM %.0f TFLOP/s\n\n",
                r.device.c_str(), r.copy_gb_s, r.gemm_tflop_s);
  s += line;
  std::snprintf(line, sizeof line, "| %-24s | %-44s | %10s | %9s | %7s | %8s | %7s |\n", "kernel", "shape", "us",
                "GB/s", "% copy", "TFLOP/s", "% gemm");
  s += line;
  s += "|--------------------------|----------------------------------------------|------------|-----------|---------|----------|---------|\n";
  for (const auto& x : r.rows) {
    std::snprintf(line, sizeof line, "| %-24s | %-44s | %10.2f | %9.1f | %6.1f%% | %8.2f | %6.1f%% |\n",
                  x.kernel.c_str(), x.shape.c_str(), x.us, x.gb_s(),
                  r.copy_gb_s > 0 ? 100.0 * x.gb_s() / r.copy_gb_s : 0.0, x.tflop_s(),
                  r.gemm_tflop_s > 0 ? 100.0 * x.tflop_s() / r.gemm_tflop_s : 0.0);
    s += line;
  }
  return s;
}

std::string kernel_bench_json(const KernelBenchResult& r) {
  nlohmann::json j;
  j["device"] = r.device;
  j["copy_gb_s"] = r.copy_gb_s;
  j["gemm_tflop_s"] = r.gemm_tflop_s;
  for (const auto& x : r.rows)
    j["rows"].push_back({{"kernel", x.kernel}, {"shape", x.shape}, {"us", x.us}, {"bytes", x.bytes},
                         {"flops", x.flops}, {"gb_s", x.gb_s()}, {"tflop_s", x.tflop_s()}});
  return j.dump(2);
}

}  // namespace pagoda
