// The Backend contract (docs/design.md §3): device memory, a stream, a small set of PRIMITIVE ops that
// every backend implements, and FUSED fast paths that a backend may override (ggml's private
// fusion). A model is written once against this interface and runs on every backend; it calls the
// fused entry points, whose defaults (backend.cpp) are compositions of the primitives, so a new
// backend needs only the primitives and supports(). docs/architecture.md: "How to add a backend".
//
// Conventions for every op:
//  - tensors live on the backend's device; activations use activation_dtype() (cpu: F32, cuda: BF16
//    or F32); weights may be any of F32/BF16/F16 (what supports() accepts); math is fp32 inside;
//  - dim 0 of an input or output may be strided (Tensor::row_stride), inner dims are contiguous;
//  - an EMPTY tensor (data == nullptr) passed for an optional input means "absent": the op skips
//    what it would do with it (e.g. empty q/k norm weights: no norm). Every backend honours this;
//  - outputs never alias inputs unless the op says so;
//  - no op synchronises with the host;
//  - bad arguments throw pagoda::Error naming the op (they are bugs of the caller).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/attention_plan.h"
#include "backend/step_meta.h"
#include "core/rope_params.h"
#include "core/tensor.h"

namespace pagoda {

class Backend;
class ThreadPool;

// Owning device allocation.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Backend* backend, void* ptr, size_t bytes) : backend_(backend), ptr_(ptr), bytes_(bytes) {}
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }

  void reset();
  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  // A tensor over the start of this buffer.
  Tensor tensor(DType t, std::initializer_list<int64_t> dims) const;

 private:
  Backend* backend_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

struct AttentionParams {
  float scale = 1.0f;          // softmax scale, usually 1/sqrt(head_dim)
  int32_t sliding_window = 0;  // 0 = none; else a query at position p sees keys (p - window, p]
  float softcap = 0.0f;        // 0 = none; else scores = softcap * tanh(scores / softcap)
};

// inv_freq of every rotary pair (rotary_dim / 2 values; rotary_dim 0 = head_dim), in fp32 as
// transformers computes them, with the scaling applied. Host-side; what a backend's rope uses.
std::vector<float> rope_inv_freq(const RopeParams& rope, int64_t head_dim);

// The primitive ops, one list: X(enum name, Backend method name). The Op enum, op_name() and the op
// table's expected ops (tests/backend/op_table_test.cpp) all come from it, so an op added here must
// also get op-table cases and a naive formula. Order = enum order.
#define PAGODA_PRIMITIVE_OPS(X)                 \
  X(Embedding, embedding)                       \
  X(RmsNorm, rms_norm)                          \
  X(Rope, rope)                                 \
  X(ReshapeAndCache, reshape_and_cache)         \
  X(PagedAttention, paged_attention)            \
  X(Linear, linear)                             \
  X(LinearFp8, linear_fp8)                      \
  X(LinearInt4, linear_int4)                    \
  X(SiluMul, silu_mul)                          \
  X(GeluTanhMul, gelu_tanh_mul)                 \
  X(Add, add)                                   \
  X(Scale, scale)                               \
  X(Softcap, softcap)                           \
  X(AddBias, add_bias)                          \
  X(GatherRows, gather_rows)                    \
  X(SigmoidGate, sigmoid_gate)                  \
  X(CausalConv1dSilu, causal_conv1d_silu)       \
  X(GatedDeltaRule, gated_delta_rule)           \
  X(GatedRmsNorm, gated_rms_norm)               \
  X(ArgmaxRows, argmax_rows)                    \
  X(ApplyTokenMask, apply_token_mask)           \
  X(MoeRoute, moe_route)                        \
  X(MoePermute, moe_permute)                    \
  X(MoeGroupedLinear, moe_grouped_linear)       \
  X(MoeUnpermute, moe_unpermute)                \
  X(LoraExpand, lora_expand)                    \
  X(LayerNorm, layer_norm)                      \
  X(Gelu, gelu)                                 \
  X(RopeAxes, rope_axes)                        \
  X(SegmentAttention, segment_attention)

