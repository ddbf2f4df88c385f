// What the HTTP routes share: the engine, the chat template, the metrics and the server options.
#pragma once

#include <string>
#include <vector>

#include "server/async_engine.h"
#include "server/chat_prompt.h"
#include "server/metrics.h"

namespace pagoda::server {

struct ServerOptions {
  std::string host = "0.0.0.0";
  int port = 8000;
  std::vector<std::string> served_model_names;  // the first is the one /v1/models lists
  std::string api_key;                          // "" = no authentication
  std::string model_dir;
  int http_threads = 512;                       // one per open connection (streams block theirs)
  bool reasoning_parser = true;  // <think>...</think> -> reasoning_content (when the vocab has them)
  bool tool_call_parser = true;  // <tool_call>...</tool_call> -> tool_calls (when tools are given)
};

struct ServerContext {
  AsyncEngine& engine;
  MetricsRegistry& metrics;
  const ChatPrompt* chat = nullptr;  // null: the model has no chat template
  ServerOptions options;
  SamplingParams sampling_defaults;  // for fields a request leaves out (generation_config.json)

  const std::string& model_name() const { return options.served_model_names.front(); }
};

}  // namespace pagoda::server
