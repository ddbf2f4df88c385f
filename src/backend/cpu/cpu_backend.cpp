#include "backend/cpu/cpu_backend.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <iterator>

#include "backend/cpu/check.h"
#include "backend/cpu/convert.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/gemv.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/kernels.h"

namespace pagoda {

namespace {
constexpr size_t kAlignment = 64;
// Allocations from this size on are anonymous mappings of their own (the KV pool, the workspaces):
// their pages are committed only when first written, and fill_zero() hands whole pages back to the
// kernel instead of writing zeros, so a KV pool sized for max_num_seqs x max_model_len costs
// resident memory only for the blocks in use.
constexpr size_t kMapMin = size_t{1} << 20;

size_t page_size() {
  static const auto p = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return p;
}
}  // namespace

CpuBackend::~CpuBackend() = default;

CpuBackend::CpuBackend(int num_threads) : pool_(num_threads) {
  cpu::gemv_kernels();  // a PAGODA_CPU_ISA this CPU cannot run fails here, not at the first step
  cpu::gemm_kernels(false);  // and so does a PAGODA_CPU_PREFILL it cannot
}

std::string CpuBackend::name() const {
  return "cpu (" + std::to_string(pool_.num_threads()) + " threads, " + cpu::kernels().isa + ", 16-bit weights " +
         cpu::isa_name(cpu::gemv_kernels().isa) +
         (cpu::gemm_kernels(bf16_prefill_).bf16 != nullptr ? ", prefill GEMM with bf16 activations" : "") + ")";
}

bool CpuBackend::supports(Op op, DType dtype) const {
  if (op == Op::Embedding || op == Op::Linear || op == Op::MoeGroupedLinear || op == Op::LoraExpand) return cpu::is_float_dtype(dtype);
  // LayerNorm's weights may be any float dtype; its activations are F32 like every other op's.
  if (op == Op::LinearFp8) return dtype == DType::F8_E4M3;
  if (op == Op::LinearInt4) return dtype == DType::I32;
  return dtype == DType::F32;
}

void* CpuBackend::raw_alloc(size_t bytes) {
  if (bytes >= kMapMin) {
    const size_t len = (bytes + page_size() - 1) / page_size() * page_size();
    void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    const std::lock_guard<std::mutex> lock(maps_mutex_);
    maps_[reinterpret_cast<uintptr_t>(p)] = len;
    return p;
  }
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  return std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
}

void CpuBackend::raw_free(void* ptr) {
  {
    const std::lock_guard<std::mutex> lock(maps_mutex_);
    auto it = maps_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it != maps_.end()) {
      ::munmap(ptr, it->second);
      maps_.erase(it);
      return;
    }
  }
  std::free(ptr);
}

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
  if (bytes == 0) return;
  const auto begin = reinterpret_cast<uintptr_t>(dst), end = begin + bytes;
  bool mapped = false;
  if (bytes >= kMapMin) {
    const std::lock_guard<std::mutex> lock(maps_mutex_);
    auto it = maps_.upper_bound(begin);
    mapped = it != maps_.begin() && end <= std::prev(it)->first + std::prev(it)->second;
  }
  const uintptr_t first = (begin + page_size() - 1) / page_size() * page_size();
  const uintptr_t last = end / page_size() * page_size();
  if (!mapped || last <= first) {
    std::memset(dst, 0, bytes);
    return;
  }
  // Whole pages of a private anonymous mapping read back as zeros once dropped.
  std::memset(dst, 0, first - begin);
  ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
  std::memset(reinterpret_cast<void*>(last), 0, end - last);
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
  cpu::linear(pool_, x, w, out, bf16_prefill_);
}
void CpuBackend::linear_fp8(const Tensor& x, const Tensor& w, const Tensor& scale, int64_t block_n, int64_t block_k,
                            Tensor& out) {
  cpu::linear_fp8(pool_, x, w, scale, block_n, block_k, out);
}

