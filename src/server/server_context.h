// What the HTTP routes share: the engine, the chat template, the metrics and the server options.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "server/data_parallel_engine.h"
#include "server/chat_prompt.h"
#include "server/cors.h"
#include "server/metrics.h"

namespace pagoda::server {

// What one connection may send, checked while reading whatever the framing (Content-Length, chunked,
// gzip/deflate). Defaults follow vLLM (uvicorn/h11) and nginx; each is a `serve` flag.
struct HttpLimits {
  int64_t max_body_bytes = int64_t{64} << 20;  // after decoding; 413 beyond
  int64_t max_header_bytes = 64 << 10;         // request line + headers; 431 beyond
  int32_t max_header_count = 256;              // vLLM's --h11-max-header-count; 431 beyond
  int32_t max_url_bytes = 8 << 10;             // nginx's large_client_header_buffers; 414 beyond
  double request_timeout_s = 60;               // whole request (headers + body); 408 beyond (nginx)
  double keep_alive_timeout_s = 5;             // idle between requests (uvicorn's default)
  double write_timeout_s = 60;                 // one write to a client that does not read (nginx)
};

// What one request may ask for: its memory is bounded before anything is allocated for it.
struct RequestLimits {
  int32_t max_logprobs = 20;          // vLLM's --max-logprobs
  int32_t max_stop_strings = 64;      // OpenAI allows 4
  int64_t max_stop_bytes = 64 << 10;  // all stop strings together
  int32_t max_stop_token_ids = 1024;  // distinct ids; checked on each sampled token
  int32_t max_logit_bias = 300;       // entries, as OpenAI caps it; added to every logits row
  // Bytes of text one request may have tokenized (a prompt, a rendered chat, /tokenize): bounds the
  // tokenizer's time and memory whatever the body limit.
  int64_t max_tokenize_bytes = int64_t{8} << 20;
  // choices x max_tokens x (1 + logprobs): the tokens (and logprob entries) one request can make
  // the server produce and hold for its response.
  int64_t max_output_budget = int64_t{1} << 20;
  // Compiled grammars kept for reuse, all together: a large grammar's parser memos and mask caches
  // reach tens of MiB, and the least recently used go first past this.
  int64_t max_grammar_cache_bytes = int64_t{256} << 20;
};

struct ServerOptions {
  std::string host = "0.0.0.0";
  int port = 8000;
  std::vector<std::string> served_model_names;  // the first is the one /v1/models lists
  // Any of them opens the /v1 routes (vLLM's --api-key takes several); none = no authentication.
  std::vector<std::string> api_keys;
  std::string model_dir;
  int io_threads = 2;      // connections are coroutines on these threads (a few serve thousands)
  int worker_threads = 2;  // parse, template and tokenize requests off the I/O threads
  HttpLimits http;
  RequestLimits request;
  std::string root_path;                     // a prefix a proxy adds, removed before routing
  bool return_tokens_as_token_ids = false;   // logprobs tokens as "token_id:N" (vLLM's flag)
  bool enable_prompt_tokens_details = false; // usage.prompt_tokens_details (cached_tokens)
  // --scheduling-policy priority: requests' priority orders the waiting ones (lower first); fcfs
  // (the default) refuses a non-zero priority, as vLLM does.
  bool priority_scheduling = false;
  bool reasoning_parser = true;  // <think>...</think> -> reasoning_content (when the vocab has them)
  bool tool_call_parser = true;  // tool calls -> tool_calls (when tools are given)
  // --tool-call-parser: "auto" (from the vocabulary: <tool_call> hermes, [TOOL_CALLS] mistral,
  // <|python_tag|> llama3_json, Gemma's <start_of_turn> pythonic) or a name tool_call_format_named knows.
  std::string tool_call_format = "auto";
  // vLLM's --runner / --task / --convert (server/pooling_runner.h decides from them and the model).
  std::string runner = "auto";
  std::string task = "auto";
  std::string convert = "auto";
  CorsOptions cors;  // --allowed-origins, --allowed-methods, --allowed-headers, --allow-credentials
  // One line per answered request, as uvicorn writes it for vLLM (--disable-uvicorn-access-log
  // turns it off; --disable-access-log-for-endpoints leaves out the paths named).
  bool access_log = true;
  std::vector<std::string> access_log_skip_paths;
  // Where image URLs may be read from: --allowed-local-media-path, --allowed-media-domains.
  std::string allowed_local_media_path;
  std::vector<std::string> allowed_media_domains;
  // Per image (docs/vision.md): encoded bytes (--max-image-bytes) and width x height
  // (--max-image-pixels), checked before any pixel memory is allocated; 0 = the defaults.
  int64_t max_image_bytes = 0;
  int64_t max_image_pixels = 0;
};

struct PoolingRunner;
class ImageLoader;

struct ServerContext {
  DataParallelEngine& engine;  // one replica, or --data-parallel-size of them
  MetricsRegistry& metrics;
  const ChatPrompt* chat = nullptr;  // null: the model has no chat template
  ServerOptions options;
  SamplingParams sampling_defaults;  // for fields a request leaves out (generation_config.json)
  // Set (by HttpServer, from the options and the model) when the server is an embedding server.
  std::shared_ptr<const PoolingRunner> pooling;
  // Images in chat requests (server/image_inputs.h); null when the model takes none.
  std::shared_ptr<const ImageLoader> images;

  const std::string& model_name() const { return options.served_model_names.front(); }
};

}  // namespace pagoda::server
