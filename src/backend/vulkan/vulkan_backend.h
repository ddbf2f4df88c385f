// The Vulkan backend (docs/design.md §3): GLSL compute shaders (shaders/) on any Vulkan 1.2 device with
// buffer device addresses — Mesa's lavapipe in CI, NVIDIA/AMD/Intel GPUs, Apple GPUs through
// MoltenVK. fp32 activations with fp32 math; weights and KV caches stored as f32, bf16 or f16. A
// tensor's data pointer is its device address; every op is recorded into one command stream
// (vulkan_stream.h), submitted when the host reads a result. copy_to_host and synchronize are the
// only host synchronisations.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "backend/vulkan/vulkan_context.h"
#include "backend/vulkan/vulkan_memory.h"
#include "backend/vulkan/vulkan_pipelines.h"
#include "backend/vulkan/vulkan_stream.h"

namespace pagoda {

class VulkanBackend final : public Backend {
 public:
  // Device `index` of vulkan::list_devices(); activation must be F32 (the only one so far).
  explicit VulkanBackend(int index, DType activation = DType::F32);
  ~VulkanBackend() override;

  Device device() const override { return Device::Vulkan; }
  DType activation_dtype() const override { return DType::F32; }
  std::string name() const override;
  // Every primitive with fp32 activations; weights (embedding, linear, grouped linear) in f32,
  // bf16 or f16.
  bool supports(Op op, DType dtype) const override;

  void* raw_alloc(size_t bytes) override;
  void raw_free(void* ptr) override;
  void copy_to_device(void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void copy_on_device(void* dst, const void* src, size_t bytes) override;
  void fill_zero(void* dst, size_t bytes) override;
  void synchronize() override;
  // The device-local heap; 0 on a unified-memory device (lavapipe, integrated GPUs, Apple), which
  // the engine then sizes as it does the CPU.
  int64_t total_memory() const override;
  void upload_convert(const Tensor& host_src, Tensor& dst) override;

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

  // Dispatches of `shader` recorded since construction: tests check which path an op took.
  int64_t dispatches(const std::string& shader) const;
  // gated_delta_rule's paths (PAGODA_VULKAN_GDN=auto|recurrent|chunked, read at construction):
  // auto gives sequences of at most kGdnRecurrentMaxLen new tokens the recurrent shader and longer
  // ones the chunked pair, as the CUDA backend does; the other two force one path for every sequence
  // (tests run the op table under each).
  enum class GdnPath { Auto, Recurrent, Chunked };
  static constexpr int32_t kGdnRecurrentMaxLen = 8;

 private:
  // Records one dispatch of `shader` with `push` (a struct laid out as the shader's push constants).
  template <class Push>
  void run(const char* shader, const Push& push, uint32_t gx, uint32_t gy = 1, uint32_t gz = 1) {
    static_assert(sizeof(Push) <= vulkan::kMaxPushBytes, "push constants over 128 bytes");
    VkPipeline pipeline = pipelines_.get(shader);
    if (profiling_) begin_profile();
    stream_.dispatch(pipeline, pipelines_.layout(), &push, sizeof(Push), gx, gy, gz);
    ++dispatch_counts_[shader];
    if (profiling_) end_profile(shader);
  }
  // PAGODA_VULKAN_PROFILE=1: every dispatch waited for and timed; a table per shader at exit.
  void begin_profile();
  void end_profile(const char* shader);
  // Workgroups for a grid-stride loop over n items, `per_group` per workgroup.
  static uint32_t groups_for(int64_t n, int64_t per_group);
  // A device scratch buffer of at least `bytes`, valid until the next op that asks for one. A grown
  // scratch keeps the old one alive until the device has passed it (synchronize).
  uint64_t scratch(size_t bytes);
  // The device address of inv_freq for these RoPE parameters (uploaded once, kept).
  uint64_t inv_freq_address(const RopeParams& rope, int64_t head_dim);
  void eltwise(uint32_t mode, const Tensor& a, const Tensor* b, Tensor& out, int64_t cols, float f,
               const char* op);

  vulkan::Context ctx_;
  vulkan::Memory memory_;
  vulkan::Pipelines pipelines_;
  vulkan::Stream stream_;
  vulkan::Allocation scratch_;
  std::vector<vulkan::Allocation> retired_;  // freed once the device is idle
  struct RopeTable {
    std::vector<float> inv_freq;
    vulkan::Allocation buffer;
  };
  std::vector<RopeTable> rope_tables_;
  bool profiling_ = false;
  GdnPath gdn_path_ = GdnPath::Auto;
  std::unordered_map<const char*, int64_t> dispatch_counts_;  // keyed by the literal's address
  bool gemv16_ = true;  // 16-byte weight loads in decode-sized linears (PAGODA_VULKAN_GEMV=scalar: off)
  double profile_start_ = 0;
  std::map<std::string, std::pair<int64_t, double>> profile_;  // shader → (dispatches, seconds)
};

// The device address of a tensor's first element (0 for an empty tensor).
inline uint64_t vk_address(const Tensor& t) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(t.data)); }

}  // namespace pagoda
