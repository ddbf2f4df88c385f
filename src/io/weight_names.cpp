// Normalises the decoder prefixes of Qwen3 / Qwen3.5 checkpoints (docs/models.md, "Weight names").
#include "io/weight_names.h"

#include <string_view>

namespace pagoda {

namespace {

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// Vision tower (HF `visual`, MLX and Gemma 3 `vision_tower`), Gemma 3's multimodal projector and
// the multi-token-prediction head: pagoda serves text with the main decoder only.
bool is_skipped(std::string_view name) {
  for (std::string_view p : {"visual.", "mtp.", "vision_tower.", "multi_modal_projector.", "model.visual.",
                             "model.mtp.", "model.vision_tower.", "model.multi_modal_projector."}) {
    if (starts_with(name, p)) return true;
  }
  return false;
}

}  // namespace

std::optional<std::string> canonical_weight_name(const std::string& name) {
  // Multimodal HF saves nest the decoder as model.language_model.X (X = embed_tokens, layers, norm,
  // or visual/mtp parts); MLX saves wrap the text-only layout as language_model.<text-only name>.
  constexpr std::string_view kHf = "model.language_model.";
  constexpr std::string_view kMlx = "language_model.";
  std::string rest;
  if (starts_with(name, kHf)) {
    rest = "model." + name.substr(kHf.size());
    if (is_skipped(name.substr(kHf.size()))) return std::nullopt;
  } else if (starts_with(name, kMlx)) {
    rest = name.substr(kMlx.size());
  } else {
    rest = name;
  }
  if (is_skipped(rest)) return std::nullopt;
  return rest;
}

std::optional<std::string> canonical_mtp_name(const std::string& name) {
  for (std::string_view p : {"mtp.", "model.mtp.", "model.language_model.mtp.", "language_model.mtp.",
                             "language_model.model.mtp."}) {
    if (starts_with(name, p)) return "mtp." + name.substr(p.size());
  }
  return std::nullopt;
}

std::optional<std::string> canonical_vision_name(const std::string& name) {
  for (std::string_view p : {"model.visual.", "visual.", "model.language_model.visual."}) {
    if (starts_with(name, p)) return "model.visual." + name.substr(p.size());
  }
  return std::nullopt;
}

}  // namespace pagoda
