// The Vulkan backend: memory, copies and the dense ops (embedding, norms, RoPE, linear, the
// elementwise ops, argmax). The step ops — KV cache, attention, Gated DeltaNet, MoE — are in
// vulkan_step_ops.cpp.
#include "backend/vulkan/vulkan_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backend/vulkan/vulkan_util.h"
#include "core/dtype.h"

namespace pagoda {

using vulkan::dtype_code;
using vulkan::require;
using vulkan::require_f32;
using vulkan::require_i32;
using vulkan::rows_of;
using vulkan::u32;

namespace {

// eltwise.comp's modes.
enum : uint32_t { kAdd = 0, kSiluMul = 1, kGeluTanhMul = 2, kScale = 3, kSoftcap = 4, kAddBias = 5, kSigmoidGate = 6 };

// Up to this many tokens a linear runs as GEMVs (gemv.comp), beyond as 16 × 16 tiles (linear.comp).
constexpr int64_t kGemvMaxTokens = 64;

}  // namespace

std::unique_ptr<Backend> make_vulkan_backend(int index, DType activation) {
  return std::make_unique<VulkanBackend>(index, activation);
}

VulkanBackend::VulkanBackend(int index, DType activation)
    : ctx_(index), memory_(ctx_), pipelines_(ctx_), stream_(ctx_, memory_) {
  // PAGODA_VULKAN_GEMV=scalar: every decode-sized linear on gemv.comp (the A/B of gemv16.comp).
  if (const char* g = std::getenv("PAGODA_VULKAN_GEMV"); g && std::strcmp(g, "scalar") == 0) gemv16_ = false;
  const char* prof = std::getenv("PAGODA_VULKAN_PROFILE");
  profiling_ = prof && std::strcmp(prof, "1") == 0;
  if (const char* gdn = std::getenv("PAGODA_VULKAN_GDN"); gdn && *gdn && std::strcmp(gdn, "auto") != 0) {
    if (std::strcmp(gdn, "recurrent") == 0) gdn_path_ = GdnPath::Recurrent;
    else if (std::strcmp(gdn, "chunked") == 0) gdn_path_ = GdnPath::Chunked;
    else
      throw Error(std::string("PAGODA_VULKAN_GDN=") + gdn +
                  " is not a gated delta rule path: use auto, recurrent or chunked (or unset it)");
  }
  require(activation == DType::F32, "init",
          std::string("activations in ") + dtype_name(activation) +
              " are not supported yet; the Vulkan backend computes in float32 (--dtype float32 or auto)");
}

VulkanBackend::~VulkanBackend() {
  try {
    stream_.finish();
  } catch (...) {
  }
  if (profiling_) {
    std::fprintf(stderr, "vulkan profile (every dispatch waited for):\n%-18s %10s %12s\n", "shader", "dispatches", "ms");
    for (const auto& [shader, v] : profile_)
      std::fprintf(stderr, "%-18s %10lld %12.2f\n", shader.c_str(), static_cast<long long>(v.first), v.second * 1e3);
  }
  if (scratch_.buffer) memory_.release(scratch_);
  for (auto& a : retired_) memory_.release(a);
  for (auto& r : rope_tables_) memory_.release(r.buffer);
}

std::string VulkanBackend::name() const {
  return std::string("vulkan (") + ctx_.props.deviceName + (ctx_.validation ? ", validation on" : "") + ")";
}

bool VulkanBackend::supports(Op op, DType dtype) const {
  switch (op) {
    case Op::Embedding:
    case Op::Linear:
    case Op::MoeGroupedLinear:
      return dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16;
    case Op::LinearFp8:
    case Op::LinearInt4:
    case Op::LoraExpand:
    case Op::LayerNorm:
    case Op::Gelu:
    case Op::RopeAxes:
    case Op::SegmentAttention:
      return false;
    default:
      return dtype == DType::F32;
  }
}

// ---- memory ---------------------------------------------------------------------------------------

void* VulkanBackend::raw_alloc(size_t bytes) { return memory_.add(memory_.allocate(bytes)); }

void VulkanBackend::raw_free(void* ptr) {
  if (!ptr) return;
  // The device may still be using it: wait (frees are rare: teardown and resizes).
  stream_.finish();
  memory_.release(memory_.remove(ptr));
}

void VulkanBackend::copy_to_device(void* dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  const vulkan::Located d = memory_.locate(dst, bytes);
  stream_.upload(d.alloc->buffer, d.offset, host_src, bytes);
}

void VulkanBackend::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  const vulkan::Located s = memory_.locate(src, bytes);
  if (s.alloc->mapped) {  // host-visible (lavapipe, UMA): read in place once the device is done
    stream_.finish();
    std::memcpy(host_dst, static_cast<const char*>(s.alloc->mapped) + s.offset, bytes);
    return;
  }
  stream_.download(host_dst, s.alloc->buffer, s.offset, bytes);
}