// The fused entry points, X(Backend method name): not Ops (supports() is asked about the primitives
// they are made of), but each has op-table cases of its own.
#define PAGODA_FUSED_OPS(X) \
  X(add_rms_norm)           \
  X(linear_silu_mul)        \
  X(qk_norm_rope_and_cache)

// The primitive ops, for supports().
enum class Op : int32_t {
#define PAGODA_OP_ENUMERATOR(op, method) op,
  PAGODA_PRIMITIVE_OPS(PAGODA_OP_ENUMERATOR)
#undef PAGODA_OP_ENUMERATOR
  kCount  // not an op: the number of them
};
// The op's method name ("rms_norm", "paged_attention", ...), as messages name it.
const char* op_name(Op op);
// Every primitive op, in enum order.
std::vector<Op> all_ops();
// The fused entry points' method names, in PAGODA_FUSED_OPS order.
std::vector<std::string> fused_op_names();

// One use of a primitive by a model: the op and the dtype that supports() is asked about.
struct OpUse {
  Op op;
  DType dtype;
  // Spelled out: the CUDA sources include this header as C++17.
  bool operator==(const OpUse& o) const { return op == o.op && dtype == o.dtype; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual DType activation_dtype() const = 0;
  virtual std::string name() const = 0;

  // ---- capabilities -------------------------------------------------------------------------
  // Whether this backend runs `op` with `dtype`: the dtype of the weights for Embedding (the table),
  // Linear and MoeGroupedLinear (w), of the logits (F32) for ArgmaxRows, and of the activations for every other op
  // (KV-cache dtypes are the engine's choice; a backend that cannot store one throws naming it).
  // A backend implements every primitive below, but may answer false here for the ones it cannot
  // run (it then throws if called anyway); the model's needs are checked at load (fallback_backend.h).
  virtual bool supports(Op op, DType dtype) const = 0;
  // Whether the host can read and write this backend's memory through plain pointers (CPU, unified
  // memory). Only such a backend can run some ops on the CPU backend (FallbackBackend).
  virtual bool host_visible_memory() const { return false; }
  // The threads of a backend that computes on the host (the CPU's pool), which the engine reuses for
  // host sampling between forward passes; null for a device backend.
  virtual ThreadPool* host_pool() { return nullptr; }
  // The model's weights are bf16: a backend that computes in fp32 may round a prefill GEMM's input
  // to bf16 (the CPU with AVX-512 BF16, as a bf16 transformers forward does). Others ignore it.
  virtual void set_bf16_prefill(bool on) { (void)on; }
  // Linear's skinny-GEMM switch (CUDA: x of at most this many rows takes the GEMV kernel), for the
  // kernel benchmark's A/B: sets it and returns the previous value; -1 where there is no switch.
  virtual int set_gemv_max_tokens(int tokens) { (void)tokens; return -1; }
  // Whether linear(x, w, out) takes that skinny-GEMM path.
  virtual bool linear_uses_gemv(const Tensor& x, const Tensor& w, const Tensor& out) const {
    (void)x, (void)w, (void)out;
    return false;
  }

  // ---- memory -------------------------------------------------------------------------------
  Buffer alloc(size_t bytes);  // throws pagoda::Error when the device is out of memory
  virtual void* raw_alloc(size_t bytes) = 0;
  virtual void raw_free(void* ptr) = 0;
  virtual void copy_to_device(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void copy_on_device(void* dst, const void* src, size_t bytes) = 0;
  virtual void fill_zero(void* dst, size_t bytes) = 0;
  virtual void synchronize() = 0;
  // Device memory in bytes (the memory plan's starting point); 0 for host backends.
  virtual int64_t total_memory() const { return 0; }
  // Converts a host tensor of any float dtype into `dst` (on device, dst.dtype), element count equal.
  virtual void upload_convert(const Tensor& host_src, Tensor& dst) = 0;

  // ==== primitive ops: every backend implements these ========================================
  // out[t, :] = table[ids[t], :]. table [V, H] (any float dtype, converted), ids I32 [T], out [T, H]
  // activations. Ids must lie in [0, V): the engine checks them; a backend that sees one outside
  // throws (CPU) or, where it cannot throw (a device kernel), writes a row of zeros.
  virtual void embedding(const Tensor& table, const Tensor& ids, Tensor& out) = 0;
  // RMSNorm over the last dim D of x [T, D] or, per head, [T, H, D] (w [D] shared by every head):
  // out = x * rsqrt(mean(x^2) + eps) * (zero_centered ? 1 + w : w), statistics in fp32. w any float
  // dtype; out has x's shape and may alias x (in place).
  virtual void rms_norm(const Tensor& x, const Tensor& w, Tensor& out, float eps,
                        bool zero_centered) = 0;
  // RoPE in place on x [T, H, D] (q or k; dim 0 may be strided): token t at position positions[t]
  // (I32, at least T entries) rotates pair j of every head by the angle positions[t] * inv_freq[j],
  // inv_freq = rope_inv_freq(rope, D) (so the scaling is applied), pairs as rope.style says; dims
  // past rotary_dim pass through.
  virtual void rope(Tensor& x, const Tensor& positions, const RopeParams& rope) = 0;
  // Writes k, v [T, Hkv, D] (activations, dim 0 may be strided) to the caches [num_blocks,
  // block_size, Hkv, D] (contiguous, any float dtype, converted on write) at slot slot_mapping[t]
  // (I32; slot = block * block_size + offset; -1: skipped).
  virtual void reshape_and_cache(const Tensor& k, const Tensor& v, const Tensor& slot_mapping,
                                 Tensor& k_cache, Tensor& v_cache) = 0;
  // Unified varlen paged attention over one step: q [T, Hq, D] → out [T, Hq, D]. Sequence s owns
  // rows cu_seqlens_q[s]..cu_seqlens_q[s+1]; its query i (of q_len) sits at context position
  // seq_lens[s] - q_len + i and attends causally to keys [0, that position] read through
  // block_tables[s] (limited by params.sliding_window). GQA: query head h reads kv head h / (Hq / Hkv).
  // The work partition comes from meta.attention_plan when it was made for this call's shape and
  // step (plan_attention), else the call plans for itself; the results are the same either way.
  virtual void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                               const StepMeta& meta, const AttentionParams& params,
                               Tensor& out) = 0;
  // The step's attention plan (attention_plan.h), made once per step on the host from StepMeta's
  // host scalars and, where given, the host lengths; the caller stores it in meta.attention_plan.
  // The default: tiles of one query row, no splits.
  virtual AttentionPlan plan_attention(const StepMeta& meta, const AttentionShape& shape,
                                       const AttentionLengths& lengths);
  // out[T, N] = x[T, K] · w[N, K]^T (weights stored [out_features, in_features], contiguous).
  virtual void linear(const Tensor& x, const Tensor& w, Tensor& out) = 0;
  // FP8 weights with 2-D block scales: out[t, n] = Σ_k x[t, k] · w[n, k] · scale[n / block_n,
  // k / block_k], w F8_E4M3 [N, K] contiguous, scale F32 [ceil(N / block_n), ceil(K / block_k)]
  // contiguous (partial last blocks). One form for every FP8 checkpoint: Qwen/DeepSeek 128×128
  // blocks, per-channel (block_n 1, block_k K) and per-tensor (N, K) scales. x and out are
  // activations; fp32 accumulation, the answer of dequantizing w (w·scale) and multiplying, up to
  // the rounding of the activation dtype. supports(LinearFp8, F8_E4M3) says whether it runs.
  virtual void linear_fp8(const Tensor& x, const Tensor& w, const Tensor& scale, int64_t block_n, int64_t block_k,
                          Tensor& out) = 0;
  // 4-bit integer weights in groups of `group` input columns (AWQ, GPTQ, compressed-tensors W4A16,
  // repacked at load into this one form): out[t, n] = Σ_k x[t, k] · (q[n, k] − z[n, g]) · scale[n, g],
  // g = k / group; q[n, k] is nibble k % 8 (lowest first) of w[n, k / 8], w I32 [N, K / 8]; z[n, g]
  // nibble g % 8 of zeros[n, g / 8], zeros I32 [N, ceil(G / 8)]; scale F32 [N, G], G = K / group.
  // K a multiple of group, group of 8. fp32 accumulation: the answer of dequantizing w exactly in
  // fp32 and multiplying, up to the rounding of the activation dtype. supports(LinearInt4, I32).
  virtual void linear_int4(const Tensor& x, const Tensor& w, const Tensor& scale, const Tensor& zeros, int64_t group,
                           Tensor& out) = 0;
  // out[T, I] = silu(gate_up[:, :I]) * gate_up[:, I:]   (gate and up fused in one [T, 2I] input)
  virtual void silu_mul(const Tensor& gate_up, Tensor& out) = 0;
  // out[T, I] = gelu_tanh(gate_up[:, :I]) * gate_up[:, I:], gelu_tanh(g) = 0.5·g·(1 + tanh(√(2/π)·
  // (g + 0.044715·g³))) (transformers' gelu_pytorch_tanh: Gemma's MLP), in fp32.
  virtual void gelu_tanh_mul(const Tensor& gate_up, Tensor& out) = 0;
  // x *= factor, elementwise and in place, x [T, N] activations (Gemma's embedding scale).
  virtual void scale(Tensor& x, float factor) = 0;
  // x = cap · tanh(x / cap), elementwise and in place, x [R, N] F32 or activations (Gemma's final
  // logit soft-capping).
  virtual void softcap(Tensor& x, float cap) = 0;
  // out = a + b elementwise, all [T, N] (same shape, dim 0 may be strided); out may alias a or b.
  virtual void add(const Tensor& a, const Tensor& b, Tensor& out) = 0;
  // x[t, :] += bias for every row t; x [T, N] activations (dim 0 may be strided), bias [N] F32.
  virtual void add_bias(Tensor& x, const Tensor& bias) = 0;
  // out[i, :] = x[rows[i], :]; rows I32 [R], out [R, N].
  virtual void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) = 0;
  // out = a * sigmoid(gate), elementwise (Qwen3.5 attention output gate); out may alias a.
  virtual void sigmoid_gate(const Tensor& a, const Tensor& gate, Tensor& out) = 0;

