// A model named by its Hugging Face id ("Qwen/Qwen3-0.6B"), as vLLM takes one: found in the local
// Hugging Face cache, else downloaded from the Hub (only the files pagoda loads) into that cache,
// so that the next start finds it without the network.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace pagoda::hub {

struct HubOptions {
  std::string revision = "main";     // a branch, a tag or a commit hash
  std::filesystem::path cache_root;  // where models--org--name/ lives (the cache, or --download-dir)
  std::string endpoint;              // e.g. https://huggingface.co, without a trailing '/'
  std::string token;                 // empty: no Authorization header
  bool offline = false;              // HF_HUB_OFFLINE: the cache only, never the network
};

// What the environment says, as huggingface_hub reads it: HF_ENDPOINT (default
// https://huggingface.co), HF_TOKEN or HUGGING_FACE_HUB_TOKEN (else the token file `hf auth login`
// writes, HF_TOKEN_PATH or HF_HOME/token), HF_HUB_OFFLINE (1/true/yes/on), and the cache root
// (default_cache_root()). `download_dir`, when not empty, takes the cache's place (vLLM's
// --download-dir); `token`, when not empty, wins over the environment's.
HubOptions hub_options_from_env(const std::string& revision, const std::string& download_dir,
                                const std::string& token);

// Whether pagoda loads a file of that name from a model repository: the configs, the tokenizer,
// the chat template and the safetensors weights (with their index).
bool is_model_file(const std::string& name);

// The directory holding `repo_id`'s files at `options.revision`: the cached snapshot when it is
// whole, else one downloaded now. Throws pagoda::Error saying what to do (a token for a gated
// model, a name or revision that does not exist, a URL that cannot be reached, an offline cache
// without the model).
std::filesystem::path resolve_hub_model(const std::string& repo_id, const HubOptions& options);

}  // namespace pagoda::hub
