// The Backend interface: device memory, a stream, and the coarse op set the models call
// (DESIGN.md §3). A model is written once against this interface and runs on every backend.
// Conventions for every op:
//  - tensors live on the backend's device; activations use activation_dtype() (cpu: F32, cuda: BF16 or F32);
//    weights may be any of F32/BF16/F16; math is fp32 inside;
//  - dim 0 of an input or output may be strided (Tensor::row_stride), inner dims are contiguous;
//  - no op synchronises with the host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/attention_plan.h"
#include "backend/step_meta.h"
#include "core/tensor.h"

namespace pagoda {

class Backend;

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

// RoPE frequency scaling, as transformers' rope_type names it. None: inv_freq_j = theta^(-2j/rot).
// Llama3 (Llama 3.1+): long wavelengths divided by `factor`, short ones kept, a smooth blend between
// (MODELS.md "Llama 3.x").
enum class RopeScaling : int32_t { None, Llama3 };

struct RopeParams {
  int32_t rotary_dim = 0;  // leading dims rotated (NeoX pairing i, i + rotary_dim/2); rest pass through
  float theta = 10000.0f;
  RopeScaling scaling = RopeScaling::None;
  // Llama3 scaling: factor, low_freq_factor, high_freq_factor, original_max_position_embeddings.
  double factor = 1.0, low_freq_factor = 1.0, high_freq_factor = 4.0;
  double original_max_positions = 8192.0;
};

// inv_freq of every rotary pair (rotary_dim / 2 values; rotary_dim 0 = head_dim), in fp32 as
// transformers computes them, with the scaling applied. Host-side; what a backend's rope uses.
std::vector<float> rope_inv_freq(const RopeParams& rope, int64_t head_dim);
// What cos and sin are multiplied by (yarn's attention factor; 1 for every other scaling).
float rope_attention_scale(const RopeParams& rope);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual DType activation_dtype() const = 0;
  virtual std::string name() const = 0;

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

