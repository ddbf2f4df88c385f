#include "model/model.h"

#include "backend/fallback_backend.h"
#include "core/error.h"
#include "core/format.h"
#include "io/weight_names.h"
#include "model/moe_block.h"
#include "model/registry.h"
#include "model/weight_store.h"

namespace pagoda {

int Model::attention_index(int layer) const {
  return attention_index_.at(static_cast<size_t>(layer));
}

void check_weights_fit(const ModelConfig& config, const Checkpoint& ckpt, DType weight_dtype, int64_t device_bytes,
                       const std::string& device) {
  if (device_bytes <= 0) return;
  int64_t params = 0, bytes = 0;
  const WeightQuantization& q = config.quantization;
  for (const TensorView* t : ckpt.all()) {
    const auto name = canonical_weight_name(t->name);
    if (!name) continue;
    params += t->numel();
    // FP8 stays one byte; online FP8 makes a projection's matrix one byte (a lower bound: every
    // 2-D tensor but the embedding and lm_head is a projection).
    const bool fp8 = t->dtype == DType::F8_E4M3 ||
                     (q.online && t->shape.size() == 2 && !q.keeps_dense(*name) && name->find("embed") == std::string::npos);
    bytes += t->numel() * static_cast<int64_t>(fp8 ? 1 : dtype_size(weight_dtype));
  }
  if (bytes <= device_bytes) return;
  std::string what = format_count(params) + " parameters";
  if (moe_fields(config) != nullptr) {
    const bool gated = config.num_layers_of(LayerKind::LinearAttention) > 0;  // Qwen3.5's gated attention
    what += ", " + format_count(moe_parameter_counts(config, gated).active) + " active per token";
  }
  throw Error("the weights need " + format_bytes(bytes) + " as " + dtype_name(weight_dtype) + " (" + what +
              "), more than the " + format_bytes(device_bytes) + " of " + device +
              "; one device must hold them all (tensor parallelism is not implemented yet): use a smaller or "
              "quantised checkpoint, or --device cpu");
}

std::unique_ptr<Model> load_model(const ModelConfig& config, const Checkpoint& ckpt, Backend& backend,
                                  const ShardSpec& shard) {
  const DType wdtype =
      backend.device() == Device::CUDA ? backend.activation_dtype() : WeightStore::native_dtype(ckpt);
  check_weights_fit(config, ckpt, wdtype, backend.total_memory(), backend.name());
  const ModelFamily& family = model_family_of(config);
  std::unique_ptr<Model> model = family.make(config, ckpt, backend, shard);
  require_ops(backend, model->required_ops(), family.name);
  return model;
}

std::unique_ptr<Model> Model::load_mtp_head(const Checkpoint&) {
  throw Error("--speculative-config: method \"mtp\" needs a checkpoint with a multi-token-prediction head "
              "(mtp.*, e.g. Qwen3.5); " + config().architecture + " has none");
}

void Model::set_aux_hidden_layers(const std::vector<int>& layers) {
  if (layers.empty()) return;
  throw Error("--speculative-config: method \"eagle3\" needs the target's hidden states at three of its layers; "
              "pagoda exports them from dense decoders (Qwen3, Llama, Qwen2, Mistral, Gemma 3, Qwen3-MoE), not from " +
              config().architecture + " (use \"mtp\", \"ngram\" or a draft model)");
}

std::vector<Tensor> Model::aux_hidden(int32_t) const { return {}; }

std::unique_ptr<Model> load_model(const std::string& dir, Backend& backend) {
  const ModelConfig config = load_model_config(dir);
  const Checkpoint ckpt = Checkpoint::open_dir(dir);
  return load_model(config, ckpt, backend);
}

}  // namespace pagoda
