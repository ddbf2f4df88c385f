// Backend::lora_expand on the CPU: the expand half of a batched LoRA delta, each row against its own
// adapter slot's B, summed in fp32 (activations are F32 here) onto the row's value.
#include <string>
#include <vector>

#include "backend/cpu/check.h"
#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_ops.h"

namespace pagoda::cpu {

void lora_expand(ThreadPool& pool, const Tensor& low, const Tensor& b, const Tensor& slots, Tensor& out) {
  const char* op = "lora_expand";
  require(b.ndim == 3 && is_float_dtype(b.dtype) && b.is_contiguous(), op, "b must be a contiguous float [S, N, R] tensor");
  require_dtype(low, DType::F32, op, "low");
  require_dtype(out, DType::F32, op, "out");
  require_dtype(slots, DType::I32, op, "slots");
  const int64_t S = b.size(0), N = b.size(1), R = b.size(2), T = out.size(0);
  require(slots.is_contiguous() && slots.numel() == T, op, "slots must be contiguous I32 [T]");
  require(low.size(0) == T && low.row_numel() == S * R && out.row_numel() == N, op,
          "low must be [T, S·R] and out [T, N] for b [S, N, R]");
  const auto* slot = slots.ptr<const int32_t>();
  for (int64_t t = 0; t < T; ++t)
    if (slot[t] >= S)
      throw Error(std::string(op) + ": row " + std::to_string(t) + " names slot " + std::to_string(slot[t]) +
                  " of " + std::to_string(S));
  pool.parallel_for(T, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(R));
    for (int64_t t = begin; t < end; ++t) {
      const int64_t s = slot[t];
      if (s < 0) continue;
      const float* l = low.ptr<const float>() + t * low.stride0() + s * R;
      float* o = out.ptr<float>() + t * out.stride0();
      for (int64_t n = 0; n < N; ++n) {
        load_row(static_cast<const char*>(b.data) + static_cast<size_t>((s * N + n) * R) * dtype_size(b.dtype), b.dtype,
                 row.data(), R);
        float acc = o[n];
        for (int64_t r = 0; r < R; ++r) acc += row[static_cast<size_t>(r)] * l[r];
        o[n] = acc;
      }
    }
  }, 1, static_cast<double>(2 * N * R));
}

}  // namespace pagoda::cpu
