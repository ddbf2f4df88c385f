#include "server/http_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>

#include <boost/asio/buffer.hpp>

#include "server/api_error.h"
#include "server/router.h"

namespace pagoda::server {

namespace http = boost::beast::http;

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

HttpReply closing(const ApiError& e) {
  HttpReply r = error_reply(e);
  r.close = true;
  return r;
}

// gzip and zlib-wrapped deflate (what "deflate" means in HTTP), raw deflate as some clients send
// it; the output stops at `limit` bytes.
std::string inflate_capped(const std::string& in, bool raw, int64_t limit) {
  z_stream zs{};
  // 15 + 32: zlib or gzip header, detected; -15: no header at all.
  if (inflateInit2(&zs, raw ? -15 : 15 + 32) != Z_OK) throw internal_error("zlib: inflateInit2 failed");
  std::string out;
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  const auto gzip_magic = [&zs] {
    return zs.avail_in >= 2 && zs.next_in[0] == 0x1f && zs.next_in[1] == 0x8b;
  };
  const bool gzip = !raw && gzip_magic();
  int rc = Z_OK;
  char chunk[64 << 10];
  for (;;) {
    if (rc == Z_STREAM_END) {
      if (zs.avail_in == 0) break;
      // A gzip body may be several members back to back (RFC 1952 §2.2, what `cat a.gz b.gz` makes):
      // each is inflated in turn. Anything else after the end is not part of the stream.
      if (!gzip || !gzip_magic()) {
        inflateEnd(&zs);
        throw ApiError(400, "the request body has data after the end of its compressed stream",
                       "invalid_request_error");
      }
      inflateReset(&zs);
    }
    zs.next_out = reinterpret_cast<Bytef*>(chunk);
    zs.avail_out = sizeof chunk;
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&zs);
      throw ApiError(400, "the request body is not a valid compressed stream", "invalid_request_error");
    }
    const size_t produced = sizeof chunk - zs.avail_out;
    if (static_cast<int64_t>(out.size() + produced) > limit) {
      inflateEnd(&zs);
      throw ApiError(413, "the request body inflates to more than " + std::to_string(limit) +
                              " bytes (--max-body-bytes)", "invalid_request_error");
    }
    out.append(chunk, produced);
    if (rc == Z_OK && produced == 0 && zs.avail_in == 0) {  // truncated input
      inflateEnd(&zs);
      throw ApiError(400, "the request body's compressed stream is truncated", "invalid_request_error");
    }
  }
  inflateEnd(&zs);
  return out;
}

}  // namespace

void configure_parser(RequestParser& parser, const HttpLimits& limits) {
  parser.header_limit(static_cast<std::uint32_t>(std::min<int64_t>(limits.max_header_bytes, UINT32_MAX)));
  parser.body_limit(static_cast<std::uint64_t>(limits.max_body_bytes));
}

std::optional<HttpReply> check_header(const RequestParser& parser, const HttpLimits& limits) {
  const auto& msg = parser.get();
  if (static_cast<int64_t>(msg.target().size()) > limits.max_url_bytes)
    return closing(ApiError(414, "the URL is longer than " + std::to_string(limits.max_url_bytes) + " bytes",
                            "invalid_request_error"));
  const auto count = std::distance(msg.begin(), msg.end());
  if (count > limits.max_header_count)
    return closing(ApiError(431, "the request has " + std::to_string(count) + " headers; at most " +
                                     std::to_string(limits.max_header_count) + " are allowed",
                            "invalid_request_error"));
  if (const auto len = parser.content_length(); len && static_cast<int64_t>(*len) > limits.max_body_bytes)
    return closing(ApiError(413, "the request body is larger than " + std::to_string(limits.max_body_bytes) +
                                     " bytes (--max-body-bytes)", "invalid_request_error"));
  return std::nullopt;
}

HttpReply parse_error_reply(const boost::beast::error_code& ec) {
  if (ec == http::error::header_limit)
    return closing(ApiError(431, "the request headers are too large", "invalid_request_error"));
  if (ec == http::error::body_limit)
    return closing(ApiError(413, "the request body is too large (--max-body-bytes)", "invalid_request_error"));
  return closing(ApiError(400, "malformed HTTP request: " + ec.message(), "invalid_request_error"));
}

HttpRequest request_head(const RequestParser& parser) {
  const auto& msg = parser.get();
  HttpRequest req;
  req.method = std::string(msg.method_string());
  req.target = std::string(msg.target());
  req.path = req.target.substr(0, req.target.find('?'));
  req.version = msg.version();
  for (const auto& f : msg) req.headers.emplace_back(lower(std::string(f.name_string())), std::string(f.value()));
  return req;
}

void take_body(RequestParser& parser, HttpRequest& req, const HttpLimits& limits) {
  req.body = std::move(parser.get().body());
  const std::string encoding = lower(req.header("content-encoding"));
  if (encoding.empty() || encoding == "identity") return;
  if (encoding == "gzip" || encoding == "x-gzip" || encoding == "deflate") {
    try {
      req.body = inflate_capped(req.body, false, limits.max_body_bytes);
    } catch (const ApiError& e) {
      if (encoding != "deflate" || e.status != 400) throw;
      req.body = inflate_capped(req.body, true, limits.max_body_bytes);
    }
    return;
  }
  throw ApiError(415, "Content-Encoding '" + encoding + "' is not supported (gzip, deflate or identity)",
                 "invalid_request_error");
}

std::optional<HttpRequest> parse_raw_request(std::string_view raw, const HttpLimits& limits, HttpReply& error) {
  RequestParser parser;
  configure_parser(parser, limits);
  parser.eager(false);
  boost::beast::error_code ec;
  size_t used = 0;
  // The header first (as a connection reads it), then the body.
  while (!parser.is_header_done()) {
    const size_t n = parser.put(boost::asio::buffer(raw.data() + used, raw.size() - used), ec);
    used += n;
    if (ec == http::error::need_more || (!ec && n == 0)) {
      error = closing(ApiError(408, "the request ended before its header did", "invalid_request_error"));
      return std::nullopt;
    }
    if (ec) {
      error = parse_error_reply(ec);
      return std::nullopt;
    }
  }
  if (auto e = check_header(parser, limits)) {
    error = *e;
    return std::nullopt;
  }
  parser.eager(true);
  while (!parser.is_done()) {
    const size_t n = parser.put(boost::asio::buffer(raw.data() + used, raw.size() - used), ec);
    used += n;
    if (ec == http::error::need_more || (!ec && n == 0)) {
      parser.put_eof(ec);
      if (ec) {
        error = closing(ApiError(408, "the request ended before its body did", "invalid_request_error"));
        return std::nullopt;
      }
      break;
    }
    if (ec) {
      error = parse_error_reply(ec);
      return std::nullopt;
    }
  }
  HttpRequest req = request_head(parser);
  try {
    take_body(parser, req, limits);
  } catch (const ApiError& e) {
    error = closing(e);
    return std::nullopt;
  }
  return req;
}

}  // namespace pagoda::server