void VulkanBackend::copy_on_device(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  const vulkan::Located s = memory_.locate(src, bytes), d = memory_.locate(dst, bytes);
  stream_.copy(s.alloc->buffer, s.offset, d.alloc->buffer, d.offset, bytes);
}

void VulkanBackend::fill_zero(void* dst, size_t bytes) {
  if (bytes == 0) return;
  const vulkan::Located d = memory_.locate(dst, bytes);
  stream_.fill_zero(d.alloc->buffer, d.offset, bytes);
}

void VulkanBackend::synchronize() {
  stream_.finish();
  for (auto& a : retired_) memory_.release(a);
  retired_.clear();
}

int64_t VulkanBackend::total_memory() const { return memory_.device_local_bytes(); }

void VulkanBackend::upload_convert(const Tensor& host_src, Tensor& dst) {
  const char* op = "upload_convert";
  const int64_t n = host_src.numel();
  require(n == dst.numel(), op, "element counts differ");
  require(host_src.is_contiguous() && dst.is_contiguous(), op, "tensors must be contiguous");
  if (n == 0) return;
  if (host_src.dtype == dst.dtype) {
    copy_to_device(dst.data, host_src.data, static_cast<size_t>(n) * dtype_size(dst.dtype));
    return;
  }
  dtype_code(host_src.dtype, op, "the source");
  dtype_code(dst.dtype, op, "the destination");
  // Converted on the host in chunks; each chunk is staged by the stream, so the buffer is reusable.
  constexpr int64_t kChunk = int64_t{1} << 20;
  const size_t in_es = dtype_size(host_src.dtype), out_es = dtype_size(dst.dtype);
  std::vector<unsigned char> buf(static_cast<size_t>(std::min(kChunk, n)) * out_es);
  for (int64_t begin = 0; begin < n; begin += kChunk) {
    const int64_t count = std::min(kChunk, n - begin);
    convert_float_elements(static_cast<const unsigned char*>(host_src.data) + static_cast<size_t>(begin) * in_es,
                           host_src.dtype, buf.data(), dst.dtype, static_cast<size_t>(count));
    copy_to_device(static_cast<unsigned char*>(dst.data) + static_cast<size_t>(begin) * out_es, buf.data(),
                   static_cast<size_t>(count) * out_es);
  }
}

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

void VulkanBackend::begin_profile() {
  stream_.finish();
  profile_start_ = now_seconds();
}

void VulkanBackend::end_profile(const char* shader) {
  stream_.finish();
  auto& [n, secs] = profile_[shader];
  ++n;
  secs += now_seconds() - profile_start_;
}

uint32_t VulkanBackend::groups_for(int64_t n, int64_t per_group) {
  // Grid-stride loops: enough workgroups to fill a device, within every device's 65,535 limit.
  return static_cast<uint32_t>(std::clamp<int64_t>((n + per_group - 1) / per_group, 1, 4096));
}

int64_t VulkanBackend::dispatches(const std::string& shader) const {
  int64_t n = 0;
  for (const auto& [name, count] : dispatch_counts_)
    if (shader == name) n += count;
  return n;
}

uint64_t VulkanBackend::scratch(size_t bytes) {
  if (scratch_.bytes < bytes) {
    if (scratch_.buffer) retired_.push_back(scratch_);
    scratch_ = vulkan::Allocation{};
    scratch_ = memory_.allocate(std::max(bytes, size_t{1} << 20));
  }
  return scratch_.address;
}

uint64_t VulkanBackend::inv_freq_address(const RopeParams& rope, int64_t head_dim) {
  std::vector<float> inv = rope_inv_freq(rope, head_dim);
  for (const RopeTable& r : rope_tables_)
    if (r.inv_freq == inv) return r.buffer.address;
  RopeTable r;
  r.inv_freq = inv;
  r.buffer = memory_.allocate(inv.size() * sizeof(float));
  stream_.upload(r.buffer.buffer, 0, inv.data(), inv.size() * sizeof(float));
  rope_tables_.push_back(std::move(r));
  return rope_tables_.back().buffer.address;
}

