#include "server/http_server.h"

#include "server/image_inputs.h"

#include <sys/socket.h>

#include <sys/resource.h>

#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "core/error.h"
#include "core/log.h"
#include "server/http_session.h"
#include "server/pooling_runner.h"
#include "server/structured_output.h"

namespace pagoda::server {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using boost::system::error_code;

namespace {

// Thousands of connections need thousands of descriptors: take the hard limit.
void raise_open_file_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

}  // namespace

struct HttpServer::Impl {
  explicit Impl(ServerContext c)
      : ctx(std::move(c)), workers(static_cast<size_t>(std::max(1, ctx.options.worker_threads))),
        env{ctx, workers, active_requests, trim_queued} {
    for (int i = 0; i < std::max(1, ctx.options.io_threads); ++i) {
      iocs.push_back(std::make_unique<net::io_context>(1));
      guards.emplace_back(net::make_work_guard(*iocs.back()));
    }
    acceptor = std::make_unique<tcp::acceptor>(*iocs.front());
  }

  net::awaitable<void> accept_loop();

  ServerContext ctx;
  // Declared before the workers: the workers are joined first, while the coroutine frames they
  // refer to (owned by the io_contexts) still exist.
  std::vector<std::unique_ptr<net::io_context>> iocs;
  std::vector<net::executor_work_guard<net::io_context::executor_type>> guards;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::atomic<int64_t> active_requests{0};
  std::atomic<bool> trim_queued{false};
  net::thread_pool workers;
  SessionEnv env;
  std::shared_ptr<net::ssl::context> tls;
  std::vector<std::thread> threads;
};

net::awaitable<void> HttpServer::Impl::accept_loop() {
  size_t next = 0;
  for (;;) {
    net::io_context& target = *iocs[next++ % iocs.size()];
    tcp::socket socket(target);
    error_code ec;
    co_await acceptor->async_accept(socket, net::redirect_error(net::use_awaitable, ec));
    if (!acceptor->is_open() || ec == net::error::operation_aborted) co_return;
    if (ec) {
      // Out of descriptors (EMFILE) or a connection reset before accept: wait instead of spinning.
      LOG_WARN("accept failed: " << ec.message());
      net::steady_timer pause(*iocs.front(), std::chrono::milliseconds(50));
      co_await pause.async_wait(net::redirect_error(net::use_awaitable, ec));
      continue;
    }
    net::co_spawn(target, serve_connection(env, std::move(socket)), [](std::exception_ptr e) {
      if (!e) return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        LOG_ERROR("connection failed: " << ex.what());
      }
    });
  }
}

HttpServer::HttpServer(ServerContext ctx) {
  // The runner (generate or pooling) follows --runner / --task and the model directory, as in vLLM.
  if (!ctx.pooling) ctx.pooling = resolve_runner(ctx.options, ctx.engine.model_config().hidden_size);
  if (!ctx.images && ctx.engine.takes_images()) {
    MediaOptions media;
    media.allowed_local_media_path = ctx.options.allowed_local_media_path;
    media.allowed_media_domains = ctx.options.allowed_media_domains;
    if (ctx.options.max_image_bytes > 0) media.limits.max_bytes = static_cast<size_t>(ctx.options.max_image_bytes);
    if (ctx.options.max_image_pixels > 0) media.limits.max_pixels = ctx.options.max_image_pixels;
    const auto& v = ctx.engine.model_config().vision;
    ctx.images = std::make_shared<const ImageLoader>(ctx.options.model_dir, static_cast<int32_t>(v.image_token_id),
                                                     ctx.engine.max_images_per_prompt(), std::move(media));
  }
  impl_ = std::make_unique<Impl>(std::move(ctx));
}

HttpServer::~HttpServer() {
  if (!impl_->threads.empty()) shutdown(std::chrono::milliseconds(0));
  drop_compile_waiters();  // they would post to the I/O threads' contexts, about to go
}

int HttpServer::bind() {
  raise_open_file_limit();
  const ServerOptions& o = impl_->ctx.options;
  error_code ec;
  tcp::resolver resolver(*impl_->iocs.front());
  const auto endpoints = resolver.resolve(o.host, std::to_string(o.port), tcp::resolver::passive, ec);
  check(!ec && !endpoints.empty(), "cannot resolve --host " + o.host + ": " + ec.message());
  const tcp::endpoint ep = endpoints.begin()->endpoint();
  tcp::acceptor& a = *impl_->acceptor;
  a.open(ep.protocol(), ec);
  check(!ec, "cannot open a socket for " + o.host + ": " + ec.message());
  // SO_REUSEADDR lets a restarted server bind past TIME_WAIT; SO_REUSEPORT (never set) would let
  // a second server share the port and split the connections.
  a.set_option(tcp::acceptor::reuse_address(true), ec);
  a.bind(ep, ec);
  if (ec == net::error::address_in_use)
    throw Error("port " + std::to_string(o.port) + " on " + o.host +
                " is in use (another server is listening there): choose another --port or stop that server");
  check(!ec, "cannot listen on " + o.host + ":" + std::to_string(o.port) + ": " + ec.message());
  a.listen(net::socket_base::max_listen_connections, ec);
  check(!ec, "cannot listen on " + o.host + ":" + std::to_string(o.port) + ": " + ec.message());
  return a.local_endpoint().port();
}

int HttpServer::adopt(int listening_fd) {
  raise_open_file_limit();
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  check(getsockname(listening_fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0,
        "the listening socket handed over is not a socket");
  error_code ec;
  impl_->acceptor->assign(addr.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), listening_fd, ec);
  check(!ec, "cannot take over the listening socket: " + ec.message());
  return impl_->acceptor->local_endpoint().port();
}

void HttpServer::use_tls(std::shared_ptr<net::ssl::context> tls) {
  impl_->tls = std::move(tls);
  impl_->env.tls = impl_->tls.get();
}

void HttpServer::run() {
  net::co_spawn(*impl_->iocs.front(), impl_->accept_loop(), net::detached);
  for (auto& ioc : impl_->iocs) impl_->threads.emplace_back([&ioc] { ioc->run(); });
  for (std::thread& t : impl_->threads) t.join();
}

void HttpServer::stop_accepting() {
  net::post(*impl_->iocs.front(), [this] {
    error_code ec;
    impl_->acceptor->close(ec);
  });
}

void HttpServer::shutdown(std::chrono::milliseconds grace) {
  stop_accepting();
  const auto until = std::chrono::steady_clock::now() + grace;
  while (impl_->active_requests > 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  // Whatever is left (idle keep-alive connections, slow clients) is dropped with the io_contexts.
  for (auto& ioc : impl_->iocs) ioc->stop();
}

int64_t HttpServer::num_active_requests() const { return impl_->active_requests; }

}  // namespace pagoda::server
