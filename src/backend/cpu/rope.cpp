// rope: RoPE in place on every head of [T, H, D] (NeoX or interleaved pairs). And the CPU's fused
// qk_norm_rope_and_cache: per-head RMSNorm of q and k, NeoX RoPE on the leading rotary_dim dims of
// every head (inv_freq from rope_inv_freq, cos/sin times rope.attention_factor), then K and V into
// the paged caches, in one pass over the token's heads.
#include <cmath>
#include <vector>

#include "backend/cpu/check.h"
#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_ops.h"

namespace pagoda::cpu {

namespace {

// x'[i] = x[i] cos - x[i + h] sin, x'[i + h] = x[i + h] cos + x[i] sin, for i < h = rotary_dim / 2.
void rotate(float* x, const float* cos_v, const float* sin_v, int64_t half) {
  for (int64_t i = 0; i < half; ++i) {
    const float a = x[i], b = x[i + half];
    x[i] = a * cos_v[i] - b * sin_v[i];
    x[i + half] = b * cos_v[i] + a * sin_v[i];
  }
}

// x'[2i] = x[2i] cos - x[2i+1] sin, x'[2i+1] = x[2i+1] cos + x[2i] sin, for i < half (GPT-J).
void rotate_interleaved(float* x, const float* cos_v, const float* sin_v, int64_t half) {
  for (int64_t i = 0; i < half; ++i) {
    const float a = x[2 * i], b = x[2 * i + 1];
    x[2 * i] = a * cos_v[i] - b * sin_v[i];
    x[2 * i + 1] = b * cos_v[i] + a * sin_v[i];
  }
}

// cos and sin of position p times every inv_freq, in fp32 as transformers computes them, scaled by
// attention_scaling (yarn's attention factor; 1 otherwise) as transformers does.
void angles(float p, const std::vector<float>& inv_freq, float af, float* cos_v, float* sin_v) {
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const float angle = p * inv_freq[i];
    cos_v[i] = std::cos(angle) * af;
    sin_v[i] = std::sin(angle) * af;
  }
}

std::vector<float> head_norm_weights(const Tensor& w, int64_t D, bool zero_centered) {
  std::vector<float> out;
  if (w.empty()) return out;
  require(is_float_dtype(w.dtype) && w.numel() == D, "qk_norm_rope_and_cache",
          "q/k norm weights must be [head_dim]");
  out.resize(static_cast<size_t>(D));
  load_row(w.data, w.dtype, out.data(), D);
  if (zero_centered)
    for (float& v : out) v += 1.0f;
  return out;
}

}  // namespace

void rope(ThreadPool& pool, Tensor& x, const Tensor& positions, const RopeParams& params) {
  const char* op = "rope";
  require_dtype(x, DType::F32, op, "x");
  require_dtype(positions, DType::I32, op, "positions");
  require(x.ndim == 3, op, "x must be [T, heads, head_dim]");
  const int64_t T = x.size(0), H = x.size(1), D = x.size(2);
  require(positions.numel() >= T, op, "fewer positions than tokens");
  const int64_t rot = params.rotary_dim > 0 ? params.rotary_dim : D;
  require(rot % 2 == 0 && rot <= D, op, "rotary_dim must be even and at most head_dim");
  const int64_t half = rot / 2;
  const std::vector<float> inv_freq = rope_inv_freq(params, D);
  const int32_t* pos = positions.ptr<const int32_t>();
  const bool neox = params.style == RopeStyle::NeoX;
  pool.parallel_for(T, [&](int64_t t0, int64_t t1) {
    std::vector<float> cos_v(static_cast<size_t>(half)), sin_v(static_cast<size_t>(half));
    for (int64_t t = t0; t < t1; ++t) {
      angles(static_cast<float>(pos[t]), inv_freq, params.attention_factor, cos_v.data(), sin_v.data());
      auto* row = static_cast<float*>(x.row(t));
      for (int64_t h = 0; h < H; ++h) {
        if (neox) rotate(row + h * D, cos_v.data(), sin_v.data(), half);
        else rotate_interleaved(row + h * D, cos_v.data(), sin_v.data(), half);
      }
    }
  }, 1, static_cast<double>(H * D * 4 + half * 40));
}

void qk_norm_rope_and_cache(ThreadPool& pool, Tensor& q, Tensor& k, const Tensor& v,
                            const Tensor& q_norm_w, const Tensor& k_norm_w, float eps,
                            bool zero_centered, const RopeParams& rope, const StepMeta& meta,
                            Tensor& k_cache, Tensor& v_cache) {
  const char* op = "qk_norm_rope_and_cache";
  require(rope.style == RopeStyle::NeoX, op, "the fused path rotates NeoX pairs only");
  require_dtype(q, DType::F32, op, "q");
  require_dtype(k, DType::F32, op, "k");
  require(k_cache.ndim == 4, op, "k_cache must be [num_blocks, block_size, Hkv, D]");
  const int64_t D = k_cache.size(3), T = q.size(0);
  require(q.row_numel() % D == 0 && k.row_numel() % D == 0, op, "q/k rows are not whole heads");
  require(k.size(0) == T && meta.positions.numel() >= T, op, "q, k and positions disagree on T");
  require_dtype(meta.positions, DType::I32, op, "positions");
  const int64_t Hq = q.row_numel() / D, Hk = k.row_numel() / D;
  const int64_t rot = rope.rotary_dim > 0 ? rope.rotary_dim : D;
  require(rot % 2 == 0 && rot <= D, op, "rotary_dim must be even and at most head_dim");
  const int64_t half = rot / 2;

  const std::vector<float> qw = head_norm_weights(q_norm_w, D, zero_centered);
  const std::vector<float> kw = head_norm_weights(k_norm_w, D, zero_centered);
  const std::vector<float> inv_freq = rope_inv_freq(rope, D);
  const int32_t* pos = meta.positions.ptr<const int32_t>();
  const float af = rope.attention_factor;

  pool.parallel_for(T, [&](int64_t t0, int64_t t1) {
    std::vector<float> cos_v(static_cast<size_t>(half)), sin_v(static_cast<size_t>(half));
    for (int64_t t = t0; t < t1; ++t) {
      angles(static_cast<float>(pos[t]), inv_freq, af, cos_v.data(), sin_v.data());
      auto* qr = static_cast<float*>(q.row(t));
      for (int64_t h = 0; h < Hq; ++h) {
        if (!qw.empty()) rms_norm_vector(qr + h * D, qw.data(), D, eps);
        rotate(qr + h * D, cos_v.data(), sin_v.data(), half);
      }
      auto* kr = static_cast<float*>(k.row(t));
      for (int64_t h = 0; h < Hk; ++h) {
        if (!kw.empty()) rms_norm_vector(kr + h * D, kw.data(), D, eps);
        rotate(kr + h * D, cos_v.data(), sin_v.data(), half);
      }
    }
  }, 1, static_cast<double>((Hq + Hk) * D * 6 + half * 40));
  reshape_and_cache(pool, k, v, meta.slot_mapping, k_cache, v_cache);
}

}  // namespace pagoda::cpu
