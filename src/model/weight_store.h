// Moves a checkpoint's tensors onto a backend, by canonical name (io/weight_names.h), converting
// dtypes and fusing projections that share an input (q|k|v, gate|up) into one matrix.
// On the CPU backend a matrix asked for in its checkpoint dtype is not copied: the tensor points into
// the read-only mapping of the safetensors file (start-up in milliseconds, page cache shared between
// processes). Fused matrices are views too when their parts lie back to back in the file; otherwise
// they are copied once and the mapped pages of the parts are dropped from this process.
#pragma once

#include <cstdint>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/safetensors.h"

namespace pagoda {

class WeightStore {
 public:
  WeightStore(Backend& backend, const Checkpoint& ckpt);

  // The dtype the CPU backend keeps the matrices in: the float dtype holding most of the checkpoint's
  // bytes (bf16 for a bf16 checkpoint), so they are used in place; other backends choose their own.
  static DType native_dtype(const Checkpoint& ckpt);

  bool has(const std::string& name) const { return by_name_.count(name) > 0; }
  // Uploads tensor `name` as `dtype`; throws naming the tensor when absent or of another shape.
  Tensor load(const std::string& name, DType dtype, const std::vector<int64_t>& shape);
  // Row-wise concatenation of 2-D tensors with the same number of columns. `row_orders[i]`, when
  // given and non-empty, lists which source row of tensor i lands at each destination row.
  Tensor load_rows(const std::vector<std::string>& names, DType dtype,
                   const std::vector<std::vector<int64_t>>& shapes,
                   const std::vector<std::vector<int64_t>>& row_orders = {});
  size_t bytes() const { return bytes_; }  // device bytes held (allocated copies)
  size_t mapped_bytes() const { return mapped_bytes_; }  // bytes used in place from the mapping

 private:
  const TensorView& find(const std::string& name, const std::vector<int64_t>& shape) const;
  Tensor allocate(DType dtype, int64_t rows, int64_t cols);
  // True when the CPU backend may use `src` (as `dtype`) straight from the mapping.
  bool in_place(const TensorView& src, DType dtype) const;
  // load_rows() as one view of the mapping when the parts lie back to back in the file.
  bool adjacent_in_place(const std::vector<std::string>& names, DType dtype,
                         const std::vector<std::vector<int64_t>>& shapes,
                         const std::vector<std::vector<int64_t>>& row_orders, int64_t rows, Tensor& view);
  // After a copy on the CPU: drop this process's mapped pages lying wholly inside `src`.
  void release(const TensorView& src) const;
  // Progress on loads that take more than a second: a line a second, bytes read of the total.
  void loaded(const Tensor& src);

  Backend& backend_;
  Checkpoint ckpt_;  // keeps the mapped files alive while tensors point into them
  std::map<std::string, const TensorView*> by_name_;  // canonical name -> checkpoint tensor
  std::vector<Buffer> buffers_;
  size_t bytes_ = 0, mapped_bytes_ = 0;
  size_t total_source_bytes_ = 0, loaded_source_bytes_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_report_ = start_;
};

}  // namespace pagoda
