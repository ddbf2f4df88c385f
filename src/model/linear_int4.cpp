#include "model/linear_int4.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "core/error.h"
#include "model/quantized_parts.h"

namespace pagoda {
namespace {

using quantized_parts::shape_str;
using quantized_parts::check_finite_scales;
using quantized_parts::source_rows;

using Layout = WeightQuantization::Int4Layout;

std::string stem_of(const std::string& weight_name) {
  const std::string tail = ".weight";
  if (weight_name.size() > tail.size() && weight_name.compare(weight_name.size() - tail.size(), tail.size(), tail) == 0)
    return weight_name.substr(0, weight_name.size() - tail.size());
  return weight_name;
}

// AWQ packs the eight columns of a word in the order 0 2 4 6 1 3 5 7: column c is nibble kAwqNibble[c].
constexpr int kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};

uint32_t nib(int32_t word, int i) { return (static_cast<uint32_t>(word) >> (4 * i)) & 15u; }

// One checkpoint tensor's packed weight, scales and zero points, read and checked.
struct Part {
  Layout layout;
  int64_t rows = 0, cols = 0, group = 0, groups = 0;  // of the checkpoint tensor; group = cols when per channel
  std::vector<int32_t> q, z;
  std::vector<float> scale;
  int32_t zero_offset = 0;

  // Eight weights of row n, columns [8·kb, 8·kb + 8), as one word in the backend's order.
  uint32_t word(int64_t n, int64_t kb) const {
    switch (layout) {
      case Layout::Gptq:  // [cols / 8, rows]: the word already holds eight columns of one row
        return static_cast<uint32_t>(q[static_cast<size_t>(kb * rows + n)]);
      case Layout::PackQuantized:  // [rows, cols / 8]
        return static_cast<uint32_t>(q[static_cast<size_t>(n * (cols / 8) + kb)]);
      case Layout::Awq: {  // [cols, rows / 8]: a word holds eight rows of one column
        uint32_t w = 0;
        for (int i = 0; i < 8; ++i)
          w |= nib(q[static_cast<size_t>((kb * 8 + i) * (rows / 8) + n / 8)], kAwqNibble[n % 8]) << (4 * i);
        return w;
      }
    }
    return 0;
  }
  float scale_at(int64_t n, int64_t g) const {
    return layout == Layout::PackQuantized ? scale[static_cast<size_t>(n * groups + g)]
                                           : scale[static_cast<size_t>(g * rows + n)];
  }
  uint32_t zero_at(int64_t n, int64_t g) const {
    switch (layout) {
      case Layout::PackQuantized: return 8;  // symmetric: values stored as q + 8
      case Layout::Awq: return nib(z[static_cast<size_t>(g * (rows / 8) + n / 8)], kAwqNibble[n % 8]);
      case Layout::Gptq:  // v1 stores zero − 1 (a zero of 0 as 15, wrapping as GPTQ's kernels do)
        return (nib(z[static_cast<size_t>(g * (rows / 8) + n / 8)], static_cast<int>(n % 8)) +
                static_cast<uint32_t>(zero_offset)) & 15u;
    }
    return 8;
  }
};

void expect_shape(const WeightStore& ws, const std::string& name, const std::vector<int64_t>& want,
                  const std::string& weight) {
  check(ws.has(name), "4-bit weight '" + weight + "' has no '" + name + "': the checkpoint is incomplete");
  const std::vector<int64_t>& got = ws.shape_of(name);
  check(got == want, "4-bit tensor '" + name + "' has shape " + shape_str(got) + "; weight '" + weight + "' needs " +
                         shape_str(want));
}

Part read_part(WeightStore& ws, const WeightRows& block) {
  const WeightQuantization& qc = ws.quantization();
  const std::string& w = block.name;
  const std::string stem = stem_of(w);
  Part p;
  p.layout = qc.int4_layout;
  p.rows = block.shape[0];
  p.cols = block.shape.size() > 1 ? block.shape[1] : 1;
  p.group = qc.group_size > 0 ? qc.group_size : p.cols;
  check(p.cols % p.group == 0 && p.cols % 8 == 0,
        "4-bit weight '" + w + "': its " + std::to_string(p.cols) + " input columns are not whole groups of " +
            std::to_string(p.group));
  p.groups = p.cols / p.group;
  std::string scale_name;
  if (p.layout == Layout::PackQuantized) {
    const std::string packed = stem + ".weight_packed";
    expect_shape(ws, packed, {p.rows, p.cols / 8}, w);
    p.q = ws.host_i32(packed);
    scale_name = stem + ".weight_scale";
    expect_shape(ws, scale_name, {p.rows, p.groups}, w);
    if (const std::string shape = stem + ".weight_shape"; ws.has(shape)) {
      const std::vector<int32_t> s = ws.host_i32(shape);
      check(s.size() == 2 && s[0] == p.rows && s[1] == p.cols,
            "4-bit tensor '" + shape + "' does not give the projection's shape " + shape_str({p.rows, p.cols}));
    }
  } else {
    check(p.rows % 8 == 0, "4-bit weight '" + w + "': " + std::to_string(p.rows) + " output rows are not whole words "
                           "of eight");
    const bool awq = p.layout == Layout::Awq;
    expect_shape(ws, stem + ".qweight", awq ? std::vector<int64_t>{p.cols, p.rows / 8} : std::vector<int64_t>{p.cols / 8, p.rows}, w);
    p.q = ws.host_i32(stem + ".qweight");
    expect_shape(ws, stem + ".qzeros", {p.groups, p.rows / 8}, w);
    p.z = ws.host_i32(stem + ".qzeros");
    scale_name = stem + ".scales";
    expect_shape(ws, scale_name, {p.groups, p.rows}, w);
    p.zero_offset = awq ? 0 : qc.gptq_zero_offset;
    if (const std::string gidx = stem + ".g_idx"; !awq && ws.has(gidx)) {
      const std::vector<int32_t> g = ws.host_i32(gidx);
      check(static_cast<int64_t>(g.size()) == p.cols, "GPTQ tensor '" + gidx + "' has " + std::to_string(g.size()) +
                                                         " entries; the weight has " + std::to_string(p.cols) + " columns");
      for (int64_t k = 0; k < p.cols; ++k)
        if (g[static_cast<size_t>(k)] != k / p.group)  // (the message built only on failure)
          throw Error("GPTQ tensor '" + gidx + "' reorders the columns' groups (act-order, desc_act: true): column " +
                      std::to_string(k) + " is in group " + std::to_string(g[static_cast<size_t>(k)]) +
                      "; pagoda loads GPTQ checkpoints quantized with desc_act: false");
    }
  }
  p.scale = ws.host_floats(scale_name);
  check_finite_scales(p.scale, "4-bit", scale_name);
  return p;
}

}  // namespace

