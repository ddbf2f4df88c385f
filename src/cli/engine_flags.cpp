#include "cli/engine_flags.h"

#include <cctype>
#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "engine/generation_defaults.h"

namespace pagoda::cli {

void add_engine_flags(CLI::App* cmd, EngineFlags& f) {
  EngineConfig& c = f.config;
  cmd->add_option("--device", c.device, "cpu, cuda or vulkan[:N] (Vulkan device N, as `pagoda info` lists them)")->capture_default_str();
  cmd->add_option("--threads", c.num_threads, "CPU threads (0 = all cores)");
  cmd->add_option("--dtype", c.dtype,
                  "Model dtype: auto (cpu: the checkpoint's, computed in float32; cuda: bfloat16), bfloat16 "
                  "(cuda), or float32 (every op and the KV cache in fp32; on cuda slower; for token-exact "
                  "comparison with an fp32 reference)")
      ->capture_default_str();
  cmd->add_option("--max-num-seqs", c.max_num_seqs,
                  "Most sequences in one step (default: cpu 64, cuda 256)");
  cmd->add_option("--max-num-batched-tokens", c.max_num_batched_tokens,
                  "Token budget of one step; longer prompts are prefilled in chunks "
                  "(default: cpu 2048, cuda 8192)");
  cmd->add_option("--max-model-len", c.max_model_len,
                  "Longest prompt + output (default: the model's max_position_embeddings)");
  cmd->add_option("--block-size", c.block_size, "KV cache block size in tokens (8..128)")
      ->capture_default_str();
  cmd->add_option("--kv-cache-dtype", c.kv_cache_dtype, "auto (= the model dtype, see --dtype), bf16, fp16 or fp32")
      ->capture_default_str();
  cmd->add_option("--gpu-memory-utilization", c.gpu_memory_utilization,
                  "Fraction of GPU memory pagoda may use")
      ->capture_default_str();
  cmd->add_option("--kv-cache-memory", f.kv_cache_memory,
                  "KV cache size, e.g. 2GiB (default on the CPU: what max-num-seqs sequences of "
                  "max-model-len need, at most a quarter of free memory)");
  cmd->add_option("--num-gpu-blocks-override", c.num_gpu_blocks_override,
                  "Force a KV pool of N blocks (either device)");
  cmd->add_option("--engine-seed", c.seed, "Seed for requests that bring none");
  cmd->add_option("--tokenizer", c.tokenizer_dir,
                  "Directory with tokenizer.json (and the chat template) when not the model's own");
  // Accepted as vllm serve takes them; pagoda's behaviour is fixed (documented in the README).
  cmd->add_flag("--trust-remote-code")->description("No effect: pagoda runs no code from checkpoints");
  cmd->add_flag("--enable-chunked-prefill")->description("No effect: chunked prefill is always on");
  cmd->add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", c.enable_prefix_caching,
                "Reuse the KV blocks (and on hybrid models the recurrent state) of prompt prefixes "
                "seen before (default: on)");
  cmd->add_option("--state-snapshot-memory-fraction", c.state_snapshot_memory_fraction,
                  "Hybrid models with prefix caching: the share of the cache memory that holds "
                  "recurrent-state snapshots, the points a prefix hit can resume from")
      ->capture_default_str();
  cmd->add_option("--state-checkpoint-interval", c.state_checkpoint_interval,
                  "Hybrid models with prefix caching: also snapshot the state every N tokens of a long "
                  "prompt, a multiple of --block-size; 0 = only at a prompt's last full block (default: " +
                      std::to_string(kDefaultStateCheckpointInterval) + ")");
  cmd->add_option("--speculative-config", f.speculative_config,
                  "Speculative decoding as JSON, as vLLM takes it: "
                  "'{\"method\": \"ngram\", \"num_speculative_tokens\": 4, \"prompt_lookup_max\": 4}' "
                  "(docs/architecture.md, \"Speculative decoding\")");
  cmd->add_flag("--enforce-eager", c.enforce_eager,
                "cuda: run every step eagerly (no CUDA graphs for decode steps)");
}

EngineConfig engine_config_from(const EngineFlags& f) {
  EngineConfig c = f.config;
  if (!f.kv_cache_memory.empty())
    c.kv_cache_memory_bytes = parse_byte_size(f.kv_cache_memory, "--kv-cache-memory");
  c.speculative = parse_speculative_config(f.speculative_config);
  validate_engine_config(c);  // a bad flag fails here, before the model loads
  return c;
}

