// reshape_and_cache: scatter the new tokens' K and V rows into the paged caches
// [num_blocks, block_size, Hkv, D], converting to the cache dtype on write.
#include "backend/cpu/check.h"
#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_ops.h"

namespace pagoda::cpu {

namespace {

void write_rows(const Tensor& src, const int32_t* slots, Tensor& cache, int64_t t0, int64_t t1) {
  const int64_t width = src.row_numel();
  const size_t row_bytes = static_cast<size_t>(width) * dtype_size(cache.dtype);
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t slot = slots[t];
    if (slot < 0) continue;
    void* dst = static_cast<char*>(cache.data) + static_cast<size_t>(slot) * row_bytes;
    store_row(static_cast<const float*>(src.row(t)), cache.dtype, dst, width);
  }
}

void check_cache(const char* op, const Tensor& x, const Tensor& cache, const char* name) {
  require_dtype(x, DType::F32, op, name);
  require(is_kv_cache_dtype(cache.dtype) && cache.ndim == 4 && cache.is_contiguous(), op,
          "caches must be contiguous [num_blocks, block_size, heads, head_dim] of a float type");
  require(cache.size(2) * cache.size(3) == x.row_numel(), op,
          "new rows and the cache disagree on heads * head_dim");
}

}  // namespace

void reshape_and_cache(ThreadPool& pool, const Tensor& k, const Tensor& v,
                       const Tensor& slot_mapping, Tensor& k_cache, Tensor& v_cache) {
  const char* op = "reshape_and_cache";
  check_cache(op, k, k_cache, "k");
  check_cache(op, v, v_cache, "v");
  require_dtype(slot_mapping, DType::I32, op, "slot_mapping");
  const int64_t T = k.size(0);
  require(v.size(0) == T && slot_mapping.numel() >= T, op, "k, v and slot_mapping disagree on T");
  require(k_cache.size(0) == v_cache.size(0) && k_cache.size(1) == v_cache.size(1), op,
          "k and v caches disagree on blocks");
  const int32_t* slots = slot_mapping.ptr<const int32_t>();
  const int64_t num_slots = k_cache.size(0) * k_cache.size(1);
  for (int64_t t = 0; t < T; ++t) require(slots[t] < num_slots, op, "slot beyond the cache");
  pool.parallel_for(T, [&](int64_t t0, int64_t t1) {
    write_rows(k, slots, k_cache, t0, t1);
    write_rows(v, slots, v_cache, t0, t1);
  }, 1, static_cast<double>(2 * (k.row_numel() + v.row_numel())));
}

}  // namespace pagoda::cpu
