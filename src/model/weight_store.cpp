#include "model/weight_store.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <thread>
#include <cstdio>
#include <cstring>
#include <utility>

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

WeightStore::WeightStore(Backend& backend, const Checkpoint& ckpt, const WeightQuantization& quantization)
    : backend_(backend), quant_(quantization), ckpt_(ckpt) {
  for (const TensorView* t : ckpt_.all()) {
    auto canon = canonical_weight_name(t->name);
    if (!canon) canon = canonical_mtp_name(t->name);  // loaded only when speculative decoding asks for it
    if (!canon) canon = canonical_vision_name(t->name);  // loaded only when images are served
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

const std::vector<int64_t>& WeightStore::shape_of(const std::string& name) const {
  auto it = by_name_.find(name);
  check(it != by_name_.end(), "checkpoint is missing tensor '" + name + "'");
  return it->second->shape;
}

DType WeightStore::dtype_of(const std::string& name) const {
  auto it = by_name_.find(name);
  check(it != by_name_.end(), "checkpoint is missing tensor '" + name + "'");
  return it->second->dtype;
}

std::vector<float> WeightStore::host_floats(const std::string& name) const {
  auto it = by_name_.find(name);
  check(it != by_name_.end(), "checkpoint is missing tensor '" + name + "'");
  const TensorView& t = *it->second;
  check(t.dtype == DType::F32 || t.dtype == DType::BF16 || t.dtype == DType::F16,
        "tensor '" + name + "' is " + dtype_name(t.dtype) + "; a float tensor (F32, BF16, F16) was expected");
  std::vector<float> out(static_cast<size_t>(product(t.shape, 0)));
  convert_float_elements(t.data, t.dtype, out.data(), DType::F32, out.size());
  return out;
}

std::vector<int32_t> WeightStore::host_i32(const std::string& name) const {
  auto it = by_name_.find(name);
  check(it != by_name_.end(), "checkpoint is missing tensor '" + name + "'");
  const TensorView& t = *it->second;
  check(t.dtype == DType::I32, "tensor '" + name + "' is " + dtype_name(t.dtype) + "; I32 was expected");
  std::vector<int32_t> out(static_cast<size_t>(product(t.shape, 0)));
  std::memcpy(out.data(), t.data, out.size() * sizeof(int32_t));
  return out;
}

std::vector<float> WeightStore::host_rows(std::vector<WeightRows> parts, int64_t col_begin, int64_t col_end) {
  // Every output row's source (tensor view, row), then the conversion split over the host's cores:
  // an 8B model's projections are ~7 billion weights.
  struct Source {
    Tensor src;
    int64_t row;
  };
  std::vector<Source> rows;
  int64_t width = -1;
  for (WeightRows& part : parts) {
    const Tensor src = host_view(find(part.name, part.shape));
    const int64_t cols = src.shape[1], end = col_end < 0 ? cols : col_end;
    check_invariant(0 <= col_begin && col_begin < end && end <= cols, "WeightStore::host_rows: columns outside '" +
                                                                          part.name + "'");
    check_invariant(width < 0 || width == end - col_begin, "WeightStore::host_rows: parts of different widths");
    width = end - col_begin;
    if (part.end < 0) part.end = src.shape[0];
    std::vector<int64_t> order = part.order;
    if (order.empty())
      for (int64_t r = part.begin; r < part.end; ++r) order.push_back(r);
    for (int64_t r : order) {
      check_invariant(r >= 0 && r < src.shape[0], "WeightStore::host_rows: row outside '" + part.name + "'");
      rows.push_back({src, r});
    }
    loaded(src.rows(0, static_cast<int64_t>(order.size())));
  }
  std::vector<float> out(rows.size() * static_cast<size_t>(std::max<int64_t>(width, 0)));
  auto convert = [&](size_t r0, size_t r1) {
    std::vector<float> row;
    for (size_t i = r0; i < r1; ++i) {
      const Tensor& src = rows[i].src;
      row.resize(static_cast<size_t>(src.shape[1]));
      convert_float_elements(src.row(rows[i].row), src.dtype, row.data(), DType::F32, row.size());
      std::copy(row.begin() + col_begin, row.begin() + col_begin + width, out.begin() + static_cast<ptrdiff_t>(i * width));
    }
  };
  const size_t threads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 32);
  const size_t per = (rows.size() + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads && t * per < rows.size(); ++t)
    pool.emplace_back(convert, t * per, std::min(rows.size(), (t + 1) * per));
  convert(0, std::min(rows.size(), per));
  for (std::thread& t : pool) t.join();
  return out;
}

Tensor WeightStore::upload(const void* host, DType dtype, int64_t rows, int64_t cols) {
  Tensor dst = allocate(dtype, rows, cols);
  const Tensor src(const_cast<void*>(host), dtype, Device::CPU, {rows, cols});
  backend_.upload_convert(src, dst);
  return dst;
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

bool WeightStore::adjacent_in_place(const std::vector<WeightRows>& parts, DType dtype, int64_t rows, Tensor& view) {
  const uint8_t* next = nullptr;
  const uint8_t* first = nullptr;
  for (const WeightRows& part : parts) {
    const TensorView& src = find(part.name, part.shape);
    if (!part.order.empty() || !in_place(src, dtype)) return false;
    const size_t row_bytes = static_cast<size_t>(product(part.shape, 1)) * dtype_size(dtype);
    const uint8_t* begin = src.data + static_cast<size_t>(part.begin) * row_bytes;
    if (next != nullptr && begin != next) return false;
    if (first == nullptr) first = begin;
    next = begin + static_cast<size_t>(part.num_rows()) * row_bytes;
  }
  view = Tensor(const_cast<uint8_t*>(first), dtype, Device::CPU, {rows, product(parts[0].shape, 1)});
  for (const WeightRows& part : parts) {
    const Tensor used = host_view(find(part.name, part.shape)).rows(part.begin, part.end);
    mapped_bytes_ += used.nbytes();
    loaded(used);
  }
  return true;
}

Tensor WeightStore::load_parts(std::vector<WeightRows> parts, DType dtype, int64_t col_begin, int64_t col_end) {
  check_invariant(!parts.empty(), "WeightStore::load_parts: no parts");
  const int64_t cols = product(parts[0].shape, 1);
  if (col_end < 0) col_end = cols;
  check_invariant(0 <= col_begin && col_begin < col_end && col_end <= cols,
                  "WeightStore::load_parts: columns [" + std::to_string(col_begin) + ", " + std::to_string(col_end) +
                      ") outside the " + std::to_string(cols) + " of '" + parts[0].name + "'");
  int64_t rows = 0;
  for (WeightRows& part : parts) {
    const TensorView& src = find(part.name, part.shape);
    check_invariant(product(part.shape, 1) == cols, "WeightStore::load_parts: '" + part.name + "' has " +
                                                        std::to_string(product(part.shape, 1)) + " columns, the first part " +
                                                        std::to_string(cols));
    const int64_t n = src.shape.empty() ? 1 : src.shape[0];
    if (part.end < 0) part.end = n;
    check_invariant(0 <= part.begin && part.begin <= part.end && part.end <= n,
                    "WeightStore::load_parts: rows outside '" + part.name + "'");
    for (int64_t r : part.order)
      check_invariant(r >= 0 && r < n, "WeightStore::load_parts: row " + std::to_string(r) + " outside '" + part.name + "'");
    rows += part.num_rows();
  }
  const bool all_cols = col_begin == 0 && col_end == cols;
  if (Tensor view; all_cols && adjacent_in_place(parts, dtype, rows, view)) return view;
  Tensor dst = allocate(dtype, rows, col_end - col_begin);
  int64_t at = 0;
  std::vector<uint8_t> staging;
  for (const WeightRows& part : parts) {
    const TensorView& view = find(part.name, part.shape);
    const Tensor src = host_view(view);
    // Runs of consecutive source rows, each one upload (an explicit order is usually runs of a
    // head's rows).
    std::vector<std::pair<int64_t, int64_t>> runs;  // first source row, count
    if (part.order.empty()) {
      if (part.end > part.begin) runs.emplace_back(part.begin, part.end - part.begin);
    } else {
      for (int64_t r : part.order) {
        if (!runs.empty() && runs.back().first + runs.back().second == r) ++runs.back().second;
        else runs.emplace_back(r, 1);
      }
    }
    for (const auto& [first, count] : runs) {
      Tensor out = dst.rows(at, at + count);
      const Tensor in = src.rows(first, first + count);
      loaded(in);
      if (all_cols) {
        backend_.upload_convert(in, out);
      } else {  // a column block: gathered on the host first, the upload wants contiguous rows
        const size_t es = dtype_size(in.dtype), width = static_cast<size_t>(col_end - col_begin) * es;
        staging.resize(static_cast<size_t>(count) * width);
        for (int64_t r = 0; r < count; ++r)
          std::memcpy(staging.data() + static_cast<size_t>(r) * width,
                      static_cast<const uint8_t*>(in.row(r)) + static_cast<size_t>(col_begin) * es, width);
        const Tensor block(staging.data(), in.dtype, Device::CPU, {count, col_end - col_begin});
        backend_.upload_convert(block, out);
      }
      at += count;
    }
    release(view);
  }
  return dst;
}

}  // namespace pagoda
