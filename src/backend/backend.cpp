#include "backend/backend.h"

#include <cassert>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <utility>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace pagoda {

#ifdef PAGODA_HAS_CUDA
// Defined in backend/cuda/cuda_backend.cpp (declared in cuda_backend.h, which needs the CUDA
// headers; this file does not).
std::unique_ptr<Backend> make_cuda_backend(int device, DType activation);
#endif

void Backend::add_bias(Tensor&, const Tensor&) {
  throw Error("the " + name() + " backend has no add_bias yet, which models with biased "
              "projections (attention_bias) need; run this model with --device cpu");
}

float rope_attention_scale(const RopeParams&) { return 1.0f; }

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
  if (rope.scaling == RopeScaling::Llama3) {
    // transformers' _compute_llama3_parameters: wavelen = 2π/f; f/factor where wavelen > old/low,
    // f where wavelen < old/high, else (1 - s)·f/factor + s·f with s = (old/wavelen - low)/(high - low).
    // Every step in fp32, with the scalars cast to fp32, as torch evaluates it on an fp32 tensor.
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

DType parse_activation_dtype(const std::string& dtype, const std::string& device) {
  const bool f32 = dtype == "float32" || dtype == "float" || dtype == "fp32";
  const bool bf16 = dtype == "bfloat16" || dtype == "bf16";
  const bool f16 = dtype == "float16" || dtype == "half" || dtype == "fp16";
  if (!(dtype == "auto" || f32 || bf16 || f16))
    throw Error("--dtype '" + dtype + "' is not a dtype; choose auto, bfloat16 or float32");
  if (device == "cpu") {
    if (bf16 || f16)
      throw Error("--dtype " + dtype + ": the CPU backend computes in float32 (weights of any dtype are "
                  "converted when loaded); pass --dtype auto or float32");
    return DType::F32;
  }
  if (f16)
    throw Error("--dtype " + dtype + ": float16 activations are not supported on CUDA; choose bfloat16 (the "
                "default) or float32");
  return f32 ? DType::F32 : DType::BF16;
}

std::unique_ptr<Backend> make_backend(const std::string& device, int num_threads, const std::string& dtype) {
  if (device == "cpu") {
    parse_activation_dtype(dtype, device);
    return make_cpu_backend(num_threads);
  }
  if (device == "cuda") {
#ifdef PAGODA_HAS_CUDA
    return make_cuda_backend(0, parse_activation_dtype(dtype, device));
#else
    throw Error(
        "this pagoda was built without CUDA; rebuild with nvcc available or use --device cpu");
#endif
  }
  throw Error("unknown device '" + device + "'; choose cpu or cuda");
}

}  // namespace pagoda
