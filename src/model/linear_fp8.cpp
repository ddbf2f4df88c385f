#include "model/linear_fp8.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>

#include "core/error.h"
#include "model/quantized_parts.h"

namespace pagoda {
namespace {

using quantized_parts::shape_str;
using quantized_parts::check_finite_scales;
using quantized_parts::source_rows;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

enum class ScaleKind { Tensor, Channel, Block };

// One checkpoint tensor's scales, checked against its weight.
struct PartScales {
  ScaleKind kind;
  std::vector<float> values;
  int64_t cols = 1;  // of the scale matrix (Block)
};

PartScales read_part_scales(WeightStore& ws, const WeightRows& part) {
  const std::string& w = part.name;
  check(ws.dtype_of(w) == DType::F8_E4M3, "projection tensor '" + w + "' is " + dtype_name(ws.dtype_of(w)) +
                                              " beside FP8 parts of the same projection; a fused projection "
                                              "must be stored in one format");
  const std::string base = w.size() > 7 && w.compare(w.size() - 7, 7, ".weight") == 0 ? w : w + ".weight";
  std::string name = base + "_scale_inv";
  if (!ws.has(name)) name = base + "_scale";
  check(ws.has(name), "FP8 weight '" + w + "' has no scale tensor (looked for '" + base + "_scale_inv' and '" + base +
                          "_scale'): the checkpoint is incomplete");
  const std::vector<int64_t>& ss = ws.shape_of(name);
  PartScales p;
  p.values = ws.host_floats(name);
  check_finite_scales(p.values, "FP8", name);
  const int64_t rows = part.shape[0], cols = part.shape.size() > 1 ? part.shape[1] : 1;
  const WeightQuantization& q = ws.quantization();
  if (p.values.size() == 1) {
    p.kind = ScaleKind::Tensor;
  } else if (static_cast<int64_t>(p.values.size()) == rows && (ss.size() == 1 || (ss.size() == 2 && ss[1] == 1))) {
    p.kind = ScaleKind::Channel;
  } else {
    check(q.block_n > 0, "FP8 scale tensor '" + name + "' has shape " + shape_str(ss) + ", which is neither one " +
                             "scale, one per row " + shape_str({rows, 1}) + " nor blocks: quantization_config " +
                             "gives no weight_block_size");
    const std::vector<int64_t> want{ceil_div(rows, q.block_n), ceil_div(cols, q.block_k)};
    check(ss == want, "FP8 scale tensor '" + name + "' has shape " + shape_str(ss) + "; weight '" + w + "' " +
                          shape_str(part.shape) + " in " + std::to_string(q.block_n) + "x" +
                          std::to_string(q.block_k) + " blocks needs " + shape_str(want));
    p.kind = ScaleKind::Block;
    p.cols = want[1];
  }
  return p;
}

}  // namespace

Fp8Weight load_fp8_weight(WeightStore& ws, const std::vector<WeightRows>& blocks, int64_t col_begin, int64_t col_end) {
  const WeightQuantization& q = ws.quantization();
  const int64_t cols = blocks[0].shape.size() > 1 ? blocks[0].shape[1] : 1;
  if (col_end < 0) col_end = cols;
  std::vector<PartScales> scales;
  bool any_block = false, all_block = true;
  for (const WeightRows& b : blocks) {
    scales.push_back(read_part_scales(ws, b));
    any_block = any_block || scales.back().kind == ScaleKind::Block;
    all_block = all_block && scales.back().kind == ScaleKind::Block;
  }
  Fp8Weight out;
  out.block_k = any_block ? q.block_k : col_end - col_begin;
  check(!any_block || col_begin % q.block_k == 0,
        "FP8 weight '" + blocks[0].name + "': a shard starting at column " + std::to_string(col_begin) +
            " splits a " + std::to_string(q.block_k) + "-column scale block; use a tensor-parallel size that keeps "
            "shards whole blocks");
  const int64_t scols = ceil_div(col_end - col_begin, out.block_k), kb0 = any_block ? col_begin / q.block_k : 0;
  // The checkpoint's own blocks when every part is whole blocks of rows (only the last may end in
  // a partial one); one scale row per output row otherwise.
  bool aligned = all_block;
  for (size_t i = 0; aligned && i < blocks.size(); ++i) {
    const WeightRows& b = blocks[i];
    const int64_t end = b.end < 0 ? b.shape[0] : b.end;
    aligned = b.order.empty() && b.begin % q.block_n == 0 &&
              (i + 1 == blocks.size() ? (end % q.block_n == 0 || end == b.shape[0]) : (end - b.begin) % q.block_n == 0);
  }
  std::vector<float> s;
  int64_t srows = 0;
  if (aligned) {
    out.block_n = q.block_n;
    for (size_t i = 0; i < blocks.size(); ++i) {
      const WeightRows& b = blocks[i];
      const int64_t end = b.end < 0 ? b.shape[0] : b.end;
      for (int64_t br = b.begin / q.block_n; br < ceil_div(end, q.block_n); ++br, ++srows)
        for (int64_t j = 0; j < scols; ++j) s.push_back(scales[i].values[static_cast<size_t>(br * scales[i].cols + kb0 + j)]);
    }
  } else {
    out.block_n = 1;
    for (size_t i = 0; i < blocks.size(); ++i) {
      const PartScales& p = scales[i];
      for (int64_t r : source_rows(blocks[i])) {
        for (int64_t j = 0; j < scols; ++j) {
          float v = p.values[0];
          if (p.kind == ScaleKind::Channel) v = p.values[static_cast<size_t>(r)];
          if (p.kind == ScaleKind::Block) v = p.values[static_cast<size_t>((r / q.block_n) * p.cols + kb0 + j)];
          s.push_back(v);
        }
        ++srows;
      }
    }
  }
  out.weight = ws.load_parts(blocks, DType::F8_E4M3, col_begin, col_end);
  out.scale = ws.upload(s.data(), DType::F32, srows, scols);
  return out;
}

Fp8Weight quantize_fp8_weight(WeightStore& ws, const std::vector<WeightRows>& blocks, int64_t col_begin,
                              int64_t col_end) {
  const int64_t cols = blocks[0].shape.size() > 1 ? blocks[0].shape[1] : 1;
  if (col_end < 0) col_end = cols;
  const int64_t K = col_end - col_begin;
  const std::vector<float> w = ws.host_rows(blocks, col_begin, col_end);
  const auto R = static_cast<int64_t>(w.size()) / K;
  std::vector<uint8_t> qw(w.size());
  std::vector<float> scale(static_cast<size_t>(R));
  // Rows split over the host's cores: an 8B model is ~7 billion weights.
  const int64_t threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 32);
  std::atomic<int64_t> bad_row{-1};
  auto work = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* row = w.data() + r * K;
      float amax = 0.0f;
      for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(row[k]));
      if (!std::isfinite(amax)) bad_row = r;
      const float s = amax > 0.0f ? amax / 448.0f : 1.0f;
      scale[static_cast<size_t>(r)] = s;
      for (int64_t k = 0; k < K; ++k) qw[static_cast<size_t>(r * K + k)] = f32_to_fp8_e4m3(row[k] / s);
    }
  };
  std::vector<std::thread> pool;
  const int64_t per = ceil_div(R, threads);
  for (int64_t t = 1; t < threads && t * per < R; ++t) pool.emplace_back(work, t * per, std::min(R, (t + 1) * per));
  work(0, std::min(R, per));
  for (std::thread& t : pool) t.join();
  check(bad_row < 0, "--quantization fp8: row " + std::to_string(bad_row.load()) + " of '" + blocks[0].name +
                         "' holds a non-finite weight");
  Fp8Weight out;
  out.block_n = 1;
  out.block_k = K;
  out.weight = ws.upload(qw.data(), DType::F8_E4M3, R, K);
  out.scale = ws.upload(scale.data(), DType::F32, R, 1);
  return out;
}

}  // namespace pagoda
