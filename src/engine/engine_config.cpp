#include "engine/engine_config.h"

#include <algorithm>
#include <sstream>

#include "core/error.h"

namespace pagoda {

const char* torch_dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "float32";
    case DType::F16: return "float16";
    case DType::BF16: return "bfloat16";
    case DType::I32: return "int32";
    case DType::I64: return "int64";
    case DType::F8_E4M3: return "float8_e4m3fn";
  }
  return "?";
}

// The recurrent state of the GDN layers is fp32 unless asked otherwise: it is carried across every
// token of a sequence, and the exact comparisons with the references are made with it. bf16 halves
// the bytes a decode step reads and writes for it (vLLM's --mamba-ssm-cache-dtype); only the CUDA
// kernels take it.
DType ssm_state_dtype(const EngineConfig& c) {
  const std::string& v = c.mamba_ssm_cache_dtype;
  if (v == "auto" || v == "float32" || v == "fp32") return DType::F32;
  if (v == "bfloat16" || v == "bf16") {
    check(c.device == "cuda", "--mamba-ssm-cache-dtype bfloat16 is supported on cuda only (the " + c.device +
                                  " backend keeps the recurrent state in float32); drop the flag or use --device cuda");
    return DType::BF16;
  }
  throw Error("--mamba-ssm-cache-dtype must be auto, float32 or bfloat16, got '" + v + "'" +
              (v == "float16" || v == "fp16" ? " (pagoda keeps a bf16 state, not fp16: use bfloat16)" : ""));
}

void validate_engine_config(const EngineConfig& c) {
  check(c.device == "cpu" || c.device == "cuda" || c.device == "vulkan" || c.device.rfind("vulkan:", 0) == 0,
        "--device must be cpu, cuda or vulkan[:N], got '" + c.device + "'");
  choose_dtypes(c.device, c.dtype, c.kv_cache_dtype, DType::F32);  // throws for a bad --dtype or --kv-cache-dtype
  const LoraConfig& l = c.lora;
  check(l.max_loras >= 1, "--max-loras must be >= 1, got " + std::to_string(l.max_loras));
  check(l.max_lora_rank >= 1 && l.max_lora_rank <= 512,
        "--max-lora-rank must be in [1, 512], got " + std::to_string(l.max_lora_rank));
  check(l.max_cpu_loras == 0 || l.max_cpu_loras >= l.max_loras,
        "--max-cpu-loras " + std::to_string(l.max_cpu_loras) + " is below --max-loras " + std::to_string(l.max_loras) +
            ": the host keeps at least the adapters on the device");
  for (size_t i = 0; i < l.modules.size(); ++i) {
    check(!l.modules[i].name.empty() && !l.modules[i].path.empty(), "--lora-modules: an entry needs a name and a path");
    for (size_t j = 0; j < i; ++j)
      check(l.modules[i].name != l.modules[j].name, "--lora-modules names '" + l.modules[i].name + "' twice");
  }
  const int32_t tp = c.tensor_parallel_size;
  check(tp >= 1 && tp <= 64, "--tensor-parallel-size must be in [1, 64], got " + std::to_string(tp));
  check(tp == 1 || c.device == "cpu" || c.device == "cuda",
        "--tensor-parallel-size " + std::to_string(tp) + " on --device " + c.device +
            ": tensor parallelism runs on the cpu and on cuda (NCCL); use --tensor-parallel-size 1");
  check(tp == 1 || c.replicated_workers == 1, "replicated workers and tensor parallelism do not combine");
  const int32_t dp = c.data_parallel_size;
  check(dp >= 1 && dp <= 64, "--data-parallel-size must be in [1, 64], got " + std::to_string(dp));
  check(c.data_parallel_rank >= 0 && c.data_parallel_rank < dp,
        "data parallel rank " + std::to_string(c.data_parallel_rank) + " is outside [0, " + std::to_string(dp) + ")");
  check(c.gpu_memory_utilization > 0 && c.gpu_memory_utilization <= 1,
        "--gpu-memory-utilization must be in (0, 1]");
  check(c.max_num_seqs >= 0 && c.max_num_batched_tokens >= 0 && c.max_model_len >= 0 &&
            c.num_gpu_blocks_override >= 0 && c.num_threads >= 0 && c.kv_cache_memory_bytes >= 0,
        "engine sizes (--max-num-seqs, --max-num-batched-tokens, --max-model-len, "
        "--num-gpu-blocks-override, --threads, --kv-cache-memory) cannot be negative");
  const int32_t bs = c.block_size;
  check(bs >= 8 && bs <= 128 && (bs & (bs - 1)) == 0,
        "--block-size must be a power of two from 8 to 128, got " + std::to_string(bs));
  check(c.state_snapshot_memory_fraction >= 0 && c.state_snapshot_memory_fraction < 1,
        "--state-snapshot-memory-fraction must be in [0, 1), got " + std::to_string(c.state_snapshot_memory_fraction));
  check(c.state_checkpoint_interval == -1 || (c.state_checkpoint_interval >= 0 && c.state_checkpoint_interval % bs == 0),
        "--state-checkpoint-interval must be 0 (off) or a multiple of --block-size (" + std::to_string(bs) +
            "), got " + std::to_string(c.state_checkpoint_interval));
  ssm_state_dtype(c);  // throws for a bad --mamba-ssm-cache-dtype
  check(c.prefix_cache_hash_bits >= 1 && c.prefix_cache_hash_bits <= 64, "prefix cache hash bits must be in [1, 64]");
}

