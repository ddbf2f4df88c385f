#include "backend/cuda/lt_gemm.h"

#include <cublasLt.h>

#include <string>

#include "backend/cuda/cuda_util.h"
#include "core/log.h"

namespace pagoda::cuda {
namespace {

#define PAGODA_CUBLAS_CHECK(call)                                                                          \
  do {                                                                                                     \
    const cublasStatus_t st_ = (call);                                                                     \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                                      \
      throw Error(std::string("cuBLASLt error: ") + #call + " failed: " + cublasGetStatusString(st_) + " (" + \
                  std::to_string(static_cast<int>(st_)) + ")");                                            \
  } while (0)

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::F8_E4M3: return CUDA_R_8F_E4M3;
    default: throw Error(std::string("cuda linear: unsupported dtype ") + dtype_name(t));
  }
}

// Largest power of two (at most 256) dividing both the address and the column stride in bytes.
int alignment_of(const void* p, int64_t ld_bytes) {
  const uintptr_t v = reinterpret_cast<uintptr_t>(p) | static_cast<uintptr_t>(ld_bytes) | 256u;
  return static_cast<int>(v & (~v + 1));
}

}  // namespace

struct LtGemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

LtGemm::LtGemm(void* workspace, size_t workspace_bytes) : workspace_(workspace), workspace_bytes_(workspace_bytes) {
  cublasLtHandle_t h = nullptr;
  PAGODA_CUBLAS_CHECK(cublasLtCreate(&h));
  handle_ = h;
}

LtGemm::~LtGemm() {
  plans_.clear();
  if (handle_) cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
}

// Row-major y[T,N] = x[T,K] w[N,K]^T is column-major y^T[N,T] = op(W)[N,K] x^T[K,T] with W seen as a
// column-major [K, N] matrix (transposed by the op) and x as a column-major [K, T] matrix.
// Outer-vector scales: the A (weight) scale per row of op(A) = output channel, the B (x) scale per
// column of B = token.
const LtGemm::Plan* LtGemm::plan_for(const Key& key, bool may_fail) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.get();  // null: no algorithm (may_fail plans only)
  const auto [t, n, k, ldw, ldx, ldy, tw, tx, ty, aw, ax, ay, outer_vec] = key;
  auto plan = std::make_unique<Plan>();
  const cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  PAGODA_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, compute, CUDA_R_32F));
  const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
  PAGODA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof(op_t)));
  PAGODA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof(op_n)));
  if (outer_vec) {
    const int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    PAGODA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof(mode)));
    PAGODA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof(mode)));
    // Scale pointers must be set for the heuristic to consider scaled kernels; each call sets its own.
    const void* placeholder = workspace_;
    PAGODA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &placeholder, sizeof(placeholder)));
    PAGODA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &placeholder, sizeof(placeholder)));
  }
  PAGODA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, static_cast<cudaDataType_t>(tw), static_cast<uint64_t>(k),
                                                 static_cast<uint64_t>(n), ldw));
  PAGODA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, static_cast<cudaDataType_t>(tx), static_cast<uint64_t>(k),
                                                 static_cast<uint64_t>(t), ldx));
  PAGODA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->c, static_cast<cudaDataType_t>(ty), static_cast<uint64_t>(n),
                                                 static_cast<uint64_t>(t), ldy));

  cublasLtMatmulPreference_t pref = nullptr;
  PAGODA_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = workspace_bytes_;
  const uint32_t a_w = static_cast<uint32_t>(aw), a_x = static_cast<uint32_t>(ax), a_y = static_cast<uint32_t>(ay);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &a_w, sizeof(a_w));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &a_x, sizeof(a_x));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &a_y, sizeof(a_y));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &a_y, sizeof(a_y));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(handle_), plan->desc, plan->a,
                                                           plan->b, plan->c, plan->c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if ((st != CUBLAS_STATUS_SUCCESS || found == 0) && may_fail) {
    // Remembered, so that the caller's fallback does not pay the query again at every call.
    LOG_WARN("cuBLASLt has no FP8 outer-vector-scaled kernel for x[" << t << ", " << k << "] · w[" << n << ", " << k
                                                                     << "]^T (" << cublasGetStatusString(st)
                                                                     << "): FP8 weights take the dequantizing path");
    plans_.emplace(key, nullptr);
    return nullptr;
  }
  if (st != CUBLAS_STATUS_SUCCESS || found == 0)
    throw Error("cuda linear: cuBLASLt has no algorithm for x[" + std::to_string(t) + ", " + std::to_string(k) +
                "] · w[" + std::to_string(n) + ", " + std::to_string(k) + "]^T (" + cublasGetStatusString(st) + ")");
  plan->algo = result.algo;
  return plans_.emplace(key, std::move(plan)).first->second.get();
}

