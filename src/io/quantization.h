// How a checkpoint's weights are quantized: its config.json `quantization_config` (Qwen/DeepSeek
// `quant_method: fp8` with `weight_block_size`, llm-compressor's `compressed-tensors` FP8 or W4A16,
// AutoAWQ's `awq`, GPTQ's `gptq`), or FP8 asked for at load (`--quantization fp8`, vLLM's online FP8:
// per-channel scales of the bf16 weights). The projection (src/model/linear.cpp) reads this; no
// family file does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace pagoda {

struct WeightQuantization {
  enum class Method : uint8_t { None, Fp8, Int4 };
  // Where a 4-bit checkpoint keeps its packed weights (model/linear_int4.cpp reads each):
  //   Awq: qweight I32 [K, N/8] (nibbles in AWQ's interleaved order), qzeros [G, N/8], scales [G, N];
  //   Gptq: qweight I32 [K/8, N], qzeros [G, N/8] (stored minus gptq_zero_offset), scales [G, N], g_idx;
  //   PackQuantized (compressed-tensors W4A16): weight_packed I32 [N, K/8] (value + 8), weight_scale [N, G].
  enum class Int4Layout : uint8_t { Awq, Gptq, PackQuantized };
  Method method = Method::None;
  std::string source;        // "fp8", "compressed-tensors", "awq", "gptq" or "online" (what `pagoda info` prints)
  int64_t block_n = 0;       // weight_block_size / block_structure; 0 = none (per-tensor or channel)
  int64_t block_k = 0;
  Int4Layout int4_layout = Int4Layout::Gptq;
  int64_t group_size = 0;    // 4-bit: input columns per scale; 0 = the whole row (one group per channel)
  int32_t gptq_zero_offset = 1;  // GPTQ v1 checkpoints store each zero point minus one; v2 does not
  // modules_to_not_convert / ignore, as written (informational: such a module's tensor is stored
  // unquantized, and the tensor's dtype is what the projection goes by).
  std::vector<std::string> not_converted;
  bool online = false;       // quantize the dense checkpoint at load (--quantization fp8)

  bool fp8() const { return method == Method::Fp8; }
  bool int4() const { return method == Method::Int4; }
  // Whether online quantization leaves the projection whose weight is canonical tensor
  // `weight_name` unquantized (lm_head, MoE routers).
  bool keeps_dense(const std::string& weight_name) const;
  std::string describe() const;  // e.g. "fp8 (block 128×128, from the checkpoint)"
};

// Reads `quantization_config` of config.json (absent: none). Throws pagoda::Error naming the field
// for a method or scheme pagoda does not load (8-bit integer, AWQ's GEMV layout, asymmetric
// compressed-tensors 4-bit, ...).
WeightQuantization read_quantization_config(const nlohmann::json& config);

// vLLM's --quantization: "fp8" (online) or empty; anything else throws naming what is supported.
// A checkpoint that is quantized already keeps its own format (vLLM refuses a mismatch; so do we).
void apply_quantization_flag(const std::string& flag, WeightQuantization& q);

}  // namespace pagoda
