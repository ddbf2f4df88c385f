#include "backend/cuda/cuda_backend.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_util.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/lt_gemm.h"
#include "core/fault_injection.h"

namespace pagoda {

using cuda::require;

CudaBackend::CudaBackend(int device, DType activation) : device_(device), activation_(activation) {
  if (activation != DType::BF16 && activation != DType::F32)
    throw Error(std::string("the CUDA backend runs BF16 or F32 activations, not ") + dtype_name(activation));
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) throw Error(std::string("no CUDA device usable: ") + cudaGetErrorString(err));
  if (device < 0 || device >= count)
    throw Error("CUDA device " + std::to_string(device) + " does not exist (" + std::to_string(count) + " visible)");
  activate();
  cudaDeviceProp prop{};
  PAGODA_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  if (prop.major < 8)
    throw Error(std::string("CUDA device ") + prop.name + " is sm_" + std::to_string(prop.major) +
                std::to_string(prop.minor) + "; pagoda's kernels need sm_80 or newer");
  device_name_ = prop.name;
  num_sms_ = prop.multiProcessorCount;
  max_smem_optin_ = prop.sharedMemPerBlockOptin;
  gemv_max_tokens_ = cuda::kGemvMaxTokens;
  if (const char* env = std::getenv("PAGODA_GEMV"); env && *env) set_gemv_max_tokens(std::atoi(env));
  // PAGODA_MOE_GEMV=0 keeps the experts' decode GEMMs on the tiled kernel (A/B runs).
  if (const char* env = std::getenv("PAGODA_MOE_GEMV"); env && *env) moe_gemv_ = std::atoi(env) != 0;
  // FP8 tensor cores: Ada and Hopper (sm_89+). PAGODA_FP8_GEMM=0 keeps FP8 weights on the
  // dequantize-and-GEMM path (A/B runs).
  fp8_tensor_cores_ = prop.major * 10 + prop.minor >= 89;
  if (const char* env = std::getenv("PAGODA_FP8_GEMM"); env && *env) fp8_tensor_cores_ = fp8_tensor_cores_ && std::atoi(env) != 0;
  PAGODA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  PAGODA_CUDA_CHECK(cudaMalloc(&gemm_workspace_, kGemmWorkspaceBytes));
  PAGODA_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&split_workspace_), kSplitWorkspaceBytes));
  gemm_ = std::make_unique<cuda::LtGemm>(gemm_workspace_, kGemmWorkspaceBytes);
}

CudaBackend::~CudaBackend() {
  // Destructors do not throw: errors here are dropped.
  cudaSetDevice(device_);
  if (stream_) cudaStreamSynchronize(stream_);
  for (cudaGraphExec_t g : graphs_)
    if (g) cudaGraphExecDestroy(g);
  gemm_.reset();
  if (split_workspace_) cudaFree(split_workspace_);
  if (dequant_weight_scratch_.ptr) cudaFree(dequant_weight_scratch_.ptr);
  if (fp8_act_scratch_.ptr) cudaFree(fp8_act_scratch_.ptr);
  if (gdn_split_scratch_.ptr) cudaFree(gdn_split_scratch_.ptr);
  if (gemm_workspace_) cudaFree(gemm_workspace_);
  if (stream_) cudaStreamDestroy(stream_);
}

std::string CudaBackend::name() const { return "cuda:" + std::to_string(device_) + " (" + device_name_ + ")"; }

bool CudaBackend::supports(Op op, DType dtype) const {
  if (op == Op::Embedding) return dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16;
  if (op == Op::LinearFp8) return dtype == DType::F8_E4M3;
  if (op == Op::LinearInt4) return dtype == DType::I32;
  return dtype == DType::F32 || dtype == DType::BF16;
}

void CudaBackend::activate() const {
  int cur = -1;
  PAGODA_CUDA_CHECK(cudaGetDevice(&cur));
  if (cur != device_) PAGODA_CUDA_CHECK(cudaSetDevice(device_));
}

