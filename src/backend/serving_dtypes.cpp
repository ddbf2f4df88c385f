#include "backend/serving_dtypes.h"

#include <optional>

#include "core/error.h"

namespace pagoda {

namespace {

// The dtype a flag value names, in any of the spellings vLLM and torch accept; nullopt for "auto"
// and for anything else (the caller tells them apart).
std::optional<DType> named_dtype(const std::string& s) {
  if (s == "float32" || s == "float" || s == "fp32") return DType::F32;
  if (s == "bfloat16" || s == "bf16") return DType::BF16;
  if (s == "float16" || s == "half" || s == "fp16") return DType::F16;
  return std::nullopt;
}

}  // namespace

DType parse_activation_dtype(const std::string& dtype, const std::string& device) {
  const std::optional<DType> named = named_dtype(dtype);
  if (!named && dtype != "auto") throw Error("--dtype '" + dtype + "' is not a dtype; choose auto, bfloat16 or float32");
  const bool narrow = named && *named != DType::F32;
  if (device == "cpu") {
    if (narrow)
      throw Error("--dtype " + dtype + ": the CPU backend computes in float32 (weights of any dtype are "
                  "converted when loaded); pass --dtype auto or float32");
    return DType::F32;
  }
  if (device.rfind("vulkan", 0) == 0) {
    if (narrow)
      throw Error("--dtype " + dtype + ": the Vulkan backend computes in float32 so far (weights of any dtype are "
                  "converted when loaded); pass --dtype auto or float32");
    return DType::F32;
  }
  if (named == DType::F16)
    throw Error("--dtype " + dtype + ": float16 activations are not supported on CUDA; choose bfloat16 (the "
                "default) or float32");
  return named.value_or(DType::BF16);
}

DType parse_kv_cache_dtype(const std::string& s, DType model_dtype) {
  if (s == "auto") return model_dtype;
  if (s == "fp8" || s == "fp8_e4m3") return DType::F8_E4M3;  // vLLM's names; scale 1 (uncalibrated)
  if (const std::optional<DType> named = named_dtype(s)) return *named;
  throw Error("--kv-cache-dtype '" + s + "' is not supported; choose auto, bf16, fp16, fp32 or fp8 (fp8_e4m3)");
}

ServingDtypes choose_dtypes(const std::string& device, const std::string& dtype_flag,
                            const std::string& kv_cache_dtype_flag, DType checkpoint) {
  ServingDtypes d;
  d.activation = parse_activation_dtype(dtype_flag, device);
  // An explicit --dtype can only name what the device computes in (the parse refuses the rest).
  if (dtype_flag != "auto") d.model = d.activation;
  else d.model = device == "cpu" ? checkpoint : d.activation;
  d.kv_cache = parse_kv_cache_dtype(kv_cache_dtype_flag, d.model);
  if (d.kv_cache == DType::F8_E4M3 && device.rfind("vulkan", 0) == 0)
    throw Error("--kv-cache-dtype " + kv_cache_dtype_flag + ": the FP8 KV cache is implemented on the cpu and cuda "
                "backends so far; on " + device + " use auto, bf16 or fp16");
  return d;
}

}  // namespace pagoda
