// The CUDA backend (docs/design.md §3): bf16 activations (or fp32 ones, on request) with fp32 math inside, cuBLASLt GEMMs and our
// own kernels, every op enqueued on one non-default stream owned by the backend. copy_to_host and
// synchronize are the only host synchronisations.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace pagoda {

namespace cuda {
class LtGemm;
}

class CudaBackend final : public Backend {
 public:
  // Workspaces allocated once, at construction: cuBLASLt's and split-KV attention's partial results.
  static constexpr size_t kGemmWorkspaceBytes = size_t{32} << 20;
  static constexpr size_t kSplitWorkspaceBytes = size_t{16} << 20;

  // activation: BF16 (the fast path) or F32 (every op in fp32, for token-exact comparisons).
  explicit CudaBackend(int device, DType activation = DType::BF16);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  Device device() const override { return Device::CUDA; }
  DType activation_dtype() const override { return activation_; }
  std::string name() const override;
  // Every primitive with BF16 or F32 activations (and weights; embedding tables of any float dtype).
  bool supports(Op op, DType dtype) const override;

  void* raw_alloc(size_t bytes) override;
  void raw_free(void* ptr) override;
  void copy_to_device(void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void copy_on_device(void* dst, const void* src, size_t bytes) override;
  void fill_zero(void* dst, size_t bytes) override;
  void synchronize() override;
  int64_t total_memory() const override;
  void upload_convert(const Tensor& host_src, Tensor& dst) override;

  // Primitives.
  void embedding(const Tensor& table, const Tensor& ids, Tensor& out) override;
  void rms_norm(const Tensor& x, const Tensor& w, Tensor& out, float eps, bool zero_centered) override;
  // Any scaling: the inverse frequencies are rope_inv_freq's, passed to the kernel by value.
  void rope(Tensor& x, const Tensor& positions, const RopeParams& rope) override;
  void linear(const Tensor& x, const Tensor& w, Tensor& out) override;
  // Beyond backend.h's contract: with per-channel scales and more than two tokens, x is quantized
  // per token to e4m3 for the FP8 tensor cores (W8A8, as vLLM runs FP8 checkpoints), so the answer
  // differs from the dequantized product by that rounding of x (docs/quantization.md).
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
  void reshape_and_cache(const Tensor& k, const Tensor& v, const Tensor& slot_mapping, Tensor& k_cache,
                         Tensor& v_cache) override;
  void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const StepMeta& meta,
                       const AttentionParams& params, Tensor& out) override;
  // Computed on the host once per step; device-buffer plans for graph replay come with the GPU issue.
  AttentionPlan plan_attention(const StepMeta& meta, const AttentionShape& shape,
                               const AttentionLengths& lengths) override;
  void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) override;
  void sigmoid_gate(const Tensor& a, const Tensor& gate, Tensor& out) override;
  void causal_conv1d_silu(const Tensor& x, const Tensor& w, Tensor& conv_state,
                          const StepMeta& meta, Tensor& out) override;
  void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& b,
                        const Tensor& a, const Tensor& A_log, const Tensor& dt_bias, Tensor& state,
                        const StepMeta& meta, Tensor& out) override;
  size_t reserve_gated_delta_rule(int64_t max_tokens, int64_t hv, int64_t dv, DType act) override;
  void gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& w, float eps,
                      Tensor& out) override;

  void argmax_rows(const Tensor& logits, Tensor& out) override;
  void apply_token_mask(Tensor& logits, const Tensor& mask, const Tensor& rows) override;

  // Mixture of experts (moe_backend.cpp, moe_kernels.cu): graph-safe, not yet measured on a GPU.
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

  // Fused paths (our own kernels).
  void add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& w, Tensor& out, float eps,
                    bool zero_centered) override;
  // The skinny-GEMM kernel with the activation fused into its loads where linear() would pick that
  // kernel for the down projection; silu_mul into act then linear() otherwise.
  void linear_silu_mul(const Tensor& gate_up, const Tensor& w_down, Tensor& act, Tensor& out) override;
  // One kernel for norm (where the q/k norm weights are there) + NeoX RoPE (any scaling, from
  // rope_inv_freq's table) + cache write; interleaved RoPE takes the composed primitives.
  void qk_norm_rope_and_cache(Tensor& q, Tensor& k, const Tensor& v, const Tensor& q_norm_w,
                              const Tensor& k_norm_w, float eps, bool zero_centered, const RopeParams& rope,
                              const StepMeta& meta, Tensor& k_cache, Tensor& v_cache) override;

  bool supports_graphs() const override { return true; }
  void begin_capture() override;
  int64_t end_capture() override;
  void replay(int64_t graph) override;
  void destroy_graph(int64_t graph) override;

  // linear() runs the skinny-GEMM kernel (gemv.cu) instead of cuBLASLt for x with at most this many
  // rows (0: never). From the environment variable PAGODA_GEMV at construction (default 8, the
  // kernel's limit); settable for benchmarks that compare the two paths.
  int gemv_max_tokens() const { return gemv_max_tokens_; }
  int set_gemv_max_tokens(int t) override;  // returns the previous value
  // Whether linear(x, w, out) would run the skinny-GEMM kernel (the operands suit it, T is within
  // gemv_max_tokens() and the shape is one where it was measured faster than cuBLASLt).
  bool uses_gemv(const Tensor& x, const Tensor& w, const Tensor& out) const;
  bool linear_uses_gemv(const Tensor& x, const Tensor& w, const Tensor& out) const override { return uses_gemv(x, w, out); }

  // The stream every op is enqueued on (for CUDA graph capture and events).
  cudaStream_t stream() const { return stream_; }
  int device_index() const { return device_; }
  void activate() const;  // makes device_ current on the calling thread

 private:

  int device_ = 0;
  DType activation_ = DType::BF16;
  std::string device_name_;
  int num_sms_ = 0;
  size_t max_smem_optin_ = 0;
  int gemv_max_tokens_ = 0;
  bool moe_gemv_ = true;  // the grouped GEMV for decode-sized expert GEMMs (PAGODA_MOE_GEMV=0: off)
  cudaStream_t stream_ = nullptr;
  void* gemm_workspace_ = nullptr;
  float* split_workspace_ = nullptr;
  // Scratch grown on first use (the memory plan's profiling pass runs the
  // largest step), never inside a capture: the dense copy of an FP8 or 4-bit weight matrix
  // (activation dtype) for the shapes the skinny GEMMs and the FP8 tensor-core GEMM do not take,
  // and x quantized per token.
  struct Scratch {
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  void* scratch(Scratch& s, size_t bytes);
  Scratch dequant_weight_scratch_, fp8_act_scratch_;
  Scratch gdn_split_scratch_;  // the split chunked gated delta rule's per-window products
  bool fp8_tensor_cores_ = false;  // compute capability 8.9+ and PAGODA_FP8_GEMM not 0
  // Tokens up to which per-channel FP8 weights take the skinny GEMM rather than the tensor cores.
  static constexpr int64_t kFp8GemvMaxTokensBesideTensorCores = 2;
  std::unique_ptr<cuda::LtGemm> gemm_;
  std::vector<cudaGraphExec_t> graphs_;  // handle = index; destroyed ones are null
};

// A CUDA backend on `device`; throws pagoda::Error when no usable device is there.
std::unique_ptr<Backend> make_cuda_backend(int device = 0, DType activation = DType::BF16);

}  // namespace pagoda
