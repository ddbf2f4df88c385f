// embedding: out[t, :] = table[ids[t], :], converting the table's dtype to out's.
#include <string>
#include <vector>

#include "backend/cpu/check.h"
#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_ops.h"

namespace pagoda::cpu {

void embedding(ThreadPool& pool, const Tensor& table, const Tensor& ids, Tensor& out) {
  const char* op = "embedding";
  require(ids.dtype == DType::I32 || ids.dtype == DType::I64, op, "ids must be I32 or I64");
  require(is_float_dtype(table.dtype) && is_float_dtype(out.dtype), op, "table/out must be float");
  const int64_t T = ids.numel(), V = table.size(0), H = table.row_numel();
  require(out.size(0) == T && out.row_numel() == H, op, "out must be [T, hidden]");
  for (int64_t t = 0; t < T; ++t) {
    const int64_t id =
        ids.dtype == DType::I64 ? ids.ptr<const int64_t>()[t] : ids.ptr<const int32_t>()[t];
    if (id < 0 || id >= V)
      throw Error("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                  std::to_string(V) + ")");
  }
  pool.parallel_for(T, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> scratch;
    scratch.resize(static_cast<size_t>(H));
    for (int64_t t = begin; t < end; ++t) {
      const int64_t id =
          ids.dtype == DType::I64 ? ids.ptr<const int64_t>()[t] : ids.ptr<const int32_t>()[t];
      const void* src = table.row(id);
      if (out.dtype == DType::F32) {
        load_row(src, table.dtype, static_cast<float*>(out.row(t)), H);
      } else {
        store_row(as_f32(src, table.dtype, scratch.data(), H), out.dtype, out.row(t), H);
      }
    }
  }, 1, static_cast<double>(2 * H));
}

}  // namespace pagoda::cpu
