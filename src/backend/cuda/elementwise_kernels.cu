// Row-wise and elementwise kernels: embedding, gather_rows, rms_norm / add_rms_norm, silu_mul,
// gelu_tanh_mul, scale / softcap, sigmoid_gate. Every kernel reads and writes rows through a dim-0 stride; rows are processed in
// 16-byte vectors when the pointers and strides allow it, element by element otherwise.
#include <algorithm>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"

namespace pagoda::cuda {
namespace {

// ---- vector access ------------------------------------------------------------------------------

template <int V, typename T>
__device__ __forceinline__ void load_n(const T* p, T (&v)[V]) {
  if constexpr (V * sizeof(T) == 16) {
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    const T* e = reinterpret_cast<const T*>(&u);
#pragma unroll
    for (int i = 0; i < V; ++i) v[i] = e[i];
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) v[i] = p[i];
  }
}

template <int V, typename T>
__device__ __forceinline__ void store_n(T* p, const T (&v)[V]) {
  if constexpr (V * sizeof(T) == 16) {
    uint4 u;
    T* e = reinterpret_cast<T*>(&u);
#pragma unroll
    for (int i = 0; i < V; ++i) e[i] = v[i];
    *reinterpret_cast<uint4*>(p) = u;
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) p[i] = v[i];
  }
}

// True when every (pointer, row stride) pair allows 16-byte access of rows of `cols` elements.
bool vec16_ok(size_t esize, int64_t cols, std::initializer_list<std::pair<const void*, int64_t>> rows) {
  if ((cols * static_cast<int64_t>(esize)) % 16 != 0) return false;
  for (const auto& [p, stride] : rows)
    if (!aligned16(p) || (stride * static_cast<int64_t>(esize)) % 16 != 0) return false;
  return true;
}

int threads_for(int64_t work_items) {
  int64_t t = (work_items + 31) / 32 * 32;
  return static_cast<int>(std::clamp<int64_t>(t, 32, 256));
}

void check_2d_rows(const char* op, const Tensor& t, int64_t rows, int64_t cols, const char* name) {
  require(t.device == Device::CUDA, op, std::string(name) + " must be on cuda, got " + shape_str(t));
  require(num_rows(t) == rows && t.row_numel() == cols, op,
          std::string(name) + " has shape " + shape_str(t) + ", expected " + std::to_string(rows) +
              " rows of " + std::to_string(cols));
}

// ---- gather (embedding of the table's own dtype, gather_rows) ------------------------------------

template <typename U>
__global__ void gather_rows_kernel(const char* src, int64_t src_stride_bytes, int64_t src_rows,
                                   const int32_t* idx, char* dst, int64_t dst_stride_bytes,
                                   int64_t units_per_row, int blocks_per_row) {
  const int64_t row = blockIdx.x / blocks_per_row;
  const int64_t c = static_cast<int64_t>(blockIdx.x % blocks_per_row) * blockDim.x + threadIdx.x;
  if (c >= units_per_row) return;
  const int64_t r = idx[row];
  U val{};
  if (r >= 0 && r < src_rows) val = reinterpret_cast<const U*>(src + r * src_stride_bytes)[c];
  reinterpret_cast<U*>(dst + row * dst_stride_bytes)[c] = val;
}

void gather_bytes(const Tensor& x, const Tensor& idx, Tensor& out, cudaStream_t stream) {
  const int64_t n = num_rows(out);
  if (n == 0) return;
  const size_t es = dtype_size(x.dtype);
  const int64_t row_bytes = x.row_numel() * static_cast<int64_t>(es);
  const int64_t ss = x.stride0() * static_cast<int64_t>(es), ds = out.stride0() * static_cast<int64_t>(es);
  auto run = [&](auto unit) {
    using U = decltype(unit);
    const int64_t units = row_bytes / static_cast<int64_t>(sizeof(U));
    const int threads = threads_for(units);
    const int bpr = static_cast<int>((units + threads - 1) / threads);
    gather_rows_kernel<U><<<static_cast<unsigned>(n * bpr), threads, 0, stream>>>(
        static_cast<const char*>(x.data), ss, num_rows(x), idx.ptr<int32_t>(), static_cast<char*>(out.data), ds,
        units, bpr);
  };
  const uintptr_t a = reinterpret_cast<uintptr_t>(x.data) | reinterpret_cast<uintptr_t>(out.data) |
                      static_cast<uintptr_t>(row_bytes) | static_cast<uintptr_t>(ss) | static_cast<uintptr_t>(ds);
  if (a % 16 == 0) run(uint4{});
  else if (a % 4 == 0) run(uint32_t{});
  else run(uint16_t{});
  PAGODA_CUDA_CHECK_LAUNCH();
}

