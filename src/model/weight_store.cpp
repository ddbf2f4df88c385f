#include "model/weight_store.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>

#include "core/error.h"
#include "core/log.h"
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

DType WeightStore::native_dtype(const Checkpoint& ckpt) {
  size_t bytes[3] = {0, 0, 0};  // F32, BF16, F16
  for (const TensorView* t : ckpt.all()) {
    if (t->dtype == DType::F32) bytes[0] += t->nbytes;
    if (t->dtype == DType::BF16) bytes[1] += t->nbytes;
    if (t->dtype == DType::F16) bytes[2] += t->nbytes;
  }
  if (bytes[1] >= bytes[0] && bytes[1] >= bytes[2] && bytes[1] > 0) return DType::BF16;
  if (bytes[2] > bytes[0]) return DType::F16;
  return DType::F32;
}

WeightStore::WeightStore(Backend& backend, const Checkpoint& ckpt) : backend_(backend), ckpt_(ckpt) {
  for (const TensorView* t : ckpt_.all()) {
    auto canon = canonical_weight_name(t->name);
    if (!canon) canon = canonical_mtp_name(t->name);  // loaded only when speculative decoding asks for it
    if (!canon) continue;
    check(by_name_.emplace(*canon, t).second,
          "checkpoint holds two tensors that both mean '" + *canon + "' (one is '" + t->name + "')");
    total_source_bytes_ += static_cast<size_t>(product(t->shape, 0)) * dtype_size(t->dtype);
  }
}

void WeightStore::loaded(const Tensor& src) {
  loaded_source_bytes_ += src.nbytes();
  const auto now = std::chrono::steady_clock::now();
  if (now - start_ < std::chrono::seconds(1) || now - last_report_ < std::chrono::seconds(1)) return;
  last_report_ = now;
  const double gib = 1024.0 * 1024.0 * 1024.0;
  const double secs = std::chrono::duration<double>(now - start_).count();
  const double done = static_cast<double>(loaded_source_bytes_), total = static_cast<double>(total_source_bytes_);
  char line[160];
  std::snprintf(line, sizeof line, "loading weights: %.2f / %.2f GiB (%.0f%%), %.1f s, %.2f GiB/s", done / gib,
                total / gib, total > 0 ? 100.0 * done / total : 100.0, secs, done / gib / secs);
  LOG_INFO(line);
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

bool WeightStore::in_place(const TensorView& src, DType dtype) const {
  // Matrices only: 1-D weights (norms, biases) are tiny and some ops want them as fp32.
  return backend_.device() == Device::CPU && src.dtype == dtype && src.shape.size() >= 2 &&
         reinterpret_cast<uintptr_t>(src.data) % dtype_size(dtype) == 0;
}

void WeightStore::release(const TensorView& src) const {
  if (backend_.device() != Device::CPU || !src.file_backed) return;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(src.data), end = begin + src.nbytes;
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  // A private read-only file mapping: dropped pages would be read from the file again if touched.
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

Tensor WeightStore::load(const std::string& name, DType dtype, const std::vector<int64_t>& shape) {
  const TensorView& src = find(name, shape);
  Tensor host = host_view(src);
  if (in_place(src, dtype)) {
    mapped_bytes_ += src.nbytes;
    loaded(host);
    return host;
  }
  Tensor dst = allocate(dtype, host.shape[0], host.shape[1]);
  backend_.upload_convert(host, dst);
  loaded(host);
  if (shape.size() >= 2) release(src);
  if (shape.size() == 1) return dst.reshape({shape[0]});
  return dst;
}

bool WeightStore::adjacent_in_place(const std::vector<std::string>& names, DType dtype,
                                    const std::vector<std::vector<int64_t>>& shapes,
                                    const std::vector<std::vector<int64_t>>& row_orders, int64_t rows,
                                    Tensor& view) {
  for (const auto& order : row_orders)
    if (!order.empty()) return false;
  const uint8_t* next = nullptr;
  for (size_t i = 0; i < names.size(); ++i) {
    const TensorView& src = find(names[i], shapes[i]);
    if (!in_place(src, dtype) || (next != nullptr && src.data != next)) return false;
    next = src.data + src.nbytes;
  }
  const TensorView& first = find(names[0], shapes[0]);
  view = Tensor(const_cast<uint8_t*>(first.data), dtype, Device::CPU, {rows, shapes[0][1]});
  for (size_t i = 0; i < names.size(); ++i) {
    mapped_bytes_ += find(names[i], shapes[i]).nbytes;
    loaded(host_view(find(names[i], shapes[i])));
  }
  return true;
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
  if (Tensor view; adjacent_in_place(names, dtype, shapes, row_orders, rows, view)) return view;
  Tensor dst = allocate(dtype, rows, cols);
  int64_t at = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    const Tensor src = host_view(find(names[i], shapes[i]));
    const bool reorder = i < row_orders.size() && !row_orders[i].empty();
    loaded(src);
    if (!reorder) {
      Tensor part = dst.rows(at, at + shapes[i][0]);
      backend_.upload_convert(src, part);
    } else {
      for (size_t r = 0; r < row_orders[i].size(); ++r) {  // weights load once: per-row is fine
        Tensor row = dst.rows(at + static_cast<int64_t>(r), at + static_cast<int64_t>(r) + 1);
        backend_.upload_convert(src.rows(row_orders[i][r], row_orders[i][r] + 1), row);
      }
    }
    release(find(names[i], shapes[i]));
    at += shapes[i][0];
  }
  return dst;
}

}  // namespace pagoda
