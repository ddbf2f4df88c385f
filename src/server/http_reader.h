// One request read off a connection with every limit applied. Beast's parser bounds the header
// bytes and the body bytes whatever the framing (Content-Length or chunked); this adds the header
// count and URL length, and undoes gzip/deflate with a cap on the inflated size. Used by the
// connection coroutine and, on a whole raw request in memory, by the fuzzer and the tests.
#pragma once

#include <optional>
#include <string_view>

#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "server/http_message.h"
#include "server/server_context.h"

namespace pagoda::server {

using RequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

// Sets the parser's header and body limits.
void configure_parser(RequestParser& parser, const HttpLimits& limits);

// After the header is read: the error reply (414 URL too long, 431 too many headers, 413 a declared
// body over the limit, 501 an unknown Transfer-Encoding) or nullopt.
std::optional<HttpReply> check_header(const RequestParser& parser, const HttpLimits& limits);

// A parser error as the reply to send before closing: 431 header limit, 413 body limit, 400 otherwise.
HttpReply parse_error_reply(const boost::beast::error_code& ec);

// The request line and headers (no body yet): enough for routing and the API-key check.
HttpRequest request_head(const RequestParser& parser);

// Moves the body into `req`, decoding Content-Encoding gzip / deflate (x-gzip too) with the body
// limit applied to the inflated size. Throws ApiError: 413 past the limit, 415 an unknown
// encoding, 400 a corrupt stream.
void take_body(RequestParser& parser, HttpRequest& req, const HttpLimits& limits);

// A whole raw request in memory, through the same steps as a connection. Returns the request, or
// the error reply the connection would send.
std::optional<HttpRequest> parse_raw_request(std::string_view raw, const HttpLimits& limits, HttpReply& error);

}  // namespace pagoda::server