// ---- memory -------------------------------------------------------------------------------------

void* CudaBackend::raw_alloc(size_t bytes) {
  activate();
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the error so that later launches do not report it
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw Error("CUDA out of memory: cannot allocate " + std::to_string(bytes >> 20) + " MiB on device " +
                std::to_string(device_) + " (" + std::to_string(free_b >> 20) + " MiB free of " +
                std::to_string(total_b >> 20) + " MiB): " + cudaGetErrorString(err));
  }
  return p;
}

void CudaBackend::raw_free(void* ptr) {
  if (!ptr) return;
  activate();
  PAGODA_CUDA_CHECK(cudaFree(ptr));  // implicitly waits for work that may still use ptr
}

void CudaBackend::copy_to_device(void* dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  activate();
  // From pageable memory the call returns once the source has been staged: host_src may be reused.
  PAGODA_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
}

void CudaBackend::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  activate();
  // Every forward pass ends in this copy (its tokens or logits): the place a test makes a real
  // device error land inside a step.
  if (fault_due(FaultSite::KernelError)) cuda::launch_injected_fault(false, stream_);
  if (fault_due(FaultSite::StickyKernelError)) cuda::launch_injected_fault(true, stream_);
  PAGODA_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  PAGODA_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::copy_on_device(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  activate();
  PAGODA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
}

void CudaBackend::fill_zero(void* dst, size_t bytes) {
  if (bytes == 0) return;
  activate();
  PAGODA_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, stream_));
}

void CudaBackend::synchronize() {
  activate();
  PAGODA_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

int64_t CudaBackend::total_memory() const {
  activate();
  size_t free_bytes = 0, total_bytes = 0;
  PAGODA_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return static_cast<int64_t>(total_bytes);
}

namespace {

bool is_float(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }

}  // namespace

void CudaBackend::upload_convert(const Tensor& host_src, Tensor& dst) {
  const char* op = "upload_convert";
  const int64_t n = host_src.numel();
  require(n == dst.numel(), op, "element counts differ: " + cuda::shape_str(host_src) + " → " + cuda::shape_str(dst));
  require(host_src.is_contiguous() && dst.is_contiguous(), op, "tensors must be contiguous");
  if (n == 0) return;
  if (host_src.dtype == dst.dtype) {
    copy_to_device(dst.data, host_src.data, static_cast<size_t>(n) * dtype_size(dst.dtype));
    return;
  }
  require(is_float(host_src.dtype) && is_float(dst.dtype), op,
          std::string("cannot convert ") + dtype_name(host_src.dtype) + " to " + dtype_name(dst.dtype));
  activate();
  // Convert on the host in chunks; each chunk's async copy from pageable memory returns once staged.
  constexpr size_t kChunk = size_t{1} << 22;  // elements
  const size_t out_es = dtype_size(dst.dtype);
  std::vector<unsigned char> staging(std::min<size_t>(kChunk, static_cast<size_t>(n)) * out_es);
  for (size_t begin = 0; begin < static_cast<size_t>(n); begin += kChunk) {
    const size_t count = std::min<size_t>(kChunk, static_cast<size_t>(n) - begin);
    convert_float_elements(static_cast<const unsigned char*>(host_src.data) + begin * dtype_size(host_src.dtype),
                           host_src.dtype, staging.data(), dst.dtype, count);
    PAGODA_CUDA_CHECK(cudaMemcpyAsync(static_cast<unsigned char*>(dst.data) + begin * out_es, staging.data(),
                                      count * out_es, cudaMemcpyHostToDevice, stream_));
  }
}

// ---- ops ------------------------------------------------------------------------------------------

void CudaBackend::embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  activate();
  cuda::launch_embedding(table, ids, out, stream_);
}

