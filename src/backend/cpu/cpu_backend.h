// The CPU backend: host memory, fp32 activations, ops on a thread pool (docs/design.md §3). It is the
// reference every other backend is tested against, and the portable way to run a model.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "backend/backend.h"
#include "core/thread_pool.h"

namespace pagoda {

class CpuBackend final : public Backend {
 public:
  // num_threads <= 0: one per hardware thread.
  explicit CpuBackend(int num_threads = 0);
  ~CpuBackend() override;

  Device device() const override { return Device::CPU; }
  DType activation_dtype() const override { return DType::F32; }
  std::string name() const override;
  // Every primitive, with F32 activations; weights (embedding, linear, moe_grouped_linear) of any
  // float dtype.
  bool supports(Op op, DType dtype) const override;
  bool host_visible_memory() const override { return true; }
  int num_threads() const { return pool_.num_threads(); }
  ThreadPool& pool() { return pool_; }
  ThreadPool* host_pool() override { return &pool_; }
  // Linears over many rows (prefill) may round x to bf16 for AVX-512 BF16's GEMM (gemm.h), as
  // llama.cpp's and a bf16 transformers forward do: the engine turns it on for bf16 models (off by
  // default: the op tests hold the exact product). Where the CPU lacks AVX-512 BF16 nothing changes.
  void set_bf16_prefill(bool on) override { bf16_prefill_ = on; }

  void* raw_alloc(size_t bytes) override;  // 64-byte aligned; nullptr when out of memory
  void raw_free(void* ptr) override;
  void copy_to_device(void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void copy_on_device(void* dst, const void* src, size_t bytes) override;
  void fill_zero(void* dst, size_t bytes) override;
  void synchronize() override {}
  void upload_convert(const Tensor& host_src, Tensor& dst) override;

  // Primitives.
  void embedding(const Tensor& table, const Tensor& ids, Tensor& out) override;
  void rms_norm(const Tensor& x, const Tensor& w, Tensor& out, float eps,
                bool zero_centered) override;
  void rope(Tensor& x, const Tensor& positions, const RopeParams& rope) override;
  void linear(const Tensor& x, const Tensor& w, Tensor& out) override;
  void linear_int4(const Tensor& x, const Tensor& w, const Tensor& scale, const Tensor& zeros, int64_t group,
                   Tensor& out) override;
  void linear_fp8(const Tensor& x, const Tensor& w, const Tensor& scale, int64_t block_n, int64_t block_k,
                  Tensor& out) override;
  void add(const Tensor& a, const Tensor& b, Tensor& out) override;
  void add_bias(Tensor& x, const Tensor& bias) override;
  void silu_mul(const Tensor& gate_up, Tensor& out) override;
  void gelu_tanh_mul(const Tensor& gate_up, Tensor& out) override;
  void scale(Tensor& x, float factor) override;
  void softcap(Tensor& x, float cap) override;
  void reshape_and_cache(const Tensor& k, const Tensor& v, const Tensor& slot_mapping,
                         Tensor& k_cache, Tensor& v_cache) override;
  void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                       const StepMeta& meta, const AttentionParams& params, Tensor& out) override;
  AttentionPlan plan_attention(const StepMeta& meta, const AttentionShape& shape,
                               const AttentionLengths& lengths) override;
  void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) override;
  void sigmoid_gate(const Tensor& a, const Tensor& gate, Tensor& out) override;
  void causal_conv1d_silu(const Tensor& x, const Tensor& w, Tensor& conv_state,
                          const StepMeta& meta, Tensor& out) override;
  void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& b,
                        const Tensor& a, const Tensor& A_log, const Tensor& dt_bias, Tensor& state,
                        const StepMeta& meta, Tensor& out) override;
  void gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& w, float eps,
                      Tensor& out) override;
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

  // Fused paths: one pass over the data instead of two (add_rms_norm) or three
  // (qk_norm_rope_and_cache, NeoX style; interleaved RoPE takes the composed default).
  void add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& w, Tensor& out, float eps,
                    bool zero_centered) override;
  void qk_norm_rope_and_cache(Tensor& q, Tensor& k, const Tensor& v, const Tensor& q_norm_w,
                              const Tensor& k_norm_w, float eps, bool zero_centered,
                              const RopeParams& rope, const StepMeta& meta, Tensor& k_cache,
                              Tensor& v_cache) override;

 private:
  ThreadPool pool_;
  bool bf16_prefill_ = false;
  std::mutex maps_mutex_;
  std::map<uintptr_t, size_t> maps_;  // large allocations made with mmap: start -> length
};

std::unique_ptr<Backend> make_cpu_backend(int num_threads);

}  // namespace pagoda
