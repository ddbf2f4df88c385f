// KV-cache writes: reshape_and_cache and the fused qk_norm_rope_and_cache (per token: RMSNorm of
// every q and k head (or none), NeoX RoPE, k and v stored in the paged caches at slot_mapping).
// Caches F32, BF16, F16 or F8_E4M3 (the FP8 cache: each value rounded as the CPU's
// f32_to_fp8_e4m3 rounds it, from_f32<fp8_e4m3>).
#include <algorithm>
#include <vector>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"

namespace pagoda::cuda {
namespace {

constexpr int kCacheThreads = 128;
constexpr int kMaxRopeHalf = 128;  // rotary_dim up to 256

// The rotary frequencies of one call, computed on the host by rope_inv_freq() (every scaling the
// CPU backend knows, the same fp32 numbers) and passed by value: no device table to keep alive, and
// a captured graph replays them unchanged. `scale` multiplies cos and sin (yarn's attention factor).
struct RopeTable {
  float inv_freq[kMaxRopeHalf];
  float scale;
};

template <typename T, typename TC>
__global__ void reshape_and_cache_kernel(const T* k, int64_t ks, const T* v, int64_t vs, const int32_t* slots,
                                         TC* k_cache, TC* v_cache, int64_t row) {
  const int64_t t = blockIdx.x;
  const int64_t slot = slots[t];
  if (slot < 0) return;
  for (int64_t i = threadIdx.x; i < row; i += blockDim.x) {
    k_cache[slot * row + i] = from_f32<TC>(to_f32(k[t * ks + i]));
    v_cache[slot * row + i] = from_f32<TC>(to_f32(v[t * vs + i]));
  }
}

// Grid (token, group of heads): each warp of a block takes one head (q heads first, then k heads),
// so that a decode step's few tokens still spread over many SMs. The block first computes the
// token's RoPE cos/sin table (one powf and sincosf per frequency, shared by every head), then each
// warp normalises its head in shared memory so that RoPE can pair element i with i + rotary_dim/2.
template <typename T, typename TC>
__global__ void qk_norm_rope_cache_kernel(T* q, int64_t qs, T* k, int64_t ks, const T* v, int64_t vs,
                                          const void* qw, const void* kw, int wdt, float eps, float w_off,
                                          int hq, int hkv, int d, int rotary_dim, const RopeTable rope,
                                          const int32_t* positions, const int32_t* slots, TC* k_cache,
                                          TC* v_cache) {
  extern __shared__ float head_buf[];
  const int64_t t = blockIdx.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  float* buf = head_buf + warp * d;
  const int half = rotary_dim / 2;
  float* cos_tab = head_buf + nwarps * d;
  float* sin_tab = cos_tab + half;
  const float pos = static_cast<float>(positions[t]);
  const int64_t slot = slots[t];
  for (int j = threadIdx.x; j < half; j += blockDim.x) {
    // angle = pos * inv_freq in fp32 (as HF computes it); cos and sin scaled, then rounded to T
    // (HF's bf16 path).
    float sn, cs;
    sincosf(pos * rope.inv_freq[j], &sn, &cs);
    cos_tab[j] = round_to<T>(cs * rope.scale);
    sin_tab[j] = round_to<T>(sn * rope.scale);
  }
  __syncthreads();
  const int h = static_cast<int>(blockIdx.y) * nwarps + warp;
  if (h < hq + hkv) {
    const bool is_q = h < hq;
    T* x = is_q ? q + t * qs + static_cast<int64_t>(h) * d : k + t * ks + static_cast<int64_t>(h - hq) * d;
    const void* w = is_q ? qw : kw;
    float ss = 0.0f;
    for (int i = lane; i < d; i += 32) {
      const float f = to_f32(x[i]);
      buf[i] = f;
      ss += f * f;
    }
    ss = warp_sum(ss);
    const float inv = rsqrtf(ss / static_cast<float>(d) + eps);
    // The rounding points of Hugging Face's bf16 path: the norm's output is a T tensor (plain
    // weight: normalised value rounded, then the product rounded; zero-centred: one rounding),
    // and RoPE runs in T: cos and sin rounded, q*cos and rotate_half(q)*sin rounded, then the sum.
    // Without norm weights (Llama, Mistral, Qwen2) the head goes to RoPE as it is.
    if (w != nullptr) {
      for (int i = lane; i < d; i += 32) {
        const float wv = load_weight(w, wdt, i);
        buf[i] = w_off == 0.0f ? round_to<T>(round_to<T>(buf[i] * inv) * wv) : round_to<T>(buf[i] * inv * (wv + w_off));
      }
    }
    __syncwarp();
    for (int i = lane; i < d; i += 32) {
      float y = buf[i];
      if (i < rotary_dim) {
        const int j = i < half ? i : i - half;
        const float rot = i < half ? -buf[i + half] : buf[i - half];
        y = round_to<T>(buf[i] * cos_tab[j]) + round_to<T>(rot * sin_tab[j]);
      }
      const T yt = from_f32<T>(y);
      x[i] = yt;
      if (!is_q && slot >= 0)
        k_cache[(slot * hkv + (h - hq)) * d + i] = from_f32<TC>(to_f32(yt));
    }
  }
  if (slot < 0 || blockIdx.y != 0) return;
  const int64_t row = static_cast<int64_t>(hkv) * d;
  for (int64_t i = threadIdx.x; i < row; i += blockDim.x)
    v_cache[slot * row + i] = from_f32<TC>(to_f32(v[t * vs + i]));
}

void check_caches(const char* op, const Tensor& kc, const Tensor& vc, int64_t hkv, int64_t d) {
  require(kc.ndim == 4 && kc.shape[2] == hkv && kc.shape[3] == d && kc.device == Device::CUDA, op,
          "k_cache must be [blocks, block_size, " + std::to_string(hkv) + ", " + std::to_string(d) + "] on cuda, got " +
              shape_str(kc));
  require(vc.ndim == 4 && vc.shape == kc.shape && vc.dtype == kc.dtype && vc.device == Device::CUDA, op,
          "v_cache " + shape_str(vc) + " must match k_cache " + shape_str(kc));
  require(kc.is_contiguous() && vc.is_contiguous(), op, "caches must be contiguous");
}

}  // namespace

void launch_reshape_and_cache(const Tensor& k, const Tensor& v, const Tensor& slot_mapping, Tensor& k_cache,
                              Tensor& v_cache, cudaStream_t stream) {
  const char* op = "reshape_and_cache";
  require(k.ndim == 3 && v.ndim == 3 && k.shape == v.shape, op,
          "k and v must be [T, Hkv, D] of one shape, got " + shape_str(k) + " and " + shape_str(v));
  require(k.dtype == v.dtype, op, "k and v must have one dtype");
  const int64_t t = k.shape[0], hkv = k.shape[1], d = k.shape[2];
  check_caches(op, k_cache, v_cache, hkv, d);
  require(slot_mapping.dtype == DType::I32 && slot_mapping.numel() >= t, op,
          "slot_mapping must be I32 with at least T entries, got " + shape_str(slot_mapping));
  if (t == 0) return;
  PAGODA_DISPATCH_FLOAT(k.dtype, T, op, PAGODA_DISPATCH_KV_CACHE(k_cache.dtype, TC, op, {
    reshape_and_cache_kernel<T, TC><<<static_cast<unsigned>(t), kCacheThreads, 0, stream>>>(
        k.ptr<T>(), k.stride0(), v.ptr<T>(), v.stride0(), slot_mapping.ptr<int32_t>(), k_cache.ptr<TC>(),
        v_cache.ptr<TC>(), hkv * d);
  }));
  PAGODA_CUDA_CHECK_LAUNCH();
}

void launch_qk_norm_rope_and_cache(Tensor& q, Tensor& k, const Tensor& v, const Tensor& q_norm_w,
                                   const Tensor& k_norm_w, float eps, bool zero_centered, const RopeParams& rope,
                                   const StepMeta& meta, Tensor& k_cache, Tensor& v_cache, cudaStream_t stream) {
  const char* op = "qk_norm_rope_and_cache";
  require(q.ndim == 3 && k.ndim == 3 && v.ndim == 3, op,
          "q, k, v must be [T, heads, D], got " + shape_str(q) + ", " + shape_str(k) + ", " + shape_str(v));
  const int64_t t = q.shape[0], hq = q.shape[1], d = q.shape[2], hkv = k.shape[1];
  require(k.shape[0] == t && k.shape[2] == d && v.shape == k.shape, op,
          "k " + shape_str(k) + " and v " + shape_str(v) + " do not match q " + shape_str(q));
  require(q.dtype == k.dtype && q.dtype == v.dtype, op, "q, k and v must have one dtype");
  // Empty q and k norm weights: no norm (the contract in backend.h).
  const bool has_norm = !q_norm_w.empty();
  require(has_norm == !k_norm_w.empty(), op, "q and k norm weights must be both given or both empty");
  if (has_norm) {
    require(q_norm_w.numel() == d && k_norm_w.numel() == d && q_norm_w.dtype == k_norm_w.dtype, op,
            "q/k norm weights must be [" + std::to_string(d) + "] of one dtype");
    require(q_norm_w.dtype == DType::F32 || q_norm_w.dtype == DType::BF16 || q_norm_w.dtype == DType::F16, op,
            "norm weight dtype must be F32, BF16 or F16");
  }
  // rotary_dim 0 means the whole head (the contract in backend.h).
  const int rot = rope.rotary_dim > 0 ? rope.rotary_dim : static_cast<int>(d);
  require(rot <= d && rot % 2 == 0, op,
          "rotary_dim " + std::to_string(rot) + " must be even and at most head_dim " + std::to_string(d));
  require(rope.theta > 0.0f, op, "rope theta must be positive");
  require(rot / 2 <= kMaxRopeHalf, op,
          "rotary_dim " + std::to_string(rot) + " is above the kernel's " + std::to_string(2 * kMaxRopeHalf));
  RopeTable table{};
  const std::vector<float> inv_freq = rope_inv_freq(rope, d);
  std::copy(inv_freq.begin(), inv_freq.end(), table.inv_freq);
  table.scale = rope.attention_factor;
  check_caches(op, k_cache, v_cache, hkv, d);
  require(meta.positions.dtype == DType::I32 && meta.slot_mapping.dtype == DType::I32 &&
              meta.positions.numel() >= t && meta.slot_mapping.numel() >= t,
          op, "meta.positions and meta.slot_mapping must be I32 with at least T entries");
  if (t == 0) return;
  const int threads = kCacheThreads;
  const int warps = threads / 32;
  const size_t smem = (static_cast<size_t>(warps) * static_cast<size_t>(d) + static_cast<size_t>(rot)) * sizeof(float);
  require(smem <= 48 * 1024, op, "head_dim too large");
  const dim3 grid(static_cast<unsigned>(t), static_cast<unsigned>((hq + hkv + warps - 1) / warps));
  PAGODA_DISPATCH_FLOAT(q.dtype, T, op, PAGODA_DISPATCH_KV_CACHE(k_cache.dtype, TC, op, {
    qk_norm_rope_cache_kernel<T, TC><<<grid, threads, smem, stream>>>(
        q.ptr<T>(), q.stride0(), k.ptr<T>(), k.stride0(), v.ptr<T>(), v.stride0(), has_norm ? q_norm_w.data : nullptr,
        has_norm ? k_norm_w.data : nullptr, static_cast<int>(q_norm_w.dtype), eps, zero_centered ? 1.0f : 0.0f,
        static_cast<int>(hq), static_cast<int>(hkv), static_cast<int>(d), rot, table,
        meta.positions.ptr<int32_t>(),
        meta.slot_mapping.ptr<int32_t>(), k_cache.ptr<TC>(), v_cache.ptr<TC>());
  }));
  PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace pagoda::cuda
