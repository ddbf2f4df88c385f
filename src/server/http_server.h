// The HTTP front end: Boost.Beast on Boost.Asio. A few I/O threads (each its own io_context) carry
// every connection as a coroutine; a small worker pool parses, templates and tokenizes requests
// so that an I/O thread never waits on that work; /health and the other cheap routes are answered
// on the I/O thread itself. Limits are in ServerOptions (docs/architecture.md lists them).
#pragma once

#include <chrono>
#include <memory>

#include "server/server_context.h"
#include "server/tls_context.h"

namespace pagoda::server {

class HttpServer {
 public:
  explicit HttpServer(ServerContext ctx);
  ~HttpServer();

  // Binds host:port (port 0 = any free port; SO_REUSEADDR but never SO_REUSEPORT, so a second
  // server on a port in use fails) and returns the port. Throws pagoda::Error.
  int bind();
  // Takes a socket already listening (LoadingResponder's, which held the port while the model
  // loaded) instead of binding; returns its port. Throws pagoda::Error.
  int adopt(int listening_fd);
  // Serves HTTPS (every connection does the TLS handshake first) instead of plain HTTP. Before run().
  void use_tls(std::shared_ptr<boost::asio::ssl::context> tls);
  // Serves until shutdown(); returns once the I/O threads have stopped.
  void run();
  // Stops accepting new connections (those open stay served).
  void stop_accepting();
  // Waits up to `grace` for the requests being answered to finish, then closes every connection
  // (slow, idle or not) and makes run() return. Safe from any thread.
  void shutdown(std::chrono::milliseconds grace);
  // Requests read and not yet fully answered.
  int64_t num_active_requests() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda::server
