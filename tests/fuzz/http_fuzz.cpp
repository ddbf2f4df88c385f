// libFuzzer target: a whole raw HTTP request through what a connection does with it — Beast's
// parser with every limit, gzip/deflate decoding with its cap, the route table, the API-key check,
// and the JSON body parsed into the request of its route — must end in a request or an error reply,
// never a crash, a hang or unbounded memory.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "server/api_error.h"
#include "server/http_reader.h"
#include "server/messages_request.h"
#include "server/openai_request.h"
#include "server/responses_request.h"
#include "server/router.h"

namespace {

using namespace pagoda::server;

// The routes' own parsing, without an engine behind them.
void parse_body_of(const std::string& path, const std::string& body) {
  if (path == "/v1/completions") (void)parse_completion_request(parse_json_body(body));
  else if (path == "/v1/chat/completions") (void)parse_chat_request(parse_json_body(body));
  else if (path == "/v1/responses") (void)parse_responses_request(parse_json_body(body));
  else if (path == "/v1/messages") (void)parse_messages_request(parse_json_body(body));
  else if (path == "/v1/messages/count_tokens") (void)parse_messages_prompt(parse_json_body(body));
  else if (path == "/tokenize") (void)parse_tokenize_request(parse_json_body(body));
  else if (path == "/detokenize") (void)parse_detokenize_request(parse_json_body(body));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  HttpLimits limits;
  limits.max_body_bytes = 1 << 20;  // keeps inflation cheap; the logic is the same at 64 MiB
  limits.max_header_bytes = 16 << 10;
  limits.max_header_count = 64;
  limits.max_url_bytes = 2048;
  const std::string_view raw(reinterpret_cast<const char*>(data), size);
  HttpReply error;
  const auto req = parse_raw_request(raw, limits, error);
  if (!req) {
    if (error.status < 400) __builtin_trap();  // every failure is answered with an error status
    return 0;
  }
  HttpReply not_found;
  const Route* route = find_route(req->method, req->path, not_found);
  if (!route) {
    if (not_found.status != 404 && not_found.status != 405) __builtin_trap();
    return 0;
  }
  try {
    parse_body_of(req->path, req->body);
  } catch (const ApiError& e) {
    if (e.status < 400 || e.status > 599) __builtin_trap();
  } catch (const pagoda::Error&) {
  } catch (const std::exception&) {
    // The server answers these with a 500 (run_route); what the fuzzer looks for is memory errors,
    // undefined behaviour, hangs and unbounded memory, which no catch hides.
  }
  return 0;
}
