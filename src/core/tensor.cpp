#include "core/tensor.h"

#include <cassert>
#include <sstream>

#include "core/error.h"

namespace pagoda {

const char* device_name(Device d) {
  switch (d) {
    case Device::CPU: return "cpu";
    case Device::CUDA: return "cuda";
    case Device::Vulkan: return "vulkan";
  }
  return "?";
}

Tensor::Tensor(void* ptr, DType t, Device dev, std::initializer_list<int64_t> dims)
    : data(ptr), dtype(t), device(dev), ndim(static_cast<int>(dims.size())) {
  assert(dims.size() <= static_cast<size_t>(kMaxDims));
  size_t i = 0;
  for (int64_t d : dims) shape[i++] = d;
}

Tensor Tensor::reshape(std::initializer_list<int64_t> dims) const {
  Tensor t(data, dtype, device, dims);
  if (is_contiguous()) {
    check_invariant(t.numel() == numel(), "cannot reshape " + describe() + ": element count differs");
    return t;
  }
  // A strided view keeps its dim 0 and may only regroup the contiguous inner dimensions.
  check_invariant(t.ndim >= 1 && t.shape[0] == shape[0] && t.row_numel() == row_numel(),
                  "cannot reshape strided " + describe() + " except within a row");
  t.row_stride = row_stride;
  return t;
}

Tensor Tensor::rows(int64_t begin, int64_t end) const {
  assert(ndim >= 1 && 0 <= begin && begin <= end && end <= shape[0]);
  Tensor t = *this;
  t.data = row(begin);
  t.shape[0] = end - begin;
  return t;
}

Tensor Tensor::cols(int64_t begin, int64_t end) const {
  assert(ndim == 2 && 0 <= begin && begin <= end && end <= shape[1]);
  Tensor t = *this;
  t.data = static_cast<char*>(data) + static_cast<size_t>(begin) * dtype_size(dtype);
  t.row_stride = stride0();
  t.shape[1] = end - begin;
  return t;
}

std::string Tensor::describe() const {
  std::ostringstream os;
  os << dtype_name(dtype) << "[";
  for (int i = 0; i < ndim; ++i) os << (i ? ", " : "") << shape[static_cast<size_t>(i)];
  os << "] on " << device_name(device);
  return os.str();
}

}  // namespace pagoda