void add_sampling_flags(CLI::App* cmd, SamplingParams& p) {
  // The five values a checkpoint may recommend have no fixed default: generation_config.json's
  // value when the model has one (sampling_with_model_defaults), else the built-in one named here.
  cmd->add_option("--max-tokens", p.max_tokens,
                  "Most tokens to generate per request (default: " +
                      (p.max_tokens ? std::to_string(*p.max_tokens) : std::string("up to max-model-len")) + ")");
  cmd->add_option("--temperature", p.temperature,
                  "0 = greedy (default: the model's generation_config.json, else 1.0)");
  cmd->add_option("--top-p", p.top_p, "Nucleus sampling mass (default: generation_config.json, else 1.0)");
  cmd->add_option("--top-k", p.top_k,
                  "Keep the k most likely tokens, 0 = off (default: generation_config.json, else 0)");
  cmd->add_option("--min-p", p.min_p,
                  "Drop tokens below min_p x the top probability (default: generation_config.json, else 0)");
  cmd->add_option("--seed", p.seed, "Sampling seed");
  cmd->add_option("--presence-penalty", p.presence_penalty)->capture_default_str();
  cmd->add_option("--frequency-penalty", p.frequency_penalty)->capture_default_str();
  cmd->add_option("--repetition-penalty", p.repetition_penalty,
                  "Default: generation_config.json, else 1.0 (off)");
  cmd->add_option("--stop", p.stop, "Stop string (repeatable)");
  cmd->add_option("--stop-token-ids", p.stop_token_ids, "Token ids that stop generation");
  cmd->add_flag("--ignore-eos", p.ignore_eos, "Keep generating past end-of-sequence tokens");
}

std::string describe_sampling(const SamplingParams& p) {
  std::ostringstream s;
  s << "temperature " << p.temperature << ", top_p " << p.top_p << ", top_k " << p.top_k << ", min_p "
    << p.min_p << ", repetition_penalty " << p.repetition_penalty;
  if (p.max_tokens) s << ", max_tokens " << *p.max_tokens;
  if (p.seed) s << ", seed " << *p.seed;
  return s.str();
}

SamplingParams sampling_with_model_defaults(const CLI::App* cmd, SamplingParams flags,
                                            const ModelConfig& config) {
  const SamplingParams model = with_generation_defaults(flags, config);
  if (cmd->count("--temperature") == 0) flags.temperature = model.temperature;
  if (cmd->count("--top-p") == 0) flags.top_p = model.top_p;
  if (cmd->count("--top-k") == 0) flags.top_k = model.top_k;
  if (cmd->count("--min-p") == 0) flags.min_p = model.min_p;
  if (cmd->count("--repetition-penalty") == 0) flags.repetition_penalty = model.repetition_penalty;
  return flags;
}

int64_t parse_byte_size(const std::string& text, const std::string& flag) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  std::string unit = text.substr(i);
  double value = 0;
  try {
    value = std::stod(text.substr(0, i));
  } catch (const std::exception&) {
    throw Error(flag + " expects a size such as 4GiB, 512MiB or a number of bytes; got '" + text + "'");
  }
  for (char& ch : unit) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  double scale = 1;
  if (unit.empty() || unit == "b") scale = 1;
  else if (unit == "k" || unit == "kb") scale = 1e3;
  else if (unit == "m" || unit == "mb") scale = 1e6;
  else if (unit == "g" || unit == "gb") scale = 1e9;
  else if (unit == "kib") scale = 1024.0;
  else if (unit == "mib") scale = 1024.0 * 1024;
  else if (unit == "gib") scale = 1024.0 * 1024 * 1024;
  else throw Error(flag + ": unknown unit '" + unit + "' in '" + text + "' (use B, KiB, MiB, GiB, KB, MB, GB)");
  check(value > 0, flag + " must be positive, got '" + text + "'");
  return static_cast<int64_t>(value * scale);
}

std::string resolve_model_dir(const std::string& given) {
  if (!given.empty()) {
    check(std::filesystem::is_directory(given),
          "model directory '" + given + "' does not exist (expected config.json and *.safetensors in it)");
    return given;
  }
  // The model that ships with the project, found relative to the binary's source tree.
  for (const char* dir : {"models/default", PAGODA_SOURCE_DIR "/models/default"})
    if (std::filesystem::is_directory(dir)) return dir;
  throw Error("no MODEL_DIR given and no default model found in models/default; pass a checkpoint "
              "directory (config.json + *.safetensors)");
}

}  // namespace pagoda::cli
