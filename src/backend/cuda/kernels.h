// Launchers of the CUDA backend's kernels (each checks its arguments and enqueues on `stream`;
// none synchronises). Called by CudaBackend; C++17-clean. Internal to src/backend/cuda.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include "backend/backend.h"

namespace pagoda::cuda {

// An injected device error (core/fault_injection.h): a launch that is refused (sticky = false:
// too many threads a block, thrown here as Error) or a kernel that traps (sticky: FatalDeviceError at
// the next check that syncs).
void launch_injected_fault(bool sticky, cudaStream_t stream);

void launch_embedding(const Tensor& table, const Tensor& ids, Tensor& out, cudaStream_t stream);
void launch_gather_rows(const Tensor& x, const Tensor& rows, Tensor& out, cudaStream_t stream);
void launch_rms_norm(const Tensor& x, Tensor* residual, const Tensor& w, Tensor& out, float eps,
                     bool zero_centered, cudaStream_t stream);
void launch_silu_mul(const Tensor& gate_up, Tensor& out, cudaStream_t stream);
void launch_gelu_tanh_mul(const Tensor& gate_up, Tensor& out, cudaStream_t stream);
// In place on x's rows: x *= factor when cap is 0, else x = cap * tanh(x / cap).
void launch_scale_or_cap(Tensor& x, float factor, float cap, cudaStream_t stream);
void launch_sigmoid_gate(const Tensor& a, const Tensor& gate, Tensor& out, cudaStream_t stream);

// out[i] = argmax of logits row i (F32 [R, V], lowest index on ties, NaN never wins) → I32 [R].
// Few rows of a large vocab are split over several blocks per row, whose partial results go to
// `workspace` (8 bytes per block); without room there it runs one block per row.
void launch_argmax_rows(const Tensor& logits, Tensor& out, int num_sms, void* workspace, size_t workspace_bytes,
                        cudaStream_t stream);
// logits[rows[m], j] = -inf where bit j of mask row m is clear (Backend::apply_token_mask).
void launch_apply_token_mask(Tensor& logits, const Tensor& mask, const Tensor& rows, cudaStream_t stream);

// rope_add_kernels.cu. RoPE in place on x [T, heads, D] with inv_freq (rotary_dim / 2 values, at
// most kMaxRopePairs) as rope_inv_freq computed them; NeoX or interleaved pairs.
constexpr int kMaxRopePairs = 256;
void launch_rope(Tensor& x, const Tensor& positions, const std::vector<float>& inv_freq, float scale, int rotary_dim,
                 bool interleaved, cudaStream_t stream);
// out = a + b ([rows, cols], dim 0 strided; out may alias a or b); x += bias (F32 [cols]) per row.
void launch_add(const Tensor& a, const Tensor& b, Tensor& out, cudaStream_t stream);
void launch_add_bias(Tensor& x, const Tensor& bias, cudaStream_t stream);

void launch_reshape_and_cache(const Tensor& k, const Tensor& v, const Tensor& slot_mapping,
                              Tensor& k_cache, Tensor& v_cache, cudaStream_t stream);
void launch_qk_norm_rope_and_cache(Tensor& q, Tensor& k, const Tensor& v, const Tensor& q_norm_w,
                                   const Tensor& k_norm_w, float eps, bool zero_centered,
                                   const RopeParams& rope, const StepMeta& meta, Tensor& k_cache,
                                   Tensor& v_cache, cudaStream_t stream);

// Skinny bf16 GEMM for decode (gemv.cu): out[T, N] = x[T, K] · w[N, K]^T for 1 ≤ T ≤ kGemvMaxTokens.
// gemv_fits says whether the operands suit it (bf16 x and w, out BF16 or F32, K a multiple of 8,
// x and w 16-byte aligned with strides a multiple of 8 elements, T ≤ max_tokens); launch_gemv
// throws where they do not.
constexpr int kGemvMaxTokens = 8;
bool gemv_fits(const Tensor& x, const Tensor& w, const Tensor& out, int max_tokens);
// Where the kernel beats cuBLASLt (H200, 2026-11-21, `pagoda bench kernels`): every shape at T = 1;
// at 2 ≤ T ≤ 8 only the narrow matrices (T·N ≤ 8192: Qwen3-0.6B's o_proj and down_proj up to T = 8),
// since its cost grows with T while cuBLASLt's stays flat at these sizes.
bool gemv_preferred(int64_t t, int64_t n);
void launch_gemv(const Tensor& x, const Tensor& w, Tensor& out, int num_sms, cudaStream_t stream);
// The same kernel with the SwiGLU of the MLP fused into its loads of x: out = (silu(gate) * up) · w^T
// for gate_up [T, 2I] (gate = columns [0, I), up = [I, 2I)), each product rounded to bf16 as
// launch_silu_mul rounds it, so that the result is bit-identical to silu_mul then launch_gemv.
// Fits where launch_gemv fits the gate half as x.
bool gemv_silu_mul_fits(const Tensor& gate_up, const Tensor& w, const Tensor& out, int max_tokens);
// Every block recomputes the activation for the whole row of x, so the fusion pays only where
// there are few blocks: the narrow down projections of the small models (N = 1024: 0.6B tg128
// 971 → 991 tok/s). At Qwen3-8B's N = 4096 (2,048 blocks, K = 12,288) the recomputation made the
// down projection compute-bound: tg128 218 → 195 tok/s on an H200 (2026-11-21).
constexpr int64_t kGemvSiluMulMaxRows = 2048;
bool gemv_silu_mul_preferred(int64_t t, int64_t n);
void launch_gemv_silu_mul(const Tensor& gate_up, const Tensor& w, Tensor& out, int num_sms, cudaStream_t stream);

// FP8 weights (gemv_fp8.cu), Backend::linear_fp8's semantics for bf16 x. The skinny GEMM for
// T ≤ kGemvMaxTokens: fits bf16 x (16-byte aligned, stride a multiple of 8), contiguous F8_E4M3 w
// with K a multiple of 16 and block_k a multiple of 16, out BF16 or F32. Otherwise the caller
// dequantizes w into a matrix of w's shape in the activation dtype (launch_dequantize_fp8: BF16 or
// F32 out) and runs the dense GEMM.
bool gemv_fp8_fits(const Tensor& x, const Tensor& w, const Tensor& out, int64_t block_k);
void launch_gemv_fp8(const Tensor& x, const Tensor& w, const Tensor& scale, int64_t block_n, int64_t block_k,
                     Tensor& out, int num_sms, cudaStream_t stream);
void launch_dequantize_fp8(const Tensor& w, const Tensor& scale, int64_t block_n, int64_t block_k, Tensor& out,
                           cudaStream_t stream);
// 4-bit weights (gemv_int4.cu), Backend::linear_int4's semantics for bf16 x. The skinny GEMM for
// T ≤ kInt4MmaMaxTokens where group is a multiple of 128 (tensor cores), else T ≤ kGemvMaxTokens:
// fits bf16 x (16-byte aligned, stride a multiple of 8), contiguous I32 w with K and group multiples
// of 32, out BF16 or F32. Otherwise the caller dequantizes w into a [N, K]
// matrix of the activation dtype (launch_dequantize_int4: BF16 or F32 out) and runs the dense GEMM.
constexpr int kInt4MmaMaxTokens = 32;
bool gemv_int4_fits(const Tensor& x, const Tensor& w, const Tensor& out, int64_t group);
void launch_gemv_int4(const Tensor& x, const Tensor& w, const Tensor& scale, const Tensor& zeros, int64_t group,
                      Tensor& out, cudaStream_t stream);
void launch_dequantize_int4(const Tensor& w, const Tensor& scale, const Tensor& zeros, int64_t group, Tensor& out,
                            cudaStream_t stream);
// Per-row (per-token) FP8 quantization of bf16 x [T, K] for the FP8 tensor-core GEMM: scale[t] =
// max |x[t, :]| / 448 (1 for a zero row), q[t, k] = e4m3(x[t, k] / scale[t]) saturated, rounded to
// nearest even. q F8_E4M3 [T, K] contiguous, scale F32 [T].
void launch_quantize_rows_fp8(const Tensor& x, Tensor& q, Tensor& scale, cudaStream_t stream);

// The experts' skinny GEMMs of a decode step (gemv.cu), moe_grouped_linear's semantics (backend.h)
// for bf16 x [R, K] and w [E, N, K] (contiguous, K a multiple of 8, 16-byte aligned), out BF16 or
// F32, when R ≤ kMoeGemvMaxRowsPerExpert · E: each routed expert's weights are streamed once per
// four of its rows, as launch_gemv does for a dense matrix. Graph-safe: the launch shape depends on
// R, E and N only.
constexpr int64_t kMoeGemvMaxRowsPerExpert = 8;
bool moe_gemv_fits(const Tensor& x, const Tensor& w, const Tensor& out);
void launch_moe_gemv(const Tensor& x, const Tensor& w, const Tensor& expert_offsets, Tensor& out,
                     cudaStream_t stream);

// What paged attention needs from its backend: the device's shape and a scratch area for split-KV
// partial results (fp32), allocated once by the backend.
struct AttentionContext {
  int num_sms = 0;
  size_t max_smem_optin = 0;
  float* split_workspace = nullptr;
  size_t split_workspace_floats = 0;
};

// The plan of the tensor-core kernels for one step (attention_plan.h): decode or prefill tiling,
// grid.x and the split-KV factor, from the real longest context where `lengths` are given (else
// StepMeta's max_seq_len: under graph capture the most a replay may see).
AttentionPlan plan_paged_attention(const StepMeta& meta, const AttentionShape& shape, const AttentionLengths& lengths,
                                   const AttentionContext& ctx);
// q and out BF16: the tensor-core kernels (paged_attention.cuh); F32: launch_paged_attention_simt.
// Uses meta.attention_plan where it was made for this call's shape and step, else plans the call.
void launch_paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                            const StepMeta& meta, const AttentionParams& params, Tensor& out,
                            const AttentionContext& ctx, cudaStream_t stream);
// The fp32 path (paged_attention_simt.cu), after launch_paged_attention's checks of the shapes.
void launch_paged_attention_simt(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                                 const StepMeta& meta, const AttentionParams& params, Tensor& out,
                                 int block_shift, cudaStream_t stream);

}  // namespace pagoda::cuda
