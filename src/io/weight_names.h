// Maps the tensor names of the three Qwen3.5 layouts (and Qwen3's) to one canonical form:
//   model.embed_tokens.weight, model.layers.{i}.<...>, model.norm.weight, lm_head.weight
#pragma once

#include <optional>
#include <string>

namespace pagoda {

// The canonical name, or nullopt for tensors pagoda skips (model.visual.*, mtp.*, and their
// prefixed forms).
std::optional<std::string> canonical_weight_name(const std::string& name);

}  // namespace pagoda
