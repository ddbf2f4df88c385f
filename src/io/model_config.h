// The common core of a checkpoint's config.json + generation_config.json: what the engine, the KV
// cache and `pagoda info` need of any model. Every value is read from the files; nothing is
// hard-coded per model (docs/models.md). Each family parses its config (src/model/<family>.cpp, found
// through src/model/registry.h); config_reader.h has the shared readers.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/rope_params.h"
#include "io/quantization.h"

namespace pagoda {

enum class LayerKind { FullAttention, LinearAttention };  // linear = Gated DeltaNet

const char* layer_kind_name(LayerKind kind);

// Fields that only one family's model reads: that family's own struct, derived from this, parsed
// by the family (src/model/<family>.cpp) and reached with ModelConfig::family_fields_as.
struct FamilyFields {
  virtual ~FamilyFields() = default;
};

struct ModelConfig {
  std::string family;        // the family's name, e.g. Qwen3.5 (what `pagoda info` prints)
  std::string model_type;    // as written: qwen3, qwen3_5, qwen3_5_text
  std::string architecture;  // architectures[0], e.g. Qwen3ForCausalLM
  DType dtype = DType::BF16; // `dtype` / `torch_dtype` of the checkpoint
  WeightQuantization quantization;  // quantization_config, or --quantization fp8 applied at load

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;      // attention query heads
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 1e6;
  // RoPE scaling of the full-attention layers (rope_type linear, llama3, yarn): only the scaling
  // fields are set; rotary_dim and theta are the two fields here. Default: no scaling.
  RopeParams rope_scaling;
  double partial_rotary_factor = 1.0;  // Qwen3.5: 0.25
  int64_t rotary_dim = 0;              // head_dim * partial_rotary_factor
  int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  std::vector<LayerKind> layer_types;  // size num_layers
  // Sliding-window attention (Mistral, Gemma 3, Qwen2 with use_sliding_window): a query at position p
  // of a sliding layer sees keys (p - sliding_window, p]. sliding_layers has num_layers entries.
  int64_t sliding_window = 0;
  std::vector<bool> sliding_layers;

  // Gated DeltaNet layers (hybrid families such as Qwen3.5), zero for others; in the core because the
  // engine sizes the recurrent state from them.
  int64_t linear_num_key_heads = 0;    // Hk
  int64_t linear_num_value_heads = 0;  // Hv
  int64_t linear_key_head_dim = 0;     // dk
  int64_t linear_value_head_dim = 0;   // dv
  int64_t linear_conv_kernel_dim = 0;  // 4

  std::vector<int64_t> eos_token_ids;  // generation_config.json, then config.json; deduplicated
  // Sampling defaults the checkpoint recommends (generation_config.json), used for requests that
  // do not set them, as vLLM does with --generation-config auto.
  struct GenerationDefaults {
    std::optional<double> temperature, top_p, min_p, repetition_penalty;
    std::optional<int64_t> top_k;
  } generation_defaults;
  int64_t bos_token_id = -1;
  // Images in (a checkpoint with a vision tower: Qwen3.5's vision_config; docs/vision.md). Absent
  // (no images served) when image_token_id < 0.
  struct Vision {
    int64_t image_token_id = -1, vision_start_token_id = -1, vision_end_token_id = -1;
    int64_t spatial_merge_size = 0;  // merged tokens are spatial_merge_size² patches
    // Multimodal RoPE of the decoder: how many rotary pairs read the temporal, height and width
    // positions (rope_parameters.mrope_section), interleaved (t h w t h w ...) or in three runs.
    std::vector<int64_t> mrope_section;
    bool mrope_interleaved = false;
    bool present() const { return image_token_id >= 0; }
  } vision;
  std::shared_ptr<const FamilyFields> family_fields;  // null when the family has none

  // The family's own fields as `T`; null when absent or of another type.
  template <class T>
  const T* family_fields_as() const {
    return dynamic_cast<const T*>(family_fields.get());
  }

  int64_t num_layers_of(LayerKind kind) const;
  // KV cache bytes per token over all full-attention layers, for a cache of element type `kv`.
  int64_t kv_bytes_per_token(DType kv) const;
  // Recurrent state bytes per sequence over all GDN layers: the conv state, whose element type is
  // the backend's activation dtype (cpu F32, cuda BF16), plus the fp32 recurrent state (docs/models.md).
  int64_t state_bytes_per_sequence(DType conv_state_dtype, DType recurrent_state_dtype = DType::F32) const;
  // The same with the conv state in the checkpoint's dtype (what `pagoda info` reports before any
  // device is chosen).
  int64_t state_bytes_per_sequence() const { return state_bytes_per_sequence(dtype); }
  int64_t conv_dim() const;  // 2*Hk*dk + Hv*dv
};

}  // namespace pagoda