ResolvedEngineConfig resolve_engine_config(const EngineConfig& c, const ModelConfig& model) {
  validate_engine_config(c);
  ResolvedEngineConfig r;
  r.device = c.device;
  r.num_threads = c.num_threads;
  r.dtype_flag = c.dtype;
  const bool cpu = c.device == "cpu";

  const ServingDtypes dtypes = choose_dtypes(c.device, c.dtype, c.kv_cache_dtype, model.dtype);
  r.activation_dtype = dtypes.activation;
  r.model_dtype = dtypes.model;
  r.kv_cache_dtype = dtypes.kv_cache;
  r.ssm_state_dtype = ssm_state_dtype(c);

  r.max_num_seqs = c.max_num_seqs > 0 ? c.max_num_seqs : (cpu ? 64 : 256);
  r.max_num_batched_tokens = c.max_num_batched_tokens > 0 ? c.max_num_batched_tokens : (cpu ? 2048 : 8192);
  r.max_num_batched_tokens = std::max(r.max_num_batched_tokens, r.max_num_seqs);
  check(c.long_prefill_token_threshold >= 0, "--long-prefill-token-threshold must be 0 (no limit) or more");
  r.long_prefill_token_threshold = c.long_prefill_token_threshold;
  r.max_model_len = c.max_model_len > 0 ? c.max_model_len : static_cast<int32_t>(model.max_position_embeddings);
  check(r.max_model_len > 0, "the model's config has no max_position_embeddings; pass --max-model-len");
  check(r.max_model_len <= model.max_position_embeddings,
        "--max-model-len " + std::to_string(r.max_model_len) + " is longer than the model's max_position_embeddings (" +
            std::to_string(model.max_position_embeddings) + ")");
  r.block_size = c.block_size;
  r.gpu_memory_utilization = c.gpu_memory_utilization;
  r.kv_cache_memory_bytes = c.kv_cache_memory_bytes;
  r.num_gpu_blocks_override = c.num_gpu_blocks_override;
  r.seed = c.seed;
  r.enforce_eager = c.enforce_eager;
  r.disable_custom_all_reduce = c.disable_custom_all_reduce;
  r.enable_expert_parallel = c.enable_expert_parallel;
  check(c.profile_steps >= 0, "--profile-steps must be 0 (off) or a positive step interval, got " +
                                  std::to_string(c.profile_steps));
  r.profile_steps = c.profile_steps;
  r.tokenizer_dir = c.tokenizer_dir;
  r.enable_prefix_caching = c.enable_prefix_caching;
  const bool hybrid = model.num_layers_of(LayerKind::LinearAttention) > 0;
  if (r.enable_prefix_caching && hybrid) {
    r.state_snapshot_memory_fraction = c.state_snapshot_memory_fraction;
    r.state_checkpoint_interval = c.state_checkpoint_interval >= 0 ? c.state_checkpoint_interval
                                                                   : kDefaultStateCheckpointInterval;
  }
  r.prefix_cache_hash_bits = c.prefix_cache_hash_bits;
  r.speculative = c.speculative;
  r.lora = c.lora;
  r.multimodal = c.multimodal;
  check(c.multimodal.max_images_per_prompt >= 0 && c.multimodal.encoder_cache_tokens >= 0,
        "--limit-mm-per-prompt: the image count must be 0 or more");
  r.images = model.vision.present() && c.multimodal.max_images_per_prompt > 0;
  if (r.multimodal.encoder_cache_tokens == 0)
    r.multimodal.encoder_cache_tokens = std::max<int64_t>(16384, r.max_num_batched_tokens);
  r.tensor_parallel_size = c.tensor_parallel_size;
  r.data_parallel_rank = c.data_parallel_rank;
  r.data_parallel_size = c.data_parallel_size;
  r.replicated_workers = c.replicated_workers;
  return r;
}

std::string ResolvedEngineConfig::describe() const {
  std::ostringstream s;
  s << "device " << device << ", dtype " << torch_dtype_name(model_dtype) << " (activations "
    << torch_dtype_name(activation_dtype) << "), kv cache " << torch_dtype_name(kv_cache_dtype)
    << ", max_model_len " << max_model_len << ", max_num_seqs " << max_num_seqs << ", max_num_batched_tokens "
    << max_num_batched_tokens << ", block_size " << block_size << ", prefix caching "
    << (enable_prefix_caching ? "on" : "off");
  if (long_prefill_token_threshold > 0) s << ", long_prefill_token_threshold " << long_prefill_token_threshold;
  if (ssm_state_dtype != DType::F32) s << ", recurrent state " << torch_dtype_name(ssm_state_dtype);
  if (enable_prefix_caching && state_snapshot_memory_fraction > 0)
    s << " (state snapshots: " << state_snapshot_memory_fraction << " of the cache memory, every "
      << state_checkpoint_interval << " tokens of long prefills)";
  if (speculative.enabled()) s << ", speculative decoding " << speculative.describe();
  if (tensor_parallel_size > 1) s << ", tensor parallel size " << tensor_parallel_size;
  if (data_parallel_size > 1) s << ", data parallel rank " << data_parallel_rank << " of " << data_parallel_size;
  return s.str();
}

}  // namespace pagoda
