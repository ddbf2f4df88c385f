// What the routes see of HTTP: a request already read and checked against every limit, and the
// reply they give — a whole body now, or a generation that the connection drives to its end. The
// routes never see sockets or the HTTP library, so they run on any thread and in the fuzzer.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/async_engine.h"

namespace pagoda::server {

class GrammarCompile;

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent: path and query
  std::string path;    // target without the query
  unsigned version = 11;  // 10 = HTTP/1.0: no chunked replies, no 1xx
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;    // decoded (Content-Encoding undone)

  // The first header of that (lower-case) name, or "".
  std::string_view header(std::string_view name) const {
    for (const auto& [k, v] : headers)
      if (k == name) return v;
    return {};
  }
};

// A generation whose outputs become the response. The connection takes outputs from the channel as
// the engine produces them (never blocking a thread), and cancels the generation when the client
// goes away, streaming or not.
struct GenerationReply {
  std::shared_ptr<GenerationChannel> channel;
  bool stream = false;
  // stream: outputs -> server-sent events; on_end -> the last events before "data: [DONE]".
  // done_marker false: no "data: [DONE]" (the Responses API ends with its own final event).
  bool done_marker = true;
  // The shape of an error the generation ends with (a stream's last event, or a whole reply).
  ErrorShape error_shape = ErrorShape::kOpenAI;
  std::function<std::string(std::vector<ChoiceOutput>&)> on_events;
  std::function<std::string()> on_end;
  // whole: each output as it comes, then the body once every choice has finished.
  std::function<void(ChoiceOutput&)> on_output;
  std::function<nlohmann::ordered_json()> finish;
};

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers (Retry-After, ...)
  std::shared_ptr<GenerationReply> generation;               // set: drive it instead of `body`
  bool close = false;  // close the connection after this reply (the request was not fully read)
  // Set: the request needs a grammar still compiling on the grammar pool; the connection waits for
  // it (no thread does) and runs the route again (server/structured_output.h).
  std::shared_ptr<GrammarCompile> compile;
};

HttpReply json_reply(const nlohmann::ordered_json& body, int status = 200);
HttpReply text_reply(std::string body, std::string content_type, int status = 200);

}  // namespace pagoda::server
