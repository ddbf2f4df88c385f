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

#include "core/dtype.h"
#include "core/error.h"

#ifdef PAGODA_HAS_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

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

struct LinearShape {
  const char* name;
  int64_t n, k;
};

// The CUDA backend's linear path switch for x with at most `t` rows: the skinny-GEMM kernel
// (gemv.cu) where it is measured faster, or cuBLASLt. Returns the previous setting; -1 where the
// backend has no such switch.
int set_gemv_tokens(Backend& be, int t) {
#ifdef PAGODA_HAS_CUDA
  if (auto* cuda = dynamic_cast<CudaBackend*>(&be)) {
    const int prev = cuda->gemv_max_tokens();
    cuda->set_gemv_max_tokens(t);
    return prev;
  }
#endif
  (void)be;
  (void)t;
  return -1;
}

// Whether the backend's linear(x, w, out) takes the skinny-GEMM kernel.
bool uses_gemv(Backend& be, const Tensor& x, const Tensor& w, const Tensor& out) {
#ifdef PAGODA_HAS_CUDA
  if (auto* cuda = dynamic_cast<CudaBackend*>(&be)) return cuda->uses_gemv(x, w, out);
#endif
  (void)be;
  (void)x;
  (void)w;
  (void)out;
  return false;
}

void bench_linear(Ctx& c, const char* model, std::vector<LinearShape> mats, std::vector<int64_t> ts) {
  for (int64_t t : ts) {
    for (const LinearShape& s : mats) {
      const bool head = std::string(s.name) == "lm_head";
      const std::string shape = std::string(model) + " " + s.name + " T=" + std::to_string(t) + " " + dims({s.n, s.k});
      if (!c.wanted("linear", shape)) continue;
      if (head && t > 256) continue;  // lm_head runs on sampled rows only
      Arena ar(c.be);
      const DType out_t = head ? DType::F32 : c.act;
      const double wbytes = static_cast<double>(s.n * s.k) * dtype_size(c.act);
      const int copies = copies_for(wbytes);
      std::vector<Tensor> w;
      for (int i = 0; i < copies; ++i) w.push_back(ar.random(c.act, {s.n, s.k}));
      Tensor x = ar.random(c.act, {t, s.k}), y = ar.random(out_t, {t, s.n});
      const double bytes = wbytes + static_cast<double>(t * s.k) * dtype_size(c.act) +
                           static_cast<double>(t * s.n) * dtype_size(out_t);
      const auto run = [&] {
        return time_us(c.be, [&](int i) { c.be.linear(x, w[static_cast<size_t>(i % copies)], y); }, c.opt.quick);
      };
      // Where the backend takes the skinny-GEMM kernel, cuBLASLt beside it.
      if (uses_gemv(c.be, x, w[0], y)) {
        c.add("linear gemv", shape, run(), bytes, 2.0 * static_cast<double>(t) * s.n * s.k);
        const int saved = set_gemv_tokens(c.be, 0);
        c.add("linear cublaslt", shape, run(), bytes, 2.0 * static_cast<double>(t) * s.n * s.k);
        set_gemv_tokens(c.be, saved);
      } else {
        c.add("linear", shape, run(), bytes, 2.0 * static_cast<double>(t) * s.n * s.k);
      }
    }
  }
}

