// Which runner `pagoda serve` is: generate (completions, chat) or pooling (/v1/embeddings), decided
// as vLLM decides it: `--runner pooling` (or the older `--task embed`, or `--convert embed`) asks
// for it; with `--runner auto` a sentence-transformers modules.json with a Pooling module selects it
// (Qwen3-Embedding's architecture is Qwen3ForCausalLM, so the architecture alone cannot).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "io/pooling_config.h"
#include "server/server_context.h"

namespace pagoda::server {

struct PoolingRunner {
  PoolingConfig pooling;
  int64_t hidden_size = 0;
};

// The pooling runner for options.model_dir, or null for the generate runner. Throws pagoda::Error
// for unknown --runner / --task / --convert values, contradicting ones, or a checkpoint whose
// pooling pagoda cannot apply.
std::shared_ptr<const PoolingRunner> resolve_runner(const ServerOptions& options, int64_t hidden_size);

// 400 "The model does not support <api>" (vLLM's words) when the server runs the pooling runner.
void require_generate_runner(const ServerContext& ctx, const std::string& api);

// The embedding head: the first `dimensions` values of the pooled hidden state (all when 0), then
// L2-normalised when `normalize` (vLLM: truncate, then normalise).
std::vector<float> embedding_head(const std::vector<float>& pooled, int64_t dimensions, bool normalize);

}  // namespace pagoda::server