bool stored_as_int4(const WeightStore& ws, const std::string& weight_name) {
  if (!ws.quantization().int4() || ws.has(weight_name)) return false;
  const std::string stem = stem_of(weight_name);
  return ws.has(stem + ".qweight") || ws.has(stem + ".weight_packed");
}

Int4Weight load_int4_weight(WeightStore& ws, const std::vector<WeightRows>& blocks, int64_t col_begin, int64_t col_end) {
  std::vector<Part> parts;
  for (const WeightRows& b : blocks) parts.push_back(read_part(ws, b));
  const int64_t cols = parts[0].cols, group = parts[0].group;
  if (col_end < 0) col_end = cols;
  const bool per_channel = ws.quantization().group_size == 0;
  check(col_begin % (per_channel ? 8 : group) == 0 && col_end % (per_channel ? 8 : group) == 0,
        "4-bit weight '" + blocks[0].name + "': a shard of columns [" + std::to_string(col_begin) + ", " +
            std::to_string(col_end) + ") splits a group of " + std::to_string(group) + "; use a tensor-parallel size "
            "that keeps shards whole groups");
  const int64_t width = col_end - col_begin, local_group = per_channel ? width : group;
  const int64_t G = width / local_group, zw = (G + 7) / 8, kw = width / 8;
  // (part, source row) of every output row.
  std::vector<std::pair<const Part*, int64_t>> rows;
  for (size_t i = 0; i < blocks.size(); ++i)
    for (int64_t r : source_rows(blocks[i])) rows.emplace_back(&parts[i], r);
  const auto R = static_cast<int64_t>(rows.size());
  std::vector<uint32_t> words(static_cast<size_t>(R * kw)), zeros(static_cast<size_t>(R * zw), 0u);
  std::vector<float> scales(static_cast<size_t>(R * G));
  // Rows split over the host's cores, in tiles of 16 rows so that a column-major source (GPTQ,
  // AWQ) is read a cache line at a time: an 8B model is ~7 billion weights.
  auto work = [&](int64_t r0, int64_t r1) {
    for (int64_t t0 = r0; t0 < r1; t0 += 16) {
      const int64_t t1 = std::min(r1, t0 + 16);
      for (int64_t kb = 0; kb < kw; ++kb)
        for (int64_t r = t0; r < t1; ++r)
          words[static_cast<size_t>(r * kw + kb)] = rows[static_cast<size_t>(r)].first->word(
              rows[static_cast<size_t>(r)].second, col_begin / 8 + kb);
      for (int64_t r = t0; r < t1; ++r) {
        const auto& [part, n] = rows[static_cast<size_t>(r)];
        for (int64_t g = 0; g < G; ++g) {
          const int64_t src = per_channel ? 0 : col_begin / group + g;
          scales[static_cast<size_t>(r * G + g)] = part->scale_at(n, src);
          zeros[static_cast<size_t>(r * zw + g / 8)] |= part->zero_at(n, src) << (4 * (g % 8));
        }
      }
    }
  };
  const int64_t threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 32);
  const int64_t per = (R + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads && t * per < R; ++t) pool.emplace_back(work, t * per, std::min(R, (t + 1) * per));
  work(0, std::min(R, per));
  for (std::thread& t : pool) t.join();
  Int4Weight out;
  out.group = local_group;
  out.weight = ws.upload(words.data(), DType::I32, R, kw);
  out.scale = ws.upload(scales.data(), DType::F32, R, G);
  out.zeros = ws.upload(zeros.data(), DType::I32, R, zw);
  return out;
}

}  // namespace pagoda
