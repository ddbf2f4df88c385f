// The memory of the paged KV cache: for every full-attention layer one K and one V pool of shape
// [num_blocks, block_size, num_kv_heads, head_dim] (docs/design.md §5). Block bookkeeping lives in the
// KV cache manager; this class only owns the bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace pagoda {

struct KvCacheShape {
  int32_t num_layers = 0;  // full-attention layers only
  int32_t num_blocks = 0;
  int32_t block_size = 16;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  DType dtype = DType::BF16;

  size_t bytes_per_pool() const {
    return static_cast<size_t>(num_blocks) * block_size * num_kv_heads * head_dim * dtype_size(dtype);
  }
  size_t total_bytes() const { return 2 * static_cast<size_t>(num_layers) * bytes_per_pool(); }
};

class PagedKvCache {
 public:
  PagedKvCache(Backend& backend, const KvCacheShape& shape);

  const KvCacheShape& shape() const { return shape_; }
  Tensor& k(int attention_layer) { return k_[static_cast<size_t>(attention_layer)]; }
  Tensor& v(int attention_layer) { return v_[static_cast<size_t>(attention_layer)]; }
  size_t bytes() const;  // what was actually allocated

 private:
  KvCacheShape shape_;
  std::vector<Buffer> buffers_;
  std::vector<Tensor> k_, v_;
};

}  // namespace pagoda