void CudaBackend::rms_norm(const Tensor& x, const Tensor& w, Tensor& out, float eps, bool zero_centered) {
  activate();
  cuda::launch_rms_norm(x, nullptr, w, out, eps, zero_centered, stream_);
}

void CudaBackend::add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& w, Tensor& out, float eps,
                               bool zero_centered) {
  activate();
  cuda::launch_rms_norm(x, &residual, w, out, eps, zero_centered, stream_);
}

int CudaBackend::set_gemv_max_tokens(int t) {
  return std::exchange(gemv_max_tokens_, std::clamp(t, 0, cuda::kGemvMaxTokens));
}

bool CudaBackend::uses_gemv(const Tensor& x, const Tensor& w, const Tensor& out) const {
  return gemv_max_tokens_ > 0 && cuda::gemv_fits(x, w, out, gemv_max_tokens_) &&
         cuda::gemv_preferred(x.shape[0], w.shape[0]);
}

void CudaBackend::linear(const Tensor& x, const Tensor& w, Tensor& out) {
  activate();
  if (uses_gemv(x, w, out))
    cuda::launch_gemv(x, w, out, num_sms_, stream_);
  else
    gemm_->linear(x, w, out, stream_);
}

void* CudaBackend::scratch(Scratch& s, size_t bytes) {
  if (bytes <= s.bytes) return s.ptr;
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  PAGODA_CUDA_CHECK(cudaStreamIsCapturing(stream_, &capturing));
  if (capturing != cudaStreamCaptureStatusNone)
    throw Error("internal: an op needs a larger scratch buffer inside a CUDA graph capture");
  PAGODA_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the old buffer may still be read
  if (s.ptr) PAGODA_CUDA_CHECK(cudaFree(s.ptr));
  s.ptr = nullptr;
  s.ptr = raw_alloc(bytes);
  s.bytes = bytes;
  return s.ptr;
}

void CudaBackend::linear_fp8(const Tensor& x, const Tensor& w, const Tensor& scale, int64_t block_n, int64_t block_k,
                             Tensor& out) {
  activate();
  const int64_t t = x.shape[0], n = w.shape[0], k = w.shape[1];
  // Per-channel scales (online FP8, compressed-tensors per channel or tensor): FP8 tensor cores with
  // x quantized per token, as vLLM runs them (W8A8), from two tokens on: the skinny GEMM's cost
  // grows with the tokens (8B shapes at T = 8: 25-90 µs, 1.6x bf16's) while the tensor cores' stays
  // flat (H200, docs/benchmarks.md). cuBLASLt declines where it has no kernel.
  const bool w8a8 = fp8_tensor_cores_ && block_n == 1 && block_k == k && x.dtype == DType::BF16 && k % 16 == 0 &&
                    n % 16 == 0 && w.is_contiguous();
  if (cuda::gemv_fp8_fits(x, w, out, block_k) && (!w8a8 || t <= kFp8GemvMaxTokensBesideTensorCores)) {
    cuda::launch_gemv_fp8(x, w, scale, block_n, block_k, out, num_sms_, stream_);
    return;
  }
  if (w8a8) {
    const size_t q_bytes = (static_cast<size_t>(t * k) + 255) / 256 * 256;
    auto* base = static_cast<uint8_t*>(scratch(fp8_act_scratch_, q_bytes + static_cast<size_t>(t) * 4));
    Tensor xq(base, DType::F8_E4M3, Device::CUDA, {t, k});
    Tensor sx(base + q_bytes, DType::F32, Device::CUDA, {t});
    cuda::launch_quantize_rows_fp8(x, xq, sx, stream_);
    if (gemm_->linear_fp8_rowwise(xq, sx, w, scale.reshape({n}), out, stream_)) return;
  }
  // The dense copy in the activation dtype: bf16 for speed, fp32 under --dtype float32 (exact).
  void* dense_ptr = scratch(dequant_weight_scratch_, static_cast<size_t>(w.numel()) * dtype_size(x.dtype));
  Tensor dense(dense_ptr, x.dtype, Device::CUDA, {n, k});
  cuda::launch_dequantize_fp8(w, scale, block_n, block_k, dense, stream_);
  gemm_->linear(x, dense, out, stream_);
}

