#include "cli/engine_flags.h"

#include <cctype>
#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "backend/devices.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/generation_defaults.h"
#include "core/build_paths.h"

namespace pagoda::cli {

void add_engine_flags(CLI::App* cmd, EngineFlags& f) {
  EngineConfig& c = f.config;
  // As vLLM: the GPU when there is one. EngineConfig itself stays "cpu" (what the tests build).
  c.device = "auto";
  cmd->add_option("--device", c.device,
                  "auto (cuda when a CUDA GPU is visible, else cpu), cpu, cuda or vulkan[:N] (Vulkan device N, "
                  "as `pagoda info` lists them)")
      ->capture_default_str();
  cmd->add_option("--threads", c.num_threads, "CPU threads (0 = all cores)");
  cmd->add_option("--tensor-parallel-size", c.tensor_parallel_size,
                  "Ranks that split every layer's heads and columns (-tp; cpu: threads of this process, "
                  "docs/architecture.md \"Tensor parallelism\")")
      ->capture_default_str();
  cmd->add_option("--dtype", c.dtype,
                  "Model dtype: auto (cpu: the checkpoint's, computed in float32; cuda: bfloat16), bfloat16 "
                  "(cuda), or float32 (every op and the KV cache in fp32; on cuda slower; for token-exact "
                  "comparison with an fp32 reference)")
      ->capture_default_str();
  cmd->add_option("--max-num-seqs", c.max_num_seqs,
                  "Most sequences in one step (default: cpu 64, cuda 256)");
  // Lengths as vLLM takes them: 4096, 4k (4000), 4K (4096), 1M (1048576), 25.6k (25600).
  auto length = [](int32_t& out, const char* flag) {
    return [&out, flag](const std::string& v) {
      const int64_t n = parse_human_int(v, flag);
      if (n < 0 || n > INT32_MAX)
        throw CLI::ValidationError(flag, "must be a length from 0 to 2147483647, got '" + v + "'");
      out = static_cast<int32_t>(n);
    };
  };
  cmd->add_option_function<std::string>("--max-num-batched-tokens", length(c.max_num_batched_tokens, "--max-num-batched-tokens"),
                                        "Token budget of one step; longer prompts are prefilled in chunks "
                                        "(default: cpu 2048, cuda 8192; 8k, 8K as vLLM takes them)");
  cmd->add_option_function<std::string>(
      "--long-prefill-token-threshold", length(c.long_prefill_token_threshold, "--long-prefill-token-threshold"),
      "Most tokens of one prompt in a step (vLLM's flag; default 0: no limit but --max-num-batched-tokens): a "
      "long prompt is prefilled in chunks of this size, leaving the rest of each step to decodes and other prompts");
  cmd->add_option_function<std::string>("--max-model-len", length(c.max_model_len, "--max-model-len"),
                                        "Longest prompt + output (default: the model's max_position_embeddings); "
                                        "4096, 4k (= 4000), 4K (= 4096), 1M (= 1048576)");
  cmd->add_option("--block-size", c.block_size, "KV cache block size in tokens (8..128)")
      ->capture_default_str();
  cmd->add_option("--quantization,-q", c.quantization,
                  "fp8: quantize a bf16/fp16 checkpoint's projections to FP8 at load (per-channel scales, as vLLM's "
                  "online FP8; CUDA and CPU). A checkpoint with a quantization_config loads in its own format without it");
  cmd->add_option("--kv-cache-dtype", c.kv_cache_dtype, "auto (= the model dtype, see --dtype), bf16, fp16, fp32, or fp8 / fp8_e4m3 (cpu, cuda; scale 1)")
      ->capture_default_str();
  cmd->add_option("--mamba-ssm-cache-dtype", c.mamba_ssm_cache_dtype,
                  "Recurrent state of hybrid (Gated DeltaNet) models: auto (= float32), float32, or bfloat16 "
                  "(cuda: half the state's bytes per decode step)")
      ->capture_default_str();
  cmd->add_option("--gpu-memory-utilization", c.gpu_memory_utilization,
                  "Fraction of GPU memory pagoda may use")
      ->capture_default_str();
  cmd->add_option("--kv-cache-memory", f.kv_cache_memory,
                  "KV cache size, e.g. 2GiB (default on the CPU: what max-num-seqs sequences of "
                  "max-model-len need, at most a quarter of free memory)");
  cmd->add_option_function<std::string>(
      "--kv-cache-memory-bytes",
      [&c](const std::string& v) {
        const int64_t n = parse_human_int(v, "--kv-cache-memory-bytes");
        if (n <= 0) throw CLI::ValidationError("--kv-cache-memory-bytes", "must be positive, got '" + v + "'");
        c.kv_cache_memory_bytes = n;
      },
      "vLLM's form of --kv-cache-memory: bytes, or 8G (= 8 GiB), 500M, 8g (= 8e9)");
  cmd->add_option("--num-gpu-blocks-override", c.num_gpu_blocks_override,
                  "Force a KV pool of N blocks (either device)");
  cmd->add_option("--engine-seed", c.seed, "Seed for requests that bring none");
  cmd->add_option("--tokenizer", c.tokenizer_dir,
                  "Directory with tokenizer.json (and the chat template) when not the model's own");
  // Accepted as vllm serve takes them; pagoda's behaviour is fixed (documented in the README).
  cmd->add_flag("--trust-remote-code,!--no-trust-remote-code")
      ->description("No effect: pagoda runs no code from checkpoints");
  cmd->add_flag("--enable-chunked-prefill,!--no-enable-chunked-prefill")
      ->description("No effect: chunked prefill is always on");
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
  cmd->add_flag("--disable-custom-all-reduce", c.disable_custom_all_reduce,
                "cuda, --tensor-parallel-size > 1: every sum through NCCL (by default sums of up to 4 MiB go "
                "through the GPUs' peer memory in one kernel)");
  cmd->add_flag("--enable-expert-parallel", c.enable_expert_parallel,
                "--tensor-parallel-size > 1: place each MoE layer's experts whole, num_experts / N on each rank "
                "(vLLM's expert parallelism), instead of splitting every expert's columns over the ranks");
  cmd->add_option("--profile-steps", c.profile_steps,
                  "Time every N-th step op by op on the device (run eagerly) and print where the step time "
                  "goes, against the device's measured copy and GEMM rates, at the end (0 = off; "
                  "docs/performance.md, \"The step profiler\")")
      ->check(CLI::NonNegativeNumber);
}

void add_lora_flags(CLI::App* cmd, EngineFlags& f) {
  LoraConfig& l = f.config.lora;
  cmd->add_flag("--enable-lora", l.enabled, "Serve LoRA adapters over the base model (docs/lora.md)");
  cmd->add_option("--lora-modules", f.lora_modules,
                  "LoRA adapters (PEFT directories) a request names by its \"model\": name=path, or JSON "
                  "'{\"name\": ..., \"path\": ..., \"base_model_name\": ...}'; implies --enable-lora")
      ->expected(1, -1);
  cmd->add_option("--max-loras", l.max_loras,
                  "Device slots for adapters: the most one step serves; others are swapped in, least recently used out")
      ->capture_default_str();
  cmd->add_option("--max-lora-rank", l.max_lora_rank, "Highest adapter rank served (slots are this wide)")
      ->capture_default_str();
  cmd->add_option("--max-cpu-loras", l.max_cpu_loras,
                  "Adapters kept read in host memory (default and minimum --max-loras); others are read again from "
                  "their directory when needed");
}

void add_multimodal_flags(CLI::App* cmd, EngineFlags& f) {
  cmd->add_option("--limit-mm-per-prompt", f.limit_mm_per_prompt,
                  "Images one prompt may carry, as vLLM takes it: '{\"image\": N}' or image=N (default " +
                      std::to_string(MultimodalConfig{}.max_images_per_prompt) +
                      "); 0 serves a multimodal checkpoint as text only, without loading its vision tower");
}

namespace {

// --limit-mm-per-prompt: {"image": N, "video": 0} or image=N,video=0. Videos are not served.
int32_t parse_image_limit(const std::string& text) {
  std::vector<std::pair<std::string, int64_t>> items;
  if (!text.empty() && text.front() == '{') {
    const auto j = nlohmann::json::parse(text, nullptr, false);
    check(j.is_object(), "--limit-mm-per-prompt: '" + text + "' is not a JSON object such as '{\"image\": 4}'");
    for (const auto& [k, v] : j.items()) {
      // vLLM also takes {"image": {"count": N, ...}}.
      const auto& n = v.is_object() && v.contains("count") ? v["count"] : v;
      check(n.is_number_integer() && n.get<int64_t>() >= 0 && n.get<int64_t>() <= 1024,
            "--limit-mm-per-prompt: " + k + " must be a count from 0 to 1024");
      items.emplace_back(k, n.get<int64_t>());
    }
  } else {
    size_t at = 0;
    while (at < text.size()) {
      const size_t comma = std::min(text.find(',', at), text.size());
      const std::string item = text.substr(at, comma - at);
      const size_t eq = item.find('=');
      check(eq != std::string::npos, "--limit-mm-per-prompt: '" + text + "' is neither JSON nor image=N");
      int64_t n = -1;
      try {
        n = std::stoll(item.substr(eq + 1));
      } catch (const std::exception&) {
      }
      check(n >= 0 && n <= 1024, "--limit-mm-per-prompt: " + item.substr(0, eq) + " must be a count from 0 to 1024");
      items.emplace_back(item.substr(0, eq), n);
      at = comma + 1;
    }
  }
  int32_t images = MultimodalConfig{}.max_images_per_prompt;
  for (const auto& [k, n] : items) {
    if (k == "image") images = static_cast<int32_t>(n);
    else check(n == 0, "--limit-mm-per-prompt: pagoda serves images only; '" + k + "' must be 0 or left out");
  }
  return images;
}

// "name=path" or {"name": ..., "path": ..., "base_model_name": ...}.
LoraModule parse_lora_module(const std::string& text) {
  LoraModule m;
  if (!text.empty() && text.front() == '{') {
    const auto j = nlohmann::json::parse(text, nullptr, false);
    check(j.is_object() && j.contains("name") && j["name"].is_string() && j.contains("path") && j["path"].is_string(),
          "--lora-modules: '" + text + "' is neither name=path nor a JSON object with \"name\" and \"path\"");
    m.name = j["name"].get<std::string>();
    m.path = j["path"].get<std::string>();
    if (j.contains("base_model_name") && j["base_model_name"].is_string())
      m.base_model_name = j["base_model_name"].get<std::string>();
    return m;
  }
  const size_t eq = text.find('=');
  check(eq != std::string::npos && eq > 0 && eq + 1 < text.size(),
        "--lora-modules: '" + text + "' is not name=path (or vLLM's JSON form)");
  m.name = text.substr(0, eq);
  m.path = text.substr(eq + 1);
  return m;
}

}  // namespace

EngineConfig engine_config_from(const EngineFlags& f) {
  EngineConfig c = f.config;
  for (const std::string& m : f.lora_modules) c.lora.modules.push_back(parse_lora_module(m));
  if (!f.limit_mm_per_prompt.empty()) c.multimodal.max_images_per_prompt = parse_image_limit(f.limit_mm_per_prompt);
  if (!c.lora.modules.empty()) c.lora.enabled = true;
  if (c.device == "auto") {
    const int gpus = cuda_device_count();
    c.device = gpus > 0 ? "cuda" : "cpu";
    LOG_INFO("--device auto: " << c.device << " (" << gpus << " CUDA device" << (gpus == 1 ? "" : "s") << " visible)");
  }
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

int64_t parse_human_int(const std::string& given, const std::string& flag) {
  // vLLM's human_readable_int (vllm/engine/arg_utils.py): k, m, g are powers of 1000 and take a
  // decimal ("25.6k"); K, M, G are powers of 1024 and take whole numbers only.
  std::string text = given;
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.erase(0, 1);
  auto bad = [&](const std::string& why) {
    return CLI::ValidationError(flag, why + "; got '" + given + "' (use a number such as 4096, 4k = 4000, 4K = 4096, 1M)");
  };
  if (text.empty()) throw bad("expects a number");
  const char suffix = text.back();
  const std::string lower = "kmg", upper = "KMG";
  if (lower.find(suffix) != std::string::npos || upper.find(suffix) != std::string::npos) {
    const std::string number = text.substr(0, text.size() - 1);
    size_t dots = 0;
    bool digits_ok = !number.empty() && std::isdigit(static_cast<unsigned char>(number.front())) &&
                     std::isdigit(static_cast<unsigned char>(number.back()));
    for (char ch : number) {
      if (ch == '.') ++dots;
      else if (!std::isdigit(static_cast<unsigned char>(ch))) digits_ok = false;
    }
    if (!digits_ok || dots > 1) throw bad("expects a number before the '" + std::string(1, suffix) + "'");
    if (upper.find(suffix) != std::string::npos) {
      if (dots)
        throw CLI::ValidationError(flag, "decimals are not allowed with binary suffixes like " + std::string(1, suffix) +
                                             "; did you mean " + number + static_cast<char>(std::tolower(suffix)) + "?");
      const int shift = 10 * static_cast<int>(upper.find(suffix) + 1);
      const long double v = std::stold(number) * static_cast<long double>(int64_t{1} << shift);
      if (v > static_cast<long double>(INT64_MAX)) throw bad("is too large");
      return static_cast<int64_t>(v);
    }
    const long double scale = suffix == 'k' ? 1e3L : suffix == 'm' ? 1e6L : 1e9L;
    const long double v = std::stold(number) * scale;
    if (v > static_cast<long double>(INT64_MAX)) throw bad("is too large");
    return static_cast<int64_t>(v);
  }
  size_t i = (text[0] == '-' || text[0] == '+') ? 1 : 0;
  if (i == text.size()) throw bad("expects a number");
  for (size_t j = i; j < text.size(); ++j)
    if (!std::isdigit(static_cast<unsigned char>(text[j]))) throw bad("expects a whole number");
  try {
    return std::stoll(text);
  } catch (const std::out_of_range&) {
    throw bad("is too large");
  }
}

std::string resolve_model_dir(const std::string& given) {
  if (!given.empty()) {
    check(std::filesystem::is_directory(given),
          "model directory '" + given +
              "' does not exist (expected config.json and *.safetensors in it; a Hugging Face model id is "
              "written org/name)");
    return given;
  }
  // The model that ships with the project, found relative to the binary's source tree.
  for (const std::string& dir : {std::string("models/default"), std::string(PAGODA_SOURCE_DIR) + "/models/default"})
    if (std::filesystem::is_directory(dir)) return dir;
  throw Error("no MODEL_DIR given and no default model found in models/default; pass a checkpoint "
              "directory (config.json + *.safetensors)");
}

}  // namespace pagoda::cli
