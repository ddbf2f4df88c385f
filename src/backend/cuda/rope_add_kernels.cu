// The primitives the fused kernels made unnecessary until the contract split them out: RoPE on one
// tensor of heads (any scaling: the host's inverse frequencies travel as a kernel argument, so a
// captured graph replays them), and the elementwise add / add_bias.
#include <algorithm>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"

namespace pagoda::cuda {
namespace {

constexpr int kThreads = 128;

// Passed by value (1 KiB of the 4 KiB of kernel arguments): no device buffer, nothing to upload.
struct RopeTable {
  float inv_freq[kMaxRopePairs];
  float scale;  // cos and sin are multiplied by it (yarn's attention factor; 1 otherwise)
};

// Grid (token, group of pairs). cos and sin rounded to T, each product rounded, then the sum: the
// rounding points of Hugging Face's T-typed apply_rotary_pos_emb, as the fused kernel has them.
template <typename T>
__global__ void rope_kernel(T* x, int64_t xs, int heads, int d, int half, int interleaved,
                            const int32_t* positions, RopeTable table) {
  extern __shared__ float tab[];
  float* cos_t = tab;
  float* sin_t = tab + half;
  const int64_t t = blockIdx.x;
  const float pos = static_cast<float>(positions[t]);
  for (int j = threadIdx.x; j < half; j += blockDim.x) {
    float sn, cs;
    sincosf(pos * table.inv_freq[j], &sn, &cs);
    cos_t[j] = round_to<T>(cs * table.scale);
    sin_t[j] = round_to<T>(sn * table.scale);
  }
  __syncthreads();
  T* row = x + t * xs;
  const int pairs = heads * half;
  for (int p = static_cast<int>(blockIdx.y * blockDim.x + threadIdx.x); p < pairs;
       p += static_cast<int>(blockDim.x * gridDim.y)) {
    const int h = p / half, j = p % half;
    T* head = row + static_cast<int64_t>(h) * d;
    const int i0 = interleaved ? 2 * j : j, i1 = interleaved ? 2 * j + 1 : j + half;
    const float a = to_f32(head[i0]), b = to_f32(head[i1]);
    head[i0] = from_f32<T>(round_to<T>(a * cos_t[j]) - round_to<T>(b * sin_t[j]));
    head[i1] = from_f32<T>(round_to<T>(b * cos_t[j]) + round_to<T>(a * sin_t[j]));
  }
}

template <typename T>
__global__ void add_kernel(const T* a, int64_t as, const T* b, int64_t bs, T* out, int64_t os, int64_t cols) {
  const int64_t row = blockIdx.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; i < cols;
       i += static_cast<int64_t>(blockDim.x) * gridDim.y)
    out[row * os + i] = from_f32<T>(to_f32(a[row * as + i]) + to_f32(b[row * bs + i]));
}

template <typename T>
__global__ void add_bias_kernel(T* x, int64_t xs, const float* bias, int64_t cols) {
  const int64_t row = blockIdx.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; i < cols;
       i += static_cast<int64_t>(blockDim.x) * gridDim.y)
    x[row * xs + i] = from_f32<T>(to_f32(x[row * xs + i]) + bias[i]);
}

dim3 row_grid(int64_t rows, int64_t cols) {
  const int64_t per_row = std::min<int64_t>((cols + kThreads - 1) / kThreads, 64);
  return dim3(static_cast<unsigned>(rows), static_cast<unsigned>(per_row < 1 ? 1 : per_row));
}

void check_rows(const char* op, const Tensor& t, int64_t rows, int64_t cols, const char* name) {
  require(t.device == Device::CUDA && num_rows(t) == rows && t.row_numel() == cols, op,
          std::string(name) + " has shape " + shape_str(t) + ", expected " + std::to_string(rows) + " rows of " +
              std::to_string(cols) + " on cuda");
}

}  // namespace

void launch_rope(Tensor& x, const Tensor& positions, const std::vector<float>& inv_freq, float scale,
                 int rotary_dim, bool interleaved, cudaStream_t stream) {
  const char* op = "rope";
  require(x.ndim == 3 && x.device == Device::CUDA, op, "x must be [T, heads, head_dim] on cuda, got " + shape_str(x));
  const int64_t t = x.shape[0], heads = x.shape[1], d = x.shape[2];
  require(rotary_dim > 0 && rotary_dim <= d && rotary_dim % 2 == 0, op,
          "rotary_dim " + std::to_string(rotary_dim) + " must be even and at most head_dim " + std::to_string(d));
  const int half = rotary_dim / 2;
  require(half <= kMaxRopePairs && static_cast<int>(inv_freq.size()) == half, op,
          "at most " + std::to_string(2 * kMaxRopePairs) + " rotary dims");
  require(positions.dtype == DType::I32 && positions.numel() >= t, op,
          "positions must be I32 with at least T entries, got " + shape_str(positions));
  if (t == 0 || heads == 0) return;
  RopeTable table{};
  for (int j = 0; j < half; ++j) table.inv_freq[j] = inv_freq[static_cast<size_t>(j)];
  table.scale = scale;
  const int64_t pairs = heads * half;
  const dim3 grid(static_cast<unsigned>(t),
                  static_cast<unsigned>(std::min<int64_t>((pairs + kThreads - 1) / kThreads, 64)));
  const size_t smem = 2 * static_cast<size_t>(half) * sizeof(float);
  PAGODA_DISPATCH_FLOAT(x.dtype, T, op, {
    rope_kernel<T><<<grid, kThreads, smem, stream>>>(x.ptr<T>(), x.stride0(), static_cast<int>(heads),
                                                     static_cast<int>(d), half, interleaved ? 1 : 0,
                                                     positions.ptr<int32_t>(), table);
  });
  PAGODA_CUDA_CHECK_LAUNCH();
}

void launch_add(const Tensor& a, const Tensor& b, Tensor& out, cudaStream_t stream) {
  const char* op = "add";
  const int64_t rows = num_rows(a), cols = a.row_numel();
  check_rows(op, a, rows, cols, "a");
  check_rows(op, b, rows, cols, "b");
  check_rows(op, out, rows, cols, "out");
  require(a.dtype == b.dtype && a.dtype == out.dtype, op, "a, b and out must have one dtype");
  if (rows == 0 || cols == 0) return;
  PAGODA_DISPATCH_FLOAT(a.dtype, T, op, {
    add_kernel<T><<<row_grid(rows, cols), kThreads, 0, stream>>>(a.ptr<T>(), a.stride0(), b.ptr<T>(), b.stride0(),
                                                                  out.ptr<T>(), out.stride0(), cols);
  });
  PAGODA_CUDA_CHECK_LAUNCH();
}

void launch_add_bias(Tensor& x, const Tensor& bias, cudaStream_t stream) {
  const char* op = "add_bias";
  const int64_t rows = num_rows(x), cols = x.row_numel();
  check_rows(op, x, rows, cols, "x");
  require(bias.dtype == DType::F32 && bias.numel() == cols && bias.device == Device::CUDA, op,
          "bias must be F32 [" + std::to_string(cols) + "] on cuda, got " + shape_str(bias));
  if (rows == 0 || cols == 0) return;
  PAGODA_DISPATCH_FLOAT(x.dtype, T, op, {
    add_bias_kernel<T><<<row_grid(rows, cols), kThreads, 0, stream>>>(x.ptr<T>(), x.stride0(), bias.ptr<float>(),
                                                                       cols);
  });
  PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace pagoda::cuda