void CudaBackend::linear_int4(const Tensor& x, const Tensor& w, const Tensor& scale, const Tensor& zeros, int64_t group,
                              Tensor& out) {
  activate();
  if (cuda::gemv_int4_fits(x, w, out, group)) {
    cuda::launch_gemv_int4(x, w, scale, zeros, group, out, stream_);
    return;
  }
  const int64_t n = w.shape[0], k = w.shape[1] * 8;
  void* dense_ptr = scratch(dequant_weight_scratch_, static_cast<size_t>(n * k) * dtype_size(x.dtype));
  Tensor dense(dense_ptr, x.dtype, Device::CUDA, {n, k});
  cuda::launch_dequantize_int4(w, scale, zeros, group, dense, stream_);
  gemm_->linear(x, dense, out, stream_);
}

void CudaBackend::silu_mul(const Tensor& gate_up, Tensor& out) {
  activate();
  cuda::launch_silu_mul(gate_up, out, stream_);
}

void CudaBackend::gelu_tanh_mul(const Tensor& gate_up, Tensor& out) {
  activate();
  cuda::launch_gelu_tanh_mul(gate_up, out, stream_);
}

void CudaBackend::scale(Tensor& x, float factor) {
  activate();
  cuda::launch_scale_or_cap(x, factor, 0.0f, stream_);
}

void CudaBackend::softcap(Tensor& x, float cap) {
  if (!(cap > 0.0f)) throw Error("softcap: cap must be positive");
  activate();
  cuda::launch_scale_or_cap(x, 1.0f, cap, stream_);
}

void CudaBackend::linear_silu_mul(const Tensor& gate_up, const Tensor& w_down, Tensor& act, Tensor& out) {
  activate();
  if (gemv_max_tokens_ > 0 && cuda::gemv_silu_mul_fits(gate_up, w_down, out, gemv_max_tokens_) &&
      cuda::gemv_silu_mul_preferred(gate_up.shape[0], w_down.shape[0])) {
    cuda::launch_gemv_silu_mul(gate_up, w_down, out, num_sms_, stream_);
    return;
  }
  cuda::launch_silu_mul(gate_up, act, stream_);
  linear(act, w_down, out);
}

void CudaBackend::qk_norm_rope_and_cache(Tensor& q, Tensor& k, const Tensor& v, const Tensor& q_norm_w,
                                         const Tensor& k_norm_w, float eps, bool zero_centered,
                                         const RopeParams& rope, const StepMeta& meta, Tensor& k_cache,
                                         Tensor& v_cache) {
  // The fused kernel rotates NeoX pairs (any scaling, norm weights or none); interleaved pairs take
  // the primitives (rms_norm where a weight is there, rope, cache write).
  if (rope.style != RopeStyle::NeoX) {
    Backend::qk_norm_rope_and_cache(q, k, v, q_norm_w, k_norm_w, eps, zero_centered, rope, meta, k_cache, v_cache);
    return;
  }
  activate();
  cuda::launch_qk_norm_rope_and_cache(q, k, v, q_norm_w, k_norm_w, eps, zero_centered, rope, meta, k_cache, v_cache,
                                      stream_);
}

void CudaBackend::rope(Tensor& x, const Tensor& positions, const RopeParams& params) {
  activate();
  require(x.ndim == 3, "rope", "x must be [T, heads, head_dim], got " + cuda::shape_str(x));
  const int64_t d = x.shape[2];
  const int rot = params.rotary_dim > 0 ? params.rotary_dim : static_cast<int>(d);
  cuda::launch_rope(x, positions, rope_inv_freq(params, d), params.attention_factor, rot, params.style == RopeStyle::Interleaved, stream_);
}

