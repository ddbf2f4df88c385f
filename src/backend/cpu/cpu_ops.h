// The CPU backend's ops as plain functions over host tensors (internal to src/backend/cpu).
// CpuBackend's methods forward here; the semantics are those documented in backend/backend.h.
#pragma once

#include "backend/backend.h"
#include "core/thread_pool.h"

namespace pagoda::cpu {

// embedding.cpp
void embedding(ThreadPool& pool, const Tensor& table, const Tensor& ids, Tensor& out);

// norm.cpp
void rms_norm(ThreadPool& pool, const Tensor& x, const Tensor& w, Tensor& out, float eps,
              bool zero_centered);
void add_rms_norm(ThreadPool& pool, Tensor& residual, const Tensor& x, const Tensor& w, Tensor& out,
                  float eps, bool zero_centered);
// In-place RMSNorm of one vector of n floats (weights as fp32, already 1+w when zero-centred).
void rms_norm_vector(float* x, const float* w, int64_t n, float eps);

// linear.cpp
// bf16_prefill: many rows of x (prefill) may go through the bf16-activation GEMM (gemm.h).
void linear(ThreadPool& pool, const Tensor& x, const Tensor& w, Tensor& out, bool bf16_prefill = false);
// linear_int4.cpp: Backend::linear_int4.
void linear_int4(ThreadPool& pool, const Tensor& x, const Tensor& w, const Tensor& scale, const Tensor& zeros,
                 int64_t group, Tensor& out);
// linear_fp8.cpp: Backend::linear_fp8.
void linear_fp8(ThreadPool& pool, const Tensor& x, const Tensor& w, const Tensor& scale, int64_t block_n,
                int64_t block_k, Tensor& out);

// elementwise.cpp
void silu_mul(ThreadPool& pool, const Tensor& gate_up, Tensor& out);
void gelu_tanh_mul(ThreadPool& pool, const Tensor& gate_up, Tensor& out);
void scale(ThreadPool& pool, Tensor& x, float factor);
void softcap(ThreadPool& pool, Tensor& x, float cap);
void add(ThreadPool& pool, const Tensor& a, const Tensor& b, Tensor& out);
void add_bias(ThreadPool& pool, Tensor& x, const Tensor& bias);
void sigmoid_gate(ThreadPool& pool, const Tensor& a, const Tensor& gate, Tensor& out);
void gather_rows(ThreadPool& pool, const Tensor& x, const Tensor& rows, Tensor& out);
// out[i] = index of the largest logits[i, :] (F32), lowest index on ties; NaN never wins.
void argmax_rows(ThreadPool& pool, const Tensor& logits, Tensor& out);
// logits[rows[m], j] = -inf where bit j of mask row m is clear (Backend::apply_token_mask).
void apply_token_mask(ThreadPool& pool, Tensor& logits, const Tensor& mask, const Tensor& rows);
// Converts src into dst (same element count, any float dtypes, dim 0 of either may be strided).
void convert_tensor(ThreadPool& pool, const Tensor& src, Tensor& dst);

// cache.cpp
void reshape_and_cache(ThreadPool& pool, const Tensor& k, const Tensor& v,
                       const Tensor& slot_mapping, Tensor& k_cache, Tensor& v_cache);

// rope.cpp
void rope(ThreadPool& pool, Tensor& x, const Tensor& positions, const RopeParams& params);
void qk_norm_rope_and_cache(ThreadPool& pool, Tensor& q, Tensor& k, const Tensor& v,
                            const Tensor& q_norm_w, const Tensor& k_norm_w, float eps,
                            bool zero_centered, const RopeParams& rope, const StepMeta& meta,
                            Tensor& k_cache, Tensor& v_cache);

// attention.cpp
// The CPU's attention plan: query tiles (one row for decodes, up to 16 rows of a prefill chunk)
// and the GQA-group split, from the lengths (read from meta's host tensors where not given).
AttentionPlan plan_attention(ThreadPool& pool, const StepMeta& meta, const AttentionShape& shape,
                             const AttentionLengths& lengths);
void paged_attention(ThreadPool& pool, const Tensor& q, const Tensor& k_cache,
                     const Tensor& v_cache, const StepMeta& meta, const AttentionParams& params,
                     Tensor& out);

// conv1d.cpp
void causal_conv1d_silu(ThreadPool& pool, const Tensor& x, const Tensor& w, Tensor& conv_state,
                        const StepMeta& meta, Tensor& out);

// delta_rule.cpp
void gated_delta_rule(ThreadPool& pool, const Tensor& q, const Tensor& k, const Tensor& v,
                      const Tensor& b, const Tensor& a, const Tensor& A_log, const Tensor& dt_bias,
                      Tensor& state, const StepMeta& meta, Tensor& out);

// gated_delta_net.cpp
void gated_rms_norm(ThreadPool& pool, const Tensor& x, const Tensor& z, const Tensor& w, float eps,
                    Tensor& out);

// moe.cpp
void moe_route(ThreadPool& pool, const Tensor& logits, bool renormalize, Tensor& expert_ids, Tensor& weights);
void moe_permute(ThreadPool& pool, const Tensor& x, const Tensor& expert_ids, Tensor& expert_offsets,
                 Tensor& sorted_slots, Tensor& slot_rows, Tensor& x_sorted);
void moe_grouped_linear(ThreadPool& pool, const Tensor& x, const Tensor& w, const Tensor& expert_offsets,
                        Tensor& out);
void moe_unpermute(ThreadPool& pool, const Tensor& y, const Tensor& weights, const Tensor& slot_rows,
                   const Tensor& shared, const Tensor& shared_gate, Tensor& out);

// lora.cpp
void lora_expand(ThreadPool& pool, const Tensor& low, const Tensor& b, const Tensor& slots, Tensor& out);

// vision_ops.cpp: the vision encoder's primitives (backend.h).
void layer_norm(ThreadPool& pool, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& out, float eps);
void gelu(ThreadPool& pool, const Tensor& x, Tensor& out, bool tanh_approx);
void rope_axes(ThreadPool& pool, Tensor& x, const Tensor& positions, const Tensor& axes, const Tensor& inv_freq);
void segment_attention(ThreadPool& pool, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& cu_seqlens, float scale, Tensor& out);

}  // namespace pagoda::cpu
