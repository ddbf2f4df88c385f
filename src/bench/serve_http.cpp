#include "bench/serve_http.h"

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace pagoda::bench {

ServerUrl parse_base_url(const std::string& base_url) {
  const size_t scheme = base_url.find("://");
  check(scheme != std::string::npos, "bench serve: --base-url must look like http://host:port (got '" +
                                         base_url + "')");
  ServerUrl u;
  const size_t slash = base_url.find('/', scheme + 3);
  u.scheme_host_port = base_url.substr(0, slash);
  if (slash != std::string::npos) u.path_prefix = base_url.substr(slash);
  while (!u.path_prefix.empty() && u.path_prefix.back() == '/') u.path_prefix.pop_back();
  return u;
}

void SseReader::feed(std::string_view bytes, const std::function<void(std::string_view)>& on_data) {
  pending_.append(bytes);
  size_t begin = 0;
  for (size_t nl; (nl = pending_.find('\n', begin)) != std::string::npos; begin = nl + 1) {
    std::string_view line(pending_.data() + begin, nl - begin);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.substr(0, 5) != "data:") continue;  // blank separators, comments (": ping"), event: ...
    line.remove_prefix(5);
    if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    on_data(line);
  }
  pending_.erase(0, begin);
}

namespace {

httplib::Headers auth_headers(const std::string& api_key) {
  httplib::Headers h;
  if (!api_key.empty()) h.emplace("Authorization", "Bearer " + api_key);
  return h;
}

const char* http_error_text(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection: return "cannot connect";
    case httplib::Error::Read: return "read error (connection closed?)";
    case httplib::Error::Write: return "write error";
    case httplib::Error::ConnectionTimeout: return "connection timed out";
    case httplib::Error::Canceled: return "canceled";
    default: return "HTTP client error";
  }
}

}  // namespace

void stream_request(const ServerUrl& url, const StreamCall& call, std::chrono::steady_clock::time_point t0,
                    RequestResult& result) {
  using Clock = std::chrono::steady_clock;
  auto secs = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  httplib::Client cli(url.scheme_host_port);
  cli.set_connection_timeout(30);
  cli.set_read_timeout(6 * 3600);
  cli.set_write_timeout(60);
  cli.set_tcp_nodelay(true);

  httplib::Request req;
  req.method = "POST";
  req.path = url.path_prefix + call.path;
  req.headers = auth_headers(call.api_key);
  req.headers.emplace("Content-Type", "application/json");
  req.headers.emplace("Accept", "text/event-stream");
  req.body = call.body;

  int status = 0;
  std::string error_body;
  SseReader sse;
  bool done = false;
  int32_t chunks = 0;
  std::optional<int32_t> usage_out, usage_in;
  Clock::time_point last{};
  const Clock::time_point begin = Clock::now();
  result.start = secs(begin - t0);

  auto on_event = [&](std::string_view data, Clock::time_point now) {
    if (data == "[DONE]") {
      done = true;
      return;
    }
    const auto j = nlohmann::json::parse(data, nullptr, false);
    if (!j.is_object()) {
      result.error = "unparsable event: " + std::string(data.substr(0, 200));
      return;
    }
    if (j.contains("error")) {
      result.error = j["error"].dump();
      return;
    }
    if (const auto c = j.find("choices"); c != j.end() && c->is_array() && !c->empty()) {
      const nlohmann::json& ch = c->front();
      const nlohmann::json* text = nullptr;
      if (!call.chat) {
        if (auto t = ch.find("text"); t != ch.end()) text = &*t;
      } else if (auto d = ch.find("delta"); d != ch.end() && d->is_object()) {
        for (const char* k : {"content", "reasoning_content", "reasoning"})
          if (auto t = d->find(k); t != d->end() && t->is_string() && !t->get_ref<const std::string&>().empty()) {
            text = &*t;
            break;
          }
      }
      if (text && text->is_string() && !text->get_ref<const std::string&>().empty()) {
        if (chunks == 0) result.ttft = secs(now - begin);
        else result.itl.push_back(secs(now - last));
        last = now;
        ++chunks;
      }
    }
    if (const auto u = j.find("usage"); u != j.end() && u->is_object()) {
      if (auto v = u->find("completion_tokens"); v != u->end() && v->is_number_integer()) usage_out = v->get<int32_t>();
      if (auto v = u->find("prompt_tokens"); v != u->end() && v->is_number_integer()) usage_in = v->get<int32_t>();
      if (auto d = u->find("prompt_tokens_details"); d != u->end() && d->is_object())
        if (auto v = d->find("cached_tokens"); v != d->end() && v->is_number_integer())
          result.cached_tokens = v->get<int32_t>();
    }
  };

  req.response_handler = [&](const httplib::Response& r) {
    status = r.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    const Clock::time_point now = Clock::now();
    if (status != 200) {
      if (error_body.size() < 2000) error_body.append(data, std::min<size_t>(n, 2000));
      return true;
    }
    sse.feed(std::string_view(data, n), [&](std::string_view ev) { on_event(ev, now); });
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool sent = cli.send(req, res, err);
  result.latency = secs(Clock::now() - begin);
  if (!sent) {
    result.error = http_error_text(err);
  } else if (status != 200) {
    result.error = "HTTP " + std::to_string(status) + ": " + error_body;
  } else if (result.error.empty() && !done && chunks == 0 && !usage_out) {
    result.error = "the stream ended with no tokens";
  }
  result.success = result.error.empty();
  if (chunks == 0) result.ttft = result.latency;
  result.output_tokens = usage_out ? *usage_out : chunks;
  if (usage_in) result.prompt_len = *usage_in;
}

std::optional<std::string> http_get(const ServerUrl& url, const std::string& path, const std::string& api_key) {
  httplib::Client cli(url.scheme_host_port);
  cli.set_connection_timeout(10);
  cli.set_read_timeout(30);
  auto r = cli.Get(url.path_prefix + path, auth_headers(api_key));
  if (!r || r->status != 200) return std::nullopt;
  return r->body;
}

std::pair<int, std::string> http_post_empty(const ServerUrl& url, const std::string& path, const std::string& api_key) {
  httplib::Client cli(url.scheme_host_port);
  cli.set_connection_timeout(10);
  cli.set_read_timeout(60);
  auto r = cli.Post(url.path_prefix + path, auth_headers(api_key), "", "application/json");
  if (!r) return {0, "no answer"};
  return {r->status, r->body};
}

}  // namespace pagoda::bench
