// `pagoda info [MODEL_DIR]`: what a checkpoint is, before anything is loaded onto a device.
#include <cstdio>
#include <map>
#include <string>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "core/format.h"
#include "io/model_config.h"
#include "model/registry.h"
#include "io/safetensors.h"
#include "io/weight_names.h"

#ifdef PAGODA_HAS_CUDA
#include "backend/cuda/cuda_device.h"
#endif

namespace pagoda::cli {
namespace {

// "linear_attention ×3, full_attention ×1, ..." run-length encoded in layer order.
std::string layer_pattern(const ModelConfig& cfg) {
  std::string out;
  for (size_t i = 0; i < cfg.layer_types.size();) {
    size_t j = i;
    while (j < cfg.layer_types.size() && cfg.layer_types[j] == cfg.layer_types[i]) ++j;
    if (!out.empty()) out += ", ";
    out += std::string(layer_kind_name(cfg.layer_types[i])) + " x" + std::to_string(j - i);
    i = j;
  }
  return out;
}

void print_info(const std::string& dir) {
  const ModelConfig cfg = load_model_config(dir);
  const Checkpoint ckpt = Checkpoint::open_dir(dir);

  int64_t params = 0, skipped = 0;
  std::map<std::string, int64_t> by_dtype;  // dtype -> parameter count
  for (const TensorView* t : ckpt.all()) {
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
  std::printf("layers             %lld: %s\n", static_cast<long long>(cfg.num_layers),
              layer_pattern(cfg).c_str());
  std::printf("hidden / mlp       %lld / %lld\n", static_cast<long long>(cfg.hidden_size),
              static_cast<long long>(cfg.intermediate_size));
  std::printf("attention          %lld heads, %lld kv heads, head_dim %lld, rotary_dim %lld, "
              "rope_theta %g\n",
              static_cast<long long>(cfg.num_heads), static_cast<long long>(cfg.num_kv_heads),
              static_cast<long long>(cfg.head_dim), static_cast<long long>(cfg.rotary_dim),
              cfg.rope_theta);
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
  std::printf("parameters         %lld (%s; %s)\n", static_cast<long long>(params),
              format_count(params).c_str(), dtypes.c_str());
  if (skipped > 0)
    std::printf("skipped            %lld (vision tower / MTP head, not served)\n",
                static_cast<long long>(skipped));
  std::printf("weights on disk    %s in %zu tensors\n", format_bytes(ckpt.total_bytes()).c_str(),
              ckpt.all().size());
  const int64_t kv = cfg.kv_bytes_per_token(cfg.dtype), state = cfg.state_bytes_per_sequence();
  std::printf("kv cache / token   %lld B (%s, %s)\n", static_cast<long long>(kv),
              format_bytes(kv).c_str(), dtype_name(cfg.dtype));
  std::printf("state / sequence   %lld B (%s)\n", static_cast<long long>(state),
              format_bytes(state).c_str());
  std::string eos;
  for (int64_t id : cfg.eos_token_ids) eos += (eos.empty() ? "" : " ") + std::to_string(id);
  std::printf("eos token ids      %s\n", eos.empty() ? "(none)" : eos.c_str());
#ifdef PAGODA_HAS_CUDA
  std::printf("cuda devices       %s", cuda::describe_devices().c_str());
#else
  std::printf("cuda devices       (built without CUDA)\n");
#endif
}

}  // namespace

void add_info_command(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("info", "Describe a checkpoint: architecture, layers, sizes");
  auto dir = std::make_shared<std::string>();
  cmd->add_option("model_dir", *dir,
                  "Checkpoint directory, config.json + *.safetensors (default: models/default)");
  cmd->add_option("--model", *dir, "Same as MODEL_DIR");
  cmd->callback([dir, exit_code] {
    print_info(resolve_model_dir(*dir));
    *exit_code = 0;
  });
}

}  // namespace pagoda::cli
