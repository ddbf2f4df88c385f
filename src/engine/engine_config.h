// The engine's configuration: the flags as given (EngineConfig, vllm serve's names) and what they
// resolve to for one model on one device (ResolvedEngineConfig). Device, dtypes and sizes are
// decided here, once; the engine, /metrics, the startup log and `pagoda info` read the result.
//
// The dtype rules: backend/serving_dtypes.h (choose_dtypes), which the backend factory shares.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/serving_dtypes.h"  // parse_kv_cache_dtype, for the callers of this header
#include "core/dtype.h"
#include "engine/speculative_config.h"
#include "io/model_config.h"

namespace pagoda {

// Engine flags as the user gave them; 0 / "auto" mean "decide for me".
// LoRA adapters served over the base model (vLLM's flags; docs/lora.md).
struct LoraModule {
  std::string name;  // what a request's "model" names
  std::string path;  // a PEFT adapter directory
  std::string base_model_name;  // the JSON form's base_model_name (informative)
};
struct LoraConfig {
  bool enabled = false;             // --enable-lora
  std::vector<LoraModule> modules;  // --lora-modules
  int32_t max_loras = 1;            // --max-loras: device slots, the most adapters one step serves
  int32_t max_lora_rank = 16;       // --max-lora-rank
  int32_t max_cpu_loras = 0;        // --max-cpu-loras: adapters kept read on the host (0: max_loras)
  // POST /v1/load_lora_adapter and /v1/unload_lora_adapter (vLLM's VLLM_ALLOW_RUNTIME_LORA_UPDATING):
  // every decoder projection then carries adapter slots, whatever --lora-modules target.
  bool runtime_updates = false;
};

// Images in (vLLM's --limit-mm-per-prompt and encoder cache; docs/vision.md).
struct MultimodalConfig {
  int32_t max_images_per_prompt = 8;   // --limit-mm-per-prompt '{"image": N}'; 0: text only, no vision tower
  int64_t encoder_cache_tokens = 0;    // merged image tokens kept encoded; 0: max(16384, max_num_batched_tokens)
};

struct EngineConfig {
  std::string device = "cpu";          // cpu | cuda
  int32_t num_threads = 0;             // cpu threads; 0 = all cores
  std::string dtype = "auto";          // auto | bfloat16 | float32 (see the rules above)
  int32_t max_num_seqs = 0;            // 0 = default for the device (cpu 64, cuda 256)
  int32_t max_num_batched_tokens = 0;  // 0 = default for the device (cpu 2048, cuda 8192)
  int32_t long_prefill_token_threshold = 0;  // most tokens of one prompt in a step; 0 = no limit
  int32_t max_model_len = 0;           // 0 = the model's max_position_embeddings
  int32_t block_size = 16;
  std::string kv_cache_dtype = "auto";  // auto (= the model dtype) | bf16 | fp16 | fp32
  std::string quantization;             // --quantization: "" (the checkpoint's own) | fp8 (online)
  // Hybrid models' recurrent (SSM) state: auto (= float32) | float32 | bfloat16 (cuda only).
  std::string mamba_ssm_cache_dtype = "auto";
  double gpu_memory_utilization = 0.9;
  int64_t kv_cache_memory_bytes = 0;    // explicit KV budget; cpu default: see engine_core.cpp
  int64_t num_gpu_blocks_override = 0;  // force a pool of N blocks (either device)
  uint64_t seed = 0;
  bool enforce_eager = false;  // cuda: no CUDA graphs for decode steps (as vLLM's --enforce-eager)
  int32_t profile_steps = 0;   // --profile-steps N: every N-th step timed op by op (engine/step_profiler.h); 0 = off
  std::string tokenizer_dir;   // where tokenizer.json is (vLLM's --tokenizer); "" = the model directory
  bool enable_prefix_caching = true;            // vLLM's default
  double state_snapshot_memory_fraction = 0.1;  // hybrid models: share of the cache budget for snapshots
  int32_t state_checkpoint_interval = -1;       // tokens between snapshots of long prefills; -1 = default, 0 = off
  int prefix_cache_hash_bits = 64;              // test hook: < 64 truncates the block hashes
  SpeculativeConfig speculative;                // --speculative-config (parsed)
  LoraConfig lora;                              // --enable-lora, --lora-modules, --max-loras, --max-lora-rank
  MultimodalConfig multimodal;                  // --limit-mm-per-prompt
  int32_t tensor_parallel_size = 1;             // --tensor-parallel-size / -tp: ranks that split every layer
  bool disable_custom_all_reduce = false;       // cuda: every sum through NCCL (no peer-memory all-reduce)
  bool enable_expert_parallel = false;          // MoE experts whole per rank instead of split (tp > 1)
  // Data parallelism (serve's --data-parallel-size): this engine is replica `data_parallel_rank` of
  // `data_parallel_size`, on devices rank x tp .. rank x tp + tp - 1 (offset from vulkan:M); on the cpu
  // the replicas share the host's cores.
  int32_t data_parallel_rank = 0;
  int32_t data_parallel_size = 1;
  // Test double of the executor seam (engine/executor.h): N cpu workers, each with the whole model.
  int32_t replicated_workers = 1;
};

// The default --state-checkpoint-interval (tokens): see docs/benchmarks.md for the measurement.
inline constexpr int32_t kDefaultStateCheckpointInterval = 1024;

// Every value decided: no 0 or "auto" left.
struct ResolvedEngineConfig {
  std::string device;  // cpu | cuda
  int32_t num_threads = 0;
  std::string dtype_flag;  // --dtype as given (the backend factory takes it)
  DType activation_dtype = DType::F32;
  DType model_dtype = DType::F32;
  DType kv_cache_dtype = DType::F32;
  DType ssm_state_dtype = DType::F32;  // the GDN layers' recurrent state
  int32_t max_num_seqs = 0;
  int32_t max_num_batched_tokens = 0;
  int32_t long_prefill_token_threshold = 0;
  int32_t max_model_len = 0;
  int32_t block_size = 16;
  double gpu_memory_utilization = 0.9;
  int64_t kv_cache_memory_bytes = 0;
  int64_t num_gpu_blocks_override = 0;
  uint64_t seed = 0;
  bool enforce_eager = false;
  int32_t profile_steps = 0;
  std::string tokenizer_dir;
  bool enable_prefix_caching = true;
  double state_snapshot_memory_fraction = 0;  // 0 unless prefix caching is on for a hybrid model
  int32_t state_checkpoint_interval = 0;
  int prefix_cache_hash_bits = 64;
  SpeculativeConfig speculative;
  LoraConfig lora;
  // Images: the model has a vision tower and they are not turned off (max_images_per_prompt > 0).
  bool images = false;
  MultimodalConfig multimodal;
  int32_t tensor_parallel_size = 1;
  bool disable_custom_all_reduce = false;
  bool enable_expert_parallel = false;
  int32_t data_parallel_rank = 0;
  int32_t data_parallel_size = 1;
  int32_t replicated_workers = 1;

  // The device ordinal of worker `index`: past the devices of the data-parallel replicas before this one.
  int32_t device_ordinal(int32_t index) const { return data_parallel_rank * std::max(1, tensor_parallel_size) + index; }

  // "device cuda, dtype bfloat16 (activations bfloat16), kv cache bfloat16, max_model_len 4096,
  // max_num_seqs 256, max_num_batched_tokens 8192, block_size 16"
  std::string describe() const;
};

// The recurrent state dtype --mamba-ssm-cache-dtype asks for; throws pagoda::Error for a bad value.
DType ssm_state_dtype(const EngineConfig& flags);
// Checks what can be checked without the model (device, dtype names, ranges); throws
// pagoda::Error naming the flag. The CLI calls it before loading anything.
void validate_engine_config(const EngineConfig& flags);

// The flags resolved for `model`. Throws pagoda::Error for a bad flag or one the model cannot
// honour (--max-model-len past max_position_embeddings). Host logic only: no device is touched.
ResolvedEngineConfig resolve_engine_config(const EngineConfig& flags, const ModelConfig& model);

// vLLM's spelling of a dtype ("bfloat16", "float16", "float32"), as /metrics and logs show it.
const char* torch_dtype_name(DType t);

}  // namespace pagoda
