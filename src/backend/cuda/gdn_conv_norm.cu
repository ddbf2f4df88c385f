// Gated DeltaNet's elementwise-class kernels: the varlen causal depthwise conv + SiLU with its
// per-slot conv state, and the gated RMSNorm (RMSNorm with a plain weight, times silu(z)).
// Rounding follows the bf16 reference (transformers' eager path): the conv output is rounded to the
// activation dtype before SiLU; the gated norm rounds the normalised row before the weight multiply.
#include <algorithm>
#include <string>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/gdn_kernels.cuh"

namespace pagoda::cuda {
namespace {

// ---- causal_conv1d_silu -------------------------------------------------------------------------

constexpr int kConvThreads = 128;  // channel groups per block
constexpr int kConvSegment = 32;   // consecutive tokens per thread (>= kGdnMaxConvKernel - 1)
constexpr int kConvMaxK = kGdnMaxConvKernel;

template <int V, typename T>
struct alignas(sizeof(T) * V) VecT {
  T e[V];
};

// Thread = V consecutive channels (one 16-byte access where the layout allows it). Work items (grid.x):
// item s < nseq is the first kConvSegment tokens of sequence s — the only item that reads the slot's
// old state, and the one that writes the new state; item nseq + w is the step's rows
// kConvSegment·w .. kConvSegment·(w + 1) − 1, of whatever sequences, past their own first segment (so
// its history is always inside x). A mixed step of a few long prefills among hundreds of decodes thus
// launches work for its rows, not sequences × the longest one's segments (that grid was 97% empty
// blocks at Qwen3.5-9B's throughput profile: 0.55 ms a call). The window of the last K inputs lives in
// registers, right-aligned in MK >= K slots: hist[MK - 1 - j] is the input j steps back; unused taps
// carry weight 0.
template <typename T, typename TS, int V, int MK>
__device__ __forceinline__ void conv_rows(const T* __restrict__ x, int64_t xs, const float (&wr)[MK][V],
                                          const TS* st, bool use_state, T* __restrict__ out, int64_t os,
                                          int64_t begin, int t0, int t1, int c, int k) {
  using Vec = VecT<V, T>;
  float hist[MK][V];
  // Inputs before t0: from x inside the sequence, from the old state before its start (index K-1+p
  // for relative position p < 0; only the first segment gets there since kConvSegment >= K-1).
#pragma unroll
  for (int j = 1; j < MK; ++j) {
    const int p = t0 - j;
    if (j < k && p >= 0) {
      const Vec xv = *reinterpret_cast<const Vec*>(x + (begin + p) * xs + c);
#pragma unroll
      for (int e = 0; e < V; ++e) hist[MK - 1 - j][e] = to_f32(xv.e[e]);
    } else {
#pragma unroll
      for (int e = 0; e < V; ++e)
        hist[MK - 1 - j][e] = (j < k && use_state) ? to_f32(st[e * (k - 1) + k - 1 + p]) : 0.0f;
    }
  }
#pragma unroll 4
  for (int t = t0; t < t1; ++t) {
    const Vec xv = *reinterpret_cast<const Vec*>(x + (begin + t) * xs + c);
    Vec ov;
#pragma unroll
    for (int e = 0; e < V; ++e) {
      hist[MK - 1][e] = to_f32(xv.e[e]);
      float acc = 0.0f;
#pragma unroll
      for (int j = 0; j < MK; ++j) acc = fmaf(wr[j][e], hist[j][e], acc);
      acc = round_to<T>(acc);  // the conv's output is a T tensor in the reference; SiLU runs on that
      ov.e[e] = from_f32<T>(acc / (1.0f + __expf(-acc)));
#pragma unroll
      for (int j = 0; j < MK - 1; ++j) hist[j][e] = hist[j + 1][e];
    }
    *reinterpret_cast<Vec*>(out + (begin + t) * os + c) = ov;
  }
}

template <typename T, typename TS, int V, int MK>
__global__ void __launch_bounds__(kConvThreads)
    causal_conv1d_silu_kernel(const T* __restrict__ x, int64_t xs, const void* __restrict__ w, int wdt,
                              TS* __restrict__ conv_state, int64_t num_slots, T* __restrict__ out, int64_t os,
                              const int32_t* __restrict__ cu_seqlens, const int32_t* __restrict__ state_slots,
                              const int32_t* __restrict__ has_init, int nseq, int channels, int k) {
  static_assert(kConvSegment >= MK - 1, "a segment must cover the conv's history");
  using Vec = VecT<V, T>;
  const int c = (static_cast<int>(blockIdx.y) * kConvThreads + static_cast<int>(threadIdx.x)) * V;
  if (c >= channels) return;  // channels % V == 0
  const int64_t item = blockIdx.x;
  float wr[MK][V];
  auto load_w = [&] {
#pragma unroll
    for (int j = 0; j < MK; ++j)
#pragma unroll
      for (int e = 0; e < V; ++e)
        wr[MK - 1 - j][e] = j < k ? load_weight(w, wdt, static_cast<int64_t>(c + e) * k + (k - 1 - j)) : 0.0f;
  };

  if (item >= nseq) {  // rows of a window, each past its sequence's first segment
    const int64_t total = cu_seqlens[nseq];
    const int64_t r0 = (item - nseq) * kConvSegment;
    if (r0 >= total) return;
    const int64_t r1 = min(total, r0 + kConvSegment);
    bool loaded = false;
    for (int s = seq_of_row(cu_seqlens, nseq, r0); s < nseq; ++s) {
      const int64_t begin = cu_seqlens[s], end = cu_seqlens[s + 1];
      if (begin >= r1) break;
      const int64_t from = max(r0, begin + kConvSegment), to = min(r1, end);
      if (from >= to) continue;
      if (!loaded) load_w(), loaded = true;
      conv_rows<T, TS, V, MK>(x, xs, wr, static_cast<const TS*>(nullptr), false, out, os, begin,
                              static_cast<int>(from - begin), static_cast<int>(to - begin), c, k);
    }
    return;
  }

  const int s = static_cast<int>(item);
  const int64_t begin = cu_seqlens[s];
  const int len = cu_seqlens[s + 1] - static_cast<int>(begin);
  if (len <= 0) return;
  const int slot = state_slots[s];
  const bool slot_ok = slot >= 0 && slot < num_slots;
  const bool use_state = slot_ok && has_init[s] != 0;
  // Channel c + e's state entries are st[e * (k - 1) + i], i < k - 1, oldest first.
  TS* st = slot_ok ? conv_state + (static_cast<int64_t>(slot) * channels + c) * (k - 1) : nullptr;
  load_w();
  conv_rows<T, TS, V, MK>(x, xs, wr, st, use_state, out, os, begin, 0, min(len, kConvSegment), c, k);

  if (st == nullptr) return;
  // New state: the inputs at relative positions len-(K-1) .. len-1, oldest first; positions before
  // the sequence's start come from the old state (a chunk shorter than K-1 shifts it). Gather all,
  // then write, so that no old entry is overwritten before it is read.
  float ns[MK - 1][V];
#pragma unroll
  for (int i = 0; i < MK - 1; ++i) {
    const int p = len - (k - 1) + i;
    if (i < k - 1 && p >= 0) {
      const Vec xv = *reinterpret_cast<const Vec*>(x + (begin + p) * xs + c);
#pragma unroll
      for (int e = 0; e < V; ++e) ns[i][e] = to_f32(xv.e[e]);
    } else {
#pragma unroll
      for (int e = 0; e < V; ++e) ns[i][e] = (i < k - 1 && use_state) ? to_f32(st[e * (k - 1) + k - 1 + p]) : 0.0f;
    }
  }
#pragma unroll
  for (int i = 0; i < MK - 1; ++i)
    if (i < k - 1) {
#pragma unroll
      for (int e = 0; e < V; ++e) st[e * (k - 1) + i] = from_f32<TS>(ns[i][e]);
    }
}

// ---- gated_rms_norm -------------------------------------------------------------------------------

constexpr int kNormThreads = 128;  // one warp per (token, head)

// out = round(w * round(x * rsqrt(mean(x^2) + eps)) [rounded again when w has x's dtype]) * silu(z).
// out may alias x (the layer normalises in place): each lane reads its elements before writing them.
template <typename T, int V>
__global__ void __launch_bounds__(kNormThreads)
    gated_rms_norm_kernel(const T* x, int64_t xs, const T* __restrict__ z, int64_t zs,
                          const void* __restrict__ w, int wdt, int round_product, T* out, int64_t os,
                          int heads, int dv, float eps, int64_t num_heads_total) {
  const int lane = threadIdx.x & 31;
  const int64_t hr = static_cast<int64_t>(blockIdx.x) * (kNormThreads / 32) + (threadIdx.x >> 5);
  if (hr >= num_heads_total) return;
  const int64_t t = hr / heads;
  const int h = static_cast<int>(hr % heads);
  const T* xr = x + t * xs + static_cast<int64_t>(h) * dv;
  const T* zr = z + t * zs + static_cast<int64_t>(h) * dv;
  T* orow = out + t * os + static_cast<int64_t>(h) * dv;
  float ss = 0.0f;
  for (int i = lane * V; i < dv; i += 32 * V) {
    const VecT<V, T> xv = *reinterpret_cast<const VecT<V, T>*>(xr + i);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const float f = to_f32(xv.e[e]);
      ss = fmaf(f, f, ss);
    }
  }
  ss = warp_sum(ss);
  const float inv = rsqrtf(ss / static_cast<float>(dv) + eps);
  for (int i = lane * V; i < dv; i += 32 * V) {
    const VecT<V, T> xv = *reinterpret_cast<const VecT<V, T>*>(xr + i);
    const VecT<V, T> zv = *reinterpret_cast<const VecT<V, T>*>(zr + i);
    VecT<V, T> ov;
#pragma unroll
    for (int e = 0; e < V; ++e) {
      float y = load_weight(w, wdt, i + e) * round_to<T>(to_f32(xv.e[e]) * inv);
      if (round_product) y = round_to<T>(y);
      const float g = to_f32(zv.e[e]);
      ov.e[e] = from_f32<T>(y * (g / (1.0f + __expf(-g))));
    }
    *reinterpret_cast<VecT<V, T>*>(orow + i) = ov;
  }
}

void check_i32(const char* op, const Tensor& t, int64_t min_elems, const char* name) {
  require(t.dtype == DType::I32 && t.device == Device::CUDA && t.numel() >= min_elems && t.is_contiguous(), op,
          std::string("meta.") + name + " must be contiguous I32 on cuda with at least " +
              std::to_string(min_elems) + " entries, got " + shape_str(t));
}

bool is_float_dtype(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }

}  // namespace

