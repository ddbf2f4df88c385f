// The HTTP routes. Each parses its request, throws ApiError for anything wrong, and either fills
// a reply or one that drives a generation.
#pragma once

#include "server/http_message.h"
#include "server/server_context.h"

namespace pagoda::server {

HttpReply handle_completions(ServerContext& ctx, const HttpRequest& req);
HttpReply handle_chat_completions(ServerContext& ctx, const HttpRequest& req);
HttpReply handle_responses(ServerContext& ctx, const HttpRequest& req);
HttpReply handle_messages(ServerContext& ctx, const HttpRequest& req);
HttpReply handle_messages_count_tokens(ServerContext& ctx, const HttpRequest& req);
HttpReply handle_embeddings(ServerContext& ctx, const HttpRequest& req);
HttpReply handle_models(ServerContext& ctx, const HttpRequest& req);
HttpReply handle_tokenize(ServerContext& ctx, const HttpRequest& req);
HttpReply handle_detokenize(ServerContext& ctx, const HttpRequest& req);
HttpReply handle_metrics(ServerContext& ctx, const HttpRequest& req);
HttpReply handle_load_lora_adapter(ServerContext& ctx, const HttpRequest& req);
HttpReply handle_unload_lora_adapter(ServerContext& ctx, const HttpRequest& req);
HttpReply handle_start_profile(ServerContext& ctx, const HttpRequest& req);
HttpReply handle_stop_profile(ServerContext& ctx, const HttpRequest& req);

}  // namespace pagoda::server
