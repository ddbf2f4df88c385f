#include "backend/cpu/cpu_backend.h"

#include <cstdlib>
#include <cstring>

#include "backend/cpu/check.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/kernels.h"

#ifdef PAGODA_HAS_BLAS
#include <cblas.h>
#endif

namespace pagoda {

namespace {
constexpr size_t kAlignment = 64;
}

CpuBackend::CpuBackend(int num_threads) : pool_(num_threads) {
#if defined(PAGODA_HAS_BLAS) && defined(OPENBLAS_VERSION)
  // linear() calls sgemm from each of our threads on its own slice: OpenBLAS must not add threads.
  openblas_set_num_threads(1);
#endif
}

std::string CpuBackend::name() const {
  std::string s = "cpu (" + std::to_string(pool_.num_threads()) + " threads, " + cpu::kernels().isa;
#ifdef PAGODA_HAS_BLAS
  s += ", blas";
#endif
  return s + ")";
}

void* CpuBackend::raw_alloc(size_t bytes) {
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  return std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
}

void CpuBackend::raw_free(void* ptr) { std::free(ptr); }

void CpuBackend::copy_to_device(void* dst, const void* host_src, size_t bytes) {
  if (bytes) std::memcpy(dst, host_src, bytes);
}
void CpuBackend::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(host_dst, src, bytes);
}
void CpuBackend::copy_on_device(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memmove(dst, src, bytes);
}
void CpuBackend::fill_zero(void* dst, size_t bytes) {
  if (bytes) std::memset(dst, 0, bytes);
}

void CpuBackend::upload_convert(const Tensor& host_src, Tensor& dst) {
  cpu::convert_tensor(pool_, host_src, dst);
}

void CpuBackend::embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  cpu::embedding(pool_, table, ids, out);
}
void CpuBackend::rms_norm(const Tensor& x, const Tensor& w, Tensor& out, float eps,
                          bool zero_centered) {
  cpu::rms_norm(pool_, x, w, out, eps, zero_centered);
}
void CpuBackend::add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& w, Tensor& out,
                              float eps, bool zero_centered) {
  cpu::add_rms_norm(pool_, residual, x, w, out, eps, zero_centered);
}
void CpuBackend::linear(const Tensor& x, const Tensor& w, Tensor& out) {
  cpu::linear(pool_, x, w, out);
}
void CpuBackend::add_bias(Tensor& x, const Tensor& bias) {
  cpu::require_dtype(x, DType::F32, "add_bias", "x");
  cpu::require_dtype(bias, DType::F32, "add_bias", "bias");
  const int64_t n = x.row_numel();
  cpu::require(bias.numel() == n, "add_bias", "bias must have one value per column of x");
  const float* b = bias.ptr<const float>();
  for (int64_t t = 0; t < x.size(0); ++t) {
    auto* row = static_cast<float*>(x.row(t));
    for (int64_t i = 0; i < n; ++i) row[i] += b[i];
  }
}
void CpuBackend::silu_mul(const Tensor& gate_up, Tensor& out) {
  cpu::silu_mul(pool_, gate_up, out);
}
void CpuBackend::linear_silu_mul(const Tensor& gate_up, const Tensor& w_down, Tensor& act,
                                 Tensor& out) {
  cpu::linear_silu_mul(pool_, gate_up, w_down, act, out);
}
void CpuBackend::qk_norm_rope_and_cache(Tensor& q, Tensor& k, const Tensor& v,
                                        const Tensor& q_norm_w, const Tensor& k_norm_w, float eps,
                                        bool zero_centered, const RopeParams& rope,
                                        const StepMeta& meta, Tensor& k_cache, Tensor& v_cache) {
  cpu::qk_norm_rope_and_cache(pool_, q, k, v, q_norm_w, k_norm_w, eps, zero_centered, rope, meta,
                              k_cache, v_cache);
}
void CpuBackend::reshape_and_cache(const Tensor& k, const Tensor& v, const Tensor& slot_mapping,
                                   Tensor& k_cache, Tensor& v_cache) {
  cpu::reshape_and_cache(pool_, k, v, slot_mapping, k_cache, v_cache);
}
void CpuBackend::paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                                 const StepMeta& meta, const AttentionParams& params, Tensor& out) {
  cpu::paged_attention(pool_, q, k_cache, v_cache, meta, params, out);
}
AttentionPlan CpuBackend::plan_attention(const StepMeta& meta, const AttentionShape& shape,
                                         const AttentionLengths& lengths) {
  return cpu::plan_attention(pool_, meta, shape, lengths);
}
void CpuBackend::gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) {
  cpu::gather_rows(pool_, x, rows, out);
}
void CpuBackend::sigmoid_gate(const Tensor& a, const Tensor& gate, Tensor& out) {
  cpu::sigmoid_gate(pool_, a, gate, out);
}

void CpuBackend::argmax_rows(const Tensor& logits, Tensor& out) {
  cpu::argmax_rows(pool_, logits, out);
}

std::unique_ptr<Backend> make_cpu_backend(int num_threads) {
  return std::make_unique<CpuBackend>(num_threads);
}

}  // namespace pagoda
