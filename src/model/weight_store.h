// Moves a checkpoint's tensors onto a backend, by canonical name (io/weight_names.h), converting
// dtypes and stacking row blocks of one or more matrices into one (fused projections such as
// q|k|v and gate|up, a rank's shard of each, or the parts of a checkpoint's own fused tensor).
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
#include "io/quantization.h"
#include "io/safetensors.h"

namespace pagoda {

class LoraSet;

// A block of rows of one checkpoint matrix: rows [begin, end) of tensor `name` (shape `shape`,
// checked; dims past the first are flattened into columns), or, when `order` is non-empty, those
// source rows in that order.
struct WeightRows {
  std::string name;
  std::vector<int64_t> shape;
  int64_t begin = 0, end = -1;  // end -1: shape[0]
  std::vector<int64_t> order;

  int64_t num_rows() const { return order.empty() ? end - begin : static_cast<int64_t>(order.size()); }
};

class WeightStore {
 public:
  WeightStore(Backend& backend, const Checkpoint& ckpt, const WeightQuantization& quantization = {});

  // The dtype the CPU backend keeps the matrices in: the float dtype holding most of the checkpoint's
  // bytes (bf16 for a bf16 checkpoint), so they are used in place; other backends choose their own.
  static DType native_dtype(const Checkpoint& ckpt);

  bool has(const std::string& name) const { return by_name_.count(name) > 0; }
  const WeightQuantization& quantization() const { return quant_; }
  // The LoRA adapters the projections loaded from here take (Linear::load), or null.
  void set_lora(LoraSet* lora) { lora_ = lora; }
  LoraSet* lora() const { return lora_; }
  // The checkpoint dtype of tensor `name`; throws naming it when absent.
  DType dtype_of(const std::string& name) const;
  // Tensor `name` (any float dtype) as fp32 values on the host, row-major (scales, small vectors).
  std::vector<float> host_floats(const std::string& name) const;
  // Tensor `name` (I32: packed 4-bit weights, zero points, g_idx) as its values on the host.
  std::vector<int32_t> host_i32(const std::string& name) const;
  // load_parts()'s rows and columns as fp32 on the host (what online quantization reads).
  std::vector<float> host_rows(std::vector<WeightRows> parts, int64_t col_begin = 0, int64_t col_end = -1);
  // A [rows, cols] tensor of `dtype` on the backend holding `host` (rows * cols elements).
  Tensor upload(const void* host, DType dtype, int64_t rows, int64_t cols);
  // The checkpoint shape of tensor `name`; throws naming it when absent.
  const std::vector<int64_t>& shape_of(const std::string& name) const;
  // Uploads tensor `name` as `dtype`; throws naming the tensor when absent or of another shape.
  Tensor load(const std::string& name, DType dtype, const std::vector<int64_t>& shape);
  // The row blocks of `parts` stacked in order, columns [col_begin, col_end) of each (col_end -1:
  // all; every part must have as many columns). A view of the mapping on the CPU when the blocks
  // are whole rows lying back to back in the file; otherwise one allocation, filled a run of
  // consecutive source rows at a time.
  Tensor load_parts(std::vector<WeightRows> parts, DType dtype, int64_t col_begin = 0, int64_t col_end = -1);
  size_t bytes() const { return bytes_; }  // device bytes held (allocated copies)
  size_t mapped_bytes() const { return mapped_bytes_; }  // bytes used in place from the mapping

 private:
  const TensorView& find(const std::string& name, const std::vector<int64_t>& shape) const;
  Tensor allocate(DType dtype, int64_t rows, int64_t cols);
  // True when the CPU backend may use `src` (as `dtype`) straight from the mapping.
  bool in_place(const TensorView& src, DType dtype) const;
  // load_parts() as one view of the mapping when the blocks lie back to back in the file.
  bool adjacent_in_place(const std::vector<WeightRows>& parts, DType dtype, int64_t rows, Tensor& view);
  // After a copy on the CPU: drop this process's mapped pages lying wholly inside `src`.
  void release(const TensorView& src) const;
  // Progress on loads that take more than a second: a line a second, bytes read of the total.
  void loaded(const Tensor& src);

  Backend& backend_;
  WeightQuantization quant_;
  LoraSet* lora_ = nullptr;
  Checkpoint ckpt_;  // keeps the mapped files alive while tensors point into them
  std::map<std::string, const TensorView*> by_name_;  // canonical name -> checkpoint tensor
  std::vector<Buffer> buffers_;
  size_t bytes_ = 0, mapped_bytes_ = 0;
  size_t total_source_bytes_ = 0, loaded_source_bytes_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_report_ = start_;
};

}  // namespace pagoda