// ---- dense ops ------------------------------------------------------------------------------------

void VulkanBackend::embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  const char* op = "embedding";
  require(table.ndim == 2 && table.is_contiguous(), op, "table must be a contiguous [V, H] tensor");
  require_i32(ids, op, "ids");
  require_f32(out, op, "out");
  const int64_t T = ids.numel(), H = table.size(1);
  require(rows_of(out) == T && out.row_numel() == H, op, "out must be [T, H]");
  struct {
    uint64_t table, ids, out;
    uint32_t T, H, V, table_dt, out_stride;
  } p{vk_address(table), vk_address(ids), vk_address(out), u32(T), u32(H), u32(table.size(0)),
      dtype_code(table.dtype, op, "table"), u32(out.stride0())};
  run("embedding", p, groups_for(T * H, 256));
}

namespace {
// rms_norm.comp's push constants, for the plain and the gated norm (z = 0: no gate).
struct RmsNormPush {
  uint64_t x, w, out, z;
  uint32_t rows, heads, D, x_stride, out_stride, w_dt, zero_centered, z_stride;
  float eps;
};
}  // namespace

void VulkanBackend::rms_norm(const Tensor& x, const Tensor& w, Tensor& out, float eps, bool zero_centered) {
  const char* op = "rms_norm";
  require_f32(x, op, "x");
  require_f32(out, op, "out");
  const int64_t D = w.numel(), T = rows_of(x);
  require(D > 0 && x.row_numel() % D == 0, op, "rows of x are not whole multiples of w's length");
  require(rows_of(out) == T && out.row_numel() == x.row_numel(), op, "out must have x's shape");
  const int64_t heads = x.row_numel() / D;
  const RmsNormPush p{vk_address(x), vk_address(w), vk_address(out), 0, u32(T * heads), u32(heads), u32(D),
      u32(x.stride0()), u32(out.stride0()), dtype_code(w.dtype, op, "w"), zero_centered ? 1u : 0u, 0, eps};
  run("rms_norm", p, groups_for(T * heads, 1));
}

void VulkanBackend::gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& w, float eps, Tensor& out) {
  const char* op = "gated_rms_norm";
  require_f32(x, op, "x");
  require_f32(z, op, "z");
  require_f32(out, op, "out");
  require(x.ndim == 3, op, "x must be [T, Hv, dv]");
  const int64_t T = x.size(0), H = x.size(1), D = x.size(2);
  require(w.numel() == D, op, "w must be [dv]");
  require(rows_of(z) == T && z.row_numel() == H * D, op, "z must have x's shape");
  const RmsNormPush p{vk_address(x), vk_address(w), vk_address(out), vk_address(z), u32(T * H), u32(H), u32(D),
      u32(x.stride0()), u32(out.stride0()), dtype_code(w.dtype, op, "w"), 0, u32(z.stride0()), eps};
  run("rms_norm", p, groups_for(T * H, 1));
}

void VulkanBackend::rope(Tensor& x, const Tensor& positions, const RopeParams& params) {
  const char* op = "rope";
  require_f32(x, op, "x");
  require_i32(positions, op, "positions");
  require(x.ndim == 3, op, "x must be [T, heads, head_dim]");
  const int64_t T = x.size(0), H = x.size(1), D = x.size(2);
  require(positions.numel() >= T, op, "fewer positions than tokens");
  const int64_t rot = params.rotary_dim > 0 ? params.rotary_dim : D;
  require(rot % 2 == 0 && rot <= D, op, "rotary_dim must be even and at most head_dim");
  struct {
    uint64_t x, positions, inv_freq;
    uint32_t T, H, D, stride, half, interleaved;
    float attention_factor;
  } p{vk_address(x), vk_address(positions), inv_freq_address(params, D), u32(T), u32(H), u32(D),
      u32(x.stride0()), u32(rot / 2), params.style == RopeStyle::Interleaved ? 1u : 0u, params.attention_factor};
  run("rope", p, groups_for(T * H * (rot / 2), 256));
}

