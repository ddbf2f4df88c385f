// The dtypes a served model runs with, decided in one place from the device, --dtype,
// --kv-cache-dtype and the checkpoint's dtype. The engine's config (engine/engine_config.cpp) and the
// backend factory (make_backend) both ask here. The rules (one each):
//  - activation dtype: what the backend computes in. cpu: float32 always (--dtype auto|float32);
//    vulkan: float32 so far; cuda: --dtype (auto = bfloat16; float16 is refused).
//  - model dtype (vLLM's ModelConfig.dtype): --dtype when given; with auto, the dtype the device
//    keeps the model in: the checkpoint's dtype on the CPU (weights are used as stored, widened
//    to fp32 inside the kernels), the activation dtype elsewhere.
//  - KV-cache dtype: --kv-cache-dtype when given; auto = the model dtype. So `--dtype float32`
//    gives an fp32 cache on every device (it is asked for to match an fp32 reference).
//  - cpu, a bf16 model: the prefill GEMMs round x to bf16 (AVX-512 BF16, where the CPU has it),
//    as llama.cpp's bf16 matmuls and a bf16 transformers forward do; every other op stays fp32.
//    `--dtype float32` is exact throughout.
#pragma once

#include <string>

#include "core/dtype.h"

namespace pagoda {

struct ServingDtypes {
  DType activation = DType::F32;
  DType model = DType::F32;
  DType kv_cache = DType::F32;
};

// The rules above for `device` ("cpu", "cuda", "vulkan[:N]"), the two flags as given ("auto" or a
// dtype name) and the checkpoint's dtype. Throws pagoda::Error naming the flag for a dtype name it
// does not know or one the device cannot compute in (--dtype first, then --kv-cache-dtype).
ServingDtypes choose_dtypes(const std::string& device, const std::string& dtype_flag,
                            const std::string& kv_cache_dtype_flag, DType checkpoint);

// The activation dtype alone (what make_backend needs): choose_dtypes' first rule.
DType parse_activation_dtype(const std::string& dtype, const std::string& device);
// --kv-cache-dtype alone; auto = `model_dtype`.
DType parse_kv_cache_dtype(const std::string& s, DType model_dtype);

}  // namespace pagoda
