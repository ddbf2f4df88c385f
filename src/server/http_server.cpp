#include "server/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <httplib.h>

#include "core/error.h"
#include "core/log.h"
#include "server/api_error.h"
#include "server/generation.h"
#include "server/routes.h"

namespace pagoda::server {
namespace {

using Route = void (*)(ServerContext&, const httplib::Request&, httplib::Response&);

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, e.to_json(), e.status); }

// Runs a route; whatever it throws becomes an OpenAI error object, never a dropped connection.
httplib::Server::Handler guarded(ServerContext* ctx, Route route) {
  return [ctx, route](const httplib::Request& req, httplib::Response& res) {
    try {
      route(*ctx, req, res);
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const Error& e) {
      send_error(res, bad_request(e.what()));
    } catch (const std::exception& e) {
      LOG_ERROR(req.method << " " << req.path << ": " << e.what());
      send_error(res, internal_error(e.what()));
    }
  };
}

bool authorized(const ServerContext& ctx, const httplib::Request& req) {
  if (ctx.options.api_key.empty() || req.path == "/health") return true;
  return req.get_header_value("Authorization") == "Bearer " + ctx.options.api_key;
}

}  // namespace

struct HttpServer::Impl {
  explicit Impl(ServerContext c) : ctx(std::move(c)) {}
  ServerContext ctx;
  httplib::Server svr;
};

HttpServer::HttpServer(ServerContext ctx) : impl_(std::make_unique<Impl>(std::move(ctx))) {
  httplib::Server& svr = impl_->svr;
  ServerContext* c = &impl_->ctx;
  const size_t threads = static_cast<size_t>(std::max(4, c->options.http_threads));
  svr.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  svr.set_keep_alive_max_count(1000);
  svr.set_keep_alive_timeout(2);
  svr.set_read_timeout(60);
  svr.set_write_timeout(60);
  svr.set_payload_max_length(size_t{64} << 20);
  svr.set_tcp_nodelay(true);

  svr.set_pre_routing_handler([c](const httplib::Request& req, httplib::Response& res) {
    if (authorized(*c, req)) return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, unauthorized());
    return httplib::Server::HandlerResponse::Handled;
  });
  // 404s (no route) and anything else that reaches here without a body get an error object too.
  svr.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) {
      send_error(res, not_found("Invalid URL (" + req.method + " " + req.path + ")"));
    } else if (res.status == 413) {
      send_error(res, ApiError(413, "the request body is too large", "invalid_request_error"));
    } else {
      const int status = res.status;
      send_json(res, ApiError(status, "HTTP error " + std::to_string(status), "invalid_request_error").to_json(),
                status);
    }
  });
  svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, internal_error(what));
  });

  svr.Get("/health", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  svr.Get("/v1/models", guarded(c, handle_models));
  svr.Get("/metrics", guarded(c, handle_metrics));
  svr.Post("/v1/completions", guarded(c, handle_completions));
  svr.Post("/v1/chat/completions", guarded(c, handle_chat_completions));
  svr.Post("/tokenize", guarded(c, handle_tokenize));
  svr.Post("/detokenize", guarded(c, handle_detokenize));
}

HttpServer::~HttpServer() = default;

namespace {

// Debian's cpp-httplib is a compiled library that listens with a backlog of 5
// (CPPHTTPLIB_LISTEN_BACKLOG, fixed when the library was built): a burst of new connections
// overflows it and the kernel makes the overflow retry a second later. listen() again on the
// same socket only raises the backlog, so find our listening socket and do that.
void raise_listen_backlog(int port) {
  for (int fd = 3; fd < 1024; ++fd) {
    int listening = 0;
    socklen_t len = sizeof listening;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) continue;
    sockaddr_storage addr{};
    socklen_t alen = sizeof addr;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &alen) != 0) continue;
    int p = -1;
    if (addr.ss_family == AF_INET) p = ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    if (addr.ss_family == AF_INET6) p = ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
    if (p == port) ::listen(fd, SOMAXCONN);
  }
}

}  // namespace

int HttpServer::bind() {
  const ServerOptions& o = impl_->ctx.options;
  int port = o.port;
  if (port == 0) {
    port = impl_->svr.bind_to_any_port(o.host);
    check(port > 0, "cannot bind " + o.host + " to a free port");
  } else {
    check(impl_->svr.bind_to_port(o.host, o.port),
          "cannot listen on " + o.host + ":" + std::to_string(o.port) +
              " (in use, or not an address of this host)");
  }
  raise_listen_backlog(port);
  return port;
}

void HttpServer::run() { impl_->svr.listen_after_bind(); }

void HttpServer::stop() { impl_->svr.stop(); }

}  // namespace pagoda::server
