// What the router does for Anthropic's clients: the key from x-api-key as well as from a bearer
// token, and errors in Anthropic's shape on /v1/messages (and what is under it) only.
#include <gtest/gtest.h>

#include "server/router.h"

namespace pagoda::server {
namespace {

HttpRequest with_headers(std::vector<std::pair<std::string, std::string>> headers) {
  HttpRequest r;
  r.method = "POST";
  r.path = "/v1/messages";
  r.headers = std::move(headers);
  return r;
}

TEST(MessagesRouter, ApiKeyFromBearerOrXApiKey) {
  EXPECT_EQ(request_api_key(with_headers({{"x-api-key", "k1"}})), std::optional<std::string_view>("k1"));
  EXPECT_EQ(request_api_key(with_headers({{"authorization", "Bearer k2"}})), std::optional<std::string_view>("k2"));
  // Both: the bearer token is the one checked (what an OpenAI client sends wins on every route).
  EXPECT_EQ(request_api_key(with_headers({{"authorization", "Bearer k2"}, {"x-api-key", "k1"}})),
            std::optional<std::string_view>("k2"));
  EXPECT_FALSE(request_api_key(with_headers({})).has_value());
  EXPECT_FALSE(request_api_key(with_headers({{"x-api-key", ""}})).has_value());
  EXPECT_FALSE(request_api_key(with_headers({{"authorization", "Basic abc"}})).has_value());
  // bearer_token itself still reads the Authorization header only.
  EXPECT_FALSE(bearer_token(with_headers({{"x-api-key", "k1"}})).has_value());
}

TEST(MessagesRouter, ErrorShapeByPath) {
  EXPECT_EQ(error_shape_for("/v1/messages"), ErrorShape::kAnthropic);
  EXPECT_EQ(error_shape_for("/v1/messages/count_tokens"), ErrorShape::kAnthropic);
  EXPECT_EQ(error_shape_for("/v1/messagesX"), ErrorShape::kOpenAI);
  EXPECT_EQ(error_shape_for("/v1/chat/completions"), ErrorShape::kOpenAI);
  EXPECT_EQ(error_shape_for("/v1/responses"), ErrorShape::kOpenAI);

  const HttpReply a = error_reply(unauthorized(), ErrorShape::kAnthropic);
  EXPECT_EQ(a.status, 401);
  const nlohmann::json body = nlohmann::json::parse(a.body);
  EXPECT_EQ(body["type"], "error");
  EXPECT_EQ(body["error"]["type"], "authentication_error");
  EXPECT_TRUE(body["error"]["message"].is_string());
  EXPECT_EQ(nlohmann::json::parse(error_reply(unauthorized()).body)["error"]["code"], "invalid_api_key");

  // 503 keeps its Retry-After in either shape.
  const HttpReply busy = error_reply(unavailable("busy"), ErrorShape::kAnthropic);
  EXPECT_EQ(nlohmann::json::parse(busy.body)["error"]["type"], "overloaded_error");
  bool retry_after = false;
  for (const auto& [k, v] : busy.headers) retry_after = retry_after || k == "Retry-After";
  EXPECT_TRUE(retry_after);
}

TEST(MessagesRouter, RoutesAndWrongMethod) {
  HttpReply error;
  const Route* r = find_route("POST", "/v1/messages", error);
  ASSERT_NE(r, nullptr);
  EXPECT_TRUE(r->json_body);
  EXPECT_FALSE(r->on_io_thread);
  ASSERT_NE(find_route("POST", "/v1/messages/count_tokens", error), nullptr);
  EXPECT_EQ(find_route("GET", "/v1/messages", error), nullptr);
  EXPECT_EQ(error.status, 405);
  EXPECT_EQ(nlohmann::json::parse(error.body)["error"]["type"], "invalid_request_error");
  EXPECT_EQ(nlohmann::json::parse(error.body)["type"], "error");
}

}  // namespace
}  // namespace pagoda::server