void VulkanBackend::linear_fp8(const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t, Tensor&) {
  throw Error("vulkan: FP8 weights are not implemented on this backend (supports() says so); serve the checkpoint "
              "with --device cuda or --device cpu");
}

void VulkanBackend::linear_int4(const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t, Tensor&) {
  throw Error("vulkan: 4-bit weights are not implemented on this backend (supports() says so); serve the checkpoint "
              "with --device cuda or --device cpu");
}

void VulkanBackend::lora_expand(const Tensor&, const Tensor&, const Tensor&, Tensor&) {
  throw Error("vulkan: lora_expand has no shader (supports() says so, and a model needing it is refused at load)");
}

// The vision encoder's ops have no shaders yet: supports() says so, and a model with a vision tower is
// refused at load (serve it as text with --limit-mm-per-prompt 0).
void VulkanBackend::layer_norm(const Tensor&, const Tensor&, const Tensor&, Tensor&, float) {
  throw Error("vulkan: layer_norm has no shader (supports() says so, and a model needing it is refused at load)");
}

void VulkanBackend::gelu(const Tensor&, Tensor&, bool) {
  throw Error("vulkan: gelu has no shader (supports() says so, and a model needing it is refused at load)");
}

void VulkanBackend::rope_axes(Tensor&, const Tensor&, const Tensor&, const Tensor&) {
  throw Error("vulkan: rope_axes has no shader (supports() says so, and a model needing it is refused at load)");
}

void VulkanBackend::segment_attention(const Tensor&, const Tensor&, const Tensor&, const Tensor&, float, Tensor&) {
  throw Error("vulkan: segment_attention has no shader (supports() says so, and a model needing it is refused at load)");
}

void VulkanBackend::linear(const Tensor& x, const Tensor& w, Tensor& out) {
  const char* op = "linear";
  require_f32(x, op, "x");
  require_f32(out, op, "out");
  require(w.ndim == 2 && w.is_contiguous(), op, "w must be a contiguous [N, K] tensor");
  const int64_t T = rows_of(x), K = x.row_numel(), N = w.size(0);
  require(w.size(1) == K, op, "w's in_features differ from x's row width");
  require(rows_of(out) == T && out.row_numel() == N, op, "out must be [T, N]");
  require(N * K < (int64_t{1} << 32), op, "weights over 2^32 elements");
  struct {
    uint64_t x, w, out;
    uint32_t T, N, K, x_stride, out_stride, w_dt;
  } p{vk_address(x), vk_address(w), vk_address(out), u32(T), u32(N), u32(K), u32(x.stride0()),
      u32(out.stride0()), dtype_code(w.dtype, op, "w")};
  if (T <= kGemvMaxTokens) {
    // A subgroup per output row, w read once per 8 tokens (gemv.comp); 16-byte loads where the
    // weights are 16-bit and every row and x row starts on 16 bytes (gemv16.comp).
    const bool vec16 = gemv16_ && (w.dtype == DType::BF16 || w.dtype == DType::F16) && K % 8 == 0 &&
                       p.w % 16 == 0 && p.x % 16 == 0 && x.stride0() % 4 == 0;
    run(vec16 ? "gemv16" : "gemv", p, groups_for(N * ctx_.subgroup_size, 64));
    return;
  }
  const int64_t gx = (N + 15) / 16, gy = (T + 15) / 16;
  require(gx <= 65535 && gy <= 65535, op, "more than 65,535 tiles of 16 in one dimension");
  run("linear", p, u32(gx), u32(gy));
}

void VulkanBackend::eltwise(uint32_t mode, const Tensor& a, const Tensor* b, Tensor& out, int64_t cols, float f,
                            const char* op) {
  require_f32(a, op, "input");
  require_f32(out, op, "out");
  if (b) require_f32(*b, op, "second input");
  const int64_t rows = rows_of(out);
  require(rows_of(a) == rows, op, "inputs and out differ in rows");
  require(out.row_numel() == cols, op, "out has the wrong row width");
  struct {
    uint64_t a, b, out;
    uint32_t rows, cols, a_stride, b_stride, out_stride, mode;
    float f;
  } p{vk_address(a), b ? vk_address(*b) : 0, vk_address(out), u32(rows), u32(cols), u32(a.stride0()),
      b ? u32(b->stride0()) : 0, u32(out.stride0()), mode, f};
  run("eltwise", p, groups_for(rows * cols, 256));
}

