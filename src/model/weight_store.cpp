#include "model/weight_store.h"

#include "core/error.h"
#include "io/weight_names.h"

namespace pagoda {
namespace {

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t product(const std::vector<int64_t>& shape, size_t from) {
  int64_t n = 1;
  for (size_t i = from; i < shape.size(); ++i) n *= shape[i];
  return n;
}

// The checkpoint tensor as a host Tensor flattened to 2-D [dim0, rest].
Tensor host_view(const TensorView& t) {
  const int64_t rows = t.shape.empty() ? 1 : t.shape[0];
  return Tensor(const_cast<uint8_t*>(t.data), t.dtype, Device::CPU, {rows, product(t.shape, 1)});
}

}  // namespace

WeightStore::WeightStore(Backend& backend, const Checkpoint& ckpt) : backend_(backend) {
  for (const TensorView* t : ckpt.all()) {
    auto canon = canonical_weight_name(t->name);
    if (!canon) continue;
    check(by_name_.emplace(*canon, t).second,
          "checkpoint holds two tensors that both mean '" + *canon + "' (one is '" + t->name + "')");
  }
}

const TensorView& WeightStore::find(const std::string& name, const std::vector<int64_t>& shape) const {
  auto it = by_name_.find(name);
  check(it != by_name_.end(), "checkpoint is missing tensor '" + name + "'");
  check(it->second->shape == shape, "tensor '" + name + "' has shape " +
                                        shape_str(it->second->shape) + ", the config implies " +
                                        shape_str(shape));
  return *it->second;
}

Tensor WeightStore::allocate(DType dtype, int64_t rows, int64_t cols) {
  Buffer buf = backend_.alloc(static_cast<size_t>(rows * cols) * dtype_size(dtype));
  Tensor t = buf.tensor(dtype, {rows, cols});
  bytes_ += buf.bytes();
  buffers_.push_back(std::move(buf));
  return t;
}

Tensor WeightStore::load(const std::string& name, DType dtype, const std::vector<int64_t>& shape) {
  const TensorView& src = find(name, shape);
  Tensor host = host_view(src);
  Tensor dst = allocate(dtype, host.shape[0], host.shape[1]);
  backend_.upload_convert(host, dst);
  if (shape.size() == 1) return dst.reshape({shape[0]});
  return dst;
}

Tensor WeightStore::load_rows(const std::vector<std::string>& names, DType dtype,
                              const std::vector<std::vector<int64_t>>& shapes,
                              const std::vector<std::vector<int64_t>>& row_orders) {
  int64_t rows = 0;
  const int64_t cols = shapes.at(0).at(1);
  for (size_t i = 0; i < names.size(); ++i) {
    find(names[i], shapes[i]);
    rows += shapes[i][0];
  }
  Tensor dst = allocate(dtype, rows, cols);
  int64_t at = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    const Tensor src = host_view(find(names[i], shapes[i]));
    const bool reorder = i < row_orders.size() && !row_orders[i].empty();
    if (!reorder) {
      Tensor part = dst.rows(at, at + shapes[i][0]);
      backend_.upload_convert(src, part);
    } else {
      for (size_t r = 0; r < row_orders[i].size(); ++r) {  // weights load once: per-row is fine
        Tensor row = dst.rows(at + static_cast<int64_t>(r), at + static_cast<int64_t>(r) + 1);
        backend_.upload_convert(src.rows(row_orders[i][r], row_orders[i][r] + 1), row);
      }
    }
    at += shapes[i][0];
  }
  return dst;
}

}  // namespace pagoda
