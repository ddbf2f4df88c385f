// Launcher of the LoRA expand kernel (lora_kernels.cu); semantics in backend.h, "LoRA adapters".
// Checks its arguments, enqueues on `stream`, never synchronises; the grid depends only on tensor
// shapes, so it is captured in CUDA graphs. Internal to src/backend/cuda; C++17-clean.
#pragma once

#include <cuda_runtime_api.h>

#include "backend/backend.h"

namespace pagoda::cuda {

// bf16 with R a multiple of 8 (every LoRA engine's case): tensor cores over 64-row × 64-column
// tiles, each row masked to its own slot and each block reading only the slots its rows use (one
// adapter costs one slot's B whatever --max-loras is). Otherwise (fp32, odd shapes, or
// PAGODA_LORA_EXPAND=legacy for A/B) a thread per output column n over a tile of rows (Punica's
// BGMV expand): each row reads its own slot's B row n and its slot's R columns of low, sums in fp32
// and adds onto out.
void launch_lora_expand(const Tensor& low, const Tensor& b, const Tensor& slots, Tensor& out, cudaStream_t stream);

}  // namespace pagoda::cuda
