// Tensor: a non-owning view of device or host memory (pointer, dtype, shape). Dimension 0 may be
// strided (a view of some columns of a wider matrix, e.g. q inside a fused qkv output); all inner
// dimensions are contiguous. Ownership lives in Buffer (backend/backend.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/dtype.h"

namespace pagoda {

enum class Device : uint8_t { CPU, CUDA, Vulkan };
const char* device_name(Device d);

struct Tensor {
  static constexpr int kMaxDims = 4;

  void* data = nullptr;
  DType dtype = DType::F32;
  Device device = Device::CPU;
  int ndim = 0;
  std::array<int64_t, kMaxDims> shape{};
  int64_t row_stride = 0;  // elements between consecutive indices of dim 0 (0 = contiguous)

  Tensor() = default;
  Tensor(void* ptr, DType t, Device dev, std::initializer_list<int64_t> dims);

  int64_t size(int d) const { return shape[static_cast<size_t>(d < 0 ? d + ndim : d)]; }
  int64_t numel() const { return ndim == 0 ? 1 : shape[0] * row_numel(); }
  int64_t row_numel() const {  // product of dims 1..ndim-1 (the contiguous part)
    int64_t n = 1;
    for (int i = 1; i < ndim; ++i) n *= shape[static_cast<size_t>(i)];
    return n;
  }
  int64_t stride0() const { return row_stride ? row_stride : row_numel(); }
  bool is_contiguous() const { return row_stride == 0 || row_stride == row_numel(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  bool empty() const { return data == nullptr; }

  template <class T>
  T* ptr() const { return static_cast<T*>(data); }
  // Pointer to row i of dim 0.
  void* row(int64_t i) const {
    return static_cast<char*>(data) + static_cast<size_t>(i * stride0()) * dtype_size(dtype);
  }

  // Same memory, new shape. A strided tensor keeps dim 0 and regroups only the inner dims.
  Tensor reshape(std::initializer_list<int64_t> dims) const;
  // Rows [begin, end) of dim 0.
  Tensor rows(int64_t begin, int64_t end) const;
  // Elements [begin, end) of the last dimension of a 2-D tensor, as a strided view.
  Tensor cols(int64_t begin, int64_t end) const;

  std::string describe() const;  // "bf16[16, 8, 128] on cuda"
};

}  // namespace pagoda