void CudaBackend::add(const Tensor& a, const Tensor& b, Tensor& out) {
  activate();
  cuda::launch_add(a, b, out, stream_);
}

void CudaBackend::add_bias(Tensor& x, const Tensor& bias) {
  activate();
  cuda::launch_add_bias(x, bias, stream_);
}

void CudaBackend::reshape_and_cache(const Tensor& k, const Tensor& v, const Tensor& slot_mapping, Tensor& k_cache,
                                    Tensor& v_cache) {
  activate();
  cuda::launch_reshape_and_cache(k, v, slot_mapping, k_cache, v_cache, stream_);
}

namespace {
cuda::AttentionContext attention_context(int num_sms, size_t max_smem_optin, float* split_workspace) {
  cuda::AttentionContext ctx;
  ctx.num_sms = num_sms;
  ctx.max_smem_optin = max_smem_optin;
  ctx.split_workspace = split_workspace;
  ctx.split_workspace_floats = CudaBackend::kSplitWorkspaceBytes / sizeof(float);
  return ctx;
}
}  // namespace

AttentionPlan CudaBackend::plan_attention(const StepMeta& meta, const AttentionShape& shape,
                                          const AttentionLengths& lengths) {
  return cuda::plan_paged_attention(meta, shape, lengths, attention_context(num_sms_, max_smem_optin_, split_workspace_));
}

void CudaBackend::paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                                  const StepMeta& meta, const AttentionParams& params, Tensor& out) {
  activate();
  cuda::launch_paged_attention(q, k_cache, v_cache, meta, params, out,
                               attention_context(num_sms_, max_smem_optin_, split_workspace_), stream_);
}

void CudaBackend::gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) {
  activate();
  cuda::launch_gather_rows(x, rows, out, stream_);
}

void CudaBackend::sigmoid_gate(const Tensor& a, const Tensor& gate, Tensor& out) {
  activate();
  cuda::launch_sigmoid_gate(a, gate, out, stream_);
}

void CudaBackend::argmax_rows(const Tensor& logits, Tensor& out) {
  activate();
  // The split-KV scratch is free here: ops run one after another on the one stream.
  cuda::launch_argmax_rows(logits, out, num_sms_, split_workspace_, kSplitWorkspaceBytes, stream_);
}

void CudaBackend::apply_token_mask(Tensor& logits, const Tensor& mask, const Tensor& rows) {
  activate();
  cuda::launch_apply_token_mask(logits, mask, rows, stream_);
}

// ---- graphs -------------------------------------------------------------------------------------

void CudaBackend::begin_capture() {
  activate();
  PAGODA_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
}

int64_t CudaBackend::end_capture() {
  activate();
  cudaGraph_t graph = nullptr;
  PAGODA_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  PAGODA_CUDA_CHECK(err);
  graphs_.push_back(exec);
  return static_cast<int64_t>(graphs_.size()) - 1;
}

void CudaBackend::replay(int64_t graph) {
  activate();
  require(graph >= 0 && graph < static_cast<int64_t>(graphs_.size()) && graphs_[static_cast<size_t>(graph)],
          "replay", "unknown graph " + std::to_string(graph));
  PAGODA_CUDA_CHECK(cudaGraphLaunch(graphs_[static_cast<size_t>(graph)], stream_));
}

void CudaBackend::destroy_graph(int64_t graph) {
  if (graph < 0 || graph >= static_cast<int64_t>(graphs_.size())) return;
  cudaGraphExec_t& g = graphs_[static_cast<size_t>(graph)];
  if (g) cudaGraphExecDestroy(g);
  g = nullptr;
}

std::unique_ptr<Backend> make_cuda_backend(int device, DType activation) {
  return std::make_unique<CudaBackend>(device, activation);
}

}  // namespace pagoda
