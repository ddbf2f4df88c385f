// Sampling on the device: argmax of each logits row (greedy decoding), so that only token ids
// come back to the host.
#include <algorithm>
#include <climits>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"

namespace pagoda::cuda {
namespace {

constexpr int kArgmaxThreads = 1024;     // one block per row
constexpr int kArgmaxChunkThreads = 256;  // several blocks per row
constexpr int kArgmaxMinChunk = 2048;     // elements: two float4 per thread of a chunk block

// (value, index) with the larger value winning, the lower index on ties; NaN never wins.
__device__ __forceinline__ void better(float& v, int& i, float ov, int oi) {
  if (ov > v || (ov == v && oi < i)) {
    v = ov;
    i = oi;
  }
}

// Block-wide (value, index) reduction; every thread gets the result. blockDim.x a multiple of 32.
__device__ __forceinline__ void block_best(float& best, int& idx) {
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
  const int nw = static_cast<int>(blockDim.x >> 5);
  best = lane < nw ? sv[lane] : -INFINITY;
  idx = lane < nw ? si[lane] : INT_MAX;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, best, o);
    const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
    better(best, idx, ov, oi);
  }
}

// Block b handles chunk b % chunks of row b / chunks: elements [c * chunk, min(vocab, (c + 1) * chunk)),
// chunk a multiple of 4, read as float4 where the row start and stride are 16-byte aligned. With one
// chunk per row the block writes the row's answer to out; otherwise its (value, index) to the partials.
__global__ void argmax_chunk_kernel(const float* logits, int64_t stride, int vocab, int chunk, int chunks, bool vec4,
                                    int32_t* out, float* part_v, int* part_i) {
  const int row_id = static_cast<int>(blockIdx.x / static_cast<unsigned>(chunks));
  const int c = static_cast<int>(blockIdx.x % static_cast<unsigned>(chunks));
  const float* row = logits + static_cast<int64_t>(row_id) * stride;
  const int lo = c * chunk;
  const int hi = static_cast<int>(min(static_cast<int64_t>(vocab), static_cast<int64_t>(lo) + chunk));
  float best = -INFINITY;
  int idx = INT_MAX;
  int tail = lo;
  if (vec4) {
    const int n4 = (hi - lo) / 4;
    const float4* r4 = reinterpret_cast<const float4*>(row + lo);
#pragma unroll 4
    for (int j = threadIdx.x; j < n4; j += blockDim.x) {
      const float4 v = __ldg(r4 + j);
      const int e = lo + 4 * j;
      better(best, idx, v.x, e);
      better(best, idx, v.y, e + 1);
      better(best, idx, v.z, e + 2);
      better(best, idx, v.w, e + 3);
    }
    tail = lo + 4 * n4;
  }
  for (int j = tail + static_cast<int>(threadIdx.x); j < hi; j += blockDim.x) better(best, idx, row[j], j);
  block_best(best, idx);
  if (threadIdx.x == 0) {
    if (chunks == 1) {
      out[row_id] = idx == INT_MAX ? 0 : idx;  // a row of NaNs: 0, as on the CPU
    } else {
      part_v[blockIdx.x] = best;
      part_i[blockIdx.x] = idx;
    }
  }
}

// One warp per row over its chunks' partial results.
__global__ void argmax_finish_kernel(const float* part_v, const int* part_i, int chunks, int32_t* out) {
  const int64_t base = static_cast<int64_t>(blockIdx.x) * chunks;
  float best = -INFINITY;
  int idx = INT_MAX;
  for (int j = threadIdx.x; j < chunks; j += 32) better(best, idx, part_v[base + j], part_i[base + j]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, best, o);
    const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
    better(best, idx, ov, oi);
  }
  if (threadIdx.x == 0) out[blockIdx.x] = idx == INT_MAX ? 0 : idx;
}

// Grid (column blocks, mask rows): each thread clears the logits of its columns whose bit is off.
// A word of bits serves 32 neighbouring threads (one load, broadcast within the warp).
__global__ void token_mask_kernel(float* logits, int64_t stride, int vocab, const uint32_t* mask, int words,
                                  const int32_t* rows) {
  float* row = logits + static_cast<int64_t>(rows[blockIdx.y]) * stride;
  const uint32_t* bits = mask + static_cast<int64_t>(blockIdx.y) * words;
  for (int j = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); j < vocab;
       j += static_cast<int>(gridDim.x * blockDim.x))
    if (!((bits[j >> 5] >> (j & 31)) & 1u)) row[j] = -INFINITY;
}

}  // namespace