template <typename Tin, typename Tout>
__global__ void embedding_convert_kernel(const Tin* table, int64_t table_stride, int64_t vocab,
                                         const int32_t* ids, Tout* out, int64_t out_stride, int64_t hidden,
                                         int blocks_per_row) {
  const int64_t row = blockIdx.x / blocks_per_row;
  const int64_t c = static_cast<int64_t>(blockIdx.x % blocks_per_row) * blockDim.x + threadIdx.x;
  if (c >= hidden) return;
  const int64_t id = ids[row];
  const float v = (id >= 0 && id < vocab) ? to_f32(table[id * table_stride + c]) : 0.0f;
  out[row * out_stride + c] = from_f32<Tout>(v);
}

// ---- RMSNorm ----------------------------------------------------------------------------------------

// One block per vector of `hidden` elements; `per_row` vectors in each row of dim 0 (the heads of a
// per-head norm, 1 otherwise).
template <typename T, bool kAdd, int V>
__global__ void rms_norm_kernel(const T* x, int64_t xs, T* res, int64_t rs, const void* w, int wdt,
                                T* out, int64_t os, int hidden, int per_row, float eps, float w_offset) {
  const int64_t row = blockIdx.x / per_row, part = static_cast<int64_t>(blockIdx.x % per_row) * hidden;
  const T* xr = x + row * xs + part;
  T* rr = kAdd ? res + row * rs + part : nullptr;
  T* orow = out + row * os + part;
  const int step = static_cast<int>(blockDim.x) * V;
  float ss = 0.0f;
  for (int i = static_cast<int>(threadIdx.x) * V; i < hidden; i += step) {
    T xv[V];
    load_n<V>(xr + i, xv);
    if constexpr (kAdd) {
      // The residual stream is stored in T: round the sum, and take the statistics of what is stored.
      T rv[V];
      load_n<V>(rr + i, rv);
#pragma unroll
      for (int e = 0; e < V; ++e) rv[e] = from_f32<T>(to_f32(rv[e]) + to_f32(xv[e]));
      store_n<V>(rr + i, rv);
#pragma unroll
      for (int e = 0; e < V; ++e) xv[e] = rv[e];
    }
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const float f = to_f32(xv[e]);
      ss += f * f;
    }
  }
  ss = block_sum(ss);
  const float inv = rsqrtf(ss / static_cast<float>(hidden) + eps);
  for (int i = static_cast<int>(threadIdx.x) * V; i < hidden; i += step) {
    T v[V];
    load_n<V>(kAdd ? rr + i : xr + i, v);  // this thread's own elements: no barrier needed
    T o[V];
    // Hugging Face's Qwen3RMSNorm (plain weight) rounds the normalised value to T before the
    // weight multiplies it; the zero-centred (1 + w) norm of Qwen3.5 multiplies in fp32 and
    // rounds once. Rounding points as there, so that bf16 results match bit for bit more often.
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const float wv = load_weight(w, wdt, i + e);
      o[e] = w_offset == 0.0f ? from_f32<T>(round_to<T>(to_f32(v[e]) * inv) * wv)
                              : from_f32<T>(to_f32(v[e]) * inv * (wv + w_offset));
    }
    store_n<V>(orow + i, o);
  }
}

// ---- silu_mul, sigmoid_gate -----------------------------------------------------------------------

// out = silu(gate) * up with the rounding of a T-typed reference: silu rounded to T, product rounded.
template <typename T, int V>
__global__ void silu_mul_kernel(const T* gu, int64_t gs, T* out, int64_t os, int64_t inter, int blocks_per_row) {
  const int64_t row = blockIdx.x / blocks_per_row;
  const int64_t i = (static_cast<int64_t>(blockIdx.x % blocks_per_row) * blockDim.x + threadIdx.x) * V;
  if (i >= inter) return;
  T g[V], u[V], o[V];
  load_n<V>(gu + row * gs + i, g);
  load_n<V>(gu + row * gs + inter + i, u);
#pragma unroll
  for (int e = 0; e < V; ++e) {
    const float x = to_f32(g[e]);
    const float s = round_to<T>(x / (1.0f + __expf(-x)));
    o[e] = from_f32<T>(s * to_f32(u[e]));
  }
  store_n<V>(out + row * os + i, o);
}