void CpuBackend::linear_int4(const Tensor& x, const Tensor& w, const Tensor& scale, const Tensor& zeros, int64_t group,
                             Tensor& out) {
  cpu::linear_int4(pool_, x, w, scale, zeros, group, out);
}
void CpuBackend::add(const Tensor& a, const Tensor& b, Tensor& out) { cpu::add(pool_, a, b, out); }
void CpuBackend::add_bias(Tensor& x, const Tensor& bias) { cpu::add_bias(pool_, x, bias); }
void CpuBackend::rope(Tensor& x, const Tensor& positions, const RopeParams& rope) {
  cpu::rope(pool_, x, positions, rope);
}
void CpuBackend::silu_mul(const Tensor& gate_up, Tensor& out) {
  cpu::silu_mul(pool_, gate_up, out);
}
void CpuBackend::gelu_tanh_mul(const Tensor& gate_up, Tensor& out) {
  cpu::gelu_tanh_mul(pool_, gate_up, out);
}
void CpuBackend::scale(Tensor& x, float factor) { cpu::scale(pool_, x, factor); }
void CpuBackend::softcap(Tensor& x, float cap) { cpu::softcap(pool_, x, cap); }
void CpuBackend::qk_norm_rope_and_cache(Tensor& q, Tensor& k, const Tensor& v,
                                        const Tensor& q_norm_w, const Tensor& k_norm_w, float eps,
                                        bool zero_centered, const RopeParams& rope,
                                        const StepMeta& meta, Tensor& k_cache, Tensor& v_cache) {
  if (rope.style != RopeStyle::NeoX) {
    Backend::qk_norm_rope_and_cache(q, k, v, q_norm_w, k_norm_w, eps, zero_centered, rope, meta, k_cache,
                                    v_cache);
    return;
  }
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
void CpuBackend::apply_token_mask(Tensor& logits, const Tensor& mask, const Tensor& rows) {
  cpu::apply_token_mask(pool_, logits, mask, rows);
}

void CpuBackend::moe_route(const Tensor& logits, bool renormalize, Tensor& expert_ids, Tensor& weights) {
  cpu::moe_route(pool_, logits, renormalize, expert_ids, weights);
}

void CpuBackend::moe_permute(const Tensor& x, const Tensor& expert_ids, Tensor& expert_offsets,
                             Tensor& sorted_slots, Tensor& slot_rows, Tensor& x_sorted) {
  cpu::moe_permute(pool_, x, expert_ids, expert_offsets, sorted_slots, slot_rows, x_sorted);
}

void CpuBackend::moe_grouped_linear(const Tensor& x, const Tensor& w, const Tensor& expert_offsets, Tensor& out) {
  cpu::moe_grouped_linear(pool_, x, w, expert_offsets, out);
}

void CpuBackend::moe_unpermute(const Tensor& y, const Tensor& weights, const Tensor& slot_rows, const Tensor& shared,
                               const Tensor& shared_gate, Tensor& out) {
  cpu::moe_unpermute(pool_, y, weights, slot_rows, shared, shared_gate, out);
}

void CpuBackend::lora_expand(const Tensor& low, const Tensor& b, const Tensor& slots, Tensor& out) {
  cpu::lora_expand(pool_, low, b, slots, out);
}

void CpuBackend::layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& out, float eps) {
  cpu::layer_norm(pool_, x, w, b, out, eps);
}

void CpuBackend::gelu(const Tensor& x, Tensor& out, bool tanh_approx) { cpu::gelu(pool_, x, out, tanh_approx); }

void CpuBackend::rope_axes(Tensor& x, const Tensor& positions, const Tensor& axes, const Tensor& inv_freq) {
  cpu::rope_axes(pool_, x, positions, axes, inv_freq);
}

void CpuBackend::segment_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                                   float scale, Tensor& out) {
  cpu::segment_attention(pool_, q, k, v, cu_seqlens, scale, out);
}

std::unique_ptr<Backend> make_cpu_backend(int num_threads) {
  return std::make_unique<CpuBackend>(num_threads);
}

}  // namespace pagoda
