// `pagoda bench serve`'s HTTP side: one streaming OpenAI request (completions or chat) over
// cpp-httplib, its server-sent events read as they arrive and timed with steady_clock.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "bench/serve_stats.h"

namespace pagoda::bench {

// "http://host:port[/prefix]" split for httplib: the scheme, host and port, and a path prefix.
struct ServerUrl {
  std::string scheme_host_port;
  std::string path_prefix;  // "" or "/prefix" (no trailing '/')
};
ServerUrl parse_base_url(const std::string& base_url);

// Splits a byte stream into server-sent events' `data:` payloads, whatever the chunking.
class SseReader {
 public:
  void feed(std::string_view bytes, const std::function<void(std::string_view data)>& on_data);

 private:
  std::string pending_;
};

struct StreamCall {
  std::string path;     // "/v1/completions" or "/v1/chat/completions" (after the prefix)
  std::string body;     // the JSON request, with "stream": true
  bool chat = false;    // read choices[0].delta.content instead of choices[0].text
  std::string api_key;  // sent as "Authorization: Bearer KEY" when not empty
};

// Sends `call` and reads its stream to the end. `start` in the result is measured from `t0`;
// prompt_len is the server's usage.prompt_tokens (left as it was when the server gives none).
void stream_request(const ServerUrl& url, const StreamCall& call, std::chrono::steady_clock::time_point t0,
                    RequestResult& result);

// The text of GET `path` (e.g. "/metrics"), or nullopt when the server does not answer 200.
std::optional<std::string> http_get(const ServerUrl& url, const std::string& path, const std::string& api_key);
// POST `path` with no body: the status (0 when the server did not answer) and the text.
std::pair<int, std::string> http_post_empty(const ServerUrl& url, const std::string& path, const std::string& api_key);

}  // namespace pagoda::bench
