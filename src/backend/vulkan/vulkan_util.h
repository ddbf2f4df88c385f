// Host-side helpers of the Vulkan backend's ops: argument checks and the dtype codes the shaders
// read (shaders/common.glsl). Internal to src/backend/vulkan.
#pragma once

#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/tensor.h"

namespace pagoda::vulkan {

// Throws pagoda::Error "vulkan <op>: <what>" when cond is false. Every op checks its arguments on
// every call: with a literal the check costs no allocation unless it fails.
[[noreturn]] inline void fail(const char* op, const std::string& what) {
  throw Error(std::string("vulkan ") + op + ": " + what);
}
inline void require(bool cond, const char* op, const char* what) {
  if (!cond) fail(op, what);
}
inline void require(bool cond, const char* op, const std::string& what) {
  if (!cond) fail(op, what);
}

inline void require_f32(const Tensor& t, const char* op, const char* name) {
  if (t.dtype != DType::F32)
    fail(op, std::string(name) + " must be float32 (the Vulkan backend's activations), not " + dtype_name(t.dtype));
}

inline void require_i32(const Tensor& t, const char* op, const char* name) {
  if (t.dtype != DType::I32) fail(op, std::string(name) + " must be int32");
}

// The storage code of a float dtype in the shaders: 0 f32, 1 bf16, 2 f16.
inline uint32_t dtype_code(DType t, const char* op, const char* name) {
  switch (t) {
    case DType::F32: return 0;
    case DType::BF16: return 1;
    case DType::F16: return 2;
    default: fail(op, std::string(name) + " must be float32, bfloat16 or float16, not " + dtype_name(t));
  }
  return 0;
}

inline uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }

// Rows of dim 0 (1 for a scalar).
inline int64_t rows_of(const Tensor& t) { return t.ndim == 0 ? 1 : t.size(0); }

}  // namespace pagoda::vulkan
