#include "backend/backend.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <type_traits>
#include <utility>

#include "backend/cpu/cpu_backend.h"
#include "backend/fallback_backend.h"
#include "backend/serving_dtypes.h"
#include "core/error.h"

namespace pagoda {

#ifdef PAGODA_HAS_CUDA
// Defined in backend/cuda/cuda_backend.cpp (declared in cuda_backend.h, which needs the CUDA
// headers; this file does not).
std::unique_ptr<Backend> make_cuda_backend(int device, DType activation);
#endif
#ifdef PAGODA_HAS_VULKAN
// Defined in backend/vulkan/vulkan_backend.cpp (the Vulkan headers stay out of this file).
std::unique_ptr<Backend> make_vulkan_backend(int index, DType activation);
#endif

const char* op_name(Op op) {
  switch (op) {
#define PAGODA_OP_NAME_CASE(op, method) \
  case Op::op: return #method;
    PAGODA_PRIMITIVE_OPS(PAGODA_OP_NAME_CASE)
#undef PAGODA_OP_NAME_CASE
    case Op::kCount: break;
  }
  return "unknown op";
}

// A name in either list that is not a Backend method does not compile: op_name() is the method's name.
#define PAGODA_OP_IS_A_METHOD(op, method) \
  static_assert(std::is_member_function_pointer_v<decltype(&Backend::method)>);
PAGODA_PRIMITIVE_OPS(PAGODA_OP_IS_A_METHOD)
#undef PAGODA_OP_IS_A_METHOD
#define PAGODA_FUSED_IS_A_METHOD(method) \
  static_assert(std::is_member_function_pointer_v<decltype(&Backend::method)>);
PAGODA_FUSED_OPS(PAGODA_FUSED_IS_A_METHOD)
#undef PAGODA_FUSED_IS_A_METHOD

std::vector<Op> all_ops() {
  std::vector<Op> ops;
  for (int32_t i = 0; i < static_cast<int32_t>(Op::kCount); ++i) ops.push_back(static_cast<Op>(i));
  return ops;
}

std::vector<std::string> fused_op_names() {
#define PAGODA_FUSED_NAME(method) #method,
  return {PAGODA_FUSED_OPS(PAGODA_FUSED_NAME)};
#undef PAGODA_FUSED_NAME
}

std::vector<OpUse> unsupported_ops(const Backend& backend, const std::vector<OpUse>& uses) {
  std::vector<OpUse> missing;
  for (const OpUse& u : uses)
    if (!backend.supports(u.op, u.dtype) && std::find(missing.begin(), missing.end(), u) == missing.end())
      missing.push_back(u);
  return missing;
}

// ---- the fused entry points' default compositions -------------------------------------------------

void Backend::add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& w, Tensor& out, float eps,
                           bool zero_centered) {
  add(residual, x, residual);
  rms_norm(residual, w, out, eps, zero_centered);
}

void Backend::linear_silu_mul(const Tensor& gate_up, const Tensor& w_down, Tensor& act, Tensor& out) {
  silu_mul(gate_up, act);
  linear(act, w_down, out);
}

void Backend::qk_norm_rope_and_cache(Tensor& q, Tensor& k, const Tensor& v, const Tensor& q_norm_w,
                                     const Tensor& k_norm_w, float eps, bool zero_centered,
                                     const RopeParams& rope_params, const StepMeta& meta, Tensor& k_cache,
                                     Tensor& v_cache) {
  // Empty norm weights mean "no norm" (Llama, Mistral, Qwen2): only RoPE and the cache write.
  if (!q_norm_w.empty()) rms_norm(q, q_norm_w, q, eps, zero_centered);
  if (!k_norm_w.empty()) rms_norm(k, k_norm_w, k, eps, zero_centered);
  rope(q, meta.positions, rope_params);
  rope(k, meta.positions, rope_params);
  reshape_and_cache(k, v, meta.slot_mapping, k_cache, v_cache);
}

