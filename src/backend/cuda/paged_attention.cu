// Host plan of paged attention (grid shape, decode or prefill tiling, split-KV factor), made once
// per step (CudaBackend::plan_attention, attention_plan.h) from the real lengths where the caller
// has them, else from StepMeta's host scalars; the launch; and the kernel that merges split-KV
// partial results.
#include <algorithm>

#include "backend/cuda/kernels.h"
#include "backend/cuda/paged_attention.cuh"

namespace pagoda::cuda {
namespace {

// out[t, h, :] = sum_s w_s * o_s / sum_s w_s * l_s with w_s = 2^(m_s - max m).
__global__ void merge_splits_kernel(const float* part_o, const float* part_ml, bf16* out, int64_t out_stride,
                                    int num_tokens, int num_heads, int d, int num_splits) {
  const int64_t th = blockIdx.x;
  const int64_t tok = th / num_heads, head = th % num_heads;
  const int64_t plane = static_cast<int64_t>(num_tokens) * num_heads;
  float mx = -INFINITY;
  for (int sp = 0; sp < num_splits; ++sp) mx = fmaxf(mx, part_ml[(sp * plane + th) * 2]);
  float l = 0.0f;
  for (int sp = 0; sp < num_splits; ++sp) {
    const float m = part_ml[(sp * plane + th) * 2];
    if (m != -INFINITY) l += part_ml[(sp * plane + th) * 2 + 1] * exp2f(m - mx);
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (int c = threadIdx.x; c < d; c += blockDim.x) {
    float o = 0.0f;
    for (int sp = 0; sp < num_splits; ++sp) {
      const float m = part_ml[(sp * plane + th) * 2];
      if (m != -INFINITY) o += part_o[(sp * plane + th) * d + c] * exp2f(m - mx);
    }
    out[tok * out_stride + head * d + c] = __float2bfloat16_rn(o * inv);
  }
}

int log2_exact(int v) {
  int s = 0;
  while ((1 << s) < v) ++s;
  return (1 << s) == v ? s : -1;
}

}  // namespace

AttentionPlan plan_paged_attention(const StepMeta& meta, const AttentionShape& shape, const AttentionLengths& lengths,
                                   const AttentionContext& ctx) {
  // Tiles as the kernel walks them (rows of one sequence and kv head, up to 64 per CTA); the kernel
  // itself maps CTAs to sequences from cu_seqlens_q on the device, so they are informative here.
  AttentionPlan p = plan_attention_tiles(shape, meta.num_tokens, meta.num_seqs, meta.block_size, meta.max_seq_len,
                                         meta.max_query_len, lengths, 64);
  const int64_t d = shape.head_dim, hq = shape.num_q_heads, hkv = std::max(shape.num_kv_heads, 1);
  if (shape.q_dtype != DType::BF16 || d <= 0 || hq % hkv != 0) return p;  // the fp32 SIMT path needs no plan
  const int kd = d <= 32 ? 32 : d <= 64 ? 64 : d <= 128 ? 128 : 256;
  const int group = static_cast<int>(hq / hkv);
  const int planes = shape.kv_dtype == DType::BF16 || shape.kv_dtype == DType::F8_E4M3 ? 1 : 2;  // KvKind
  p.decode_tiling = static_cast<int64_t>(std::max(meta.max_query_len, 1)) * group <= 16;
  p.rows_per_cta = p.decode_tiling ? 16 : 64;
  const int tile_keys = attn::kv_tile_keys(kd, planes);
  const int64_t t = meta.num_tokens;
  p.grid_x = t * group / p.rows_per_cta + meta.num_seqs;

  // Split the keys over more CTAs when the grid alone would leave the GPU idle and the contexts are
  // long enough that each split still gets at least two tiles. max_context: the real longest context
  // where the lengths were given, else StepMeta's maximum (graph capture: the worst case).
  int splits = 1;
  const int64_t ctas = p.grid_x * hkv;
  const int64_t target = 2LL * std::max(ctx.num_sms, 1);
  if (ctas < target && p.max_context >= 4 * tile_keys) {
    const int64_t want = (target + ctas - 1) / ctas;
    const int64_t by_len = p.max_context / (2 * tile_keys);
    const int64_t by_mem = static_cast<int64_t>(ctx.split_workspace_floats) / std::max<int64_t>(1, t * hq * (d + 2));
    splits = static_cast<int>(std::clamp<int64_t>(std::min({want, by_len, by_mem, int64_t{32}}), 1, 32));
  }
  p.kv_splits = splits;
  return p;
}

void launch_paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const StepMeta& meta,
                            const AttentionParams& params, Tensor& out, const AttentionContext& ctx,
                            cudaStream_t stream) {
  const char* op = "paged_attention";
  require(q.ndim == 3 && (q.dtype == DType::BF16 || q.dtype == DType::F32) && q.device == Device::CUDA, op,
          "q must be BF16 or F32 [T, Hq, D] on cuda, got " + shape_str(q));
  require(out.ndim == 3 && out.dtype == q.dtype && out.shape == q.shape, op,
          "out " + shape_str(out) + " must have q's dtype and shape " + shape_str(q));
  const int64_t t = q.shape[0], hq = q.shape[1], d = q.shape[2];
  require(k_cache.ndim == 4 && v_cache.ndim == 4 && k_cache.shape == v_cache.shape && k_cache.dtype == v_cache.dtype,
          op, "k_cache " + shape_str(k_cache) + " and v_cache " + shape_str(v_cache) + " must be one shape and dtype");
  require(k_cache.shape[3] == d, op, "cache head_dim " + std::to_string(k_cache.shape[3]) + " differs from q's " + std::to_string(d));
  const int64_t hkv = k_cache.shape[2];
  require(hkv > 0 && hq % hkv == 0, op, "Hq " + std::to_string(hq) + " is not a multiple of Hkv " + std::to_string(hkv));
  const int shift = log2_exact(meta.block_size);
  require(shift >= 0 && meta.block_size == k_cache.shape[1], op,
          "block_size " + std::to_string(meta.block_size) + " must be a power of two equal to the cache's " +
              std::to_string(k_cache.shape[1]));
  require(meta.cu_seqlens_q.numel() >= meta.num_seqs + 1 && meta.seq_lens.numel() >= meta.num_seqs &&
              meta.block_tables.ndim == 2 && meta.block_tables.shape[0] >= meta.num_seqs,
          op, "StepMeta tensors are smaller than num_seqs");
  require(meta.num_tokens == t, op, "meta.num_tokens " + std::to_string(meta.num_tokens) + " differs from q's " + std::to_string(t));
  if (q.dtype == DType::F32) {
    launch_paged_attention_simt(q, k_cache, v_cache, meta, params, out, shift, stream);
    return;
  }
  require(d >= 8 && d <= 256 && d % 8 == 0, op,
          "head_dim " + std::to_string(d) + " is not supported by the CUDA kernels (multiples of 8 up to 256)");
  // The kernel instance: the smallest of 32, 64, 128, 256 that holds d (the rest is zero padding).
  const int kd = d <= 32 ? 32 : d <= 64 ? 64 : d <= 128 ? 128 : 256;
  require(aligned16(q.data) && q.stride0() % 8 == 0 && aligned16(out.data) && out.stride0() % 8 == 0, op,
          "q and out must be 16-byte aligned with row strides a multiple of 8 elements");
  require(aligned16(k_cache.data) && aligned16(v_cache.data), op, "the caches must be 16-byte aligned");
  if (t == 0 || meta.num_seqs == 0) return;

  // The step's plan (made once per step by CudaBackend::plan_attention) where it fits this call, else
  // one from StepMeta's host scalars, as every call made before plans existed.
  AttentionShape shape;
  shape.num_q_heads = static_cast<int32_t>(hq);
  shape.num_kv_heads = static_cast<int32_t>(hkv);
  shape.head_dim = static_cast<int32_t>(d);
  shape.q_dtype = q.dtype;
  shape.kv_dtype = k_cache.dtype;
  const AttentionPlan* plan = meta.attention_plan;
  AttentionPlan local;
  if (!plan || !plan->made_for(shape, meta.num_tokens, meta.num_seqs, meta.block_size) || plan->rows_per_cta == 0) {
    local = plan_paged_attention(meta, shape, AttentionLengths{}, ctx);
    plan = &local;
  }
  const int group = static_cast<int>(hq / hkv);
  const bool decode = plan->decode_tiling;
  const int64_t grid_x = plan->grid_x;
  require(grid_x < (int64_t{1} << 31), op, "batch too large");
  const int splits = plan->kv_splits;
  // The workspace holds the partial results of a split launch only; one split writes out directly
  // (a long prefill chunk's T * Hq * (D + 2) may exceed the workspace and must still run).
  require(splits >= 1 && (splits == 1 || static_cast<size_t>(splits) * t * hq * (d + 2) <= ctx.split_workspace_floats),
          op, "internal: the attention plan's split-KV factor does not fit the workspace");

  attn::Args a{};
  a.q = q.ptr<bf16>();
  a.q_stride = q.stride0();
  a.out = out.ptr<bf16>();
  a.out_stride = out.stride0();
  a.k_cache = k_cache.data;
  a.v_cache = v_cache.data;
  a.cu_seqlens_q = meta.cu_seqlens_q.ptr<int32_t>();
  a.seq_lens = meta.seq_lens.ptr<int32_t>();
  a.block_tables = meta.block_tables.ptr<int32_t>();
  a.bt_stride = meta.block_tables.stride0();
  a.num_seqs = meta.num_seqs;
  a.num_tokens = static_cast<int>(t);
  a.num_q_heads = static_cast<int>(hq);
  a.num_kv_heads = static_cast<int>(hkv);
  a.group = group;
  a.head_dim = static_cast<int>(d);
  a.block_shift = shift;
  a.scale = params.scale;
  a.softcap = params.softcap;
  a.window = params.sliding_window;
  a.num_splits = splits;
  a.part_o = ctx.split_workspace;
  a.part_ml = ctx.split_workspace + static_cast<size_t>(splits) * t * hq * d;

  const dim3 grid(static_cast<unsigned>(grid_x), static_cast<unsigned>(hkv), static_cast<unsigned>(splits));
  switch (kd) {
    case 32: attn::launch_attention_kernel<32>(a, decode, k_cache.dtype, grid, ctx.max_smem_optin, stream); break;
    case 64: attn::launch_attention_kernel<64>(a, decode, k_cache.dtype, grid, ctx.max_smem_optin, stream); break;
    case 128: attn::launch_attention_kernel<128>(a, decode, k_cache.dtype, grid, ctx.max_smem_optin, stream); break;
    default: attn::launch_attention_kernel<256>(a, decode, k_cache.dtype, grid, ctx.max_smem_optin, stream); break;
  }
  if (splits > 1) {
    merge_splits_kernel<<<static_cast<unsigned>(t * hq), 64, 0, stream>>>(
        a.part_o, a.part_ml, a.out, a.out_stride, a.num_tokens, a.num_q_heads, static_cast<int>(d), splits);
    PAGODA_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace pagoda::cuda
