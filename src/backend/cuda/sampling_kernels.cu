// Sampling on the device: argmax of each logits row (greedy decoding), so that only token ids
// come back to the host.
#include <climits>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"

namespace pagoda::cuda {
namespace {

constexpr int kArgmaxThreads = 1024;

// (value, index) with the larger value winning, the lower index on ties; NaN never wins.
__device__ __forceinline__ void better(float& v, int& i, float ov, int oi) {
  if (ov > v || (ov == v && oi < i)) {
    v = ov;
    i = oi;
  }
}

// One block per row. Rows of a 16-byte aligned row start and stride are read as float4.
__global__ void argmax_rows_kernel(const float* logits, int64_t stride, int vocab, bool vec4, int32_t* out) {
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * stride;
  float best = -INFINITY;
  int idx = INT_MAX;
  if (vec4) {
    const int n4 = vocab / 4;
    const float4* r4 = reinterpret_cast<const float4*>(row);
    for (int j = threadIdx.x; j < n4; j += blockDim.x) {
      const float4 v = r4[j];
      better(best, idx, v.x, 4 * j);
      better(best, idx, v.y, 4 * j + 1);
      better(best, idx, v.z, 4 * j + 2);
      better(best, idx, v.w, 4 * j + 3);
    }
    for (int j = n4 * 4 + static_cast<int>(threadIdx.x); j < vocab; j += blockDim.x) better(best, idx, row[j], j);
  } else {
    for (int j = threadIdx.x; j < vocab; j += blockDim.x) better(best, idx, row[j], j);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, best, o);
    const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
    better(best, idx, ov, oi);
  }
  __shared__ float sv[32];
  __shared__ int si[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    sv[warp] = best;
    si[warp] = idx;
  }
  __syncthreads();
  if (warp == 0) {
    const int nw = static_cast<int>(blockDim.x >> 5);
    best = lane < nw ? sv[lane] : -INFINITY;
    idx = lane < nw ? si[lane] : INT_MAX;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, best, o);
      const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
      better(best, idx, ov, oi);
    }
    if (lane == 0) out[blockIdx.x] = idx == INT_MAX ? 0 : idx;  // a row of NaNs: 0, as on the CPU
  }
}

}  // namespace

void launch_argmax_rows(const Tensor& logits, Tensor& out, cudaStream_t stream) {
  const char* op = "argmax_rows";
  require(logits.ndim == 2 && logits.dtype == DType::F32 && logits.device == Device::CUDA, op,
          "logits must be F32 [R, V] on cuda, got " + shape_str(logits));
  const int64_t rows = logits.shape[0], vocab = logits.shape[1];
  require(out.dtype == DType::I32 && num_elems(out) == rows && out.device == Device::CUDA, op,
          "out must be I32 [" + std::to_string(rows) + "] on cuda, got " + shape_str(out));
  require(vocab > 0 && vocab < (int64_t{1} << 31) - 4, op, "vocab out of range");
  require(rows < (int64_t{1} << 31), op, "too many rows");
  if (rows == 0) return;
  const int64_t stride = stride_rows(logits);
  const bool vec4 = aligned16(logits.data) && stride % 4 == 0;
  argmax_rows_kernel<<<static_cast<unsigned>(rows), kArgmaxThreads, 0, stream>>>(
      logits.ptr<float>(), stride, static_cast<int>(vocab), vec4, out.ptr<int32_t>());
  PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace pagoda::cuda
