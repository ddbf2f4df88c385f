#include "backend/fallback_backend.h"

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace pagoda {

FallbackBackend::FallbackBackend(std::unique_ptr<Backend> device, std::unique_ptr<Backend> cpu)
    : device_(std::move(device)), cpu_(std::move(cpu)) {
  check(device_ && cpu_, "internal: FallbackBackend needs a device and a CPU backend");
  check(device_->host_visible_memory(),
        "internal: the " + device_->name() + " backend's memory is not host-visible; the CPU cannot run its ops");
}

namespace {
// The dtype supports() is asked about for `op` in a model of activation dtype `act` (backend.h):
// the logits' for argmax, the weights' for FP8 projections, the activations' otherwise.
DType probe_dtype(Op op, DType act) {
  if (op == Op::ArgmaxRows) return DType::F32;
  if (op == Op::LinearFp8) return DType::F8_E4M3;
  if (op == Op::LinearInt4) return DType::I32;
  return act;
}
}  // namespace

std::vector<Op> FallbackBackend::ops_on_cpu() const {
  std::vector<Op> ops;
  const DType act = activation_dtype();
  for (Op op : all_ops()) {
    if (!device_->supports(op, probe_dtype(op, act))) ops.push_back(op);
  }
  return ops;
}

std::string FallbackBackend::name() const {
  std::string ops;
  for (Op op : ops_on_cpu()) ops += std::string(ops.empty() ? "" : ", ") + op_name(op);
  return device_->name() + " + " + cpu_->name() + " for " + (ops.empty() ? "no ops" : ops);
}

bool FallbackBackend::supports(Op op, DType dtype) const {
  return device_->supports(op, dtype) || cpu_->supports(op, dtype);
}

Backend& FallbackBackend::on_device() {
  device_busy_ = true;
  return *device_;
}

Backend& FallbackBackend::on(Op op, DType dtype) {
  if (device_->supports(op, dtype)) return on_device();
  if (device_busy_) {
    device_->synchronize();
    device_busy_ = false;
  }
  return *cpu_;
}

// ---- memory: the device's -------------------------------------------------------------------------

void FallbackBackend::copy_to_device(void* dst, const void* src, size_t bytes) {
  on_device().copy_to_device(dst, src, bytes);
}
void FallbackBackend::copy_to_host(void* dst, const void* src, size_t bytes) {
  device_->copy_to_host(dst, src, bytes);  // waits for the device's work before it returns
}
void FallbackBackend::copy_on_device(void* dst, const void* src, size_t bytes) {
  on_device().copy_on_device(dst, src, bytes);
}
void FallbackBackend::fill_zero(void* dst, size_t bytes) { on_device().fill_zero(dst, bytes); }
void FallbackBackend::synchronize() {
  device_->synchronize();
  device_busy_ = false;
}
void FallbackBackend::upload_convert(const Tensor& host_src, Tensor& dst) {
  on_device().upload_convert(host_src, dst);
}

// ---- primitives: routed one by one ----------------------------------------------------------------

void FallbackBackend::embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  on(Op::Embedding, table.dtype).embedding(table, ids, out);
}
void FallbackBackend::rms_norm(const Tensor& x, const Tensor& w, Tensor& out, float eps, bool zero_centered) {
  on(Op::RmsNorm, x.dtype).rms_norm(x, w, out, eps, zero_centered);
}
void FallbackBackend::rope(Tensor& x, const Tensor& positions, const RopeParams& rope_params) {
  on(Op::Rope, x.dtype).rope(x, positions, rope_params);
}
void FallbackBackend::reshape_and_cache(const Tensor& k, const Tensor& v, const Tensor& slot_mapping,
                                        Tensor& k_cache, Tensor& v_cache) {
  on(Op::ReshapeAndCache, k.dtype).reshape_and_cache(k, v, slot_mapping, k_cache, v_cache);
}
void FallbackBackend::paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                                      const StepMeta& meta, const AttentionParams& params, Tensor& out) {
  on(Op::PagedAttention, q.dtype).paged_attention(q, k_cache, v_cache, meta, params, out);
}
void FallbackBackend::linear(const Tensor& x, const Tensor& w, Tensor& out) {
  on(Op::Linear, w.dtype).linear(x, w, out);
}
void FallbackBackend::linear_fp8(const Tensor& x, const Tensor& w, const Tensor& scale, int64_t block_n,
                                 int64_t block_k, Tensor& out) {
  on(Op::LinearFp8, w.dtype).linear_fp8(x, w, scale, block_n, block_k, out);
}

