// Launcher of the LoRA expand kernel (lora_kernels.cu); semantics in backend.h, "LoRA adapters".
// Checks its arguments, enqueues on `stream`, never synchronises; the grid depends only on tensor
// shapes, so it is captured in CUDA graphs. Internal to src/backend/cuda; C++17-clean.
#pragma once

#include <cuda_runtime_api.h>

#include "backend/backend.h"

namespace pagoda::cuda {

// A thread per output column n over a tile of rows (Punica's BGMV expand): each row reads its own
// slot's B row n (R values, 16-byte loads where they line up) and its slot's R columns of low, sums
// in fp32 and adds onto out. Rows of one slot in a tile read the same B rows, which stay in L1.
void launch_lora_expand(const Tensor& low, const Tensor& b, const Tensor& slots, Tensor& out, cudaStream_t stream);

}  // namespace pagoda::cuda