void bench_norms(Ctx& c, const std::vector<int64_t>& ts) {
  for (int64_t h : {int64_t{1024}, int64_t{4096}}) {
    for (int64_t t : ts) {
      const std::string shape = "T=" + std::to_string(t) + " H=" + std::to_string(h);
      Arena ar(c.be);
      const int copies = copies_for(4.0 * static_cast<double>(t * h) * dtype_size(c.act));
      std::vector<Tensor> x, res, out;
      for (int i = 0; i < copies; ++i) {
        x.push_back(ar.random(c.act, {t, h}));
        res.push_back(ar.random(c.act, {t, h}));
        out.push_back(ar.random(c.act, {t, h}));
      }
      Tensor w = ar.random(DType::F32, {h});
      const double es = static_cast<double>(dtype_size(c.act)), n = static_cast<double>(t * h);
      if (c.wanted("rms_norm", shape)) {
        const double us = time_us(c.be, [&](int i) {
          const size_t j = static_cast<size_t>(i % copies);
          c.be.rms_norm(x[j], w, out[j], 1e-6f, false);
        }, c.opt.quick);
        c.add("rms_norm", shape, us, 2 * n * es + h * 4.0, 4 * n);
      }
      if (c.wanted("add_rms_norm", shape)) {
        const double us = time_us(c.be, [&](int i) {
          const size_t j = static_cast<size_t>(i % copies);
          c.be.add_rms_norm(res[j], x[j], w, out[j], 1e-6f, false);
        }, c.opt.quick);
        c.add("add_rms_norm", shape, us, 4 * n * es + h * 4.0, 5 * n);
      }
      if (c.wanted("silu_mul", shape) && h == 4096) {
        // gate_up [T, 2I] → [T, I] with I = h (as wide as an 8B-class MLP's half).
        std::vector<Tensor> gu;
        for (int i = 0; i < copies; ++i) gu.push_back(ar.random(c.act, {t, 2 * h}));
        const double us = time_us(c.be, [&](int i) {
          const size_t j = static_cast<size_t>(i % copies);
          c.be.silu_mul(gu[j], out[j]);
        }, c.opt.quick);
        c.add("silu_mul", "T=" + std::to_string(t) + " I=" + std::to_string(h), us, 3 * n * es, 5 * n);
      }
    }
  }
}

// Paged attention over `seqs` sequences of q_len new tokens and ctx context each, KV blocks in a
// shuffled order (as a long-running server's pool is).
void bench_attention(Ctx& c, int hq, int hkv, int d, int seqs, int q_len, int ctx) {
  const std::string shape = "Hq" + std::to_string(hq) + "/Hkv" + std::to_string(hkv) + " D" + std::to_string(d) +
                            " B=" + std::to_string(seqs) + " q=" + std::to_string(q_len) + " ctx=" + std::to_string(ctx);
  const std::string kernel = q_len == 1 ? "paged_attention decode" : "paged_attention prefill";
  if (!c.wanted(kernel, shape)) return;
  const int bs = 16, nblk = (ctx + bs - 1) / bs;
  const double kv_bytes = 2.0 * seqs * static_cast<double>(ctx) * hkv * d * dtype_size(c.act);
  const int copies = copies_for(kv_bytes);
  const int64_t blocks = static_cast<int64_t>(copies) * seqs * nblk + 1;
  Arena ar(c.be);
  Tensor kc = ar.random(c.act, {blocks, bs, hkv, d}), vc = ar.random(c.act, {blocks, bs, hkv, d});
  std::vector<int32_t> perm(static_cast<size_t>(blocks - 1));
  std::iota(perm.begin(), perm.end(), 1);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(7));
  const int64_t t = static_cast<int64_t>(seqs) * q_len;
  std::vector<int32_t> cu(static_cast<size_t>(seqs) + 1), lens(static_cast<size_t>(seqs), ctx), pos, slots;
  for (int s = 0; s <= seqs; ++s) cu[static_cast<size_t>(s)] = s * q_len;
  std::vector<Tensor> bt;
  for (int cp = 0; cp < copies; ++cp) {
    std::vector<int32_t> table(static_cast<size_t>(seqs) * nblk);
    for (size_t i = 0; i < table.size(); ++i) table[i] = perm[static_cast<size_t>(cp) * table.size() + i];
    bt.push_back(ar.ints(table, {seqs, nblk}));
  }
  StepMeta m;
  m.cu_seqlens_q = ar.ints(cu, {seqs + 1});
  m.seq_lens = ar.ints(lens, {seqs});
  m.num_tokens = static_cast<int32_t>(t);
  m.num_seqs = seqs;
  m.max_query_len = q_len;
  m.max_seq_len = ctx;
  m.max_blocks_per_seq = nblk;
  m.block_size = bs;
  Tensor q = ar.random(c.act, {t, hq, d}), out = ar.random(c.act, {t, hq, d});
  AttentionParams p;
  p.scale = 1.0f / std::sqrt(static_cast<float>(d));
  const double us = time_us(c.be, [&](int i) {
    StepMeta mi = m;
    mi.block_tables = bt[static_cast<size_t>(i % copies)];
    c.be.paged_attention(q, kc, vc, mi, p, out);
  }, c.opt.quick);
  // Causal: query i of a chunk sees ctx - q_len + i + 1 keys.
  double keys = 0;
  for (int i = 0; i < q_len; ++i) keys += ctx - q_len + i + 1;
  const double flops = 4.0 * seqs * keys * hq * d;
  const double bytes = kv_bytes + 2.0 * static_cast<double>(t) * hq * d * dtype_size(c.act);
  c.add(kernel, shape, us, bytes, flops);
}