void VulkanBackend::silu_mul(const Tensor& gate_up, Tensor& out) {
  require(gate_up.row_numel() == 2 * out.row_numel(), "silu_mul", "gate_up must be [T, 2I] for out [T, I]");
  eltwise(kSiluMul, gate_up, nullptr, out, out.row_numel(), 0, "silu_mul");
}

void VulkanBackend::gelu_tanh_mul(const Tensor& gate_up, Tensor& out) {
  require(gate_up.row_numel() == 2 * out.row_numel(), "gelu_tanh_mul", "gate_up must be [T, 2I] for out [T, I]");
  eltwise(kGeluTanhMul, gate_up, nullptr, out, out.row_numel(), 0, "gelu_tanh_mul");
}

void VulkanBackend::scale(Tensor& x, float factor) { eltwise(kScale, x, nullptr, x, x.row_numel(), factor, "scale"); }

void VulkanBackend::softcap(Tensor& x, float cap) {
  require(cap > 0, "softcap", "cap must be positive");
  eltwise(kSoftcap, x, nullptr, x, x.row_numel(), cap, "softcap");
}

void VulkanBackend::add(const Tensor& a, const Tensor& b, Tensor& out) {
  require(a.row_numel() == out.row_numel() && b.row_numel() == out.row_numel() && rows_of(b) == rows_of(out), "add",
          "a, b and out must have one shape");
  eltwise(kAdd, a, &b, out, out.row_numel(), 0, "add");
}

void VulkanBackend::add_bias(Tensor& x, const Tensor& bias) {
  require(bias.numel() == x.row_numel(), "add_bias", "bias must have x's row width");
  eltwise(kAddBias, x, &bias, x, x.row_numel(), 0, "add_bias");
}

void VulkanBackend::sigmoid_gate(const Tensor& a, const Tensor& gate, Tensor& out) {
  require(a.row_numel() == out.row_numel() && gate.row_numel() == out.row_numel() && rows_of(gate) == rows_of(out),
          "sigmoid_gate", "a, gate and out must have one shape");
  eltwise(kSigmoidGate, a, &gate, out, out.row_numel(), 0, "sigmoid_gate");
}

void VulkanBackend::gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) {
  const char* op = "gather_rows";
  require_f32(x, op, "x");
  require_f32(out, op, "out");
  require_i32(rows, op, "rows");
  const int64_t R = rows.numel(), N = x.row_numel();
  require(rows_of(out) == R && out.row_numel() == N, op, "out must be [R, N]");
  struct {
    uint64_t x, rows, out, limit;
    uint32_t R, N, x_stride, out_stride, row_div;
  } p{vk_address(x), vk_address(rows), vk_address(out), 0, u32(R), u32(N), u32(x.stride0()), u32(out.stride0()), 1};
  run("gather_rows", p, groups_for(R * N, 256));
}

void VulkanBackend::argmax_rows(const Tensor& logits, Tensor& out) {
  const char* op = "argmax_rows";
  require_f32(logits, op, "logits");
  require_i32(out, op, "out");
  const int64_t R = rows_of(logits);
  require(out.numel() >= R, op, "out must hold one id per row");
  struct {
    uint64_t logits, out;
    uint32_t R, V, stride;
  } p{vk_address(logits), vk_address(out), u32(R), u32(logits.row_numel()), u32(logits.stride0())};
  run("argmax", p, groups_for(R, 1));
}

void VulkanBackend::apply_token_mask(Tensor& logits, const Tensor& mask, const Tensor& rows) {
  const char* op = "apply_token_mask";
  require_f32(logits, op, "logits");
  require_i32(mask, op, "mask");
  require_i32(rows, op, "rows");
  const int64_t V = logits.row_numel(), M = rows.numel();
  require(mask.ndim == 2 && mask.is_contiguous() && mask.size(0) == M && mask.size(1) * 32 >= V, op,
          "mask must be contiguous [M, >= ceil(V / 32)] for rows [M]");
  require(M * V < (int64_t{1} << 32), op, "too many masked logits for one dispatch");
  if (M == 0 || V == 0) return;
  struct {
    uint64_t logits, mask, rows;
    uint32_t M, V, stride, words;
  } p{vk_address(logits), vk_address(mask), vk_address(rows), u32(M), u32(V), u32(logits.stride0()), u32(mask.size(1))};
  run("token_mask", p, groups_for(M * V, 256));
}

}  // namespace pagoda