void launch_causal_conv1d_silu(const Tensor& x, const Tensor& w, Tensor& conv_state, const StepMeta& meta,
                               Tensor& out, cudaStream_t stream) {
  const char* op = "causal_conv1d_silu";
  require(x.ndim == 2 && x.device == Device::CUDA, op, "x must be [T, C] on cuda, got " + shape_str(x));
  const int64_t t = x.shape[0], channels = x.shape[1];
  require(out.ndim == 2 && out.shape[0] == t && out.shape[1] == channels && out.device == Device::CUDA &&
              out.dtype == x.dtype,
          op, "out " + shape_str(out) + " must match x " + shape_str(x));
  require(conv_state.ndim == 3 && conv_state.shape[1] == channels && conv_state.device == Device::CUDA &&
              conv_state.is_contiguous() && is_float_dtype(conv_state.dtype),
          op, "conv_state must be a contiguous float [slots, " + std::to_string(channels) + ", K-1] on cuda, got " +
                  shape_str(conv_state));
  const int64_t k = conv_state.shape[2] + 1;
  require(k >= 1 && k <= kConvMaxK, op,
          "conv kernel size " + std::to_string(k) + " is not supported (CUDA limit: K <= " +
              std::to_string(kConvMaxK) + ")");
  require(w.ndim >= 2 && w.shape[0] == channels && w.numel() == channels * k && w.is_contiguous() &&
              w.device == Device::CUDA && is_float_dtype(w.dtype),
          op, "w must be a contiguous float [" + std::to_string(channels) + ", " + std::to_string(k) +
                  "] on cuda (K from conv_state), got " + shape_str(w));
  require(channels < (int64_t{1} << 30) && t < (int64_t{1} << 31), op, "x too large");
  const int nseq = meta.num_seqs;
  require(nseq >= 0 && nseq <= 65535, op, "num_seqs " + std::to_string(nseq) + " out of range (0..65535)");
  require(meta.num_tokens <= t, op,
          "meta.num_tokens " + std::to_string(meta.num_tokens) + " exceeds the rows of x " + shape_str(x));
  if (t == 0 || nseq == 0 || channels == 0 || meta.max_query_len <= 0) return;
  check_i32(op, meta.cu_seqlens_q, nseq + 1, "cu_seqlens_q");
  check_i32(op, meta.state_slots, nseq, "state_slots");
  check_i32(op, meta.has_initial_state, nseq, "has_initial_state");
  const int64_t items = nseq + (t + kConvSegment - 1) / kConvSegment;
  require(channels / kConvThreads < 65535, op, "too many channels");
  PAGODA_DISPATCH_FLOAT(x.dtype, T, op, PAGODA_DISPATCH_FLOAT(conv_state.dtype, TS, op, {
    // One channel per thread (V = 1): 16-byte groups of channels (V = 8) measured 2-2.5x slower on an
    // H200 for decodes and 512-token prefills (8x fewer threads for the sequential token loop).
    auto go = [&](auto mk_tag) {
      constexpr int MK = decltype(mk_tag)::value;
      const dim3 grid(static_cast<unsigned>(items), static_cast<unsigned>((channels + kConvThreads - 1) / kConvThreads));
      causal_conv1d_silu_kernel<T, TS, 1, MK><<<grid, kConvThreads, 0, stream>>>(
          x.ptr<T>(), x.stride0(), w.data, static_cast<int>(w.dtype), conv_state.ptr<TS>(), conv_state.shape[0],
          out.ptr<T>(), out.stride0(), meta.cu_seqlens_q.ptr<int32_t>(), meta.state_slots.ptr<int32_t>(),
          meta.has_initial_state.ptr<int32_t>(), nseq, static_cast<int>(channels), static_cast<int>(k));
    };
    if (k <= 4) go(std::integral_constant<int, 4>{});
    else go(std::integral_constant<int, kConvMaxK>{});
  }));
  PAGODA_CUDA_CHECK_LAUNCH();
}