namespace {

// transformers' _compute_llama3_parameters: wavelen = 2π/f; f/factor where wavelen > old/low, f where
// wavelen < old/high, else (1 - s)·f/factor + s·f with s = (old/wavelen - low)/(high - low). Every
// step in fp32, with the scalars cast to fp32, as torch evaluates it on an fp32 tensor.
void apply_llama3(const RopeParams& rope, std::vector<float>& inv_freq) {
  const auto f32 = [](double v) { return static_cast<float>(v); };
  const float old = f32(rope.original_max_positions), low = f32(rope.low_freq_factor),
              factor = f32(rope.factor);
  const float low_wavelen = f32(rope.original_max_positions / rope.low_freq_factor);
  const float high_wavelen = f32(rope.original_max_positions / rope.high_freq_factor);
  const float spread = f32(rope.high_freq_factor - rope.low_freq_factor);
  for (float& f : inv_freq) {
    const float wavelen = f32(2.0 * std::numbers::pi) / f;
    if (wavelen > low_wavelen) {
      f = f / factor;
    } else if (!(wavelen < high_wavelen)) {
      const float smooth = (old / wavelen - low) / spread;
      f = (1.0f - smooth) * f / factor + smooth * f;
    }
  }
}

// transformers' _compute_yarn_parameters: the pair index where a wavelength turns `rotations` times
// within the original context, d(r) = rot·ln(old / (2π r)) / (2 ln theta) (in double, as Python's
// math); low = d(beta_fast), high = d(beta_slow), rounded outwards when truncating, clamped to
// [0, rot - 1]. Pairs below low keep f (extrapolation), pairs above high get f/factor
// (interpolation), a linear ramp between; the ramp and the blend in fp32.
void apply_yarn(const RopeParams& rope, int64_t rot, std::vector<float>& inv_freq) {
  const double two_pi = 2.0 * std::numbers::pi, log_base = std::log(static_cast<double>(rope.theta));
  const auto correction_dim = [&](double rotations) {
    return static_cast<double>(rot) * std::log(rope.original_max_positions / (rotations * two_pi)) /
           (2.0 * log_base);
  };
  double low = correction_dim(rope.beta_fast), high = correction_dim(rope.beta_slow);
  if (rope.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(rot - 1));
  if (low == high) high += 0.001;  // transformers: "prevent singularity"
  const float lo = static_cast<float>(low), span = static_cast<float>(high) - lo;
  const float factor = static_cast<float>(rope.factor);
  for (size_t j = 0; j < inv_freq.size(); ++j) {
    const float e = static_cast<float>(2 * j) / static_cast<float>(rot);
    const auto pos_freq = static_cast<float>(std::pow(static_cast<double>(rope.theta), static_cast<double>(e)));
    const float extrapolation = 1.0f / pos_freq, interpolation = 1.0f / (factor * pos_freq);
    const float ramp = std::clamp((static_cast<float>(j) - lo) / span, 0.0f, 1.0f);
    const float keep = 1.0f - ramp;  // inv_freq_extrapolation_factor
    inv_freq[j] = interpolation * (1.0f - keep) + extrapolation * keep;
  }
}

}  // namespace

std::vector<float> rope_inv_freq(const RopeParams& rope, int64_t head_dim) {
  const int64_t rot = rope.rotary_dim > 0 ? rope.rotary_dim : head_dim;
  const int64_t half = rot / 2;
  // inv_freq[i] = theta^(-2i/rot), in fp32 as the reference computes it.
  std::vector<float> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    const float e = static_cast<float>(2 * i) / static_cast<float>(rot);
    inv_freq[static_cast<size_t>(i)] =
        1.0f /
        static_cast<float>(std::pow(static_cast<double>(rope.theta), static_cast<double>(e)));
  }
  switch (rope.scaling) {
    case RopeScaling::None:
      break;
    case RopeScaling::Linear:  // _compute_linear_scaling_rope_parameters: inv_freq /= factor
      for (float& f : inv_freq) f /= static_cast<float>(rope.factor);
      break;
    case RopeScaling::Llama3:
      apply_llama3(rope, inv_freq);
      break;
    case RopeScaling::Yarn:
      apply_yarn(rope, rot, inv_freq);
      break;
  }
  return inv_freq;
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    reset();
    backend_ = std::exchange(o.backend_, nullptr);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void Buffer::reset() {
  if (ptr_ && backend_) backend_->raw_free(ptr_);
  backend_ = nullptr;
  ptr_ = nullptr;
  bytes_ = 0;
}

