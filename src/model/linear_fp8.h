// A projection's FP8 weight: the e4m3fn matrix and its scales in the one form Backend::linear_fp8
// takes (2-D block scales; per-channel is blocks of 1 row × K, per-tensor of N × K). Internal to
// src/model (linear.cpp).
#pragma once

#include <vector>

#include "model/linear.h"

namespace pagoda {

struct Fp8Weight {
  Tensor weight;  // F8_E4M3 [rows, cols]
  Tensor scale;   // F32 [ceil(rows / block_n), ceil(cols / block_k)]
  int64_t block_n = 1, block_k = 1;
};

// From an FP8 checkpoint: every part's weight is F8_E4M3 beside its scale tensor
// (`<weight>_scale_inv`, Qwen/DeepSeek, or `<weight>_scale`, compressed-tensors). The parts'
// scales are joined into one block form when their rows align to the checkpoint's blocks, else into
// one scale row per output row. Throws naming the tensor when a scale is missing, misshaped or not
// finite.
Fp8Weight load_fp8_weight(WeightStore& ws, const std::vector<WeightRows>& blocks, int64_t col_begin, int64_t col_end);

// Online FP8 (--quantization fp8, as vLLM): the dense parts quantized at load with one scale per
// output row, scale = max |w| / 448 over the row, q = e4m3(w / scale).
Fp8Weight quantize_fp8_weight(WeightStore& ws, const std::vector<WeightRows>& blocks, int64_t col_begin,
                              int64_t col_end);

}  // namespace pagoda