void LtGemm::linear(const Tensor& x, const Tensor& w, Tensor& out, cudaStream_t stream) {
  const char* op = "linear";
  require(x.ndim == 2 && w.ndim == 2 && out.ndim == 2, op,
          "x, w, out must be 2-D, got " + shape_str(x) + ", " + shape_str(w) + ", " + shape_str(out));
  const int64_t t = x.shape[0], k = x.shape[1], n = w.shape[0];
  require(w.shape[1] == k, op, "w " + shape_str(w) + " does not match x " + shape_str(x));
  require(out.shape[0] == t && out.shape[1] == n, op, "out " + shape_str(out) + " must be [" + std::to_string(t) + ", " + std::to_string(n) + "]");
  require(x.dtype == w.dtype, op, "x " + shape_str(x) + " and w " + shape_str(w) + " must have one dtype");
  require(out.dtype == x.dtype || out.dtype == DType::F32, op, "out dtype must be x's or F32");
  if (t == 0 || n == 0) return;
  if (k == 0) {
    PAGODA_CUDA_CHECK(cudaMemset2DAsync(out.data, static_cast<size_t>(out.stride0()) * dtype_size(out.dtype), 0,
                                        static_cast<size_t>(n) * dtype_size(out.dtype), static_cast<size_t>(t), stream));
    return;
  }
  const int64_t ldw = w.stride0(), ldx = x.stride0(), ldy = out.stride0();
  const Key key{t, n, k, ldw, ldx, ldy,
                static_cast<int>(cuda_type(w.dtype)), static_cast<int>(cuda_type(x.dtype)), static_cast<int>(cuda_type(out.dtype)),
                alignment_of(w.data, ldw * static_cast<int64_t>(dtype_size(w.dtype))),
                alignment_of(x.data, ldx * static_cast<int64_t>(dtype_size(x.dtype))),
                alignment_of(out.data, ldy * static_cast<int64_t>(dtype_size(out.dtype))), false};
  std::lock_guard<std::mutex> lock(mu_);
  const Plan& p = *plan_for(key);
  const float alpha = 1.0f, beta = 0.0f;
  PAGODA_CUBLAS_CHECK(cublasLtMatmul(static_cast<cublasLtHandle_t>(handle_), p.desc, &alpha, w.data, p.a, x.data, p.b,
                                     &beta, out.data, p.c, out.data, p.c, &p.algo, workspace_, workspace_bytes_, stream));
}

bool LtGemm::linear_fp8_rowwise(const Tensor& xq, const Tensor& scale_x, const Tensor& w, const Tensor& scale_w,
                                Tensor& out, cudaStream_t stream) {
  const char* op = "linear_fp8";
  require(xq.ndim == 2 && w.ndim == 2 && out.ndim == 2 && xq.dtype == DType::F8_E4M3 && w.dtype == DType::F8_E4M3 &&
              xq.shape[1] == w.shape[1] && out.shape[0] == xq.shape[0] && out.shape[1] == w.shape[0] &&
              (out.dtype == DType::BF16 || out.dtype == DType::F32),
          op, "unsupported operands x " + shape_str(xq) + ", w " + shape_str(w) + ", out " + shape_str(out));
  const int64_t t = xq.shape[0], k = xq.shape[1], n = w.shape[0];
  if (t == 0 || n == 0) return true;
  const int64_t ldw = w.stride0(), ldx = xq.stride0(), ldy = out.stride0();
  const Key key{t, n, k, ldw, ldx, ldy, static_cast<int>(CUDA_R_8F_E4M3), static_cast<int>(CUDA_R_8F_E4M3),
                static_cast<int>(cuda_type(out.dtype)), alignment_of(w.data, ldw), alignment_of(xq.data, ldx),
                alignment_of(out.data, ldy * static_cast<int64_t>(dtype_size(out.dtype))), true};
  std::lock_guard<std::mutex> lock(mu_);
  const Plan* p = plan_for(key, /*may_fail=*/true);
  if (p == nullptr) return false;
  // The scale pointers change between calls (a graph capture records the values of its call).
  const void* sw = scale_w.data;
  const void* sx = scale_x.data;
  PAGODA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sw, sizeof(sw)));
  PAGODA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sx, sizeof(sx)));
  const float alpha = 1.0f, beta = 0.0f;
  PAGODA_CUBLAS_CHECK(cublasLtMatmul(static_cast<cublasLtHandle_t>(handle_), p->desc, &alpha, w.data, p->a, xq.data,
                                     p->b, &beta, out.data, p->c, out.data, p->c, &p->algo, workspace_,
                                     workspace_bytes_, stream));
  return true;
}

}  // namespace pagoda::cuda
