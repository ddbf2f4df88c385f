// Command-line flags shared by the commands that run an engine (generate, serve, bench), named as
// vllm serve names them.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "engine/engine_config.h"
#include "io/model_config.h"
#include "engine/sampling_params.h"

namespace pagoda::cli {

struct EngineFlags {
  EngineConfig config;
  std::string kv_cache_memory;  // "4GiB", "512MiB", bytes
  std::string speculative_config;  // JSON, as vLLM's --speculative-config
  std::vector<std::string> lora_modules;  // --lora-modules entries: name=path, or vLLM's JSON form
  std::string limit_mm_per_prompt;        // --limit-mm-per-prompt: '{"image": N}' (vLLM's JSON) or image=N
};

void add_engine_flags(CLI::App* cmd, EngineFlags& flags);
// --enable-lora, --lora-modules, --max-loras, --max-lora-rank, --max-cpu-loras (serve: a request
// picks an adapter by its "model").
void add_lora_flags(CLI::App* cmd, EngineFlags& flags);
// --limit-mm-per-prompt (images per prompt; 0 serves a multimodal checkpoint as text only).
void add_multimodal_flags(CLI::App* cmd, EngineFlags& flags);
// Resolves parsed flags into the engine config (sizes with units); throws pagoda::Error.
EngineConfig engine_config_from(const EngineFlags& flags);

// --max-tokens, --temperature, --top-p, --top-k, --min-p, --seed, --ignore-eos, --stop, ... as
// defaults for every request of the command.
void add_sampling_flags(CLI::App* cmd, SamplingParams& params);

// "temperature 0.7, top_p 0.9, ..." of the values a command's requests will use.
std::string describe_sampling(const SamplingParams& params);

// The sampling values of `flags` with, for each of --temperature, --top-p, --top-k, --min-p and
// --repetition-penalty not given on the command line, the checkpoint's recommendation.
SamplingParams sampling_with_model_defaults(const CLI::App* cmd, SamplingParams flags,
                                            const ModelConfig& config);

// "4GiB" / "512MB" / "1073741824" -> bytes. Throws pagoda::Error naming the flag.
int64_t parse_byte_size(const std::string& text, const std::string& flag);

// A length as vLLM's human_readable_int reads it: "4096", "4k" (4000), "25.6k" (25600), "4K" (4096),
// "1M" (1048576), "1G"; a decimal with K/M/G is refused. Throws CLI::ValidationError naming `flag`
// (a usage error: exit 2).
int64_t parse_human_int(const std::string& text, const std::string& flag);

// MODEL_DIR as given, or the default model shipped in models/ when empty.
std::string resolve_model_dir(const std::string& given);

}  // namespace pagoda::cli