// out = gelu_tanh(gate) * up (torch's gelu(approximate="tanh")), rounded as silu_mul_kernel rounds.
template <typename T, int V>
__global__ void gelu_tanh_mul_kernel(const T* gu, int64_t gs, T* out, int64_t os, int64_t inter,
                                     int blocks_per_row) {
  const int64_t row = blockIdx.x / blocks_per_row;
  const int64_t i = (static_cast<int64_t>(blockIdx.x % blocks_per_row) * blockDim.x + threadIdx.x) * V;
  if (i >= inter) return;
  constexpr float kBeta = 0.7978845608028654f;  // sqrt(2/pi)
  constexpr float kKappa = 0.044715f;
  T g[V], u[V], o[V];
  load_n<V>(gu + row * gs + i, g);
  load_n<V>(gu + row * gs + inter + i, u);
#pragma unroll
  for (int e = 0; e < V; ++e) {
    const float x = to_f32(g[e]);
    const float s = round_to<T>(0.5f * x * (1.0f + tanhf(kBeta * (x + kKappa * x * x * x))));
    o[e] = from_f32<T>(s * to_f32(u[e]));
  }
  store_n<V>(out + row * os + i, o);
}

// In place: x = x * factor (cap == 0) or cap * tanh(x / cap) (transformers' soft-capping order).
template <typename T, int V>
__global__ void scale_or_cap_kernel(T* x, int64_t xs, int64_t cols, float factor, float cap,
                                    int blocks_per_row) {
  const int64_t row = blockIdx.x / blocks_per_row;
  const int64_t i = (static_cast<int64_t>(blockIdx.x % blocks_per_row) * blockDim.x + threadIdx.x) * V;
  if (i >= cols) return;
  T v[V];
  load_n<V>(x + row * xs + i, v);
#pragma unroll
  for (int e = 0; e < V; ++e) {
    const float f = to_f32(v[e]);
    v[e] = from_f32<T>(cap > 0.0f ? tanhf(f / cap) * cap : f * factor);
  }
  store_n<V>(x + row * xs + i, v);
}

template <typename T, int V>
__global__ void sigmoid_gate_kernel(const T* a, int64_t as, const T* gate, int64_t gs, T* out, int64_t os,
                                    int64_t cols, int blocks_per_row) {
  const int64_t row = blockIdx.x / blocks_per_row;
  const int64_t i = (static_cast<int64_t>(blockIdx.x % blocks_per_row) * blockDim.x + threadIdx.x) * V;
  if (i >= cols) return;
  T x[V], g[V], o[V];
  load_n<V>(a + row * as + i, x);
  load_n<V>(gate + row * gs + i, g);
#pragma unroll
  for (int e = 0; e < V; ++e) {
    const float s = round_to<T>(1.0f / (1.0f + __expf(-to_f32(g[e]))));
    o[e] = from_f32<T>(to_f32(x[e]) * s);
  }
  store_n<V>(out + row * os + i, o);
}

}  // namespace

void launch_embedding(const Tensor& table, const Tensor& ids, Tensor& out, cudaStream_t stream) {
  const char* op = "embedding";
  require(table.ndim == 2, op, "table must be 2-D, got " + shape_str(table));
  require(ids.dtype == DType::I32 && ids.device == Device::CUDA, op, "ids must be I32 on cuda, got " + shape_str(ids));
  const int64_t n = ids.numel();
  check_2d_rows(op, out, n, table.shape[1], "out");
  if (n == 0) return;
  if (table.dtype == out.dtype) {
    gather_bytes(table, ids, out, stream);
    return;
  }
  PAGODA_DISPATCH_FLOAT(table.dtype, Tin, op, PAGODA_DISPATCH_FLOAT(out.dtype, Tout, op, {
    const int64_t hidden = table.shape[1];
    const int threads = threads_for(hidden);
    const int bpr = static_cast<int>((hidden + threads - 1) / threads);
    embedding_convert_kernel<Tin, Tout><<<static_cast<unsigned>(n * bpr), threads, 0, stream>>>(
        table.ptr<Tin>(), table.stride0(), table.shape[0], ids.ptr<int32_t>(), out.ptr<Tout>(),
        out.stride0(), hidden, bpr);
  }));
  PAGODA_CUDA_CHECK_LAUNCH();
}