void FallbackBackend::linear_int4(const Tensor& x, const Tensor& w, const Tensor& scale, const Tensor& zeros,
                                  int64_t group, Tensor& out) {
  on(Op::LinearInt4, w.dtype).linear_int4(x, w, scale, zeros, group, out);
}
void FallbackBackend::silu_mul(const Tensor& gate_up, Tensor& out) {
  on(Op::SiluMul, gate_up.dtype).silu_mul(gate_up, out);
}
void FallbackBackend::add(const Tensor& a, const Tensor& b, Tensor& out) { on(Op::Add, a.dtype).add(a, b, out); }
void FallbackBackend::add_bias(Tensor& x, const Tensor& bias) { on(Op::AddBias, x.dtype).add_bias(x, bias); }
void FallbackBackend::gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) {
  on(Op::GatherRows, x.dtype).gather_rows(x, rows, out);
}
void FallbackBackend::gelu_tanh_mul(const Tensor& gate_up, Tensor& out) {
  on(Op::GeluTanhMul, gate_up.dtype).gelu_tanh_mul(gate_up, out);
}

void FallbackBackend::scale(Tensor& x, float factor) { on(Op::Scale, x.dtype).scale(x, factor); }

void FallbackBackend::softcap(Tensor& x, float cap) { on(Op::Softcap, x.dtype).softcap(x, cap); }

AttentionPlan FallbackBackend::plan_attention(const StepMeta& meta, const AttentionShape& shape,
                                              const AttentionLengths& lengths) {
  return on(Op::PagedAttention, activation_dtype()).plan_attention(meta, shape, lengths);
}

void FallbackBackend::sigmoid_gate(const Tensor& a, const Tensor& gate, Tensor& out) {
  on(Op::SigmoidGate, a.dtype).sigmoid_gate(a, gate, out);
}
void FallbackBackend::causal_conv1d_silu(const Tensor& x, const Tensor& w, Tensor& conv_state,
                                         const StepMeta& meta, Tensor& out) {
  on(Op::CausalConv1dSilu, x.dtype).causal_conv1d_silu(x, w, conv_state, meta, out);
}
void FallbackBackend::gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& b,
                                       const Tensor& a, const Tensor& A_log, const Tensor& dt_bias, Tensor& state,
                                       const StepMeta& meta, Tensor& out) {
  on(Op::GatedDeltaRule, q.dtype).gated_delta_rule(q, k, v, b, a, A_log, dt_bias, state, meta, out);
}
void FallbackBackend::gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& w, float eps, Tensor& out) {
  on(Op::GatedRmsNorm, x.dtype).gated_rms_norm(x, z, w, eps, out);
}
void FallbackBackend::argmax_rows(const Tensor& logits, Tensor& out) {
  on(Op::ArgmaxRows, logits.dtype).argmax_rows(logits, out);
}
void FallbackBackend::apply_token_mask(Tensor& logits, const Tensor& mask, const Tensor& rows) {
  on(Op::ApplyTokenMask, logits.dtype).apply_token_mask(logits, mask, rows);
}
void FallbackBackend::moe_route(const Tensor& logits, bool renormalize, Tensor& expert_ids, Tensor& weights) {
  on(Op::MoeRoute, activation_dtype()).moe_route(logits, renormalize, expert_ids, weights);
}
void FallbackBackend::moe_permute(const Tensor& x, const Tensor& expert_ids, Tensor& expert_offsets,
                                  Tensor& sorted_slots, Tensor& slot_rows, Tensor& x_sorted) {
  on(Op::MoePermute, x.dtype).moe_permute(x, expert_ids, expert_offsets, sorted_slots, slot_rows, x_sorted);
}
void FallbackBackend::moe_grouped_linear(const Tensor& x, const Tensor& w, const Tensor& expert_offsets,
                                         Tensor& out) {
  on(Op::MoeGroupedLinear, w.dtype).moe_grouped_linear(x, w, expert_offsets, out);
}
void FallbackBackend::moe_unpermute(const Tensor& y, const Tensor& weights, const Tensor& slot_rows,
                                    const Tensor& shared, const Tensor& shared_gate, Tensor& out) {
  on(Op::MoeUnpermute, y.dtype).moe_unpermute(y, weights, slot_rows, shared, shared_gate, out);
}
void FallbackBackend::lora_expand(const Tensor& low, const Tensor& b, const Tensor& slots, Tensor& out) {
  on(Op::LoraExpand, b.dtype).lora_expand(low, b, slots, out);
}