void launch_gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& w, float eps, Tensor& out,
                           cudaStream_t stream) {
  const char* op = "gated_rms_norm";
  require(x.ndim == 3 && x.device == Device::CUDA, op, "x must be [T, Hv, dv] on cuda, got " + shape_str(x));
  const int64_t t = x.shape[0], heads = x.shape[1], dv = x.shape[2];
  auto same = [&](const Tensor& o) {
    return o.ndim == 3 && o.shape[0] == t && o.shape[1] == heads && o.shape[2] == dv && o.device == Device::CUDA &&
           o.dtype == x.dtype;
  };
  require(same(z), op, "z " + shape_str(z) + " must match x " + shape_str(x));
  require(same(out), op, "out " + shape_str(out) + " must match x " + shape_str(x));
  require(w.numel() == dv && w.is_contiguous() && w.device == Device::CUDA && is_float_dtype(w.dtype), op,
          "weight must be a float [" + std::to_string(dv) + "] on cuda, got " + shape_str(w));
  if (t == 0 || heads == 0 || dv == 0) return;
  require(dv < (int64_t{1} << 30) && t * heads < (int64_t{1} << 40), op, "x too large");
  const int64_t total = t * heads;
  const int64_t blocks = (total + kNormThreads / 32 - 1) / (kNormThreads / 32);
  require(blocks < (int64_t{1} << 31), op, "too many rows");
  PAGODA_DISPATCH_FLOAT(x.dtype, T, op, {
    // 4 elements per access when every row start allows it.
    constexpr int V = 4;
    const int64_t vb = static_cast<int64_t>(V * sizeof(T));
    const auto ok = [&](const Tensor& o) {
      return reinterpret_cast<uintptr_t>(o.data) % static_cast<uintptr_t>(vb) == 0 &&
             (o.stride0() * static_cast<int64_t>(sizeof(T))) % vb == 0;
    };
    const bool vec = dv % V == 0 && ok(x) && ok(z) && ok(out);
    const int round_product = (w.dtype == x.dtype && x.dtype != DType::F32) ? 1 : 0;
    auto go = [&](auto v_tag) {
      constexpr int VV = decltype(v_tag)::value;
      gated_rms_norm_kernel<T, VV><<<static_cast<unsigned>(blocks), kNormThreads, 0, stream>>>(
          x.ptr<T>(), x.stride0(), z.ptr<T>(), z.stride0(), w.data, static_cast<int>(w.dtype), round_product,
          out.ptr<T>(), out.stride0(), static_cast<int>(heads), static_cast<int>(dv), eps, total);
    };
    if (vec) go(std::integral_constant<int, V>{});
    else go(std::integral_constant<int, 1>{});
  });
  PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace pagoda::cuda