void launch_gather_rows(const Tensor& x, const Tensor& rows, Tensor& out, cudaStream_t stream) {
  const char* op = "gather_rows";
  require(rows.dtype == DType::I32 && rows.device == Device::CUDA, op, "rows must be I32 on cuda, got " + shape_str(rows));
  require(out.dtype == x.dtype, op, "out " + shape_str(out) + " and x " + shape_str(x) + " differ in dtype");
  check_2d_rows(op, out, rows.numel(), x.row_numel(), "out");
  gather_bytes(x, rows, out, stream);
}

void launch_rms_norm(const Tensor& x, Tensor* residual, const Tensor& w, Tensor& out, float eps,
                     bool zero_centered, cudaStream_t stream) {
  const char* op = residual ? "add_rms_norm" : "rms_norm";
  const int64_t rows = num_rows(x), hidden = x.ndim ? x.shape[static_cast<size_t>(x.ndim - 1)] : 0;
  require(hidden > 0 && x.row_numel() % hidden == 0, op,
          "x must be [rows, hidden] or [rows, heads, hidden], got " + shape_str(x));
  const int64_t per_row = x.row_numel() / hidden;  // vectors normalised in each row
  require(w.numel() == hidden && w.device == Device::CUDA, op,
          "weight " + shape_str(w) + " does not match hidden " + std::to_string(hidden));
  require(w.dtype == DType::F32 || w.dtype == DType::BF16 || w.dtype == DType::F16, op,
          "weight dtype must be F32, BF16 or F16");
  check_2d_rows(op, out, rows, per_row * hidden, "out");
  require(out.dtype == x.dtype, op, "out and x must have one dtype");
  if (residual) {
    check_2d_rows(op, *residual, rows, per_row * hidden, "residual");
    require(residual->dtype == x.dtype, op, "residual and x must have one dtype");
  }
  if (rows == 0) return;
  require(hidden < (int64_t{1} << 30) && rows * per_row < (int64_t{1} << 31), op, "x too large");
  const float w_off = zero_centered ? 1.0f : 0.0f;
  PAGODA_DISPATCH_FLOAT(x.dtype, T, op, {
    constexpr int V16 = 16 / sizeof(T);
    T* res = residual ? residual->ptr<T>() : nullptr;
    const int64_t rs = residual ? residual->stride0() : 0;
    bool vec = vec16_ok(sizeof(T), hidden, {{x.data, x.stride0()}, {out.data, out.stride0()}});
    if (residual) vec = vec && vec16_ok(sizeof(T), hidden, {{residual->data, rs}});
    auto go = [&](auto add_tag, auto v_tag) {
      constexpr bool kAdd = decltype(add_tag)::value;
      constexpr int V = decltype(v_tag)::value;
      const int threads = threads_for(hidden / V);
      rms_norm_kernel<T, kAdd, V><<<static_cast<unsigned>(rows * per_row), threads, 0, stream>>>(
          x.ptr<T>(), x.stride0(), res, rs, w.data, static_cast<int>(w.dtype), out.ptr<T>(),
          out.stride0(), static_cast<int>(hidden), static_cast<int>(per_row), eps, w_off);
    };
    if (residual) {
      if (vec) go(std::true_type{}, std::integral_constant<int, V16>{});
      else go(std::true_type{}, std::integral_constant<int, 1>{});
    } else {
      if (vec) go(std::false_type{}, std::integral_constant<int, V16>{});
      else go(std::false_type{}, std::integral_constant<int, 1>{});
    }
  });
  PAGODA_CUDA_CHECK_LAUNCH();
}