  // ---- Gated DeltaNet primitives (docs/models.md) --------------------------------------------------
  // Common to the two state ops: sequence s owns rows cu_seqlens_q[s]..cu_seqlens_q[s+1] and state
  // slot state_slots[s] (distinct within a step, in [0, slots)); meta.num_tokens == T. A slot
  // whose has_initial_state is 0 is read as zeros (stale contents, NaNs included, are ignored).
  //
  // Causal depthwise conv over each sequence's new tokens, then SiLU: x [T, C] (pre-conv qkv; may
  // be a column view of the fused projection output), w [C, K] (K = kernel size, w[:, K-1]
  // multiplies the current token), conv_state [slots, C, K-1] in the activation dtype holding each
  // slot's last K-1 inputs (oldest first). Writes out [T, C] (must not alias x)
  // and leaves each sequence's last K-1 inputs in its slot (reaching back into the old state when
  // a chunk is shorter than K-1).
  virtual void causal_conv1d_silu(const Tensor& x, const Tensor& w, Tensor& conv_state,
                                  const StepMeta& meta, Tensor& out) = 0;
  // The gated delta rule over each sequence's new tokens, starting from its slot's state (zero
  // where has_initial_state is 0) and writing the final state back in place:
  // q, k [T, Hk, dk], v [T, Hv, dv] (raw conv outputs, typically column views of one [T, C]
  // tensor: the l2 norms q/sqrt(Σq²+1e-6), k/sqrt(Σk²+1e-6) and the 1/sqrt(dk) scale of q are
  // applied here, in fp32), b, a [T, Hv] (column views allowed; β = sigmoid(b),
  // g = -exp(A_log) * softplus(a + dt_bias), softplus(x) = x above 20), A_log and dt_bias [Hv]
  // (any float dtype), state [slots, Hv, dk, dv] fp32 → out [T, Hv, dv] (must not alias q, k, v).
  // Value head h reads key head h / (Hv / Hk). Chunked form (chunks of 64, the last one shorter)
  // for sequences with q_len > 1, recurrent step for q_len == 1; both are the same math
  // (docs/models.md) and agree to ~1e-5 in fp32. The CPU backend takes any dk, dv; a backend with a
  // limit throws pagoda::Error naming it.
  virtual void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v,
                                const Tensor& b, const Tensor& a, const Tensor& A_log,
                                const Tensor& dt_bias, Tensor& state, const StepMeta& meta,
                                Tensor& out) = 0;
  // Device memory gated_delta_rule keeps for itself for steps of up to max_tokens rows of Hv value
  // heads of dv (the CUDA backend's split chunked form): allocated here, at load, so that the memory
  // plan counts it (the model adds it to its workspace) and no step allocates. Returns the bytes.
  virtual size_t reserve_gated_delta_rule(int64_t max_tokens, int64_t hv, int64_t dv, DType act) {
    (void)max_tokens, (void)hv, (void)dv, (void)act;
    return 0;
  }
  // Per head: out = rms_norm(x; w) * silu(z), x and z [T, Hv, dv], w [dv] (plain w, not 1 + w),
  // statistics in fp32. z may be a column view; out may alias x.
  virtual void gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& w, float eps,
                              Tensor& out) = 0;

  // ---- mixture of experts (docs/models.md "Mixture of experts") -------------------------------
  // A sparse MLP is: router logits → moe_route → moe_permute → moe_grouped_linear (gate|up) →
  // silu_mul → moe_grouped_linear (down) → moe_unpermute. T tokens, E experts, k = top-k, R = T·k
  // routed rows; a "slot" is s = t·k + j, the j-th expert choice of token t. None of these reads
  // device values on the host: launch shapes come from tensor shapes only (graph-safe).
  //
  // Per token, softmax over E of logits [T, E] (F32 or activations; dim 0 may be strided, e.g. a
  // column view of a fused router|shared-gate output) computed in fp32, then its top k: expert_ids
  // I32 [T, k] in descending probability (equal probabilities: the lower expert id first), weights
  // F32 [T, k] = those probabilities, divided by their sum when `renormalize` (transformers'
  // norm_topk_prob). k = expert_ids.size(1), 1 <= k <= E. NaN logits are never chosen before a number.
  virtual void moe_route(const Tensor& logits, bool renormalize, Tensor& expert_ids,
                         Tensor& weights) = 0;
  // Sorts the T·k slots by expert (stable: within one expert by slot), E = expert_offsets.size(0) - 1:
  //   expert_offsets I32 [E + 1]: offsets[e] = slots routed to experts below e (offsets[E] = T·k);
  //   sorted_slots I32 [R]: the slot of each sorted row (ascending within an expert);
  //   slot_rows I32 [R]: its inverse, slot_rows[s] = the sorted row of slot s;
  //   x_sorted [R, H] = x[sorted_slots[r] / k] for x [T, H] (activations, dim 0 may be strided).
  // expert_ids I32 [T, k] must lie in [0, E) (moe_route's always do); a backend that sees one outside
  // throws (CPU) or, where it cannot throw, leaves that slot out of every expert.
  virtual void moe_permute(const Tensor& x, const Tensor& expert_ids, Tensor& expert_offsets,
                           Tensor& sorted_slots, Tensor& slot_rows, Tensor& x_sorted) = 0;
  // One GEMM per expert over its rows: out[r, :] = x[r, :] · w[e]^T for r in
  // [offsets[e], offsets[e+1]), x [R, K] (activations, dim 0 may be strided), w [E, N, K] (weights,
  // contiguous, any float dtype supports() accepts), expert_offsets I32 [E + 1] non-decreasing within
  // [0, R] — from 0, or from above it when they are a window of a sort over more experts (expert
  // parallelism: a rank's experts) — out [R, N]. An expert without rows costs nothing; rows outside
  // [offsets[0], offsets[E]) are left unwritten.
  virtual void moe_grouped_linear(const Tensor& x, const Tensor& w, const Tensor& expert_offsets,
                                  Tensor& out) = 0;
  // Back to token order with the routing weights, summed in fp32 over j = 0..k-1 in that order and
  // rounded once: out[t, :] = Σ_j weights[t, j] · y[slot_rows[t·k + j], :]
  //                           + sigmoid(shared_gate[t, 0]) · shared[t, :].
  // y [R, H] (activations), weights F32 [T, k], slot_rows I32 [T·k], out [T, H] (must not alias y).
  // shared [T, H] (the shared expert's output) and shared_gate [T, 1] (its gate logit, a column view
  // allowed) are optional: empty shared = no shared term; empty shared_gate = a gate of 1.
  virtual void moe_unpermute(const Tensor& y, const Tensor& weights, const Tensor& slot_rows,
                             const Tensor& shared, const Tensor& shared_gate, Tensor& out) = 0;

  // ---- LoRA adapters (src/model/lora.h) --------------------------------------------------------
  // A batched LoRA delta is a `linear` of x by every slot's A stacked ([S·R, K]: the shrink, giving
  // low [T, S·R]) and this, the expand (Punica's BGMV): for each row t whose slot s = slots[t] is at
  // least 0, out[t, n] += Σ_r b[s, n, r] · low[t, s·R + r], summed in fp32 onto out's value and
  // rounded once. low [T, S·R] (activations), b [S, N, R] (weights, contiguous), slots I32 [T]
  // (negative: a row of the base model, left as it is), out [T, N] (activations; dim 0 may be
  // strided). A slot ≥ S throws (CPU) or leaves the row alone. Shapes from tensors only (graph-safe).
  virtual void lora_expand(const Tensor& low, const Tensor& b, const Tensor& slots, Tensor& out) = 0;

  // ---- vision encoders (src/model/qwen3_5_vision.cpp; docs/vision.md) ------------------------
  // LayerNorm over the last dim D of x [T, D]: out = (x - mean) * rsqrt(var + eps) * w + b, the
  // biased variance, statistics in fp32. w, b [D] any float dtype (b EMPTY: no bias); out may alias x.
  virtual void layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& out, float eps) = 0;
  // out = gelu(x) elementwise, x and out [T, N] (out may alias x), in fp32: tanh_approx false is the
  // exact 0.5·x·(1 + erf(x/√2)) (torch's nn.GELU()), true transformers' gelu_pytorch_tanh.
  virtual void gelu(const Tensor& x, Tensor& out, bool tanh_approx) = 0;
  // RoPE in place on x [T, H, D] (dim 0 may be strided) where each rotary pair reads its own row of
  // positions: with n = axes.size(0) pairs (2n <= D), pair j is (x[j], x[j + n]) rotated by the angle
  // positions[axes[j], t] · inv_freq[j] (fp32 product, fp32 cos / sin, NeoX's rotate-half); dims
  // past 2n pass through. positions I32 [P, T] contiguous, axes I32 [n] in [0, P), inv_freq F32 [n].
  // Qwen3.5's multimodal RoPE (temporal / height / width rows, interleaved sections) and the vision
  // tower's 2-D RoPE (height for the first half of the pairs, width for the second) are this op.
  virtual void rope_axes(Tensor& x, const Tensor& positions, const Tensor& axes, const Tensor& inv_freq) = 0;
  // Bidirectional attention within segments (a vision tower's images): rows cu_seqlens[s] ..
  // cu_seqlens[s+1] attend to every row of their own segment and no other. q, k, v [T, H, D] (dim 0
  // may be strided: views of one fused qkv output), cu_seqlens I32 [S + 1] from 0 to T, out [T, H, D]
  // (must not alias q, k, v); softmax(q·kᵀ·scale) in fp32.
  virtual void segment_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                                 float scale, Tensor& out) = 0;

  // ---- sampling helpers -----------------------------------------------------------------------
  // out[i] = argmax_j logits[i, j]: logits F32 [R, V] (dim 0 may be strided), out I32 [R]; the
  // lowest j on ties (the Sampler's greedy rule). NaN entries never win.
  virtual void argmax_rows(const Tensor& logits, Tensor& out) = 0;
  // Structured output's token masks, applied where the logits are (the masks are made on the host
  // while the forward pass runs; only they travel, never the rows): logits[rows[m], j] = -inf for
  // every j whose bit is clear in mask row m — bit j % 32 of 32-bit word j / 32 (the little-endian
  // view of the host's 64-bit words). logits F32 [R, V] (dim 0 may be strided), mask I32 [M, W]
  // with W >= ceil(V / 32) (bits past V ignored), rows I32 [M], each in [0, R) and distinct.
  virtual void apply_token_mask(Tensor& logits, const Tensor& mask, const Tensor& rows) = 0;

  // ==== fused fast paths: the model calls these; the defaults (backend.cpp) compose the =========
  // primitives named after each, so a backend overrides one only to make it faster. An override
  // must give the default's numbers up to the rounding of the activation dtype.
  //
  // residual += x, then out = rms_norm(residual). [add, rms_norm]
  virtual void add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& w, Tensor& out,
                            float eps, bool zero_centered);
  // The MLP's down projection with its activation: out[T, N] = linear(silu_mul(gate_up), w_down),
  // gate_up [T, 2I], w_down [N, I]. act [T, I] (activation dtype) is scratch: a backend that fuses
  // the activation into the projection may leave it unwritten. [silu_mul, linear]
  virtual void linear_silu_mul(const Tensor& gate_up, const Tensor& w_down, Tensor& act,
                               Tensor& out);
  // Per-head RMSNorm of q [T, Hq, D] and k [T, Hkv, D] with q_norm_w / k_norm_w [D] (each may be
  // EMPTY: no norm of that tensor), RoPE at meta.positions on both, then k and v [T, Hkv, D]
  // written to the paged caches at meta.slot_mapping. q and k are updated in place.
  // [rms_norm, rope, reshape_and_cache]
  virtual void qk_norm_rope_and_cache(Tensor& q, Tensor& k, const Tensor& v, const Tensor& q_norm_w,
                                      const Tensor& k_norm_w, float eps, bool zero_centered,
                                      const RopeParams& rope, const StepMeta& meta,
                                      Tensor& k_cache, Tensor& v_cache);

  // ---- graphs ---------------------------------------------------------------------------------
  // A backend that can record the ops it enqueues and replay them (CUDA graphs). Between
  // begin_capture() and end_capture() ops are recorded, not run; they must not synchronise, and
  // their launch configuration must depend only on what is the same at every replay (tensor
  // pointers and shapes, StepMeta's host scalars). end_capture() returns a handle for replay().
  virtual bool supports_graphs() const { return false; }
  virtual void begin_capture();
  virtual int64_t end_capture();
  virtual void replay(int64_t graph);
  virtual void destroy_graph(int64_t graph);
};

// The primitives (with their dtypes) that `backend` does not support among `uses`, each once.
std::vector<OpUse> unsupported_ops(const Backend& backend, const std::vector<OpUse>& uses);

// "cpu", "cuda" or "vulkan[:N]" (device N of the Vulkan loader's list, 0 by default); throws
// pagoda::Error naming the choices for anything else or a backend this build lacks. `dtype` is vLLM's --dtype,
// read as the activation dtype by serving_dtypes.h's rules: "auto" (cpu: float32, cuda: bfloat16, vulkan:
// float32), "bfloat16" (cuda only) or "float32" (cuda: every op in fp32, cuBLAS without TF32 — slower, for
// results that must match an fp32 reference token for token). `ordinal`: the device index on top of the one
// `device` names (a worker's device: cuda device N, vulkan:M+N); the CPU has one.
std::unique_ptr<Backend> make_backend(const std::string& device, int num_threads = 0,
                                      const std::string& dtype = "auto", int ordinal = 0);

}  // namespace pagoda