void launch_apply_token_mask(Tensor& logits, const Tensor& mask, const Tensor& rows, cudaStream_t stream) {
  const char* op = "apply_token_mask";
  require(logits.ndim == 2 && logits.dtype == DType::F32 && logits.device == Device::CUDA, op,
          "logits must be F32 [R, V] on cuda, got " + shape_str(logits));
  require(mask.ndim == 2 && mask.dtype == DType::I32 && mask.is_contiguous() && mask.device == Device::CUDA, op,
          "mask must be contiguous I32 [M, W] on cuda, got " + shape_str(mask));
  require(rows.dtype == DType::I32 && rows.numel() == mask.shape[0] && rows.device == Device::CUDA, op,
          "rows must be I32 [M] on cuda, got " + shape_str(rows));
  const int64_t vocab = logits.shape[1], M = rows.numel();
  require(mask.shape[1] * 32 >= vocab && vocab < (int64_t{1} << 31) && M < 65536, op,
          "mask rows must cover the vocab (W >= ceil(V / 32)), at most 65535 rows");
  if (M == 0 || vocab == 0) return;
  constexpr int kThreads = 256, kPerThread = 4;
  const auto col_blocks = static_cast<unsigned>((vocab + kThreads * kPerThread - 1) / (kThreads * kPerThread));
  token_mask_kernel<<<dim3(col_blocks, static_cast<unsigned>(M)), kThreads, 0, stream>>>(
      logits.ptr<float>(), logits.stride0(), static_cast<int>(vocab), mask.ptr<uint32_t>(),
      static_cast<int>(mask.shape[1]), rows.ptr<int32_t>());
  PAGODA_CUDA_CHECK_LAUNCH();
}

void launch_argmax_rows(const Tensor& logits, Tensor& out, int num_sms, void* workspace, size_t workspace_bytes,
                        cudaStream_t stream) {
  const char* op = "argmax_rows";
  require(logits.ndim == 2 && logits.dtype == DType::F32 && logits.device == Device::CUDA, op,
          "logits must be F32 [R, V] on cuda, got " + shape_str(logits));
  const int64_t rows = logits.shape[0], vocab = logits.shape[1];
  require(out.dtype == DType::I32 && out.numel() == rows && out.device == Device::CUDA, op,
          "out must be I32 [" + std::to_string(rows) + "] on cuda, got " + shape_str(out));
  require(vocab > 0 && vocab < (int64_t{1} << 31) - 4, op, "vocab out of range");
  require(rows < (int64_t{1} << 31), op, "too many rows");
  if (rows == 0) return;
  const int64_t stride = logits.stride0();
  const bool vec4 = aligned16(logits.data) && stride % 4 == 0;
  // A single block per row reads one row at the pace of one SM (22 µs for 151,936 logits on an
  // H200): split the rows into chunks so that about two blocks per SM run, then reduce each row's
  // chunk results in a second, tiny pass. Many rows: one block per row already fills the GPU.
  const int64_t target_blocks = 2 * std::max(num_sms, 1);
  int64_t chunk = (vocab * rows + target_blocks - 1) / target_blocks;
  chunk = std::max<int64_t>(kArgmaxMinChunk, (chunk + kArgmaxMinChunk - 1) / kArgmaxMinChunk * kArgmaxMinChunk);
  int64_t chunks = (vocab + chunk - 1) / chunk;
  const size_t part_bytes = static_cast<size_t>(rows * chunks) * (sizeof(float) + sizeof(int));
  if (chunks > 1 && (workspace == nullptr || part_bytes > workspace_bytes || rows * chunks >= (int64_t{1} << 31)))
    chunks = 1;
  if (chunks == 1) chunk = (vocab + 3) / 4 * 4;
  float* part_v = static_cast<float*>(workspace);
  int* part_i = chunks > 1 ? reinterpret_cast<int*>(part_v + rows * chunks) : nullptr;
  const int threads = chunks == 1 ? kArgmaxThreads : kArgmaxChunkThreads;
  argmax_chunk_kernel<<<static_cast<unsigned>(rows * chunks), threads, 0, stream>>>(
      logits.ptr<float>(), stride, static_cast<int>(vocab), static_cast<int>(chunk), static_cast<int>(chunks), vec4,
      out.ptr<int32_t>(), part_v, part_i);
  PAGODA_CUDA_CHECK_LAUNCH();
  if (chunks > 1)
    argmax_finish_kernel<<<static_cast<unsigned>(rows), 32, 0, stream>>>(part_v, part_i, static_cast<int>(chunks),
                                                                        out.ptr<int32_t>());
  PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace pagoda::cuda