// Gated DeltaNet of Qwen3.5-0.8B (Hk = Hv = 16, dk = dv = 128, conv kernel 4): conv, delta rule
// (fp32 state read and written), gated norm.
void bench_gdn(Ctx& c, int seqs, int q_len) {
  const int64_t hk = 16, hv = 16, dk = 128, dv = 128, kconv = 4, conv_dim = 2 * hk * dk + hv * dv;
  const int64_t t = static_cast<int64_t>(seqs) * q_len;
  const std::string shape = "Hv16 dk128 dv128 B=" + std::to_string(seqs) + " q=" + std::to_string(q_len);
  Arena ar(c.be);
  std::vector<int32_t> cu(static_cast<size_t>(seqs) + 1), slot(static_cast<size_t>(seqs)), init(static_cast<size_t>(seqs), 1);
  for (int s = 0; s <= seqs; ++s) cu[static_cast<size_t>(s)] = s * q_len;
  std::iota(slot.begin(), slot.end(), 0);
  std::shuffle(slot.begin(), slot.end(), std::mt19937(3));
  StepMeta m;
  m.cu_seqlens_q = ar.ints(cu, {seqs + 1});
  m.state_slots = ar.ints(slot, {seqs});
  m.has_initial_state = ar.ints(init, {seqs});
  m.num_tokens = static_cast<int32_t>(t);
  m.num_seqs = seqs;
  m.max_query_len = q_len;
  const double es = static_cast<double>(dtype_size(c.act));
  if (c.wanted("causal_conv1d_silu", shape)) {
    Tensor x = ar.random(c.act, {t, conv_dim}), w = ar.random(c.act, {conv_dim, kconv});
    Tensor st = ar.random(c.act, {seqs, conv_dim, kconv - 1}), out = ar.random(c.act, {t, conv_dim});
    const double us = time_us(c.be, [&](int) { c.be.causal_conv1d_silu(x, w, st, m, out); }, c.opt.quick);
    const double bytes = 2.0 * t * conv_dim * es + 2.0 * seqs * conv_dim * (kconv - 1) * es;
    c.add("causal_conv1d_silu", shape, us, bytes, 2.0 * t * conv_dim * kconv);
  }
  if (c.wanted("gated_delta_rule", shape)) {
    Tensor qkv = ar.random(c.act, {t, conv_dim});
    const Tensor q = qkv.cols(0, hk * dk).reshape({t, hk, dk});
    const Tensor k = qkv.cols(hk * dk, 2 * hk * dk).reshape({t, hk, dk});
    const Tensor v = qkv.cols(2 * hk * dk, conv_dim).reshape({t, hv, dv});
    Tensor ba = ar.random(c.act, {t, 2 * hv});
    const Tensor b = ba.cols(0, hv), a = ba.cols(hv, 2 * hv);
    Tensor alog = ar.random(DType::F32, {hv}), dtb = ar.random(DType::F32, {hv});
    Tensor state = ar.random(DType::F32, {seqs, hv, dk, dv}), out = ar.random(c.act, {t, hv, dv});
    const double us = time_us(c.be, [&](int) { c.be.gated_delta_rule(q, k, v, b, a, alog, dtb, state, m, out); },
                              c.opt.quick);
    const double state_bytes = 2.0 * seqs * hv * dk * dv * 4;
    const double bytes = state_bytes + static_cast<double>(t) * (conv_dim + 2 * hv + hv * dv) * es;
    // Recurrent-equivalent work: decay, k^T S, rank-1 update and q S per token and head.
    c.add("gated_delta_rule", shape, us, bytes, 8.0 * t * hv * dk * dv);
  }
  if (c.wanted("gated_rms_norm", shape)) {
    Tensor x = ar.random(c.act, {t, hv, dv}), z = ar.random(c.act, {t, hv, dv}), w = ar.random(DType::F32, {dv});
    const double us = time_us(c.be, [&](int) { c.be.gated_rms_norm(x, z, w, 1e-6f, x); }, c.opt.quick);
    c.add("gated_rms_norm", shape, us, 3.0 * t * hv * dv * es, 8.0 * t * hv * dv);
  }
}

