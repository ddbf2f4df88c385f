// Where a command's MODEL comes from: a directory, or a Hugging Face model id (org/name) found in
// the local Hugging Face cache or downloaded (io/hub.h), as vllm serve takes either.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace pagoda::cli {

struct ModelSourceFlags {
  std::string revision = "main";
  std::string download_dir;
  std::string hf_token;
};

// --revision, --download-dir and --hf-token (vLLM's names).
void add_model_source_flags(CLI::App* cmd, ModelSourceFlags& flags);

// The model directory for MODEL as given: an existing directory as it is; "org/name" that is not
// one from the Hub (the cache, else a download); empty: the default model shipped in models/.
std::string resolve_model(const std::string& given, const ModelSourceFlags& flags);

}  // namespace pagoda::cli
