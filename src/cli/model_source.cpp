#include "cli/model_source.h"

#include <filesystem>

#include "cli/engine_flags.h"
#include "io/hub.h"
#include "io/hub_cache.h"

namespace pagoda::cli {

void add_model_source_flags(CLI::App* cmd, ModelSourceFlags& f) {
  cmd->add_option("--revision", f.revision,
                  "With a Hugging Face model id: the branch, tag or commit hash to load")
      ->capture_default_str();
  cmd->add_option("--download-dir", f.download_dir,
                  "With a Hugging Face model id: look for it and download it here instead of the Hugging Face "
                  "cache (HF_HUB_CACHE, HF_HOME/hub or ~/.cache/huggingface/hub)");
  cmd->add_option("--hf-token", f.hf_token,
                  "With a Hugging Face model id: the token for a gated or private model (default: HF_TOKEN)");
}

std::string resolve_model(const std::string& given, const ModelSourceFlags& f) {
  // A directory wins over a Hub id of the same spelling, as in vLLM.
  if (given.empty() || std::filesystem::is_directory(given) || !hub::looks_like_repo_id(given))
    return resolve_model_dir(given);
  return hub::resolve_hub_model(given, hub::hub_options_from_env(f.revision, f.download_dir, f.hf_token)).string();
}

}  // namespace pagoda::cli
