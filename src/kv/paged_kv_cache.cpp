#include "kv/paged_kv_cache.h"

namespace pagoda {

PagedKvCache::PagedKvCache(Backend& backend, const KvCacheShape& shape) : shape_(shape) {
  for (int l = 0; l < shape.num_layers; ++l) {
    for (auto* pools : {&k_, &v_}) {
      Buffer buf = backend.alloc(shape.bytes_per_pool());
      backend.fill_zero(buf.data(), buf.bytes());  // stale NaNs must not leak through masked reads
      pools->push_back(buf.tensor(shape.dtype, {shape.num_blocks, shape.block_size,
                                                shape.num_kv_heads, shape.head_dim}));
      buffers_.push_back(std::move(buf));
    }
  }
}

size_t PagedKvCache::bytes() const {
  size_t n = 0;
  for (const Buffer& b : buffers_) n += b.bytes();
  return n;
}

}  // namespace pagoda
