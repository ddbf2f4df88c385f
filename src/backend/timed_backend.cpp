#include "backend/timed_backend.h"

#include <utility>

#include "core/error.h"

namespace pagoda {
namespace {

double bytes(const Tensor& t) { return t.data == nullptr ? 0.0 : static_cast<double>(t.nbytes()); }
double rows(const Tensor& t) { return t.ndim == 0 ? 1.0 : static_cast<double>(t.shape[0]); }
std::string width(const Tensor& t) { return std::to_string(t.row_numel()); }
// A product's label: N×K and the weights' dtype (a projection of a model is one of few of these).
std::string product(const Tensor& x, const Tensor& w, const Tensor& out) {
  return std::to_string(out.row_numel()) + "x" + std::to_string(x.row_numel()) + " " + dtype_name(w.dtype);
}
double product_flops(const Tensor& x, const Tensor& out) {
  return 2.0 * rows(x) * static_cast<double>(out.row_numel()) * static_cast<double>(x.row_numel());
}

}  // namespace

TimedBackend::TimedBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {
  check_invariant(inner_ != nullptr, "TimedBackend needs a backend to wrap");
}

void TimedBackend::begin(DeviceClock* clock) {
  check_invariant(clock != nullptr, "TimedBackend::begin needs a clock");
  ops_.clear();
  clock_ = clock;
}

std::vector<TimedOp> TimedBackend::end() {
  if (clock_ == nullptr) return {};
  clock_->mark();
  const std::vector<double> ms = clock_->read_ms();
  clock_ = nullptr;
  check_invariant(ms.size() == ops_.size() + 1, "TimedBackend: a mark per op and one at the end");
  for (size_t i = 0; i < ops_.size(); ++i) ops_[i].ms = ms[i + 1] - ms[i];
  return std::exchange(ops_, {});
}

void TimedBackend::record(const char* op, std::string shape, double b, double flops) {
  clock_->mark();
  ops_.push_back({op, std::move(shape), b, flops, 0.0});
}

// Each op: its record while timing, then the wrapped backend's.
#define PAGODA_TIMED(op, shape, b, flops) \
  if (clock_ != nullptr) record(op, shape, b, flops)

void TimedBackend::copy_to_device(void* dst, const void* host_src, size_t n) {
  PAGODA_TIMED("copy_to_device", "", static_cast<double>(n), 0);
  inner_->copy_to_device(dst, host_src, n);
}
void TimedBackend::copy_to_host(void* host_dst, const void* src, size_t n) {
  PAGODA_TIMED("copy_to_host", "", static_cast<double>(n), 0);
  inner_->copy_to_host(host_dst, src, n);
}
void TimedBackend::copy_on_device(void* dst, const void* src, size_t n) {
  PAGODA_TIMED("copy_on_device", "", 2.0 * static_cast<double>(n), 0);
  inner_->copy_on_device(dst, src, n);
}
void TimedBackend::fill_zero(void* dst, size_t n) {
  PAGODA_TIMED("fill_zero", "", static_cast<double>(n), 0);
  inner_->fill_zero(dst, n);
}

void TimedBackend::embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  PAGODA_TIMED("embedding", width(out), 2 * bytes(out) + bytes(ids), 0);
  inner_->embedding(table, ids, out);
}
void TimedBackend::rms_norm(const Tensor& x, const Tensor& w, Tensor& out, float eps, bool zc) {
  PAGODA_TIMED("rms_norm", width(x), bytes(x) + bytes(w) + bytes(out), 0);
  inner_->rms_norm(x, w, out, eps, zc);
}
void TimedBackend::rope(Tensor& x, const Tensor& positions, const RopeParams& r) {
  PAGODA_TIMED("rope", width(x), 2 * bytes(x) + bytes(positions), 0);
  inner_->rope(x, positions, r);
}
void TimedBackend::reshape_and_cache(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& kc, Tensor& vc) {
  PAGODA_TIMED("reshape_and_cache", width(k), 2 * (bytes(k) + bytes(v)) + bytes(slots), 0);
  inner_->reshape_and_cache(k, v, slots, kc, vc);
}
void TimedBackend::paged_attention(const Tensor& q, const Tensor& kc, const Tensor& vc, const StepMeta& meta,
                                   const AttentionParams& params, Tensor& out) {
  PAGODA_TIMED("paged_attention", width(q), 0, 0);  // the keys read depend on the contexts
  inner_->paged_attention(q, kc, vc, meta, params, out);
}
void TimedBackend::linear(const Tensor& x, const Tensor& w, Tensor& out) {
  PAGODA_TIMED("linear", product(x, w, out), bytes(x) + bytes(w) + bytes(out), product_flops(x, out));
  inner_->linear(x, w, out);
}
void TimedBackend::linear_fp8(const Tensor& x, const Tensor& w, const Tensor& s, int64_t bn, int64_t bk,
                              Tensor& out) {
  PAGODA_TIMED("linear_fp8", product(x, w, out), bytes(x) + bytes(w) + bytes(s) + bytes(out), product_flops(x, out));
  inner_->linear_fp8(x, w, s, bn, bk, out);
}
void TimedBackend::linear_int4(const Tensor& x, const Tensor& w, const Tensor& s, const Tensor& z, int64_t group,
                               Tensor& out) {
  PAGODA_TIMED("linear_int4", product(x, w, out), bytes(x) + bytes(w) + bytes(s) + bytes(z) + bytes(out),
               product_flops(x, out));
  inner_->linear_int4(x, w, s, z, group, out);
}
void TimedBackend::silu_mul(const Tensor& gate_up, Tensor& out) {
  PAGODA_TIMED("silu_mul", width(out), bytes(gate_up) + bytes(out), 0);
  inner_->silu_mul(gate_up, out);
}
void TimedBackend::gelu_tanh_mul(const Tensor& gate_up, Tensor& out) {
  PAGODA_TIMED("gelu_tanh_mul", width(out), bytes(gate_up) + bytes(out), 0);
  inner_->gelu_tanh_mul(gate_up, out);
}
void TimedBackend::scale(Tensor& x, float factor) {
  PAGODA_TIMED("scale", width(x), 2 * bytes(x), 0);
  inner_->scale(x, factor);
}
void TimedBackend::softcap(Tensor& x, float cap) {
  PAGODA_TIMED("softcap", width(x), 2 * bytes(x), 0);
  inner_->softcap(x, cap);
}
void TimedBackend::add(const Tensor& a, const Tensor& b, Tensor& out) {
  PAGODA_TIMED("add", width(out), bytes(a) + bytes(b) + bytes(out), 0);
  inner_->add(a, b, out);
}
void TimedBackend::add_bias(Tensor& x, const Tensor& bias) {
  PAGODA_TIMED("add_bias", width(x), 2 * bytes(x) + bytes(bias), 0);
  inner_->add_bias(x, bias);
}
void TimedBackend::gather_rows(const Tensor& x, const Tensor& r, Tensor& out) {
  PAGODA_TIMED("gather_rows", width(out), 2 * bytes(out) + bytes(r), 0);
  inner_->gather_rows(x, r, out);
}
void TimedBackend::sigmoid_gate(const Tensor& a, const Tensor& gate, Tensor& out) {
  PAGODA_TIMED("sigmoid_gate", width(out), bytes(a) + bytes(gate) + bytes(out), 0);
  inner_->sigmoid_gate(a, gate, out);
}
void TimedBackend::causal_conv1d_silu(const Tensor& x, const Tensor& w, Tensor& conv_state, const StepMeta& meta,
                                      Tensor& out) {
  PAGODA_TIMED("causal_conv1d_silu", width(x), bytes(x) + bytes(w) + bytes(out), 0);
  inner_->causal_conv1d_silu(x, w, conv_state, meta, out);
}
void TimedBackend::gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& b,
                                    const Tensor& a, const Tensor& A_log, const Tensor& dt_bias, Tensor& state,
                                    const StepMeta& meta, Tensor& out) {
  PAGODA_TIMED("gated_delta_rule", width(v), 0, 0);  // the states read depend on the step's sequences
  inner_->gated_delta_rule(q, k, v, b, a, A_log, dt_bias, state, meta, out);
}
void TimedBackend::gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& w, float eps, Tensor& out) {
  PAGODA_TIMED("gated_rms_norm", width(x), bytes(x) + bytes(z) + bytes(w) + bytes(out), 0);
  inner_->gated_rms_norm(x, z, w, eps, out);
}
void TimedBackend::moe_route(const Tensor& logits, bool renormalize, Tensor& ids, Tensor& weights) {
  PAGODA_TIMED("moe_route", width(logits), bytes(logits) + bytes(ids) + bytes(weights), 0);
  inner_->moe_route(logits, renormalize, ids, weights);
}
void TimedBackend::moe_permute(const Tensor& x, const Tensor& ids, Tensor& offsets, Tensor& sorted, Tensor& slot_rows,
                               Tensor& x_sorted) {
  PAGODA_TIMED("moe_permute", width(x), 2 * bytes(x_sorted), 0);
  inner_->moe_permute(x, ids, offsets, sorted, slot_rows, x_sorted);
}
void TimedBackend::moe_grouped_linear(const Tensor& x, const Tensor& w, const Tensor& offsets, Tensor& out) {
  // Bytes not estimated: a step reads only the experts its tokens chose.
  PAGODA_TIMED("moe_grouped_linear", product(x, w, out), 0, product_flops(x, out));
  inner_->moe_grouped_linear(x, w, offsets, out);
}
void TimedBackend::moe_unpermute(const Tensor& y, const Tensor& weights, const Tensor& slot_rows, const Tensor& shared,
                                 const Tensor& shared_gate, Tensor& out) {
  PAGODA_TIMED("moe_unpermute", width(out), bytes(y) + bytes(shared) + bytes(out), 0);
  inner_->moe_unpermute(y, weights, slot_rows, shared, shared_gate, out);
}
void TimedBackend::lora_expand(const Tensor& low, const Tensor& b, const Tensor& slots, Tensor& out) {
  PAGODA_TIMED("lora_expand", product(low, b, out), bytes(low) + bytes(b) + 2 * bytes(out), 0);
  inner_->lora_expand(low, b, slots, out);
}
void TimedBackend::layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& out, float eps) {
  PAGODA_TIMED("layer_norm", width(x), bytes(x) + bytes(out), 0);
  inner_->layer_norm(x, w, b, out, eps);
}
void TimedBackend::gelu(const Tensor& x, Tensor& out, bool tanh_approx) {
  PAGODA_TIMED("gelu", width(x), bytes(x) + bytes(out), 0);
  inner_->gelu(x, out, tanh_approx);
}
void TimedBackend::rope_axes(Tensor& x, const Tensor& positions, const Tensor& axes, const Tensor& inv_freq) {
  PAGODA_TIMED("rope_axes", width(x), 2 * bytes(x), 0);
  inner_->rope_axes(x, positions, axes, inv_freq);
}
void TimedBackend::segment_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu, float s,
                                     Tensor& out) {
  PAGODA_TIMED("segment_attention", width(q), 0, 0);
  inner_->segment_attention(q, k, v, cu, s, out);
}
void TimedBackend::argmax_rows(const Tensor& logits, Tensor& out) {
  PAGODA_TIMED("argmax_rows", width(logits), bytes(logits) + bytes(out), 0);
  inner_->argmax_rows(logits, out);
}
void TimedBackend::apply_token_mask(Tensor& logits, const Tensor& mask, const Tensor& r) {
  PAGODA_TIMED("apply_token_mask", width(logits), bytes(mask), 0);
  inner_->apply_token_mask(logits, mask, r);
}
void TimedBackend::add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& w, Tensor& out, float eps, bool zc) {
  PAGODA_TIMED("add_rms_norm", width(x), 2 * bytes(residual) + bytes(x) + bytes(w) + bytes(out), 0);
  inner_->add_rms_norm(residual, x, w, out, eps, zc);
}
void TimedBackend::linear_silu_mul(const Tensor& gate_up, const Tensor& w_down, Tensor& act, Tensor& out) {
  PAGODA_TIMED("linear_silu_mul", product(act, w_down, out), bytes(gate_up) + bytes(w_down) + bytes(out),
               product_flops(act, out));
  inner_->linear_silu_mul(gate_up, w_down, act, out);
}
void TimedBackend::qk_norm_rope_and_cache(Tensor& q, Tensor& k, const Tensor& v, const Tensor& qn, const Tensor& kn,
                                          float eps, bool zc, const RopeParams& r, const StepMeta& meta, Tensor& kc,
                                          Tensor& vc) {
  PAGODA_TIMED("qk_norm_rope_and_cache", width(q), 2 * (bytes(q) + bytes(k)) + 2 * bytes(v), 0);
  inner_->qk_norm_rope_and_cache(q, k, v, qn, kn, eps, zc, r, meta, kc, vc);
}

#undef PAGODA_TIMED

Backend& unwrap_timed(Backend& be) {
  auto* t = dynamic_cast<TimedBackend*>(&be);
  return t != nullptr ? t->inner() : be;
}

void record_external_op(Backend& be, const char* op, std::string shape, double b) {
  if (auto* t = dynamic_cast<TimedBackend*>(&be)) t->record_external(op, std::move(shape), b);
}

}  // namespace pagoda