void bench_argmax(Ctx& c, int64_t rows) {
  const int64_t vocab = 151936;
  const std::string shape = dims({rows, vocab}) + " f32";
  if (!c.wanted("argmax_rows", shape)) return;
  Arena ar(c.be);
  const int copies = copies_for(static_cast<double>(rows * vocab) * 4);
  std::vector<Tensor> x;
  for (int i = 0; i < copies; ++i) x.push_back(ar.random(DType::F32, {rows, vocab}));
  Tensor out = ar.random(DType::I32, {rows});
  const double us = time_us(c.be, [&](int i) { c.be.argmax_rows(x[static_cast<size_t>(i % copies)], out); }, c.opt.quick);
  c.add("argmax_rows", shape, us, static_cast<double>(rows * vocab) * 4, static_cast<double>(rows * vocab));
}

}  // namespace

KernelBenchResult run_kernel_bench(Backend& be, const KernelBenchOptions& opt) {
  KernelBenchResult res;
  res.device = be.name();
  Ctx c{be, opt, res, be.activation_dtype()};
  bench_ceilings(c);
  const bool quick = opt.quick || be.device() == Device::CPU;
  const std::vector<int64_t> ts = quick ? std::vector<int64_t>{1, 128, 2048}
                                       : std::vector<int64_t>{1, 2, 4, 8, 16, 64, 128, 512, 2048, 8192};
  // Qwen3-0.6B: H 1024, 16/8 heads of 128, I 3072, vocab 151936.
  bench_linear(c, "0.6B", {{"qkv", 4096, 1024}, {"o", 1024, 2048}, {"gate_up", 6144, 1024}, {"down", 1024, 3072},
                           {"lm_head", 151936, 1024}}, ts);
  // Qwen3-8B: H 4096, 32/8 heads of 128, I 12288.
  bench_linear(c, "8B", {{"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 24576, 4096}, {"down", 4096, 12288},
                         {"lm_head", 151936, 4096}}, ts);
  bench_norms(c, quick ? std::vector<int64_t>{1, 2048} : std::vector<int64_t>{1, 128, 8192});
  // Decode attention: long contexts, large batches (Qwen3-0.6B and Qwen3-8B heads).
  for (auto [hq, hkv] : {std::pair{16, 8}, std::pair{32, 8}}) {
    for (auto [b, ctx] : {std::pair{1, 4096}, std::pair{1, 32768}, std::pair{16, 4096}, std::pair{64, 2048},
                          std::pair{128, 1024}, std::pair{128, 4096}, std::pair{256, 2048}}) {
      if (quick && ctx > 4096) continue;
      bench_attention(c, hq, hkv, 128, b, 1, ctx);
    }
  }
  bench_attention(c, 16, 8, 128, 1, 2048, 2048);
  bench_attention(c, 16, 8, 128, 8, 512, 512);
  bench_attention(c, 8, 2, 256, 64, 1, 2048);  // Qwen3.5-0.8B's attention layers
  for (auto [b, q] : {std::pair{1, 1}, std::pair{64, 1}, std::pair{256, 1}, std::pair{1, 4096}, std::pair{8, 512}})
    bench_gdn(c, b, q);
  bench_argmax(c, 1);
  bench_argmax(c, 128);
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
