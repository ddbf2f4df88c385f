// Maps the tensor names of the three Qwen3.5 layouts (and Qwen3's) to one canonical form:
//   model.embed_tokens.weight, model.layers.{i}.<...>, model.norm.weight, lm_head.weight
#pragma once

#include <optional>
#include <string>

namespace pagoda {

// The canonical name, or nullopt for tensors pagoda skips (model.visual.*, mtp.*, and their
// prefixed forms).
std::optional<std::string> canonical_weight_name(const std::string& name);
// The multi-token-prediction head's tensors (Qwen3.5's `mtp.*`, also under model. /
// model.language_model. / language_model.) as "mtp.<rest>"; nullopt for every other tensor.
std::optional<std::string> canonical_mtp_name(const std::string& name);
// The vision tower's tensors (HF's model.visual.*, also visual.* and model.language_model.visual.*)
// as "model.visual.<rest>" (docs/vision.md); nullopt for every other tensor.
std::optional<std::string> canonical_vision_name(const std::string& name);

}  // namespace pagoda