  // ---- ops ----------------------------------------------------------------------------------
  // out[t, :] = table[ids[t], :]
  virtual void embedding(const Tensor& table, const Tensor& ids, Tensor& out) = 0;
  // Row-wise RMSNorm over the last dim: x * rsqrt(mean(x^2) + eps) * (zero_centered ? 1 + w : w).
  virtual void rms_norm(const Tensor& x, const Tensor& w, Tensor& out, float eps,
                        bool zero_centered) = 0;
  // residual += x, then out = rms_norm(residual). Saves one read of the residual stream.
  virtual void add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& w, Tensor& out,
                            float eps, bool zero_centered) = 0;
  // out[T, N] = x[T, K] · w[N, K]^T (weights stored [out_features, in_features]).
  virtual void linear(const Tensor& x, const Tensor& w, Tensor& out) = 0;
  // x[t, :] += bias for every row t; x [T, N] in the activation dtype, bias [N] fp32. Models with
  // biased projections need it; the default throws, naming the backend.
  virtual void add_bias(Tensor& x, const Tensor& bias);
  // out[T, I] = silu(gate_up[:, :I]) * gate_up[:, I:]   (gate and up fused in one [T, 2I] input)
  virtual void silu_mul(const Tensor& gate_up, Tensor& out) = 0;
  // The MLP's down projection with its activation: out[T, N] = linear(silu_mul(gate_up), w_down),
  // gate_up [T, 2I], w_down [N, I]; the same numbers as silu_mul into act, then linear(act, w_down).
  // act [T, I] (activation dtype) is scratch: a backend that fuses the activation into the
  // projection leaves it unwritten, any other writes silu_mul's result there.
  virtual void linear_silu_mul(const Tensor& gate_up, const Tensor& w_down, Tensor& act, Tensor& out) = 0;
  // Per-head RMSNorm of q [T, Hq, D] and k [T, Hkv, D] (weights [D]; empty weights: no norm — the
  // CPU backend only so far), RoPE at meta.positions on both, then k and v [T, Hkv, D] written to
  // the paged caches at meta.slot_mapping.
  // q is updated in place; the caches are [num_blocks, block_size, Hkv, D].
  virtual void qk_norm_rope_and_cache(Tensor& q, Tensor& k, const Tensor& v, const Tensor& q_norm_w,
                                      const Tensor& k_norm_w, float eps, bool zero_centered,
                                      const RopeParams& rope, const StepMeta& meta,
                                      Tensor& k_cache, Tensor& v_cache) = 0;
  // Writes k, v [T, Hkv, D] to the caches at slot_mapping[t] (slot -1: skipped).
  virtual void reshape_and_cache(const Tensor& k, const Tensor& v, const Tensor& slot_mapping,
                                 Tensor& k_cache, Tensor& v_cache) = 0;
  // Unified varlen paged attention over one step: q [T, Hq, D] → out [T, Hq, D]. Sequence s owns
  // rows cu_seqlens_q[s]..cu_seqlens_q[s+1]; its query i (of q_len) sits at context position
  // seq_lens[s] - q_len + i and attends causally to keys [0, that position] read through
  // block_tables[s]. GQA: query head h reads kv head h / (Hq / Hkv). The work partition comes
  // from meta.attention_plan when it was made for this call's shape and step (plan_attention),
  // else the call plans for itself; the results are the same either way.
  virtual void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                               const StepMeta& meta, const AttentionParams& params,
                               Tensor& out) = 0;
  // The step's attention plan (attention_plan.h), made once per step on the host from StepMeta's
  // host scalars and, where given, the host lengths; the caller stores it in meta.attention_plan.
  // The default: tiles of one query row, no splits.
  virtual AttentionPlan plan_attention(const StepMeta& meta, const AttentionShape& shape,
                                       const AttentionLengths& lengths);
  // out[i, :] = x[rows[i], :]
  virtual void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) = 0;
  // out = a * sigmoid(gate), elementwise (Qwen3.5 attention output gate); out may alias a.
  virtual void sigmoid_gate(const Tensor& a, const Tensor& gate, Tensor& out) = 0;

  // ---- Gated DeltaNet (MODELS.md) -------------------------------------------------------------
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
  // (MODELS.md) and agree to ~1e-5 in fp32. The CPU backend takes any dk, dv; a backend with a
  // limit throws pagoda::Error naming it.
  virtual void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v,
                                const Tensor& b, const Tensor& a, const Tensor& A_log,
                                const Tensor& dt_bias, Tensor& state, const StepMeta& meta,
                                Tensor& out) = 0;
  // Per head: out = rms_norm(x; w) * silu(z), x and z [T, Hv, dv], w [dv] (plain w, not 1 + w),
  // statistics in fp32. z may be a column view; out may alias x.
  virtual void gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& w, float eps,
                              Tensor& out) = 0;

  // ---- sampling -------------------------------------------------------------------------------
  // out[i] = argmax_j logits[i, j]: logits F32 [R, V] (dim 0 may be strided), out I32 [R]; the
  // lowest j on ties (the Sampler's greedy rule). NaN entries never win.
  virtual void argmax_rows(const Tensor& logits, Tensor& out) = 0;

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

// "cpu" or "cuda"; throws pagoda::Error naming the choices for anything else or a CUDA backend
// in a build without CUDA. `dtype` is the activation dtype, as vLLM's --dtype: "auto" (cpu:
// float32, cuda: bfloat16), "bfloat16" (cuda only) or "float32" (cuda: every op in fp32, cuBLAS
// without TF32 — slower, for results that must match an fp32 reference token for token).
std::unique_ptr<Backend> make_backend(const std::string& device, int num_threads = 0,
                                      const std::string& dtype = "auto");
// The activation dtype `dtype` names on `device`; throws pagoda::Error for one it cannot run.
DType parse_activation_dtype(const std::string& dtype, const std::string& device);

}  // namespace pagoda
