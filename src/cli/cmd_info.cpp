// `pagoda info [MODEL_DIR]`: what a checkpoint is, before anything is loaded onto a device.
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "backend/devices.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/model_source.h"
#include "engine/engine_config.h"
#include "core/format.h"
#include "io/model_config.h"
#include "model/registry.h"
#include "io/safetensors.h"
#include "io/weight_names.h"

namespace pagoda::cli {
namespace {

bool sliding(const ModelConfig& cfg, size_t layer) {
  return layer < cfg.sliding_layers.size() && cfg.sliding_layers[layer] && cfg.sliding_window > 0;
}

// "linear_attention ×3, full_attention ×1, ..." run-length encoded in layer order.
std::string layer_pattern(const ModelConfig& cfg) {
  std::string out;
  for (size_t i = 0; i < cfg.layer_types.size();) {
    size_t j = i;
    while (j < cfg.layer_types.size() && cfg.layer_types[j] == cfg.layer_types[i] &&
           sliding(cfg, j) == sliding(cfg, i))
      ++j;
    if (!out.empty()) out += ", ";
    out += std::string(sliding(cfg, i) ? "sliding_attention" : layer_kind_name(cfg.layer_types[i])) +
           " x" + std::to_string(j - i);
    i = j;
  }
  return out;
}

// "yarn factor 4, original context 64, ..." or "" without scaling.
std::string rope_scaling_text(const RopeParams& r) {
  char buf[200];
  switch (r.scaling) {
    case RopeScaling::None:
      return "";
    case RopeScaling::Linear:
      std::snprintf(buf, sizeof buf, "linear, factor %g", r.factor);
      break;
    case RopeScaling::Llama3:
      std::snprintf(buf, sizeof buf, "llama3, factor %g, low/high freq factor %g/%g, original context %g",
                    r.factor, r.low_freq_factor, r.high_freq_factor, r.original_max_positions);
      break;
    case RopeScaling::Yarn:
      std::snprintf(buf, sizeof buf,
                    "yarn, factor %g, original context %g, beta fast/slow %g/%g%s, attention factor %.6g",
                    r.factor, r.original_max_positions, r.beta_fast, r.beta_slow,
                    r.truncate ? "" : " (not truncated)", static_cast<double>(r.attention_factor));
      break;
  }
  return buf;
}

// The checkpoint, or none when the directory holds config.json alone (a model's shape described
// before its weights are downloaded: `pagoda info` then reports what the config implies).
std::optional<Checkpoint> open_weights(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(fs::path(dir) / "model.safetensors", ec) &&
      !fs::exists(fs::path(dir) / "model.safetensors.index.json", ec))
    return std::nullopt;
  return Checkpoint::open_dir(dir);
}

void print_info(const std::string& dir, const EngineConfig& flags) {
  const ModelConfig cfg = load_model_config(dir);
  // As serve/generate/bench would run it with these flags (engine_config.h decides, once).
  const ResolvedEngineConfig rc = resolve_engine_config(flags, cfg);
  const std::optional<Checkpoint> ckpt = open_weights(dir);

  int64_t params = 0, skipped = 0;
  std::map<std::string, int64_t> by_dtype;  // dtype -> parameter count
  for (const TensorView* t : ckpt ? ckpt->all() : std::vector<const TensorView*>{}) {
    if (!canonical_weight_name(t->name)) {
      skipped += t->numel();
      continue;
    }
    params += t->numel();
    by_dtype[dtype_name(t->dtype)] += t->numel();
  }
  std::string dtypes;
  for (const auto& [name, n] : by_dtype) {
    if (!dtypes.empty()) dtypes += ", ";
    dtypes += name + " " + std::to_string(n);
  }

  std::printf("model dir          %s\n", dir.c_str());
  std::printf("architecture       %s (model_type %s, family %s)\n", cfg.architecture.c_str(),
              cfg.model_type.c_str(), cfg.family.c_str());
  std::printf("dtype              %s\n", dtype_name(cfg.dtype));
  if (cfg.quantization.method != WeightQuantization::Method::None) std::printf("quantization       %s\n", cfg.quantization.describe().c_str());
  std::printf("layers             %lld: %s\n", static_cast<long long>(cfg.num_layers),
              layer_pattern(cfg).c_str());
  if (cfg.intermediate_size > 0)
    std::printf("hidden / mlp       %lld / %lld\n", static_cast<long long>(cfg.hidden_size),
                static_cast<long long>(cfg.intermediate_size));
  else  // every MLP is a mixture of experts (Qwen3.5-MoE): the expert sizes follow
    std::printf("hidden             %lld (no dense MLP)\n", static_cast<long long>(cfg.hidden_size));
  std::printf("attention          %lld heads, %lld kv heads, head_dim %lld, rotary_dim %lld, "
              "rope_theta %g\n",
              static_cast<long long>(cfg.num_heads), static_cast<long long>(cfg.num_kv_heads),
              static_cast<long long>(cfg.head_dim), static_cast<long long>(cfg.rotary_dim),
              cfg.rope_theta);
  if (const std::string scaling = rope_scaling_text(cfg.rope_scaling); !scaling.empty())
    std::printf("rope scaling       %s\n", scaling.c_str());
  if (cfg.sliding_window > 0)
    std::printf("sliding window     %lld (a query attends to its last %lld positions)\n",
                static_cast<long long>(cfg.sliding_window), static_cast<long long>(cfg.sliding_window));
  // The family's own settings (rope scaling, sliding window, ...), as the family words them.
  if (const ModelFamily& family = model_family_of(cfg); family.describe != nullptr) {
    for (const auto& [label, value] : family.describe(cfg))
      std::printf("%-18s %s\n", label.c_str(), value.c_str());
  }
  if (cfg.num_layers_of(LayerKind::LinearAttention) > 0) {
    std::printf("gated deltanet     %lld key heads x dk %lld, %lld value heads x dv %lld, "
                "conv kernel %lld\n",
                static_cast<long long>(cfg.linear_num_key_heads),
                static_cast<long long>(cfg.linear_key_head_dim),
                static_cast<long long>(cfg.linear_num_value_heads),
                static_cast<long long>(cfg.linear_value_head_dim),
                static_cast<long long>(cfg.linear_conv_kernel_dim));
  }
  std::printf("vocab              %lld (%s embeddings)\n", static_cast<long long>(cfg.vocab_size),
              cfg.tie_word_embeddings ? "tied" : "untied");
  std::printf("max context        %lld\n", static_cast<long long>(cfg.max_position_embeddings));
  if (ckpt) {
    std::printf("parameters         %lld (%s; %s)\n", static_cast<long long>(params),
                format_count(params).c_str(), dtypes.c_str());
    if (skipped > 0)
      std::printf("skipped            %lld (vision tower / MTP head, not served)\n",
                  static_cast<long long>(skipped));
    std::printf("weights on disk    %s in %zu tensors\n", format_bytes(ckpt->total_bytes()).c_str(),
                ckpt->all().size());
  } else {
    std::printf("weights on disk    none (config.json only)\n");
  }
  std::printf("engine dtypes      on %s: dtype %s (activations %s), kv cache %s\n", rc.device.c_str(),
              torch_dtype_name(rc.model_dtype), torch_dtype_name(rc.activation_dtype),
              torch_dtype_name(rc.kv_cache_dtype));
  const int64_t kv = cfg.kv_bytes_per_token(rc.kv_cache_dtype), state = cfg.state_bytes_per_sequence();
  std::printf("kv cache / token   %lld B (%s, %s)\n", static_cast<long long>(kv),
              format_bytes(kv).c_str(), torch_dtype_name(rc.kv_cache_dtype));
  std::printf("state / sequence   %lld B (%s)\n", static_cast<long long>(state),
              format_bytes(state).c_str());
  std::string eos;
  for (int64_t id : cfg.eos_token_ids) eos += (eos.empty() ? "" : " ") + std::to_string(id);
  std::printf("eos token ids      %s\n", eos.empty() ? "(none)" : eos.c_str());
  std::printf("cuda devices       %s", describe_cuda_devices().c_str());
  std::printf("%s", describe_vulkan_devices("vulkan devices     ").c_str());
}

}  // namespace

void add_info_command(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("info", "Describe a checkpoint: architecture, layers, sizes");
  auto dir = std::make_shared<std::string>();
  auto flags = std::make_shared<EngineConfig>();
  auto source = std::make_shared<ModelSourceFlags>();
  cmd->add_option("model_dir", *dir,
                  "Checkpoint directory, config.json + *.safetensors, or a Hugging Face model id org/name "
                  "(default: models/default)");
  cmd->add_option("--model", *dir, "Same as MODEL_DIR");
  add_model_source_flags(cmd, *source);
  cmd->add_option("--device", flags->device, "Show the dtypes for this device: cpu, cuda or vulkan")->capture_default_str();
  cmd->add_option("--dtype", flags->dtype, "As serve's --dtype")->capture_default_str();
  cmd->add_option("--kv-cache-dtype", flags->kv_cache_dtype, "As serve's --kv-cache-dtype")->capture_default_str();
  cmd->callback([dir, flags, source, exit_code] {
    print_info(resolve_model(*dir, *source), *flags);
    *exit_code = 0;
  });
}

}  // namespace pagoda::cli
