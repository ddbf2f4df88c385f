// Paged attention for fp32 activations (CudaBackend with --dtype float32): the same varlen contract
// as the tensor-core kernel (paged_attention.cuh) in plain fp32 SIMT code, so that a model on the
// GPU can reproduce an fp32 reference token for token. Not the fast path: one CTA per (query token,
// query head), its warps taking every fourth key with a warp-wide dot product and an online softmax
// each, merged at the end. Any KV cache dtype (FP8 included), any head_dim up to 256.
#include <cmath>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"

namespace pagoda::cuda {
namespace {

constexpr int kWarps = 4;

struct SimtArgs {
  const float* q;
  int64_t q_stride;
  float* out;
  int64_t out_stride;
  const void* k_cache;
  const void* v_cache;
  const int32_t* cu_seqlens_q;
  const int32_t* seq_lens;
  const int32_t* block_tables;
  int64_t bt_stride;
  int num_seqs;
  int num_kv_heads;
  int group;
  int head_dim;
  int block_shift;
  float scale;
  float softcap;
  int window;
};

// kPerLane = head-dim elements per lane (head_dim <= 32 * kPerLane).
template <typename KV, int kPerLane>
__global__ void __launch_bounds__(32 * kWarps) paged_attention_simt_kernel(SimtArgs a) {
  const int tok = static_cast<int>(blockIdx.x), h = static_cast<int>(blockIdx.y);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int s = seq_of_row(a.cu_seqlens_q, a.num_seqs, tok);  // the sequence owning this token
  const int q_len = a.cu_seqlens_q[s + 1] - a.cu_seqlens_q[s];
  const int pos = a.seq_lens[s] - q_len + (tok - a.cu_seqlens_q[s]);
  const int first = a.window > 0 ? max(0, pos - a.window + 1) : 0;
  const int d = a.head_dim, kvh = h / a.group;
  const int bs_mask = (1 << a.block_shift) - 1;
  const KV* kc = static_cast<const KV*>(a.k_cache);
  const KV* vc = static_cast<const KV*>(a.v_cache);
  const int64_t row = static_cast<int64_t>(a.num_kv_heads) * d;

  float qv[kPerLane], acc[kPerLane];
#pragma unroll
  for (int e = 0; e < kPerLane; ++e) {
    const int c = lane + 32 * e;
    qv[e] = c < d ? a.q[tok * a.q_stride + static_cast<int64_t>(h) * d + c] : 0.0f;
    acc[e] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int j = first + warp; j <= pos; j += kWarps) {
    const int64_t blk = a.block_tables[s * a.bt_stride + (j >> a.block_shift)];
    const int64_t off = ((blk << a.block_shift) + (j & bs_mask)) * row + static_cast<int64_t>(kvh) * d;
    float dot = 0.0f;
#pragma unroll
    for (int e = 0; e < kPerLane; ++e) {
      const int c = lane + 32 * e;
      if (c < d) dot += qv[e] * to_f32(kc[off + c]);
    }
    float x = warp_sum(dot) * a.scale;
    if (a.softcap > 0.0f) x = a.softcap * tanhf(x / a.softcap);
    const float m_new = fmaxf(m, x);
    const float corr = expf(m - m_new), p = expf(x - m_new);  // corr = 0 while m is -inf
    l = l * corr + p;
#pragma unroll
    for (int e = 0; e < kPerLane; ++e) {
      const int c = lane + 32 * e;
      acc[e] = acc[e] * corr + (c < d ? p * to_f32(vc[off + c]) : 0.0f);
    }
    m = m_new;
  }

  // Merge the warps' softmax states.
  __shared__ float sm_m[kWarps], sm_l[kWarps];
  __shared__ float sm_acc[kWarps][32 * kPerLane];
  if (lane == 0) sm_m[warp] = m, sm_l[warp] = l;
#pragma unroll
  for (int e = 0; e < kPerLane; ++e) sm_acc[warp][lane + 32 * e] = acc[e];
  __syncthreads();
  float mx = -INFINITY;
  for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, sm_m[w]);
  float total = 0.0f;
  for (int w = 0; w < kWarps; ++w)
    if (sm_m[w] != -INFINITY) total += sm_l[w] * expf(sm_m[w] - mx);
  const float inv = total > 0.0f ? 1.0f / total : 0.0f;
  for (int c = threadIdx.x; c < d; c += blockDim.x) {
    float o = 0.0f;
    for (int w = 0; w < kWarps; ++w)
      if (sm_m[w] != -INFINITY) o += sm_acc[w][c] * expf(sm_m[w] - mx);
    a.out[tok * a.out_stride + static_cast<int64_t>(h) * d + c] = o * inv;
  }
}

template <typename KV>
void launch_for_kv(const SimtArgs& a, dim3 grid, cudaStream_t stream) {
  const int per_lane = (a.head_dim + 31) / 32;
  if (per_lane <= 1) paged_attention_simt_kernel<KV, 1><<<grid, 32 * kWarps, 0, stream>>>(a);
  else if (per_lane <= 2) paged_attention_simt_kernel<KV, 2><<<grid, 32 * kWarps, 0, stream>>>(a);
  else if (per_lane <= 4) paged_attention_simt_kernel<KV, 4><<<grid, 32 * kWarps, 0, stream>>>(a);
  else paged_attention_simt_kernel<KV, 8><<<grid, 32 * kWarps, 0, stream>>>(a);
  PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_paged_attention_simt(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                                 const StepMeta& meta, const AttentionParams& params, Tensor& out,
                                 int block_shift, cudaStream_t stream) {
  const char* op = "paged_attention";
  require(q.dtype == DType::F32 && out.dtype == DType::F32, op, "the fp32 path takes F32 q and out");
  const int64_t t = q.shape[0], hq = q.shape[1], d = q.shape[2], hkv = k_cache.shape[2];
  require(d >= 1 && d <= 256, op, "head_dim " + std::to_string(d) + " is over the kernels' limit of 256");
  require(hq <= 65535 && t < (int64_t{1} << 31), op, "too many query heads or tokens for one launch");
  if (t == 0 || meta.num_seqs == 0) return;
  SimtArgs a{};
  a.q = q.ptr<float>();
  a.q_stride = q.stride0();
  a.out = out.ptr<float>();
  a.out_stride = out.stride0();
  a.k_cache = k_cache.data;
  a.v_cache = v_cache.data;
  a.cu_seqlens_q = meta.cu_seqlens_q.ptr<int32_t>();
  a.seq_lens = meta.seq_lens.ptr<int32_t>();
  a.block_tables = meta.block_tables.ptr<int32_t>();
  a.bt_stride = meta.block_tables.stride0();
  a.num_seqs = meta.num_seqs;
  a.num_kv_heads = static_cast<int>(hkv);
  a.group = static_cast<int>(hq / hkv);
  a.head_dim = static_cast<int>(d);
  a.block_shift = block_shift;
  a.scale = params.scale;
  a.softcap = params.softcap;
  a.window = params.sliding_window;
  const dim3 grid(static_cast<unsigned>(t), static_cast<unsigned>(hq));
  PAGODA_DISPATCH_KV_CACHE(k_cache.dtype, KV, op, launch_for_kv<KV>(a, grid, stream));
}

}  // namespace pagoda::cuda