namespace {

// The GLU activations: act(gate_up[:, :I]) * gate_up[:, I:], one launcher for both kernels.
void launch_glu(const char* op, bool gelu_tanh, const Tensor& gate_up, Tensor& out, cudaStream_t stream) {
  const int64_t rows = num_rows(gate_up), two_i = gate_up.row_numel();
  require(gate_up.ndim == 2 && two_i % 2 == 0, op, "gate_up must be [T, 2I], got " + shape_str(gate_up));
  const int64_t inter = two_i / 2;
  check_2d_rows(op, out, rows, inter, "out");
  require(out.dtype == gate_up.dtype, op, "out and gate_up must have one dtype");
  if (rows == 0 || inter == 0) return;
  PAGODA_DISPATCH_FLOAT(gate_up.dtype, T, op, {
    constexpr int V16 = 16 / sizeof(T);
    const bool vec = vec16_ok(sizeof(T), inter, {{gate_up.data, gate_up.stride0()}, {out.data, out.stride0()}});
    auto go = [&](auto v_tag) {
      constexpr int V = decltype(v_tag)::value;
      const int64_t items = inter / V;
      const int threads = threads_for(items);
      const int bpr = static_cast<int>((items + threads - 1) / threads);
      const auto blocks = static_cast<unsigned>(rows * bpr);
      if (gelu_tanh)
        gelu_tanh_mul_kernel<T, V><<<blocks, threads, 0, stream>>>(gate_up.ptr<T>(), gate_up.stride0(), out.ptr<T>(),
                                                                   out.stride0(), inter, bpr);
      else
        silu_mul_kernel<T, V><<<blocks, threads, 0, stream>>>(gate_up.ptr<T>(), gate_up.stride0(), out.ptr<T>(),
                                                              out.stride0(), inter, bpr);
    };
    if (vec) go(std::integral_constant<int, V16>{});
    else go(std::integral_constant<int, 1>{});
  });
  PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_silu_mul(const Tensor& gate_up, Tensor& out, cudaStream_t stream) {
  launch_glu("silu_mul", false, gate_up, out, stream);
}

void launch_gelu_tanh_mul(const Tensor& gate_up, Tensor& out, cudaStream_t stream) {
  launch_glu("gelu_tanh_mul", true, gate_up, out, stream);
}

void launch_scale_or_cap(Tensor& x, float factor, float cap, cudaStream_t stream) {
  const char* op = cap > 0.0f ? "softcap" : "scale";
  const int64_t rows = num_rows(x), cols = x.row_numel();
  require(x.ndim >= 1, op, "x must have rows, got " + shape_str(x));
  if (rows == 0 || cols == 0) return;
  PAGODA_DISPATCH_FLOAT(x.dtype, T, op, {
    constexpr int V16 = 16 / sizeof(T);
    const bool vec = vec16_ok(sizeof(T), cols, {{x.data, x.stride0()}});
    auto go = [&](auto v_tag) {
      constexpr int V = decltype(v_tag)::value;
      const int64_t items = cols / V;
      const int threads = threads_for(items);
      const int bpr = static_cast<int>((items + threads - 1) / threads);
      scale_or_cap_kernel<T, V><<<static_cast<unsigned>(rows * bpr), threads, 0, stream>>>(
          x.ptr<T>(), x.stride0(), cols, factor, cap, bpr);
    };
    if (vec) go(std::integral_constant<int, V16>{});
    else go(std::integral_constant<int, 1>{});
  });
  PAGODA_CUDA_CHECK_LAUNCH();
}

void launch_sigmoid_gate(const Tensor& a, const Tensor& gate, Tensor& out, cudaStream_t stream) {
  const char* op = "sigmoid_gate";
  const int64_t rows = num_rows(a), cols = a.row_numel();
  check_2d_rows(op, gate, rows, cols, "gate");
  check_2d_rows(op, out, rows, cols, "out");
  require(a.dtype == gate.dtype && a.dtype == out.dtype, op, "a, gate and out must have one dtype");
  if (rows == 0 || cols == 0) return;
  PAGODA_DISPATCH_FLOAT(a.dtype, T, op, {
    constexpr int V16 = 16 / sizeof(T);
    const bool vec = vec16_ok(sizeof(T), cols,
                              {{a.data, a.stride0()}, {gate.data, gate.stride0()}, {out.data, out.stride0()}});
    auto go = [&](auto v_tag) {
      constexpr int V = decltype(v_tag)::value;
      const int64_t items = cols / V;
      const int threads = threads_for(items);
      const int bpr = static_cast<int>((items + threads - 1) / threads);
      sigmoid_gate_kernel<T, V><<<static_cast<unsigned>(rows * bpr), threads, 0, stream>>>(
          a.ptr<T>(), a.stride0(), gate.ptr<T>(), gate.stride0(), out.ptr<T>(), out.stride0(), cols, bpr);
    };
    if (vec) go(std::integral_constant<int, V16>{});
    else go(std::integral_constant<int, 1>{});
  });
  PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace pagoda::cuda
