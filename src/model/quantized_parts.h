// What the quantized formats' loaders (linear_fp8.cpp, linear_int4.cpp) share, and the LoRA
// loader (lora.cpp) with them: a shape for their error messages and the checkpoint rows a
// WeightRows block stands for. Internal to src/model.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/weight_store.h"

namespace pagoda::quantized_parts {

inline std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// The source rows of `part`, in output order: its `order`, else [begin, end).
inline std::vector<int64_t> source_rows(const WeightRows& part) {
  if (!part.order.empty()) return part.order;
  std::vector<int64_t> rows;
  const int64_t end = part.end < 0 ? part.shape[0] : part.end;
  for (int64_t r = part.begin; r < end; ++r) rows.push_back(r);
  return rows;
}

// Throws naming tensor `name` (`what`: "FP8", "4-bit") at its first non-finite scale. The message
// is built only then: an 8B checkpoint has tens of millions of group scales, and building it for
// each (as a check() call would) took most of a 30 s load.
inline void check_finite_scales(const std::vector<float>& scales, const char* what, const std::string& name) {
  for (size_t i = 0; i < scales.size(); ++i)
    if (!std::isfinite(scales[i]))
      throw Error(std::string(what) + " scale tensor '" + name + "' holds a non-finite value (" +
                  std::to_string(scales[i]) + " at element " + std::to_string(i) + "): the checkpoint is damaged");
}

}  // namespace pagoda::quantized_parts
