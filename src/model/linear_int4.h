// A projection's 4-bit weight: AWQ, GPTQ and compressed-tensors W4A16 checkpoints repacked at load
// into the one form Backend::linear_int4 takes (eight weights of a row to an int32, lowest nibble
// first; F32 scales and nibble zero points per group of input columns). Internal to src/model
// (linear.cpp).
#pragma once

#include <string>
#include <vector>

#include "model/linear.h"

namespace pagoda {

struct Int4Weight {
  Tensor weight;  // I32 [rows, cols / 8]
  Tensor scale;   // F32 [rows, cols / group]
  Tensor zeros;   // I32 [rows, ceil(cols / group / 8)]
  int64_t group = 0;
};

// Whether the checkpoint stores projection weight `weight_name` (canonical, "….weight") packed in
// 4 bits: its `qweight` (AWQ, GPTQ) or `weight_packed` (compressed-tensors) is there instead.
bool stored_as_int4(const WeightStore& ws, const std::string& weight_name);

// The parts' rows and columns [col_begin, col_end) (col_end -1: all), repacked. Throws naming the
// tensor when a packed weight, scale or zero point is missing, misshaped or (scales) not finite,
// when a GPTQ g_idx permutes the columns (act-order), or when a shard splits a group.
Int4Weight load_int4_weight(WeightStore& ws, const std::vector<WeightRows>& blocks, int64_t col_begin, int64_t col_end);

}  // namespace pagoda
