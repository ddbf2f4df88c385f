// The HTTP routes. Each parses its request, throws ApiError for anything wrong, and either fills
// the response or sets up a stream.
#pragma once

#include "server/server_context.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace pagoda::server {

void handle_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_chat_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_models(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_tokenize(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_detokenize(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_metrics(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);

}  // namespace pagoda::server
