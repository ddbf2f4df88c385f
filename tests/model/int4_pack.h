// Packs a logical 4-bit matrix as each format's writer does — AutoAWQ's GEMM layout (eight output
// columns to an int32 in the order 0 2 4 6 1 3 5 7, qweight [K, N/8]), GPTQ v1 (eight input rows to
// an int32, qweight [K/8, N], zero points stored minus one, g_idx), compressed-tensors
// pack-quantized (signed values + 8, eight input columns to an int32, [N, K/8]). Written from the
// formats' definitions for the tests, independently of src/model/linear_int4.cpp.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "../io/io_test_util.h"
#include "io/quantization.h"

namespace pagoda::int4_test {

using Layout = WeightQuantization::Int4Layout;

// A logical 4-bit matrix [rows, cols]: values q in [0, 15], per-group zero points and scales.
struct Int4Matrix {
  int64_t rows = 0, cols = 0, group = 0;
  std::vector<int> q, z;      // [rows, cols], [rows, G]
  std::vector<float> scale;   // [rows, G]: at most 8 significant bits, so bf16 holds them exactly
  int64_t groups() const { return cols / group; }
  double at(int64_t r, int64_t c) const {
    const auto g = static_cast<size_t>(r * groups() + c / group);
    return (q[static_cast<size_t>(r * cols + c)] - z[g]) * static_cast<double>(scale[g]);
  }
};

inline std::string bf16_bytes(const std::vector<float>& v) {
  std::string out;
  for (float f : v) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    const auto h = static_cast<uint16_t>(bits >> 16);  // exact: the values have at most 8 significant bits
    out.append(reinterpret_cast<const char*>(&h), 2);
  }
  return out;
}

// The tensors a checkpoint of `layout` holds for projection `stem` (scales transposed to [G, N]
// for AWQ and GPTQ, as their writers store them).
inline std::vector<io_test::Tensor> pack(const std::string& stem, const Int4Matrix& m, Layout layout,
                                         bool act_order = false) {
  const int64_t N = m.rows, K = m.cols, G = m.groups();
  std::vector<io_test::Tensor> out;
  if (layout == Layout::PackQuantized) {
    std::vector<int32_t> packed(static_cast<size_t>(N * K / 8), 0);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        const int signed_value = m.q[static_cast<size_t>(n * K + k)] - 8;  // symmetric: z = 8
        packed[static_cast<size_t>(n * K / 8 + k / 8)] |=
            static_cast<int32_t>(static_cast<uint32_t>(signed_value + 8) << (4 * (k % 8)));
      }
    out.push_back({stem + ".weight_packed", "I32", {N, K / 8}, io_test::bytes_of(packed)});
    out.push_back({stem + ".weight_scale", "BF16", {N, G}, bf16_bytes(m.scale)});
    out.push_back({stem + ".weight_shape", "I32", {2}, io_test::bytes_of(std::vector<int32_t>{int32_t(N), int32_t(K)})});
    return out;
  }
  std::vector<float> scales_t(static_cast<size_t>(G * N));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < G; ++g) scales_t[static_cast<size_t>(g * N + n)] = m.scale[static_cast<size_t>(n * G + g)];
  std::vector<int32_t> qw, qz(static_cast<size_t>(G * N / 8), 0);
  if (layout == Layout::Awq) {
    // AutoAWQ's pack: word column c holds output columns 8c + order[i] in nibble i.
    const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    qw.assign(static_cast<size_t>(K * N / 8), 0);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t c = 0; c < N / 8; ++c)
        for (int i = 0; i < 8; ++i)
          qw[static_cast<size_t>(k * N / 8 + c)] |= static_cast<int32_t>(
              static_cast<uint32_t>(m.q[static_cast<size_t>((c * 8 + order[i]) * K + k)]) << (4 * i));
    for (int64_t g = 0; g < G; ++g)
      for (int64_t c = 0; c < N / 8; ++c)
        for (int i = 0; i < 8; ++i)
          qz[static_cast<size_t>(g * N / 8 + c)] |= static_cast<int32_t>(
              static_cast<uint32_t>(m.z[static_cast<size_t>((c * 8 + order[i]) * G + g)]) << (4 * i));
    out.push_back({stem + ".qweight", "I32", {K, N / 8}, io_test::bytes_of(qw)});
  } else {
    // GPTQ's pack: qweight row r holds input rows 8r + i in nibble i; zero points minus one.
    qw.assign(static_cast<size_t>(K / 8 * N), 0);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n)
        qw[static_cast<size_t>((k / 8) * N + n)] |=
            static_cast<int32_t>(static_cast<uint32_t>(m.q[static_cast<size_t>(n * K + k)]) << (4 * (k % 8)));
    for (int64_t g = 0; g < G; ++g)
      for (int64_t n = 0; n < N; ++n)
        qz[static_cast<size_t>(g * N / 8 + n / 8)] |= static_cast<int32_t>(
            (static_cast<uint32_t>(m.z[static_cast<size_t>(n * G + g)] - 1) & 15u) << (4 * (n % 8)));
    std::vector<int32_t> g_idx;
    for (int64_t k = 0; k < K; ++k) g_idx.push_back(static_cast<int32_t>(act_order ? (k * 7) % G : k / m.group));
    out.push_back({stem + ".qweight", "I32", {K / 8, N}, io_test::bytes_of(qw)});
    out.push_back({stem + ".g_idx", "I32", {K}, io_test::bytes_of(g_idx)});
  }
  out.push_back({stem + ".qzeros", "I32", {G, N / 8}, io_test::bytes_of(qz)});
  out.push_back({stem + ".scales", "F32", {G, N}, io_test::bytes_of(scales_t)});
  return out;
}

}  // namespace pagoda::int4_test