void FallbackBackend::layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& out, float eps) {
  on(Op::LayerNorm, x.dtype).layer_norm(x, w, b, out, eps);
}

void FallbackBackend::gelu(const Tensor& x, Tensor& out, bool tanh_approx) {
  on(Op::Gelu, x.dtype).gelu(x, out, tanh_approx);
}

void FallbackBackend::rope_axes(Tensor& x, const Tensor& positions, const Tensor& axes, const Tensor& inv_freq) {
  on(Op::RopeAxes, x.dtype).rope_axes(x, positions, axes, inv_freq);
}

void FallbackBackend::segment_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                                        float scale, Tensor& out) {
  on(Op::SegmentAttention, q.dtype).segment_attention(q, k, v, cu_seqlens, scale, out);
}

// ---- fused paths: whole on the device, or composed ------------------------------------------------

void FallbackBackend::add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& w, Tensor& out, float eps,
                                   bool zero_centered) {
  if (device_->supports(Op::Add, x.dtype) && device_->supports(Op::RmsNorm, x.dtype))
    on_device().add_rms_norm(residual, x, w, out, eps, zero_centered);
  else
    Backend::add_rms_norm(residual, x, w, out, eps, zero_centered);
}

void FallbackBackend::linear_silu_mul(const Tensor& gate_up, const Tensor& w_down, Tensor& act, Tensor& out) {
  if (device_->supports(Op::SiluMul, gate_up.dtype) && device_->supports(Op::Linear, w_down.dtype))
    on_device().linear_silu_mul(gate_up, w_down, act, out);
  else
    Backend::linear_silu_mul(gate_up, w_down, act, out);
}

void FallbackBackend::qk_norm_rope_and_cache(Tensor& q, Tensor& k, const Tensor& v, const Tensor& q_norm_w,
                                             const Tensor& k_norm_w, float eps, bool zero_centered,
                                             const RopeParams& rope_params, const StepMeta& meta, Tensor& k_cache,
                                             Tensor& v_cache) {
  const bool norm = !q_norm_w.empty() || !k_norm_w.empty();
  if ((!norm || device_->supports(Op::RmsNorm, q.dtype)) && device_->supports(Op::Rope, q.dtype) &&
      device_->supports(Op::ReshapeAndCache, k.dtype))
    on_device().qk_norm_rope_and_cache(q, k, v, q_norm_w, k_norm_w, eps, zero_centered, rope_params, meta,
                                       k_cache, v_cache);
  else
    Backend::qk_norm_rope_and_cache(q, k, v, q_norm_w, k_norm_w, eps, zero_centered, rope_params, meta, k_cache,
                                    v_cache);
}

// ---- construction and the load-time check ---------------------------------------------------------

std::unique_ptr<Backend> with_cpu_fallback(std::unique_ptr<Backend> device, int cpu_threads) {
  if (!device->host_visible_memory()) return device;
  const DType act = device->activation_dtype();
  bool complete = true;
  for (Op op : all_ops()) complete = complete && device->supports(op, probe_dtype(op, act));
  if (complete) return device;
  return std::make_unique<FallbackBackend>(std::move(device), make_cpu_backend(cpu_threads));
}

void require_ops(const Backend& backend, const std::vector<OpUse>& uses, const std::string& model) {
  const std::vector<OpUse> missing = unsupported_ops(backend, uses);
  if (missing.empty()) return;
  std::string list;
  for (const OpUse& u : missing)
    list += std::string(list.empty() ? "" : ", ") + op_name(u.op) + " (" + dtype_name(u.dtype) + ")";
  const std::string why =
      backend.host_visible_memory()
          ? "neither it nor the CPU fallback runs them with these dtypes"
          : "and its memory is not host-visible, so they cannot run on the CPU instead";
  throw Error("the " + backend.name() + " backend cannot run this " + model + " model: it does not support " +
              list + ", " + why + "; run the model with --device cpu");
}

}  // namespace pagoda
