// Gated DeltaNet ops of the CPU backend: the gated RMSNorm here, and the forwarding of
// causal_conv1d_silu (conv1d.cpp) and gated_delta_rule (delta_rule.cpp).
#include <cmath>
#include <vector>

#include "backend/cpu/check.h"
#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_ops.h"

namespace pagoda {

namespace cpu {

void gated_rms_norm(ThreadPool& pool, const Tensor& x, const Tensor& z, const Tensor& w, float eps,
                    Tensor& out) {
  const char* op = "gated_rms_norm";
  require_dtype(x, DType::F32, op, "x");
  require_dtype(z, DType::F32, op, "z");
  require_dtype(out, DType::F32, op, "out");
  require(x.ndim == 3 && z.ndim == 3 && out.ndim == 3, op, "x, z and out must be [T, Hv, dv]");
  const int64_t T = x.size(0), Hv = x.size(1), dv = x.size(2);
  require(z.size(0) == T && z.size(1) == Hv && z.size(2) == dv && out.size(0) == T &&
              out.size(1) == Hv && out.size(2) == dv,
          op, "x, z and out must have the same shape");
  require(is_float_dtype(w.dtype) && w.numel() == dv && w.is_contiguous(), op, "w must be [dv]");
  std::vector<float> wf(static_cast<size_t>(dv));
  load_row(w.data, w.dtype, wf.data(), dv);
  pool.parallel_for(T * Hv, [&](int64_t begin, int64_t end) {
    for (int64_t v = begin; v < end; ++v) {
      const int64_t t = v / Hv, h = v % Hv;
      const float* xi = static_cast<const float*>(x.row(t)) + h * dv;
      const float* zi = static_cast<const float*>(z.row(t)) + h * dv;
      float* oi = static_cast<float*>(out.row(t)) + h * dv;  // may alias xi: read before write
      float part[8] = {};
      int64_t i = 0;
      for (; i + 8 <= dv; i += 8)
        for (int j = 0; j < 8; ++j) part[j] += xi[i + j] * xi[i + j];
      float ss = ((part[0] + part[4]) + (part[1] + part[5])) +
                 ((part[2] + part[6]) + (part[3] + part[7]));
      for (; i < dv; ++i) ss += xi[i] * xi[i];
      const float inv = 1.0f / std::sqrt(ss / static_cast<float>(dv) + eps);
      for (i = 0; i < dv; ++i) {
        const float zv = zi[i];
        oi[i] = xi[i] * inv * wf[static_cast<size_t>(i)] * (zv / (1.0f + std::exp(-zv)));
      }
    }
  }, 1, static_cast<double>(16 * dv));
}

}  // namespace cpu

void CpuBackend::causal_conv1d_silu(const Tensor& x, const Tensor& w, Tensor& conv_state,
                                    const StepMeta& meta, Tensor& out) {
  cpu::causal_conv1d_silu(pool_, x, w, conv_state, meta, out);
}

void CpuBackend::gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& b, const Tensor& a, const Tensor& A_log,
                                  const Tensor& dt_bias, Tensor& state, const StepMeta& meta,
                                  Tensor& out) {
  cpu::gated_delta_rule(pool_, q, k, v, b, a, A_log, dt_bias, state, meta, out);
}

void CpuBackend::gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& w, float eps,
                                Tensor& out) {
  cpu::gated_rms_norm(pool_, x, z, w, eps, out);
}

}  // namespace pagoda
