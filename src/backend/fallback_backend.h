// A partial backend made whole: the ops a device backend does not support run on the CPU backend,
// on the same memory, which is why the device's memory must be host-visible (CPU, unified memory).
// And the check at model load: a backend that lacks an op the model needs, with no way to run it
// elsewhere, is refused with a message naming the ops and the backend (docs/design.md §3).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace pagoda {

class FallbackBackend final : public Backend {
 public:
  // `device` must have host_visible_memory(); `cpu` runs F32 activations (a CpuBackend).
  FallbackBackend(std::unique_ptr<Backend> device, std::unique_ptr<Backend> cpu);

  Backend& device_backend() { return *device_; }
  Backend& cpu_backend() { return *cpu_; }
  // The primitives this backend sends to the CPU with its activation dtype (for messages).
  std::vector<Op> ops_on_cpu() const;

  Device device() const override { return device_->device(); }
  DType activation_dtype() const override { return device_->activation_dtype(); }
  std::string name() const override;
  bool supports(Op op, DType dtype) const override;
  bool host_visible_memory() const override { return true; }

  // Memory is the device's.
  void* raw_alloc(size_t bytes) override { return device_->raw_alloc(bytes); }
  void raw_free(void* ptr) override { device_->raw_free(ptr); }
  void copy_to_device(void* dst, const void* src, size_t bytes) override;
  void copy_to_host(void* dst, const void* src, size_t bytes) override;
  void copy_on_device(void* dst, const void* src, size_t bytes) override;
  void fill_zero(void* dst, size_t bytes) override;
  void synchronize() override;
  int64_t total_memory() const override { return device_->total_memory(); }
  void upload_convert(const Tensor& host_src, Tensor& dst) override;

  // Each primitive runs on the device when it supports (op, dtype), else on the CPU.
  void embedding(const Tensor& table, const Tensor& ids, Tensor& out) override;
  void rms_norm(const Tensor& x, const Tensor& w, Tensor& out, float eps, bool zero_centered) override;
  void rope(Tensor& x, const Tensor& positions, const RopeParams& rope) override;
  void reshape_and_cache(const Tensor& k, const Tensor& v, const Tensor& slot_mapping, Tensor& k_cache,
                         Tensor& v_cache) override;
  void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const StepMeta& meta,
                       const AttentionParams& params, Tensor& out) override;
  void linear(const Tensor& x, const Tensor& w, Tensor& out) override;
  void linear_int4(const Tensor& x, const Tensor& w, const Tensor& scale, const Tensor& zeros, int64_t group,
                   Tensor& out) override;
  void linear_fp8(const Tensor& x, const Tensor& w, const Tensor& scale, int64_t block_n, int64_t block_k,
                  Tensor& out) override;
  void silu_mul(const Tensor& gate_up, Tensor& out) override;
  void add(const Tensor& a, const Tensor& b, Tensor& out) override;
  void add_bias(Tensor& x, const Tensor& bias) override;
  void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) override;
  void gelu_tanh_mul(const Tensor& gate_up, Tensor& out) override;
  void scale(Tensor& x, float factor) override;
  void softcap(Tensor& x, float cap) override;
  AttentionPlan plan_attention(const StepMeta& meta, const AttentionShape& shape,
                               const AttentionLengths& lengths) override;
  void sigmoid_gate(const Tensor& a, const Tensor& gate, Tensor& out) override;
  void causal_conv1d_silu(const Tensor& x, const Tensor& w, Tensor& conv_state, const StepMeta& meta,
                          Tensor& out) override;
  void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& b, const Tensor& a,
                        const Tensor& A_log, const Tensor& dt_bias, Tensor& state, const StepMeta& meta,
                        Tensor& out) override;
  size_t reserve_gated_delta_rule(int64_t max_tokens, int64_t hv, int64_t dv, DType act) override {
    return on(Op::GatedDeltaRule, act).reserve_gated_delta_rule(max_tokens, hv, dv, act);
  }
  void gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& w, float eps, Tensor& out) override;
  void argmax_rows(const Tensor& logits, Tensor& out) override;
  void apply_token_mask(Tensor& logits, const Tensor& mask, const Tensor& rows) override;
  void moe_route(const Tensor& logits, bool renormalize, Tensor& expert_ids, Tensor& weights) override;
  void moe_permute(const Tensor& x, const Tensor& expert_ids, Tensor& expert_offsets, Tensor& sorted_slots,
                   Tensor& slot_rows, Tensor& x_sorted) override;
  void moe_grouped_linear(const Tensor& x, const Tensor& w, const Tensor& expert_offsets, Tensor& out) override;
  void moe_unpermute(const Tensor& y, const Tensor& weights, const Tensor& slot_rows, const Tensor& shared,
                     const Tensor& shared_gate, Tensor& out) override;
  void lora_expand(const Tensor& low, const Tensor& b, const Tensor& slots, Tensor& out) override;
  void layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& out, float eps) override;
  void gelu(const Tensor& x, Tensor& out, bool tanh_approx) override;
  void rope_axes(Tensor& x, const Tensor& positions, const Tensor& axes, const Tensor& inv_freq) override;
  void segment_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, float scale,
                         Tensor& out) override;

  // A fused path runs whole on the device (its own fusion, if any) when the device supports every
  // primitive it is made of; otherwise as the default composition, primitive by primitive.
  void add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& w, Tensor& out, float eps,
                    bool zero_centered) override;
  void linear_silu_mul(const Tensor& gate_up, const Tensor& w_down, Tensor& act, Tensor& out) override;
  void qk_norm_rope_and_cache(Tensor& q, Tensor& k, const Tensor& v, const Tensor& q_norm_w,
                              const Tensor& k_norm_w, float eps, bool zero_centered, const RopeParams& rope,
                              const StepMeta& meta, Tensor& k_cache, Tensor& v_cache) override;

 private:
  // The backend that runs (op, dtype). Before the first CPU op after device work, waits for the
  // device: the CPU reads what the device wrote.
  Backend& on(Op op, DType dtype);
  Backend& on_device();

  std::unique_ptr<Backend> device_, cpu_;
  bool device_busy_ = false;  // device work enqueued since the last synchronisation
};

// `device` itself when it supports every primitive with its activation dtype, or when its memory is
// not host-visible (require_ops() then names what it lacks at model load); else a FallbackBackend
// over it and a CPU backend of `cpu_threads` threads (0: one per hardware thread).
std::unique_ptr<Backend> with_cpu_fallback(std::unique_ptr<Backend> device, int cpu_threads = 0);

// Throws pagoda::Error when `backend` does not support one of `uses` (what `model` needs), naming
// the missing ops, their dtypes and the backend. Called when a model is loaded.
void require_ops(const Backend& backend, const std::vector<OpUse>& uses, const std::string& model);

}  // namespace pagoda