Tensor Buffer::tensor(DType t, std::initializer_list<int64_t> dims) const {
  Tensor out(ptr_, t, backend_ ? backend_->device() : Device::CPU, dims);
  assert(out.nbytes() <= bytes_);
  return out;
}

namespace {
std::string human_bytes(size_t bytes) {
  char buf[64];
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024)
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1024.0 * 1024 * 1024));
  else if (b >= 1024.0 * 1024)
    std::snprintf(buf, sizeof buf, "%.2f MiB", b / (1024.0 * 1024));
  else
    std::snprintf(buf, sizeof buf, "%.2f KiB", b / 1024.0);
  return buf;
}
}  // namespace

Buffer Backend::alloc(size_t bytes) {
  if (bytes == 0) return Buffer(this, nullptr, 0);
  void* p = raw_alloc(bytes);
  if (!p)
    throw Error("out of " + std::string(device_name(device())) + " memory: could not allocate " +
                human_bytes(bytes) + " (" + std::to_string(bytes) + " bytes) on " + name());
  return Buffer(this, p, bytes);
}

AttentionPlan Backend::plan_attention(const StepMeta& meta, const AttentionShape& shape,
                                      const AttentionLengths& lengths) {
  return plan_attention_tiles(shape, meta.num_tokens, meta.num_seqs, meta.block_size, meta.max_seq_len,
                              meta.max_query_len, lengths, 1);
}

void Backend::begin_capture() { throw Error(name() + " cannot capture graphs"); }
int64_t Backend::end_capture() { throw Error(name() + " cannot capture graphs"); }
void Backend::replay(int64_t) { throw Error(name() + " cannot replay graphs"); }
void Backend::destroy_graph(int64_t) {}

std::unique_ptr<Backend> make_backend(const std::string& device, int num_threads, const std::string& dtype, int ordinal) {
  check(ordinal >= 0, "a device ordinal cannot be negative");
  if (device == "cpu") {
    parse_activation_dtype(dtype, device);
    return make_cpu_backend(num_threads);
  }
  if (device == "cuda") {
#ifdef PAGODA_HAS_CUDA
    // A complete backend comes back as it is; a partial one with host-visible memory runs the rest
    // of its ops on the CPU (fallback_backend.h).
    return with_cpu_fallback(make_cuda_backend(ordinal, parse_activation_dtype(dtype, device)), num_threads);
#else
    throw Error(
        "this pagoda was built without CUDA; rebuild with nvcc available or use --device cpu");
#endif
  }
  if (device == "vulkan" || device.rfind("vulkan:", 0) == 0) {
#ifdef PAGODA_HAS_VULKAN
    int index = 0;
    if (device.size() > 7) {
      const std::string n = device.substr(7);
      if (n.empty() || n.size() > 3 || n.find_first_not_of("0123456789") != std::string::npos)
        throw Error("--device " + device + ": expected vulkan or vulkan:N with N a device index");
      index = std::stoi(n);
    }
    return make_vulkan_backend(index + ordinal, parse_activation_dtype(dtype, "vulkan"));
#else
    throw Error("this pagoda was built without Vulkan; install the Vulkan headers and glslc (tools/setup.sh) and "
                "rebuild, or use --device cpu");
#endif
  }
  throw Error("unknown device '" + device + "'; choose cpu, cuda or vulkan[:N]");
}

}  // namespace pagoda
