// A backend that forwards every call to another and, while a step is being timed, puts a device
// timestamp between its ops (backend/device_clock.h): the step profiler's op breakdown
// (engine/step_profiler.h). Only a worker started with profiling on is wrapped; between timed steps
// a call costs one more virtual dispatch. Each timed op carries what it moved and computed, from
// its tensors' shapes (bytes of every operand but a KV cache pool; FLOPs of the products), for its
// fraction of the device's roofline.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/device_clock.h"

namespace pagoda {

struct TimedOp {
  const char* op = "";  // the Backend method
  std::string shape;    // what groups calls of one kind: a projection's N×K and dtype, a width
  double bytes = 0;     // operand bytes read and written (0: not estimated, e.g. paged attention)
  double flops = 0;     // multiply-adds × 2 of the products (0 for the others)
  double ms = 0;
};

class TimedBackend final : public Backend {
 public:
  explicit TimedBackend(std::unique_ptr<Backend> inner);

  Backend& inner() { return *inner_; }
  // Between begin and end every op is timed (the clock must be this backend's: make_device_clock).
  void begin(DeviceClock* clock);
  // Waits for the timed ops and returns them in call order.
  std::vector<TimedOp> end();
  bool timing() const { return clock_ != nullptr; }
  // An op this backend does not run (a collective enqueued on its stream), timed like its own.
  void record_external(const char* op, std::string shape, double bytes) {
    if (clock_ != nullptr) record(op, std::move(shape), bytes);
  }

  Device device() const override { return inner_->device(); }
  DType activation_dtype() const override { return inner_->activation_dtype(); }
  std::string name() const override { return inner_->name(); }
  bool supports(Op op, DType dtype) const override { return inner_->supports(op, dtype); }
  bool host_visible_memory() const override { return inner_->host_visible_memory(); }
  ThreadPool* host_pool() override { return inner_->host_pool(); }
  void set_bf16_prefill(bool on) override { inner_->set_bf16_prefill(on); }
  int set_gemv_max_tokens(int tokens) override { return inner_->set_gemv_max_tokens(tokens); }
  size_t reserve_gated_delta_rule(int64_t max_tokens, int64_t hv, int64_t dv, DType act) override {
    return inner_->reserve_gated_delta_rule(max_tokens, hv, dv, act);
  }
  bool linear_uses_gemv(const Tensor& x, const Tensor& w, const Tensor& out) const override {
    return inner_->linear_uses_gemv(x, w, out);
  }
  void* raw_alloc(size_t bytes) override { return inner_->raw_alloc(bytes); }
  void raw_free(void* ptr) override { inner_->raw_free(ptr); }
  void copy_to_device(void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void copy_on_device(void* dst, const void* src, size_t bytes) override;
  void fill_zero(void* dst, size_t bytes) override;
  void synchronize() override { inner_->synchronize(); }
  int64_t total_memory() const override { return inner_->total_memory(); }
  void upload_convert(const Tensor& host_src, Tensor& dst) override { inner_->upload_convert(host_src, dst); }

  void embedding(const Tensor& table, const Tensor& ids, Tensor& out) override;
  void rms_norm(const Tensor& x, const Tensor& w, Tensor& out, float eps, bool zero_centered) override;
  void rope(Tensor& x, const Tensor& positions, const RopeParams& rope) override;
  void reshape_and_cache(const Tensor& k, const Tensor& v, const Tensor& slot_mapping, Tensor& k_cache,
                         Tensor& v_cache) override;
  void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const StepMeta& meta,
                       const AttentionParams& params, Tensor& out) override;
  AttentionPlan plan_attention(const StepMeta& meta, const AttentionShape& shape,
                               const AttentionLengths& lengths) override {
    return inner_->plan_attention(meta, shape, lengths);
  }
  void linear(const Tensor& x, const Tensor& w, Tensor& out) override;
  void linear_fp8(const Tensor& x, const Tensor& w, const Tensor& scale, int64_t block_n, int64_t block_k,
                  Tensor& out) override;
  void linear_int4(const Tensor& x, const Tensor& w, const Tensor& scale, const Tensor& zeros, int64_t group,
                   Tensor& out) override;
  void silu_mul(const Tensor& gate_up, Tensor& out) override;
  void gelu_tanh_mul(const Tensor& gate_up, Tensor& out) override;
  void scale(Tensor& x, float factor) override;
  void softcap(Tensor& x, float cap) override;
  void add(const Tensor& a, const Tensor& b, Tensor& out) override;
  void add_bias(Tensor& x, const Tensor& bias) override;
  void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) override;
  void sigmoid_gate(const Tensor& a, const Tensor& gate, Tensor& out) override;
  void causal_conv1d_silu(const Tensor& x, const Tensor& w, Tensor& conv_state, const StepMeta& meta,
                          Tensor& out) override;
  void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& b, const Tensor& a,
                        const Tensor& A_log, const Tensor& dt_bias, Tensor& state, const StepMeta& meta,
                        Tensor& out) override;
  void gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& w, float eps, Tensor& out) override;
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
  void argmax_rows(const Tensor& logits, Tensor& out) override;
  void apply_token_mask(Tensor& logits, const Tensor& mask, const Tensor& rows) override;
  void add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& w, Tensor& out, float eps,
                    bool zero_centered) override;
  void linear_silu_mul(const Tensor& gate_up, const Tensor& w_down, Tensor& act, Tensor& out) override;
  void qk_norm_rope_and_cache(Tensor& q, Tensor& k, const Tensor& v, const Tensor& q_norm_w, const Tensor& k_norm_w,
                              float eps, bool zero_centered, const RopeParams& rope, const StepMeta& meta,
                              Tensor& k_cache, Tensor& v_cache) override;

  bool supports_graphs() const override { return inner_->supports_graphs(); }
  void begin_capture() override { inner_->begin_capture(); }
  int64_t end_capture() override { return inner_->end_capture(); }
  void replay(int64_t graph) override { inner_->replay(graph); }
  void destroy_graph(int64_t graph) override { inner_->destroy_graph(graph); }

 private:
  // Called before an op while timing: its mark and what it moves.
  void record(const char* op, std::string shape, double bytes, double flops = 0);

  std::unique_ptr<Backend> inner_;
  DeviceClock* clock_ = nullptr;
  std::vector<TimedOp> ops_;
};

// The backend a TimedBackend wraps, else `be` itself (for code that needs the concrete backend).
Backend& unwrap_timed(Backend& be);
// Times an op enqueued outside the backend (a communicator's all-reduce) when `be` is timing.
void record_external_op(Backend& be, const char* op, std::string shape, double bytes);

}  // namespace pagoda
